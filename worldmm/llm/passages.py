"""Passages as a model reads them (the response prompt) and times as a person reads them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from worldmm.llm.schemas import Passage
from worldmm.models import choice_letter

NOTHING = "(nothing was retrieved)"


def clock(ts: datetime) -> str:
    """ "04:00:05 on 1 May 2025" (UTC, the zone memory is stored in)."""
    return f"{ts:%H:%M:%S} on {ts.day} {ts:%b %Y}"


def span(start: datetime | None, end: datetime | None) -> str:
    if start is None:
        return ""
    if end is None or end == start:
        return clock(start)
    same_day = start.date() == end.date()
    return (
        f"{start:%H:%M:%S}–{end:%H:%M:%S} on {start.day} {start:%b %Y}"
        if same_day
        else (f"{clock(start)} – {clock(end)}")
    )


def passage_block(p: Passage) -> str:
    """One passage: its id and time, then what was said before what was seen."""
    when = span(p.start, p.end)
    head = f"[{p.ref}] {p.kind}" + (f", {when} UTC" if when else "")
    lines = [head]
    if p.said.strip():
        lines.append(f"  said: {' '.join(p.said.split())}")
    if p.text.strip():
        lines.append(f"  {'seen' if p.kind == 'segment' else 'text'}: {' '.join(p.text.split())}")
    if p.context.strip():
        lines.append(f"  within: {' '.join(p.context.split())}")
    return "\n".join(lines)


def render_passages(passages: Sequence[Passage]) -> str:
    return "\n".join(passage_block(p) for p in passages) or NOTHING


def render_choices(choices: Sequence[str]) -> str:
    return "Choices:\n" + "\n".join(f"{choice_letter(i)}. {c}" for i, c in enumerate(choices))
