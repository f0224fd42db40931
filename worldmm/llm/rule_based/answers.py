"""Offline answers: the short answer first, then the evidence in plain words.

Free-form: the unit (a line said, a text read, a sentence seen) most relevant to the question,
cut to what follows the question's last word in it when that reads as an answer ("on the
kitchen table" from "I put the mug on the kitchen table"). A question about what was written
(or shown, read) is answered from the text read in the frames of the window it finds, one about
what was said from the transcript (:func:`scoring.kind_relevance`). Multiple choice: every choice
weighed against the pooled evidence (see :mod:`worldmm.llm.rule_based.weighing`); the answer
names the letter, the choice and the unit it rests on most. Times are said on the wearer's clock,
relative to the question when it is near ("yesterday at 15:02"); without the question's time,
as a UTC date and time.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime

import numpy as np

from worldmm.embed.base import TextEmbedder
from worldmm.llm.rendering import clock, span
from worldmm.llm.rule_based import scoring
from worldmm.llm.rule_based.evidence import Unit, evidence_units
from worldmm.llm.rule_based.weighing import weigh
from worldmm.llm.schemas import OptionNote, Passage, Response
from worldmm.localtime import Asked
from worldmm.models import choice_letter

NOTHING_FOUND = "I found nothing in your memory about this."
MAX_SHORT_WORDS = 12
SUPPORT_SHARE = 0.5  # units contributing at least this share of the best one are cited too
MAX_CITED = 3
_TOKEN = re.compile(r"[\w'’-]+")
_LETTER = re.compile(r"[^\W\d_]")
_ABBREVIATION_END = re.compile(r"\b\w\.\w\.$")  # "p.m.", "e.g."
# Copulas and reporting verbs that open a tail ("is 4711", "says buy milk") are not the answer.
_LEADING_VERB = re.compile(
    r"^(?:(?:is|are|was|were|be|been|has|have|had|says|said|reads|read|shows|showed)\s+)+",
    re.IGNORECASE,
)


def when(u: Unit, asked: Asked | None = None) -> str:
    """'yesterday at 15:02' (a moment), 'between 09:00:00–09:10:00 on 1 May 2025' (a span)."""
    if u.start is None:
        return ""
    if u.end is None or (u.end - u.start).total_seconds() <= 60:
        return asked.spoken(u.start) if asked else f"at {clock(u.start)}"
    return f"between {_span(u.start, u.end, asked)}"


def _span(start: datetime | None, end: datetime | None, asked: Asked | None) -> str:
    return span(start, end, asked.tz if asked else UTC)


def attribution(u: Unit, asked: Asked | None = None) -> str:
    """Who said, read or saw it, and when, as a person reads it."""
    at = when(u, asked)
    if u.source == "said":
        if u.speaker and u.speaker.lower() not in {"i", "me"}:
            return f"{u.speaker} said so {at}".strip()
        return f"you {'said so' if u.speaker else 'heard it'} {at}".strip()
    if u.source == "read":
        return f"you saw it written {at}".strip()
    if u.source == "scene":
        return f"from what you saw {at}".strip()
    if u.source == "seen":  # a caption sentence, or a note the user asked to remember
        return f"from your memory {at}".strip()
    if u.source == "context":
        return f"from your memory of {_span(u.start, u.end, asked)}".strip()
    return "from what your memory holds as a fact"


def short_answer(question: str, u: Unit) -> str:
    """What follows the question's last word in the unit, if that is a short phrase with
    content; else the unit itself. Text read is quoted as read."""
    if u.source == "read":
        return f'"{u.text}"'
    asked = set(scoring.terms(question))
    words = list(_TOKEN.finditer(u.text))
    hits = [i for i, m in enumerate(words) if set(scoring.terms(m.group(0))) & asked]
    if hits:
        tail = _LEADING_VERB.sub("", _trim(u.text[words[hits[-1]].end() :].strip(" ,;:\"'!?")))
        if tail and scoring.terms(tail) and len(tail.split()) <= MAX_SHORT_WORDS:
            return tail[0].upper() + tail[1:]
    return _trim(u.text)


def _trim(text: str) -> str:
    """Without the closing full stop, unless it ends an abbreviation ("3 p.m.")."""
    text = text.rstrip()
    return text if _ABBREVIATION_END.search(text) else text.rstrip(" .")


def _quote(u: Unit) -> str:
    return u.text if u.source == "read" else _trim(u.text)


def _vectors(embedder: TextEmbedder, texts: list[str]) -> np.ndarray:
    return np.asarray(embedder.embed(texts), dtype=np.float64)


def answer_free(
    embedder: TextEmbedder,
    question: str,
    passages: Sequence[Passage],
    asked: Asked | None = None,
) -> Response:
    units = evidence_units(passages)
    if not units:
        return Response(answer=NOTHING_FOUND, guess=True)
    vectors = _vectors(embedder, [question, *(u.text for u in units)])
    q_terms = set(scoring.terms(question))
    u_terms = [set(scoring.terms(u.text)) for u in units]
    # a line heard may hold a question word misheard ("the red mud on the kitchen table")
    u_terms = [
        t | scoring.heard_alike(q_terms, t) if u.source == "said" else t
        for u, t in zip(units, u_terms, strict=True)
    ]
    idf_of = scoring.idf([*u_terms, q_terms])
    rel = scoring.relevance(q_terms, u_terms, idf_of, vectors[1:] @ vectors[0])
    rel = scoring.kind_relevance(rel, question, [u.source for u in units], [u.ref for u in units])
    best = units[scoring.best_index(rel * np.asarray([u.weight for u in units]))]
    if best.source == "read" and best.texts:
        return _written(best, passages, asked)
    short = short_answer(question, best)
    said = f': "{_quote(best)}"' if short.strip('"') != _quote(best) else ""
    return Response(answer=f"{short} — {attribution(best, asked)}{said}.", evidence=[best.ref])


def _written(u: Unit, passages: Sequence[Passage], asked: Asked | None) -> Response:
    """What was written, from the texts read in the window the question found (see
    :func:`read_texts`); the others read there follow as "beside"."""
    picked, beside = read_texts(u, passages)
    rest = f", beside {_quoted(beside)}" if beside else ""
    return Response(answer=f"{_quoted(picked)} — {attribution(u, asked)}{rest}.", evidence=[u.ref])


def _quoted(texts: Sequence[str]) -> str:
    return ", ".join(f'"{t}"' for t in texts)


def read_texts(u: Unit, passages: Sequence[Passage]) -> tuple[list[str], list[str]]:
    """(the texts that answer, the others) among those read in ``u``'s window, in reading
    order. A text read in a window that touches this one too stays in view across the moment,
    one read only here was glimpsed at its edge (the scene before); of those that stay, the
    ones read in the fewest passages answer (a place's sign is read whenever one is there).
    A text without a letter (a clock's "13:20:05") is left out unless nothing else was read;
    one read again without its spaces ("Buymilk") counts once."""
    kept: dict[str, str] = {}
    for t in u.texts:
        kept.setdefault(_squashed(t), t)
    worded = [t for t in kept.values() if _LETTER.search(t)] or list(kept.values())
    held = {p.ref: _squashed(f"{p.said} {p.text} {p.context}") for p in passages}
    touching = [p.ref for p in passages if p.ref != u.ref and _touches(p, u)]
    steady = [t for t in worded if any(_squashed(t) in held[r] for r in touching)] or worded
    count = {t: sum(_squashed(t) in h for h in held.values()) for t in steady}
    fewest = min(count.values())
    picked = [t for t in steady if count[t] == fewest]
    return picked, [t for t in worded if t not in picked]


def _touches(p: Passage, u: Unit) -> bool:
    """``p`` is a window of the same length just before or after ``u``'s."""
    start, end = p.start, p.end
    if start is None or end is None or u.start is None or u.end is None:
        return False
    return end - start == u.end - u.start and (end == u.start or start == u.end)


def _squashed(text: str) -> str:
    return re.sub(r"[\W_]+", "", text.lower())


def answer_choice(
    embedder: TextEmbedder,
    question: str,
    passages: Sequence[Passage],
    choices: Sequence[str],
    asked: Asked | None = None,
    notes: Sequence[OptionNote] | None = None,
) -> Response:
    """The option the evidence supports best for the question (:mod:`weighing`), with the
    units it rests on most."""
    if notes is not None and len(notes) != len(choices):
        raise ValueError(f"{len(notes)} option notes for {len(choices)} choices")
    units = evidence_units(passages)
    if not units:
        # Nothing to weigh: the choice closest in meaning to the question, said to be a guess.
        vectors = _vectors(embedder, [question, *choices])
        best = scoring.best_index(vectors[1:] @ vectors[0])
        return Response(
            answer=f"{choice_letter(best)}. {choices[best]} — a guess: nothing in your memory "
            "speaks to any of the choices.",
            choice_index=best,
            guess=True,
        )
    weighed = weigh(embedder, question, units, choices, notes, asked)
    best = scoring.best_index(weighed.scores())
    contribution = weighed.contribution[best]
    order = [int(i) for i in np.lexsort((np.arange(len(units)), -contribution))]
    top = order[0]
    cited = [
        units[i].ref
        for i in order[:MAX_CITED]
        if contribution[i] > 0 and contribution[i] >= SUPPORT_SHARE * contribution[top]
    ]
    if weighed.timed:
        how = "when it happened: "
    elif weighed.lexical[best, top] > 0:
        how = ""
    else:
        how = "the closest match by meaning: "
    return Response(
        answer=f"{choice_letter(best)}. {choices[best]} — {how}{attribution(units[top], asked)}: "
        f'"{_quote(units[top])}".',
        choice_index=best,
        evidence=list(dict.fromkeys(cited or [units[top].ref])),
    )
