"""Passages and choices as the response prompt reads them, and times as a person reads them:
on the wearer's clock (UTC when the question's zone is not known)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, tzinfo

from worldmm.llm.schemas import OptionNote, Passage
from worldmm.localtime import Asked, in_zone
from worldmm.models import choice_letter

NOTHING = "(nothing was retrieved)"
UNKNOWN = "(not known)"


def clock(ts: datetime, tz: tzinfo = UTC) -> str:
    """ "04:00:05 on 1 May 2025" on ``tz``'s clock (memory is stored in UTC)."""
    ts = in_zone(ts, tz)
    return f"{ts:%H:%M:%S} on {ts.day} {ts:%b %Y}"


def span(start: datetime | None, end: datetime | None, tz: tzinfo = UTC) -> str:
    if start is None:
        return ""
    if end is None or end == start:
        return clock(start, tz)
    start, end = in_zone(start, tz), in_zone(end, tz)
    same_day = start.date() == end.date()
    return (
        f"{start:%H:%M:%S}–{end:%H:%M:%S} on {start.day} {start:%b %Y}"
        if same_day
        else (f"{clock(start, tz)} – {clock(end, tz)}")
    )


def asked_label(asked: Asked | None) -> str:
    """The question's time for a prompt ('15:02 on Wednesday 25 Nov 2026 (Asia/Tokyo,
    UTC+09:00)'), or that it is not known."""
    return asked.label() if asked is not None else UNKNOWN


def passage_block(p: Passage, tz: tzinfo = UTC) -> str:
    """One passage: its id and time (with the zone's abbreviation, 'UTC', 'JST', 'EDT'),
    then what was said before what was seen."""
    when = span(p.start, p.end, tz)
    zone = in_zone(p.start, tz).tzname() if p.start is not None else ""
    head = f"[{p.ref}] {p.kind}" + (f", {when} {zone}" if when else "")
    lines = [head]
    if p.said.strip():
        lines.append(f"  said: {' '.join(p.said.split())}")
    if p.text.strip():
        lines.append(f"  {'seen' if p.kind == 'segment' else 'text'}: {' '.join(p.text.split())}")
    if p.context.strip():
        lines.append(f"  within: {' '.join(p.context.split())}")
    return "\n".join(lines)


def render_passages(passages: Sequence[Passage], tz: tzinfo = UTC) -> str:
    return "\n".join(passage_block(p, tz) for p in passages) or NOTHING


def render_choices(choices: Sequence[str], notes: Sequence[OptionNote] | None = None) -> str:
    """The lettered choices; an option that names a time is followed by the time it means
    ("About four hours ago (2–6 h before the question)"), so the passages' times can be
    compared with it directly."""
    lines = []
    for i, c in enumerate(choices):
        note = notes[i] if notes and i < len(notes) else None
        when = f" ({hours_label(*note.hours_before)})" if note and note.hours_before else ""
        lines.append(f"{choice_letter(i)}. {c}{when}")
    return "Choices:\n" + "\n".join(lines)


def hours_label(near: float, far: float) -> str:
    """'2–6 h before the question'; under an hour in minutes ('10–30 min ...')."""
    if far < 1:
        return f"{round(near * 60)}–{round(far * 60)} min before the question"
    return f"{near:.3g}–{far:.3g} h before the question"
