"""Scoring evidence units against a question and its choices (pure functions over arrays).

Terms are stemmed content words (Snowball English; number words become digits, so "level
two" meets "Level 2"). Weights are IDF over the evidence units plus the question, so a word
every unit holds says little. A unit's *relevance* to the question mixes the IDF-weighted
share of question terms it holds with the embedder's cosine; relevance becomes attention
over units through a softmax. A choice's *support* in a unit is the IDF-weighted share of its
discriminative terms the unit holds (terms every other choice shares, or the question already
names, count less) plus its cosine to the unit centred over the choices — so a choice only
gains from meaning that sets it apart. Nothing here is fitted to any question set.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Literal

import numpy as np
import snowballstemmer

from worldmm.llm.rule_based.text import STOPWORDS

# A question asking what was written (shown, read) or what was said favours units of that
# kind: text read in the frames, or the transcript.
# fmt: off
_READ_CUES = frozenset((
    "written", "write", "wrote", "read", "sign", "label", "text", "printed", "print", "shown",
    "displayed",
))
_SAID_CUES = frozenset((
    "say", "said", "says", "tell", "told", "talk", "talked", "mention", "mentioned", "ask",
    "asked", "hear", "heard", "spoke",
))
# fmt: on
# Things that hold writing: "what did the note say" asks what was written on it.
_WRITTEN_THINGS = (
    "note|notes|sign|signs|label|labels|poster|screen|board|whiteboard|menu|card|letter|"
    "page|sticker|list"
)
_WRITTEN_SAYS = re.compile(
    rf"\b(?:{_WRITTEN_THINGS})\b.*\b(?:say|says|said|read|reads)\b", re.IGNORECASE
)
_WRITTEN_THING = re.compile(rf"\b(?:{_WRITTEN_THINGS})\b", re.IGNORECASE)
# A question about what happens often ("what do I usually eat", "who do I have lunch with
# most often"): how often the memory holds an option is evidence for it. Negated ("what do I
# usually not buy", "who doesn't like durian") it is not.
HABIT_WORDS = (  # also what sends a question to the semantic memory first (routing)
    r"usually|often|always|mostly|habitually|habits?|typically|generally|normally|"
    r"regularly|routinely|routine|frequently|tends? to|most of the time|"
    r"(?:every|each) (?:day|morning|afternoon|evening|night|time|week)"
)
_HABIT = re.compile(rf"\b(?:{HABIT_WORDS})\b|\bmost\W*$", re.IGNORECASE)
_NEGATED = re.compile(r"\b(?:not|never)\b|n[’']t\b", re.IGNORECASE)
SOURCE_BONUS = 0.25
WINDOW_SOURCES = frozenset(("said", "read", "seen", "scene"))  # a window's own units
ATTENTION_TEMPERATURE = 0.1  # relevance differences of 0.1 weigh e (2.7) times more
QUESTION_TERM_WEIGHT = 0.5  # a choice word the question already names tells less
_WORD = re.compile(r"[a-z]+|\d+")
_NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
_NUMBERS = {w: str(i) for i, w in enumerate((*_NUMBER_WORDS, "ten", "eleven", "twelve"))}
_STEMMER = snowballstemmer.stemmer("english")


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    return _STEMMER.stemWord(word)


def terms(text: str) -> list[str]:
    """Stemmed content words and numbers, in order."""
    out = []
    for w in _WORD.findall(text.lower()):
        w = _NUMBERS.get(w, w)
        if w in STOPWORDS or (len(w) < 2 and not w.isdigit()):
            continue
        out.append(w if w.isdigit() else _stem(w))
    return out


def idf(docs: Sequence[set[str]]) -> dict[str, float]:
    """BM25's IDF, kept positive: ln(1 + (N - df + 0.5) / (df + 0.5))."""
    n = len(docs)
    df: dict[str, int] = {}
    for d in docs:
        for t in d:
            df[t] = df.get(t, 0) + 1
    return {t: math.log(1 + (n - k + 0.5) / (k + 0.5)) for t, k in df.items()}


def coverage(weights: dict[str, float], doc: set[str]) -> float:
    """Weighted share of ``weights``' terms present in ``doc`` (0..1; 0 with no weight)."""
    total = sum(weights.values())
    if total <= 0:
        return 0.0
    return sum(w for t, w in weights.items() if t in doc) / total


def choice_weights(
    choices: Sequence[set[str]], question: set[str], idf_of: dict[str, float]
) -> list[dict[str, float]]:
    """Per choice, each term's IDF scaled down by how many other choices share it and
    whether the question names it."""
    out = []
    for i, terms_i in enumerate(choices):
        others = [c for j, c in enumerate(choices) if j != i]
        weights = {}
        for t in terms_i:
            shared = sum(t in c for c in others) / len(others) if others else 0.0
            w = idf_of.get(t, 0.0) * (1.0 - shared)
            weights[t] = w * (QUESTION_TERM_WEIGHT if t in question else 1.0)
        out.append(weights)
    return out


def attention(relevance: np.ndarray, unit_weights: np.ndarray) -> np.ndarray:
    """Softmax of relevance / temperature, times each unit's own weight, normalised."""
    if relevance.size == 0:
        return relevance
    z = np.exp((relevance - relevance.max()) / ATTENTION_TEMPERATURE) * unit_weights
    return z / z.sum()


def asked_kind(question: str) -> Literal["read", "said"] | None:
    """What the question asks about: text seen written ("What was written on the note?",
    "What did the sign say?"), words said ("What did Alice say?"), or neither."""
    if _WRITTEN_SAYS.search(question):
        return "read"
    words = set(_WORD.findall(question.lower()))
    read, said = bool(words & _READ_CUES), bool(words & _SAID_CUES)
    if read and said:
        return "read" if _WRITTEN_THING.search(question) else "said"
    return "read" if read else "said" if said else None


def asks_habit(question: str) -> bool:
    """The question asks what happens often, not negated ("What do I usually eat at
    breakfast?", "Who do I play games with most?"; not "Which app do I usually not use?")."""
    return bool(_HABIT.search(question)) and not _NEGATED.search(question)


def source_bonus(question: str, sources: Sequence[str]) -> np.ndarray:
    """SOURCE_BONUS for each unit whose kind (said, read) the question asks about."""
    wanted = asked_kind(question)
    return np.asarray([SOURCE_BONUS if s == wanted else 0.0 for s in sources], dtype=np.float64)


def kind_relevance(
    relevance: np.ndarray, question: str, sources: Sequence[str], windows: Sequence[str]
) -> np.ndarray:
    """Relevance for a question about what was written or said: a unit of that kind takes
    the relevance of its window's best unit of another kind when that is higher (the moment
    the question finds by any of its words: "the note on the fridge" may only be heard, its
    text only read), plus SOURCE_BONUS, so the text read there answers what was written, and
    the transcript what was said. Other units, and every unit of a question of neither kind,
    keep their own relevance."""
    out = np.asarray(relevance, dtype=np.float64).copy()
    wanted = asked_kind(question)
    if wanted is None:
        return out
    other: dict[str, float] = {}  # window -> best relevance of its units of another kind
    for r, source, window in zip(out, sources, windows, strict=True):
        if source in WINDOW_SOURCES and source != wanted:
            other[window] = max(other.get(window, -math.inf), float(r))
    for i, (source, window) in enumerate(zip(sources, windows, strict=True)):
        if source == wanted:
            out[i] = max(out[i], other.get(window, out[i])) + SOURCE_BONUS
    return out


def heard_alike(question: set[str], unit: set[str]) -> set[str]:
    """The question's words that a word of a transcript may be a mishearing of: as long (three
    letters at least), the same first letter, one letter different ("mud" for "mug"). Speech
    recognition swaps a sound where text read or written does not."""
    out = set()
    for q in question - unit:
        if len(q) < 3 or q.isdigit():
            continue
        for w in unit:
            if len(w) != len(q) or w[0] != q[0]:
                continue
            if sum(a != b for a, b in zip(w, q, strict=True)) == 1:
                out.add(q)
                break
    return out


def relevance(
    question: set[str], units: Sequence[set[str]], idf_of: dict[str, float], cosine: np.ndarray
) -> np.ndarray:
    """Half the IDF-weighted share of question terms a unit holds, half its cosine."""
    q_weights = {t: idf_of.get(t, 0.0) for t in question}
    lexical = np.asarray([coverage(q_weights, u) for u in units], dtype=np.float64)
    return 0.5 * lexical + 0.5 * np.asarray(cosine, dtype=np.float64)


def support(
    weights: Sequence[dict[str, float]], units: Sequence[set[str]], cosine: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(choices x units) twice: lexical coverage, and the cosine centred over the choices.
    A choice's support in a unit is their sum."""
    lexical = np.asarray([[coverage(w, u) for u in units] for w in weights], dtype=np.float64)
    dense = np.asarray(cosine, dtype=np.float64).reshape(len(weights), len(units))
    if dense.size:
        dense = dense - dense.mean(axis=0, keepdims=True)
    return lexical, dense


def best_index(scores: np.ndarray) -> int:
    """The highest score; ties go to the earliest choice."""
    return int(np.lexsort((np.arange(len(scores)), -np.round(scores, 9)))[0])
