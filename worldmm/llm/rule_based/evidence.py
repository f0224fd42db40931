"""Passages cut into evidence units for the offline answerer: each line said, each text read,
each sentence seen, with where it came from and when.

Captions of the offline provider repeat the transcript ('Alice said: "..."', 'I heard: "..."');
those sentences are folded into the transcript's units instead of counted twice.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Literal

from worldmm.llm.rule_based.text import sentences
from worldmm.llm.schemas import Passage

Source = Literal["said", "read", "seen", "scene", "context", "fact"]

_SPEAKER_LINE = re.compile(r"^\s*([A-Z][\w' -]{0,30}):\s+(.+)$")
_CAPTION_SPEECH = re.compile(r'^\s*(?:I heard|([A-Z][\w\' -]{0,30}) said):\s*"(.+?)"?\s*[.!?]?$')
_CAPTION_READ = re.compile(r"^\s*I saw text reading\s+(.+?)\.?$")
_QUOTED = re.compile(r'"([^"]+)"')
_NORM = re.compile(r"[^a-z0-9]+")
# The offline caption's light/colour/motion cues and its "nothing legible" remarks.
_SCENE_CUE = re.compile(r"^\s*(?:I was somewhere \w+;|Nothing legible|I recorded a moment with)")
CONTEXT_WEIGHT = 0.5  # a coarse summary around the hit says less about the moment itself
SCENE_WEIGHT = 0.5  # so does the light and colour of a scene, next to words said or read


@dataclass(frozen=True)
class Unit:
    text: str
    ref: str
    source: Source
    start: datetime | None = None
    end: datetime | None = None
    speaker: str | None = None  # who said it, when the transcript names them
    weight: float = 1.0
    texts: tuple[str, ...] = ()  # a "read" unit's texts, each as read in the frames


def _norm(text: str) -> str:
    return _NORM.sub(" ", text.lower()).strip()


def _said_units(p: Passage) -> list[Unit]:
    units = []
    for line in p.said.splitlines():
        m = _SPEAKER_LINE.match(line)
        speaker, words = (m.group(1), m.group(2)) if m else (None, line)
        for s in sentences(words):
            units.append(Unit(s, p.ref, "said", p.start, p.end, speaker))
    return units


def _caption_unit(p: Passage, sentence: str, source: Source, weight: float) -> Unit:
    speech = _CAPTION_SPEECH.match(sentence)
    if speech:
        return Unit(speech.group(2).strip(), p.ref, "said", p.start, p.end, speech.group(1))
    read = _CAPTION_READ.match(sentence)
    if read and source != "context":
        shown = tuple(t.strip() for t in _QUOTED.findall(read.group(1)) or [read.group(1)])
        return Unit(", ".join(shown), p.ref, "read", p.start, p.end, texts=shown)
    if _SCENE_CUE.match(sentence):
        return Unit(sentence, p.ref, "scene", p.start, p.end, weight=weight * SCENE_WEIGHT)
    return Unit(sentence, p.ref, source, p.start, p.end, weight=weight)


def passage_units(p: Passage) -> list[Unit]:
    """What was said first, then what was read and seen, then the surrounding summary."""
    if p.kind == "frame":
        return []  # a frame carries no words the offline answerer could weigh
    if p.kind == "fact":
        return [Unit(p.text.strip(), p.ref, "fact", p.start, p.end)] if p.text.strip() else []
    units = _said_units(p)
    units += [_caption_unit(p, s, "seen", 1.0) for s in sentences(p.text)]
    units += [_caption_unit(p, s, "context", CONTEXT_WEIGHT) for s in sentences(p.context)]
    if p.weight != 1.0:
        units = [replace(u, weight=u.weight * p.weight) for u in units]
    return units


def evidence_units(passages: Sequence[Passage]) -> list[Unit]:
    """Every passage's units, in passage order, each distinct text once (first kept)."""
    seen: set[str] = set()
    out = []
    for p in passages:
        for u in passage_units(p):
            key = _norm(u.text)
            if len(key.split()) < 1 or key in seen:
                continue
            seen.add(key)
            out.append(u)
    return out
