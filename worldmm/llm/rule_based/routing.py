"""Rule-based routing of the offline retrieval agent."""

from __future__ import annotations

import re

from worldmm.llm.rule_based.scoring import HABIT_WORDS
from worldmm.llm.schemas import AgentAction, AgentRound
from worldmm.models import MemoryType

_SEMANTIC = re.compile(  # habits (what the answerer reads as frequency), likes, relations
    rf"\b(?:{HABIT_WORDS}|never|tend|tends|prefer|prefers|preference|favou?rite|like to|likes|"
    r"enjoy|enjoys|love|loves|hate|hates|dislike|dislikes|relationship|related|friend|friends|"
    r"partner|colleague|roommate|who is|role|job|works as|personality)\b",
    re.IGNORECASE,
)
_VISUAL = re.compile(
    r"\b(colou?r|colou?rs|look like|looks like|looked like|appearance|wearing|wore|wear|shape|"
    r"pattern|what did .* look|red|blue|green|yellow|black|white|purple|pink|orange|brown|grey|"
    r"gray|bright|dark|logo|picture|photo)\b",
    re.IGNORECASE,
)
_NO_RESULTS = re.compile(r"^\s*(?:\(?no (?:results|matches|memory)|nothing found)", re.IGNORECASE)
_ORDER: tuple[MemoryType, ...] = ("episodic", "semantic", "visual")


def route(question: str) -> MemoryType:
    """Habits and relations → semantic; looks and colours → visual; otherwise episodic."""
    if _SEMANTIC.search(question):
        return "semantic"
    if _VISUAL.search(question):
        return "visual"
    return "episodic"


def has_results(round_: AgentRound) -> bool:
    text = round_.results_text.strip()
    return bool(text) and not _NO_RESULTS.match(text)


def next_action(question: str, rounds: list[AgentRound], max_rounds: int) -> AgentAction:
    """Search the routed memory first, then the episodic one if that was another: what
    happened is where every answer can rest, and a habit's facts or a colour's clips are
    weighed beside the windows that show it. Answer once a round found something and the
    episodic memory was searched; otherwise try the remaining memories in turn. Ends after
    every memory was tried or ``max_rounds``."""
    tried = {r.memory_type for r in rounds}
    found = any(has_results(r) for r in rounds)
    if rounds and (len(rounds) >= max_rounds or (found and "episodic" in tried)):
        return AgentAction(action="ANSWER")
    first = route(question)
    for memory in (first, *_ORDER):
        if memory not in tried:
            return AgentAction(action="SEARCH", memory_type=memory, query=question.strip())
    return AgentAction(action="ANSWER")
