"""How much a moment matters (0 routine .. 1 critical), estimated offline when no model gave it.

Wearers' days are mostly routine; what they ask about again is speech, named people and what
was new. The estimate adds those cues to a floor:

    importance = 0.10 + 0.30 * speech + 0.25 * names + 0.35 * novelty

- speech: words said in the window, saturating at ``SPEECH_WORDS`` (a greeting counts a
  little, a conversation fully);
- names: people (or places) named in the caption or transcript, mid-sentence or as a
  speaker ("Lucia: ..."), saturating at two;
- novelty: 1 - the highest cosine between the window's text embedding and the user's
  ``NOVELTY_WINDOWS`` latest 30 s windows before it (a first window is fully novel).

An explicit "remember this" note is 1.0. A coarser segment without a model rating takes the
highest importance among its children: an hour holding one important moment is important.
The weights are a hand-set prior (documented in docs/architecture.md); what the ranking makes
of them is chosen by cross-validation (``episodic_importance_weight``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import psycopg

from worldmm.store.recall import recent_embeddings

FLOOR, W_SPEECH, W_NAMES, W_NOVELTY = 0.10, 0.30, 0.25, 0.35
SPEECH_WORDS = 20
NAMES_FULL = 2
NOVELTY_WINDOWS = 20
NOTE_IMPORTANCE = 1.0
_SENTENCE_START = re.compile(r"(?:^|[.!?\"“]\s*|\n\s*)$")
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Cues:
    """What the estimate reads of one window."""

    speech_words: int
    names: int
    novelty: float


def estimate(cues: Cues) -> float:
    speech = min(1.0, cues.speech_words / SPEECH_WORDS)
    names = min(1.0, cues.names / NAMES_FULL)
    novelty = min(1.0, max(0.0, cues.novelty))
    value = FLOOR + W_SPEECH * speech + W_NAMES * names + W_NOVELTY * novelty
    return round(min(1.0, value), 4)


def named(text: str, entities: Iterable[str]) -> int:
    """How many ``entities`` read as names in ``text``: capitalised (not shouted like a sign,
    not "I") and found mid-sentence or as a speaker label — a capital at a sentence start
    alone proves nothing."""
    count = 0
    for e in dict.fromkeys(x.strip() for x in entities):
        if not e or e == "I" or not e[0].isupper() or e.isupper():
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
