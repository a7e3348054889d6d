"""Settings of paper 3's NLP tasks (question answering, topic classification, summarisation).

``NLPTaskConfig`` composes the kernel's groups (``FlatParams``, ``RunParams``: seed; ``LLMParams``: how agents reach
their LLM; ``AgentsParams``: the team's size ``num_agents``, here at most 10) and adds the task's own fields. Words mean
what they mean elsewhere: ``num_agents`` is the team's size,
``planner`` who answers (``heuristic`` rules or an ``llm``), ``message_max_chars`` the bound of one agent's answer
as shown to another agent (or to the coordinator), ``noise``/``fail_prob`` the heuristic agents' error and failure
probabilities (as in the allocation task's noisy agents).

``max_feedback_turns`` is the paper's "maximum number of feedback turns" (5): after the first answer, at most this
many further turns (the decentralized architectures and spoke & wheel with feedback), so at most
``1 + max_feedback_turns`` turns per item. (The allocation study's ``max_turns`` counts the first turn too.)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from consensus.settings import AgentsParams, FlatParams, LLMParams, RunParams, need, param

TASKS = ("qa", "classification", "summarization")
PLANNERS = ("heuristic", "llm")
#: the paper's item counts (30 SQuAD questions, 100 AG News articles, 50 XSum articles)
PAPER_ITEMS = {"qa": 30, "classification": 100, "summarization": 50}
#: the architectures the paper runs on each task (consensus.decision names; Table 2's filled cells)
TASK_ARCHITECTURES = {
    "qa": ("single", "decentralized", "decentralized_feedback", "spoke_wheel", "spoke_wheel_feedback"),
    "classification": ("single", "majority", "decentralized", "decentralized_feedback", "spoke_wheel",
                       "spoke_wheel_feedback"),
    "summarization": ("single", "decentralized", "decentralized_feedback", "spoke_wheel", "spoke_wheel_feedback"),
}


@dataclass
class NLPTaskConfig(FlatParams, RunParams, LLMParams, AgentsParams):
    GROUP: ClassVar[str] = "nlp"     # its fields' ROS parameters: nlp.<name> (settings.ros_names)
    task: str = param("classification", "qa | classification | summarization")
    dataset: str = param("", "path: SQuAD 2.0 JSON (qa), AG News CSV (classification), XSum JSONL")
    items: int = param(0, "items per trial (0 = the paper's 30 / 100 / 50)")
    item_seed: int = param(0, "which items (and QA instructions) are drawn: the same in every trial")
    architecture: str = param("single", "one of TASK_ARCHITECTURES[task]")
    num_agents: int = param(3, "N agents of the team (the paper does not give it; at most 10)")
    max_feedback_turns: int = param(5, "paper: 5")
    planner: str = param("heuristic", "heuristic | llm")
    noise: float = param(0.2, "heuristic agents: probability of a wrong answer per call")
    fail_prob: float = param(0.05, "heuristic agents: probability of an unusable reply per call")
    text_max_chars: int = param(6000, "the context / article / document in a prompt is cut to this")
    message_max_chars: int = param(300, "one agent's answer shown to another agent or the coordinator")
    parse_retries: int = param(0, "the paper asked once: an unusable reply is a counted fallback")
    llm_max_tokens: int = param(160)

    def check(self) -> None:
        need(self.task in TASKS, f"unknown task '{self.task}'; valid: {', '.join(TASKS)}")
        need(self.prompt_style == "paper", f"prompt_style '{self.prompt_style}': the NLP tasks have the paper's "
             "prompts only (prompt_style paper)")
        need(self.planner in PLANNERS, f"unknown planner '{self.planner}'; valid: {', '.join(PLANNERS)}")
        valid = TASK_ARCHITECTURES[self.task]
        need(self.architecture in valid, f"architecture '{self.architecture}' is not run on {self.task} "
             f"(paper 3, Table 2); valid: {', '.join(valid)}")
        need(bool(self.dataset), f"dataset is required: the path of the {self.task} data file "
             f"({DATASET_HINTS[self.task]}), e.g. --set dataset=PATH")
        need(0 <= self.items <= 10_000, f"items must be in [0, 10000] (got {self.items})")
        need(0 <= self.item_seed < 2 ** 32, f"item_seed must be in [0, 2**32) (got {self.item_seed})")
        need(1 <= self.num_agents <= 10, f"num_agents must be in [1, 10] (got {self.num_agents})")
        need(0 <= self.max_feedback_turns <= 10, f"max_feedback_turns must be in [0, 10] (got "
             f"{self.max_feedback_turns})")
        for name in ("noise", "fail_prob"):
            need(0.0 <= getattr(self, name) <= 1.0, f"{name} must be in [0, 1] (got {getattr(self, name)})")
        need(200 <= self.text_max_chars <= 100_000, f"text_max_chars must be in [200, 100000] (got "
             f"{self.text_max_chars})")
        need(20 <= self.message_max_chars <= 2000, f"message_max_chars must be in [20, 2000] (got "
             f"{self.message_max_chars})")

    @property
    def item_count(self) -> int:
        return self.items or PAPER_ITEMS[self.task]

    @property
    def max_turns(self) -> int:
        """Turns per item at most (``consensus.decision.decide``'s ``max_turns``)."""
        return 1 + self.max_feedback_turns


DATASET_HINTS = {"qa": "SQuAD 2.0 JSON, e.g. dev-v2.0.json", "classification": "AG News CSV, e.g. test.csv",
                 "summarization": "XSum JSON lines with document and summary, e.g. test.jsonl"}
