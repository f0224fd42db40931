"""How much a moment matters (0 routine .. 1 critical), estimated when no model rated it.

Wearers' days are mostly routine; what they ask about again is speech, named people and what
was new, so the estimate adds those cues to a floor (:func:`estimate`). The weights are a
hand-set prior (docs/architecture.md, with the spread of the cues they were set from); what
the ranking makes of them is chosen by cross-validation (``episodic_importance_weight``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import psycopg

from worldmm.llm.schemas import importance_of
from worldmm.store.importance_recall import recent_embeddings

FLOOR, W_SPEECH, W_NAMES, W_NOVELTY = 0.10, 0.30, 0.25, 0.35
SPEECH_WORDS = 120
NAMES_FULL = 4
NOVELTY_WINDOWS = 20
NOVELTY_FULL = 0.5
NOTE_IMPORTANCE = 1.0
_SENTENCE_START = re.compile(r"(?:^|[.!?:;\"“]\s*|\n\s*)$")
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Cues:
    """What the estimate reads of one window."""

    speech_words: int
    names: int
    novelty: float


def estimate(cues: Cues) -> float:
    speech = min(1.0, math.sqrt(max(0, cues.speech_words) / SPEECH_WORDS))
    names = min(1.0, cues.names / NAMES_FULL)
    novelty = min(1.0, max(0.0, cues.novelty) / NOVELTY_FULL)
    value = FLOOR + W_SPEECH * speech + W_NAMES * names + W_NOVELTY * novelty
    return round(min(1.0, value), 4)


def named(text: str, entities: Iterable[str]) -> int:
    """How many ``entities`` read as names in ``text``: capitalised (not shouted like a sign,
    not "I") and found mid-sentence or as a speaker label — a capital at a sentence start
    (after a speaker's colon too) alone proves nothing."""
    count = 0
    for e in dict.fromkeys(x.strip() for x in entities):
        if not e or e == "I" or e.startswith("I'") or not e[0].isupper() or e.isupper():
            continue
        for m in re.finditer(rf"\b{re.escape(e)}\b", text):
            after = text[m.end() : m.end() + 1]
            if after == ":" or not _SENTENCE_START.search(text[: m.start()]):
                count += 1
                break
    return count


def novelty(vector: np.ndarray | None, recent: np.ndarray) -> float:
    """1 - the highest cosine to the recent windows' embeddings (1.0 when there are none)."""
    if vector is None or recent.size == 0:
        return 1.0
    v = np.asarray(vector, dtype=np.float32)
    norms = np.linalg.norm(recent, axis=1) * (np.linalg.norm(v) or 1.0)
    cos = (recent @ v) / np.where(norms > 0, norms, 1.0)
    return float(1.0 - max(0.0, float(cos.max())))


def window_importance(
    conn: psycopg.Connection,
    user_id: str,
    window_start: datetime,
    *,
    caption: str,
    transcript: str,
    entities: Iterable[str],
    vector: np.ndarray | None,
) -> float:
    """The estimate for a 30 s window, against the user's windows stored before it."""
    recent = recent_embeddings(conn, user_id, 30, window_start, NOVELTY_WINDOWS)
    return estimate(
        Cues(
            speech_words=len(_WORD.findall(transcript or "")),
            names=named(f"{caption}\n{transcript}", entities),
            novelty=novelty(vector, recent),
        )
    )


def summary_importance(children: Iterable[float | None]) -> float | None:
    """A coarse segment's importance from its children's (None when none has one)."""
    known = [c for c in children if c is not None]
    return max(known) if known else None


def model_rating(text: str) -> dict:
    """The segment fields of a model's importance rating (none when it gave none)."""
    value = importance_of(text)
    return {} if value is None else {"importance": value, "importance_source": "model"}


def summary_rating(summary: str, children: Iterable[float | None]) -> dict:
    """A coarse segment's importance fields: the model's rating of its summary, else the
    most important moment it holds (none when neither is known)."""
    rating = model_rating(summary)
    if rating:
        return rating
    value = summary_importance(children)
    return {} if value is None else {"importance": value, "importance_source": "estimate"}


def backfill_importance(conn: psycopg.Connection, user_id: str) -> tuple[int, int]:
    """(Re)estimate the importance of every segment of the user that no model or note rated:
    memories written before importance existed, or after the estimate changed. Reads the
    stored text, the names in each window's triples and the text embeddings; the novelty of
    a window is against the windows before it, as at ingest. Returns the 30 s windows and
    coarser segments written."""
    from worldmm.store.importance_recall import fine_windows, set_estimates, summaries_from_windows

    windows = fine_windows(conn, user_id)
    values: dict[int, float] = {}
    for i, w in enumerate(windows):
        if w.rated:
            continue
        before = [x.embedding for x in windows[max(0, i - NOVELTY_WINDOWS) : i]]
        recent = (
            np.stack([v for v in before if v is not None])
            if any(v is not None for v in before)
            else np.zeros((0, 0), dtype=np.float32)
        )
        values[w.segment_id] = estimate(
            Cues(
                speech_words=len(_WORD.findall(w.transcript)),
                names=named(f"{w.caption}\n{w.transcript}", w.entities),
                novelty=novelty(w.embedding, recent),
            )
        )
    return set_estimates(conn, user_id, values), summaries_from_windows(conn, user_id)
