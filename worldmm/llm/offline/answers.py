"""Extractive answers for the offline response role."""

from __future__ import annotations

import re
import string

import numpy as np

from worldmm.embed.base import TextEmbedder
from worldmm.llm.offline.ranking import relevance
from worldmm.llm.offline.text import lexical_overlap, sentences

_CHOICE_PREFIX = re.compile(r"^\s*\(?([A-Za-z])[).:]\s+")


def split_choice(choice: str, index: int) -> tuple[str, str]:
    """("B", "the text") from "B. the text", or a letter by position when unlabelled."""
    m = _CHOICE_PREFIX.match(choice)
    if m:
        return m.group(1).upper(), choice[m.end() :].strip()
    return string.ascii_uppercase[index], choice.strip()


def evidence_units(context: str) -> list[str]:
    return [s for s in sentences(context) if len(s.split()) >= 2]


def pick_choice(
    embedder: TextEmbedder, question: str, choices: list[str], context: str
) -> tuple[str, str, str | None]:
    """(letter, choice text, supporting sentence or None).

    Each choice scores its best agreement with one retrieved sentence, weighted by how
    relevant that sentence is to the question, plus its word overlap with all the context.
    """
    labelled = [split_choice(c, i) for i, c in enumerate(choices)]
    units = evidence_units(context)
    if not units:
        return labelled[0][0], labelled[0][1], None
    texts = [t for _, t in labelled]
    vectors = embedder.embed([question, *texts, *units])
    q, cvec, uvec = vectors[0], vectors[1 : 1 + len(texts)], vectors[1 + len(texts) :]
    unit_relevance = uvec @ q
    agreement = cvec @ uvec.T + 0.5 * unit_relevance[None, :]
    lexical = np.asarray([lexical_overlap(t, context) for t in texts])
    scores = agreement.max(axis=1) + 0.5 * lexical
    best = int(np.argmax(scores))
    support = units[int(np.argmax(agreement[best]))]
    return labelled[best][0], labelled[best][1], support


def answer(embedder: TextEmbedder, question: str, context: str, choices: list[str] | None) -> str:
    if choices:
        letter, text, support = pick_choice(embedder, question, choices, context)
        if support is None:
            return (
                f"{letter}. {text}\n(offline answer: no retrieved memory supports any choice; "
                "this is a guess)"
            )
        return f'{letter}. {text}\n(offline answer, best supported by: "{support}")'
    units = evidence_units(context)
    if not units:
        return "I found nothing in your memory about this. (offline answer)"
    scores = relevance(embedder, question, units)
    top = sorted(np.argsort(-scores)[:2].tolist())
    quoted = " ".join(units[i] for i in top)
    return f"From your memory: {quoted} (offline answer, extractive)"
