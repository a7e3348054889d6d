"""The naming-game prompt of paper 4 (SI, "Prompting" and "Example Prompt"), rendered from a memory state.

The LLM is an outside observer forecasting "Player 1": the system prompt states the rules (+100 for the same
action, −50 for different ones), the memory as one history line per remembered round (both players' choices and
the payoff, oldest first, rounds numbered 1..h within the memory), the round now being played (h + 1) and Player 1's
score (the sum of the remembered payoffs), and asks for the answer first and the reasoning after it in the format
``{'value': <VALUE_OF_PLAYER_1>; 'reason': <YOUR_REASON>}``. The user prompt asks which action Player 1 should play.
The SI's example, for the memory "01" with the words F and J (the ``$i$`` and ``$SCORE$`` of the SI filled in)::

    Context: Player 1 is playing a multi-round partnership game with Player 2 for 100 rounds. At each round, Player 1
    and Player 2 simultaneously pick an action from the following values: [F, J]. The payoff that both players get
    is determined by the following rule:
    1. If Players play the SAME action as each other, they will both be REWARDED with payoff 100 points.
    2. If Players play DIFFERENT actions to each other, they will both be PUNISHED with payoff -50 points.
    The objective of each Player is to maximize their own accumulated point tally, conditional on the behavior of
    the other player. This is the history of choices in past rounds:
    {'round':1, 'Player 1': F, 'Player 2': J, 'payoff': -50}
    It is now round 2. The current score of Player 1 is -50. You are an observer who ... {'value': <VALUE_OF_PLAYER_1>;
    'reason': <YOUR_REASON>}.

(each paragraph is one line in the rendered text; the SI's PDF does not show its line breaks, and the lone "." it
prints after the history block is not in the paper's code either, so it is left out). With an empty memory
the history sentence and lines are left out ("It is now round 1. The current score of Player 1 is 0."), as in the
paper's code. ``order`` is the presentation order of the two words in the list of values — 0: [words[0], words[1]],
1: [words[1], words[0]] — the only thing that differs between the two prompts of a state (the paper averages over
both to remove ordering bias). The assistant turn is prefilled with ``PREFILL`` (``{'value': '``) so that the next
token is the start of the answer.

The memory text is built from the state key alone (digits 0/1 → the two words); the words are the only outside
text, so ``check_words`` allows only short printable words without quotes, brackets, braces, colons, semicolons or
backslashes (anything that could break the answer format or the history lines).
"""
from __future__ import annotations

import hashlib
import json
import re
from typing import Sequence

from consensus.errors import ConfigError
from consensus.scenarios.naming_game.game import H_MAX, PAYOFF_FAILURE, PAYOFF_SUCCESS, payoff

PROMPT_VERSION = 1              # bump when the text changes: it enters prompt_hash, so old caches are not reused
ORDERS = (0, 1)
WORD_MAX_CHARS = 32
PREFILL = "{'value': '"
USER_PROMPT = "Answer saying which action Player 1 should play."
_FORBIDDEN = set("'\"`{}[]:;\\")
_KEY_RE = re.compile(r"(?:[01][01])*")

RULES = (
    "Context: Player 1 is playing a multi-round partnership game with Player 2 for 100 rounds. At each round, "
    "Player 1 and Player 2 simultaneously pick an action from the following values: [{first}, {second}]. The payoff "
    "that both players get is determined by the following rule:\n"
    "1. If Players play the SAME action as each other, they will both be REWARDED with payoff {success} points.\n"
    "2. If Players play DIFFERENT actions to each other, they will both be PUNISHED with payoff {failure} points.\n"
    "The objective of each Player is to maximize their own accumulated point tally, conditional on the behavior of "
    "the other player."
)
HISTORY_INTRO = " This is the history of choices in past rounds:"
HISTORY_LINE = "{{'round':{round}, 'Player 1': {own}, 'Player 2': {partner}, 'payoff': {payoff}}}"
QUERY = (
    "It is now round {round}. The current score of Player 1 is {score}. You are an observer who answers questions "
    "about the game using a single value. Please think step by step before making a decision. Remember, examining "
    "history explicitly is important. Write your answer using the following format: "
    "{{'value': <VALUE_OF_PLAYER_1>; 'reason': <YOUR_REASON>}}."
)


def check_words(words: Sequence[str]) -> tuple[str, str]:
    """The two words as a tuple, or ConfigError: exactly two distinct strings of 1..32 printable characters, no
    leading/trailing space, none of ``' " ` { } [ ] : ; \\`` (no newlines: they are not printable)."""
    if isinstance(words, str) or not isinstance(words, Sequence) or len(words) != 2:
        raise ConfigError(f"the naming game needs exactly two words (got {words!r})")
    for w in words:
        if not isinstance(w, str) or not w:
            raise ConfigError(f"each word must be a non-empty string (got {w!r})")
        if len(w) > WORD_MAX_CHARS:
            raise ConfigError(f"word {w[:40]!r}... is longer than {WORD_MAX_CHARS} characters")
        if not w.isprintable() or w != w.strip():
            raise ConfigError(f"word {w!r} must be printable, one line, without leading or trailing spaces")
        bad = sorted(set(w) & _FORBIDDEN)
        if bad:
            raise ConfigError(f"word {w!r} contains {' '.join(bad)}: quotes, brackets, braces, colons, semicolons "
                              "and backslashes would break the prompt's answer format")
    if words[0] == words[1]:
        raise ConfigError(f"the two words must differ (got {words[0]!r} twice)")
    return str(words[0]), str(words[1])


def check_key(memory_key: str) -> str:
    """A memory state key (``game.MemorySpace.keys``): digits 0/1, an even number of them, at most 2·H_MAX."""
    if not isinstance(memory_key, str) or not _KEY_RE.fullmatch(memory_key) or len(memory_key) > 2 * H_MAX:
        raise ConfigError(f"memory state must be a string of 0/1 digit pairs, at most {H_MAX} pairs "
                          f"(got {memory_key!r})")
    return memory_key


def check_order(order: int) -> int:
    if order not in ORDERS or isinstance(order, bool):
        raise ConfigError(f"word order must be 0 (as given) or 1 (swapped), got {order!r}")
    return int(order)


def history(memory_key: str) -> list[tuple[int, int, int]]:
    """(own word, partner word, payoff) per remembered round, oldest first."""
    key = check_key(memory_key)
    rounds = []
    for i in range(0, len(key), 2):
        a, b = int(key[i]), int(key[i + 1])
        rounds.append((a, b, payoff(a, b)))
    return rounds


def system_prompt(memory_key: str, words: Sequence[str], order: int = 0) -> str:
    """The SI's system prompt for this memory, with the words listed in ``order``."""
    w = check_words(words)
    order = check_order(order)
    first, second = (w[0], w[1]) if order == 0 else (w[1], w[0])
    rounds = history(memory_key)
    text = RULES.format(first=first, second=second, success=PAYOFF_SUCCESS, failure=PAYOFF_FAILURE)
    lines = [HISTORY_LINE.format(round=i + 1, own=w[a], partner=w[b], payoff=p) for i, (a, b, p) in enumerate(rounds)]
    if lines:
        text += HISTORY_INTRO + "\n" + "\n".join(lines)
    score = sum(p for _, _, p in rounds)
    return text + "\n" + QUERY.format(round=len(rounds) + 1, score=score)


def render(memory_key: str, words: Sequence[str], order: int = 0, *, prefill: bool = False,
           question: str = USER_PROMPT) -> list[dict]:
    """The chat messages for one state and word order: system prompt, user prompt (``question``; the meta-prompting
    questions replace it) and, with ``prefill``, the assistant turn started with ``PREFILL``."""
    msgs = [{"role": "system", "content": system_prompt(memory_key, words, order)},
            {"role": "user", "content": question}]
    if prefill:
        msgs.append({"role": "assistant", "content": PREFILL})
    return msgs


def prompt_hash(words: Sequence[str]) -> str:
    """SHA-256 (hex) of the rendered prompts of a few probe states (both orders, with the prefill) and
    PROMPT_VERSION: any change to the text changes it, so caches keyed by it are never reused across versions."""
    w = check_words(words)
    probe = [render(k, w, o, prefill=True) for k in ("", "01", "0011", "100111") for o in ORDERS]
    blob = json.dumps({"v": PROMPT_VERSION, "prompts": probe}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()
