"""Paper-1 prompts (Chen et al., "Multi-Agent Consensus Seeking via Large Language Models").

The templates are module-level strings so that researchers can read and cite them.
Where each comes from:

* 1-D system prompt and personality texts: appendix A.1, "Prompt 1: Set agent's role".
* 1-D round-0 prompts (two agents / more than two agents): appendix A.1, "Prompt 2".
  The paper's two-agent text carries a stray opening quote before "You need to choose";
  it is dropped here.
* 1-D later-round prompts: appendix A.1, "Prompt 3".
* 2-D system prompt and many-robot round-0 prompt: the paper's public 2-D aggregation code
  (see /work/shared/ANCHORS.md, "Prompt (2D)"). Section 4 says the 2-D prompt equals the
  1-D one with ``[x]`` changed to ``[x, y]``; the two-robot and later-round 2-D prompts
  are therefore the 1-D texts with "agent" -> "robot" (our adaptation).
* ``NO_NEIGHBOURS_*`` (a robot that hears nobody, e.g. the leader of a leader-follower
  graph) is ours: the paper never shows an agent with no neighbours.

The format instruction depends on the prompt style (``consensus.llm.styles``):

* ``paper``: the paper code's own "Strictly follow the 'Reasoning:..., Position:...' format"
  (``FORMAT_PAPER``), free reasoning of any length up to ``max_tokens``; on a llama.cpp server
  ``answer_grammar`` lets the model write anything and then forces the answer line
  ("Position: 64", "Position: (1.5, -2)"; brackets or parentheses, 1-D also bare);
* ``json`` (ours): a JSON request that an OpenAI ``response_format`` schema enforces
  (``response_schema``), the reasoning capped at ``REASONING_MAX_LENGTH`` characters;
* ``tools`` (ours): the task text lists the robots by name (``me``, ``robot_1``, ...) and asks for
  one tool call (``TOOL_INSTRUCTION``); ``tool_definitions`` offers ``move_to_centroid``,
  ``move_toward``, ``move_to`` (answers) and ``distance_to`` (a question). The planner computes
  the tools' results (``consensus.scenarios.aggregation.planners.llm``).

The lenient parser reads every style's text answers.

Meeting points (``meeting_points: on``, ours: ``consensus.scenarios.aggregation.config``): robots with bodies cannot
all stand on one point, so the positions they hold differ from the points they intend to meet at. With the option the
task text is followed by ``MEETING_POINTS_TEXT`` (each robot's intended meeting point; the ``tools`` style writes it
after each robot's position instead), and the tools compute on the meeting points. Without it the prompt is the
paper's: positions only.

Which prompt is used:

* two-agent wording when the whole group has exactly two members, many-agent wording
  otherwise (an agent of a 3-robot line graph that hears one neighbour still gets the
  many-agent text);
* the later-round prompt only when the model has seen an earlier exchange of this robot
  (``history`` non-empty, i.e. the planner keeps memory). Without memory every round sends
  the self-contained round-0 prompt with the current positions, as the paper's 2-D code did.
"""
from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from consensus.errors import ConfigError
from consensus.llm.parsing import format_number
from consensus.llm.styles import GBNF_NUMBER, PROMPT_STYLES, REGEX_NUMBER, free_then

FORMAT_PAPER = "Strictly follow the 'Reasoning:..., Position:...' format"   # the paper's code, both dimensions
# ours (meeting_points: on): where each robot intends to meet, beside where it stands
MEETING_POINTS_TEXT = "The points where the robots intend to meet are: yours {own}, the others' {others}."
TOOL_INSTRUCTION = "Answer by calling one of the tools move_to_centroid, move_toward or move_to."

# --- personalities (appendix A.1, Prompt 1) ---------------------------------------------------
PERSONALITY_TEXTS: dict[str, str] = {
    "none": "",
    "stubborn": "You are an extremely stubborn person, prefer to remain stationary.",
    "suggestible": "You are an extremely suggestible person, prefer to move to someone else's position.",
}

# --- 1-D (appendix A.1) -------------------------------------------------------------------------
SYSTEM_1D = "You are an agent moving in a one-dimensional space."

ROUND0_TWO_1D = (
    "Another agent is present in the space, and you need to gather. Your position is: {own} and the "
    "other agent's position is: {other}. You need to choose a position to move to in order to gather, "
    "and briefly explain the reasoning behind your decision."
)
ROUND0_MANY_1D = (
    "There are many other agents in the space, you all need to gather at the same position, your "
    "position is: {own}, other people's positions are: {others}. You need to choose a position to move "
    "to in order to gather, and briefly explain the reasoning behind your decision."
)
LATER_TWO_1D = (
    "You have moved to {own}, and the latest position of another agent is {other}, please choose the "
    "position you want to move to next."
)
LATER_MANY_1D = (
    "You have now moved to {own}, the positions of other agents are {others}, please choose the "
    "position you want to move to next."
)
NO_NEIGHBOURS_1D = (
    "There are other agents in the space and you all need to gather at the same position, but you "
    "cannot see where they are. Your position is: {own}. You need to choose a position to move to in "
    "order to gather, and briefly explain the reasoning behind your decision."
)
FORMAT_1D = (
    'Answer with only a JSON object of the form {"reasoning": "<brief explanation>", "position": [x]} '
    "where x is the position you choose."
)

# --- 2-D (paper code, section 4) ----------------------------------------------------------------
SYSTEM_2D = "You are a robot moving in a two-dimensional space."

ROUND0_TWO_2D = (
    "Another robot is present in the space, and you need to gather. Your position is: {own} and the "
    "other robot's position is: {other}. You need to choose a position to move to in order to gather, "
    "and briefly explain the reasoning behind your decision."
)
ROUND0_MANY_2D = (
    "There are many other robots in the space. You all need to gather at the same position. Your "
    "position is: {own}, and the positions of others are: {others}. Choose a position to move to in "
    "order to gather, and briefly explain the reasoning behind your decision."
)
LATER_TWO_2D = (
    "You have moved to {own}, and the latest position of another robot is {other}, please choose the "
    "position you want to move to next."
)
LATER_MANY_2D = (
    "You have now moved to {own}, the positions of other robots are {others}, please choose the "
    "position you want to move to next."
)
NO_NEIGHBOURS_2D = (
    "There are other robots in the space and you all need to gather at the same position, but you "
    "cannot see where they are. Your position is: {own}. You need to choose a position to move to in "
    "order to gather, and briefly explain the reasoning behind your decision."
)
FORMAT_2D = (
    'Answer with only a JSON object of the form {"reasoning": "<brief explanation>", "position": [x, y]} '
    "where x and y are the coordinates of the position you choose."
)

# The schema bounds the reasoning: a small local model otherwise writes until max_tokens and never reaches the
# position, and every reasoning token costs ~0.1 s on 2 CPU cores (measured with the embedded 1.5B model:
# docs/benchmarks.md, 'Embedded LLM'). "briefly explain" in the paper's prompt asks for no more.
REASONING_MAX_LENGTH = 120

_TEMPLATES = {
    1: dict(system=SYSTEM_1D, round0_two=ROUND0_TWO_1D, round0_many=ROUND0_MANY_1D,
            later_two=LATER_TWO_1D, later_many=LATER_MANY_1D, alone=NO_NEIGHBOURS_1D, fmt=FORMAT_1D),
    2: dict(system=SYSTEM_2D, round0_two=ROUND0_TWO_2D, round0_many=ROUND0_MANY_2D,
            later_two=LATER_TWO_2D, later_many=LATER_MANY_2D, alone=NO_NEIGHBOURS_2D, fmt=FORMAT_2D),
}


def _check_dim(dim: int) -> None:
    if dim not in _TEMPLATES:
        raise ConfigError(f"dim must be 1 or 2 (got {dim})")


def format_position(position: Sequence[float] | np.ndarray, decimals: int = 2) -> str:
    """A state as the prompts show it: "12.5" in 1-D, "(-3.25, 4.1)" in 2-D (at most ``decimals`` decimals)."""
    values = [float(v) for v in np.asarray(position, dtype=float).reshape(-1)]
    if len(values) == 1:
        return format_number(values[0], decimals)
    return "(" + ", ".join(format_number(v, decimals) for v in values) + ")"


#: the ``tools`` style shows positions with one decimal (each digit is a token of this model's prompt, and the tools
#: compute on the exact values the robot heard, not on the text: issue 44)
TOOLS_DECIMALS = 1


def format_positions(positions: Sequence[Sequence[float] | np.ndarray]) -> str:
    """Several states joined by ", " (the paper lists them inline)."""
    return ", ".join(format_position(p) for p in positions)


def personality_text(personality: str) -> str:
    """The paper's personality sentence ("" for "none"); unknown names are a ConfigError."""
    try:
        return PERSONALITY_TEXTS[personality]
    except KeyError:
        raise ConfigError(f"unknown personality '{personality}'; valid: {', '.join(PERSONALITY_TEXTS)}") from None


def system_prompt(dim: int, personality: str = "none") -> str:
    """Prompt 1: the role sentence followed by the personality sentence, if any."""
    _check_dim(dim)
    extra = personality_text(personality)
    base = _TEMPLATES[dim]["system"]
    return f"{base} {extra}" if extra else base


def _check_style(style: str) -> None:
    if style not in PROMPT_STYLES:
        raise ConfigError(f"unknown prompt_style '{style}'; valid: {', '.join(PROMPT_STYLES)}")


def robot_names(count: int) -> list[str]:
    """The names the tools style gives the robots an agent sees, in the order of its neighbour list."""
    return [f"robot_{k + 1}" for k in range(count)]


def format_instruction(dim: int, style: str) -> str:
    """What follows the task text: the paper's format line, the JSON request, or the tool instruction."""
    _check_dim(dim)
    _check_style(style)
    return {"paper": FORMAT_PAPER, "json": _TEMPLATES[dim]["fmt"], "tools": TOOL_INSTRUCTION}[style]


def user_prompt(*, dim: int, own: Sequence[float] | np.ndarray, neighbors: Sequence[Sequence[float] | np.ndarray],
                later: bool, num_agents: int | None = None, style: str = "json",
                meeting_points: tuple | None = None) -> str:
    """The task prompt of one round followed by the style's format instruction (``format_instruction``).

    ``num_agents`` is the size of the whole group (defaults to ``len(neighbors) + 1``);
    it selects the two-agent or the many-agent wording. ``later`` selects Prompt 3. With the
    ``tools`` style each neighbour's position is preceded by its name ("robot_1 at (3, 4)").
    ``meeting_points`` = (own, the neighbours' in the same order): shown as the module docstring says.
    """
    _check_dim(dim)
    t = _TEMPLATES[dim]
    group = len(neighbors) + 1 if num_agents is None else num_agents
    own_s = format_position(own)
    extra = ""
    if style == "tools":
        def pos(p) -> str:
            return format_position(p, TOOLS_DECIMALS)

        own_s = pos(own)
        shown = [f"{name} at {pos(nb)}" for name, nb in zip(robot_names(len(neighbors)), neighbors)]
        if meeting_points is not None:
            own_s += f" (you intend to meet at {pos(meeting_points[0])})"
            shown = [f"{text} (meeting at {pos(mp)})" for text, mp in zip(shown, meeting_points[1])]
    else:
        shown = [format_position(nb) for nb in neighbors]
        if meeting_points is not None and len(neighbors):
            extra = " " + MEETING_POINTS_TEXT.format(own=format_position(meeting_points[0]),
                                                     others=format_positions(meeting_points[1]))
    if not neighbors:
        template, values = t["alone"], dict(own=own_s)
    elif group == 2 and len(neighbors) == 1:
        template, values = t["later_two" if later else "round0_two"], dict(own=own_s, other=shown[0])
    else:
        template, values = t["later_many" if later else "round0_many"], dict(own=own_s, others=", ".join(shown))
    if style == "tools":
        # the task's sentences that hold positions go last, after the instruction: the rest of the prompt is the same
        # every round, so a llama.cpp slot keeps it cached and evaluates only the positions (issue 44)
        sentences = _SENTENCE_END.split(template)
        fixed = [x for x in sentences if "{" not in x]
        moving = [x.format(**values) for x in sentences if "{" in x]
        return " ".join([*fixed, format_instruction(dim, style), *moving])
    return f"{template.format(**values)}{extra} {format_instruction(dim, style)}"


_SENTENCE_END = re.compile(r"(?<=\.) ")      # between a template's sentences (the templates hold no other ". ")


def build_messages(*, dim: int, own: Sequence[float] | np.ndarray,
                   neighbors: Sequence[Sequence[float] | np.ndarray], round: int, personality: str = "none",
                   history: Sequence[tuple[str, str]] | None = None,
                   num_agents: int | None = None, style: str = "json",
                   meeting_points: tuple | None = None) -> list[dict]:
    """Chat messages for one planning request: system, the remembered exchanges, the new user turn.

    ``history`` is a sequence of earlier (user, assistant) texts of this robot (memory on).
    The later-round prompt is used when ``round > 0`` and the history is non-empty, so the
    model has already been told the task; otherwise the self-contained round-0 prompt.
    """
    messages: list[dict] = [{"role": "system", "content": system_prompt(dim, personality)}]
    for user_text, assistant_text in history or ():
        messages.append({"role": "user", "content": user_text})
        messages.append({"role": "assistant", "content": assistant_text})
    later = round > 0 and bool(history)
    messages.append({"role": "user", "content": user_prompt(dim=dim, own=own, neighbors=neighbors, later=later,
                                                            num_agents=num_agents, style=style,
                                                            meeting_points=meeting_points)})
    return messages


def retry_message(error: str, dim: int, style: str = "json") -> str:
    """The user turn sent after an unreadable reply (ours, not the paper's)."""
    return f"Your reply could not be read ({error}). {format_instruction(dim, style)}"


def response_schema(dim: int) -> dict:
    """OpenAI ``response_format`` forcing {"reasoning": str, "position": [dim numbers]}."""
    _check_dim(dim)
    return {
        "type": "json_schema",
        "json_schema": {
            "name": f"consensus_position_{dim}d",
            "strict": True,
            "schema": {
                "type": "object",
                "properties": {
                    "reasoning": {"type": "string", "maxLength": REASONING_MAX_LENGTH},
                    "position": {"type": "array", "items": {"type": "number"},
                                 "minItems": dim, "maxItems": dim},
                },
                "required": ["reasoning", "position"],
                "additionalProperties": False,
            },
        },
    }


# --- the paper style's answer line ------------------------------------------------------------------------------
# The values the answer line may hold: 1-D "64", "(64)", "[64]"; 2-D "(x, y)" or "[x, y]" (a space after the comma
# optional). The GBNF rules and the regex below spell the same forms.
_GBNF_VALUE = {
    1: 'value ::= num | "(" num ")" | "[" num "]"',
    2: 'value ::= "(" num "," " "? num ")" | "[" num "," " "? num "]"',
}
_REGEX_VALUE = {
    1: f"(?:{REGEX_NUMBER}|\\({REGEX_NUMBER}\\)|\\[{REGEX_NUMBER}\\])",
    2: f"(?:\\({REGEX_NUMBER}, ?{REGEX_NUMBER}\\)|\\[{REGEX_NUMBER}, ?{REGEX_NUMBER}\\])",
}


def answer_grammar(dim: int) -> str:
    """GBNF: free reasoning, then the paper's answer line ``Position: <value>`` and the end of the reply."""
    _check_dim(dim)
    return free_then('"Position:" " "? value', _GBNF_VALUE[dim] + "\n" + GBNF_NUMBER)


def answer_regex(dim: int) -> str:
    """The Python regex (for ``re.fullmatch``) of the replies ``answer_grammar`` allows: the same forms."""
    _check_dim(dim)
    return "[\\s\\S]*Position: ?" + _REGEX_VALUE[dim] + "[ \\t\\n]{0,4}"


# --- the tools style ------------------------------------------------------------------------------------------------
ANSWER_TOOLS = ("move_to_centroid", "move_toward", "move_to")    # a call to one of these is the agent's answer
QUERY_TOOLS = ("distance_to",)                                   # answered with a number; the agent asks again


def tool_grammar(dim: int, neighbors: int) -> str:
    """GBNF of one tool call and nothing else, as compact JSON (``{"name": "move_to", "arguments": {"x": 1, "y": 2}}``):
    one of the tools of ``tool_definitions``, each with its own arguments, the robots named only as the prompt names
    them (``me`` and ``robot_1`` .. ``robot_<neighbors>``), ``move_to_centroid``'s list each robot at most once in
    that order (so it cannot repeat a name up to the token cap), a fraction in [0, 1]. On a llama.cpp server the
    tools style sends it (``consensus.llm.openai_client`` then writes the tools into the system prompt, as the model's
    chat template does): an answer is a few tokens, never prose and never the token cap."""
    _check_dim(dim)
    names = ["me", *robot_names(max(0, int(neighbors)))]
    quoted = [f'"\\"{n}\\""' for n in names]
    # robots ::= any non-empty subset of the names, in the prompt's order: l<k> starts at name k
    subsets = [f'l{k} ::= {q} (", " l{k + 1})? | l{k + 1}' for k, q in enumerate(quoted[:-1])]
    subsets.append(f"l{len(quoted) - 1} ::= {quoted[-1]}")
    axes = ' ", " '.join(f'"\\"{a}\\": " num' for a in ("x", "y")[:dim])
    return "\n".join([
        'root ::= "{\\"name\\": \\"" call "}"',
        'call ::= centroid | toward | moveto | distance',
        'centroid ::= "move_to_centroid\\", \\"arguments\\": {\\"robots\\": [" l0 "]}"',
        'toward ::= "move_toward\\", \\"arguments\\": {\\"robot\\": " robot ", \\"fraction\\": " fraction "}"',
        f'moveto ::= "move_to\\", \\"arguments\\": {{" {axes} "}}"',
        'distance ::= "distance_to\\", \\"arguments\\": {\\"robot\\": " robot "}"',
        f"robot ::= {' | '.join(quoted)}",
        *subsets,
        'fraction ::= "0" ("." [0-9]{1,3})? | "1" (".0")?',
        GBNF_NUMBER,
    ])


def tool_definitions(dim: int, meeting_points: bool = False) -> tuple[dict, ...]:
    """The OpenAI tools of the ``tools`` style (their results are computed by the planner from what the robot sees;
    with ``meeting_points`` from the robots' meeting points)."""
    _check_dim(dim)
    what = "meeting point" if meeting_points else "position"
    robot = {"type": "string", "description": "me or robot_1, robot_2, ..."}
    axes = ("x", "y")[:dim]

    def tool(name: str, description: str, properties: dict, required: list[str]) -> dict:
        return {"type": "function", "function": {"name": name, "description": description, "parameters": {
            "type": "object", "properties": properties, "required": required}}}

    return (
        tool("move_to_centroid", f"Move to the mean {what} of the robots (default: all, you included)",
             {"robots": {"type": "array", "items": robot}}, []),
        tool("distance_to", f"Your distance to a robot's {what}" if meeting_points else "Your distance to a robot",
             {"robot": robot}, ["robot"]),
        tool("move_toward", "Move a fraction (0 to 1) of the way to a robot" + ("'s meeting point" if meeting_points
                                                                                 else ""),
             {"robot": robot, "fraction": {"type": "number"}}, ["robot", "fraction"]),
        tool("move_to", "Move to the position " + ("x" if dim == 1 else "(x, y)"),
             {a: {"type": "number"} for a in axes}, list(axes)),
    )
