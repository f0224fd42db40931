"""One answered demo question, read from the query API's JSON reply, whether it says what the
question expects, and how it is shown."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from pydantic import BaseModel
from rich.console import Group
from rich.panel import Panel
from rich.text import Text

from apps.demo.script import DemoQuestion
from worldmm.llm.rule_based.scoring import terms

_AM_PM = re.compile(r"\b([ap])\.\s?m\b\.?", re.IGNORECASE)  # "3 p.m." says "three pm"


class EvidenceView(BaseModel):
    scale: int
    start: datetime
    end: datetime
    text: str


class FrameView(BaseModel):
    ts: datetime
    segment_id: int | None = None


class RoundView(BaseModel):
    memory_type: str
    query: str
    hits: int
    note: str | None = None


class AnswerView(BaseModel):
    question: str
    choices: list[str] | None
    expect: str
    answer: str
    provider: str
    stopped: str
    rounds: list[RoundView]
    evidence: list[EvidenceView]  # episodic segments the answer drew on
    frames: list[FrameView]  # frames that visual searches found
    seconds: float
    right: bool  # the short answer says what the question expects

    @classmethod
    def from_reply(cls, q: DemoQuestion, reply: dict[str, Any], seconds: float) -> AnswerView:
        return cls(
            question=q.question,
            choices=q.choices,
            expect=q.expect,
            answer=reply["answer"],
            provider=reply["provider"],
            stopped=reply["stopped"],
            rounds=[
                RoundView(
                    memory_type=r["memory_type"],
                    query=r["query"],
                    hits=len(r["results"]),
                    note=r.get("note"),
                )
                for r in reply["rounds"]
            ],
            evidence=[EvidenceView.model_validate(e) for e in reply["evidence"]],
            frames=[
                FrameView(ts=h["ts"], segment_id=h.get("segment_id"))
                for r in reply["rounds"]
                if r["memory_type"] == "visual"
                for h in r["results"]
            ],
            seconds=round(seconds, 2),
            right=says_expected(reply["answer"], q.expect),
        )


def says_expected(answer: str, expect: str) -> bool:
    """Whether the short answer (what comes before its evidence, " — ") holds every content
    word of ``expect``, compared as stems with numbers as digits ("moved to 3pm" says "moved
    to three pm"; "Buy milk", "Eggs" says "buy milk, eggs")."""
    short = _AM_PM.sub(r"\1m", answer.split(" — ", 1)[0])
    return set(terms(expect)) <= set(terms(short))


def _clock(ts: datetime, origin: datetime | None) -> str:
    shown = f"{ts:%H:%M:%S}"
    if origin is not None:
        offset = int((ts - origin).total_seconds())
        sign = "-" if offset < 0 else "+"
        shown += f" ({sign}{abs(offset) // 60}:{abs(offset) % 60:02d})"
    return shown


def _scale(seconds: int) -> str:
    if seconds < 60:
        return f"{seconds} s"
    return f"{seconds // 60} min" if seconds < 3600 else f"{seconds // 3600} h"


def render_answer(n: int, view: AnswerView, origin: datetime | None, max_evidence: int = 4):
    """A panel: the question, the answer (with its provider), the rounds and the evidence
    time ranges (clock time in UTC and offset from the session start)."""
    lines: list[Text] = []
    if view.choices:
        lines.append(Text(f"choices: {' | '.join(view.choices)}", style="dim"))
    answer = Text("answer  ", style="bold")
    answer.append(view.answer.strip() or "(empty)")
    answer.append(f"   [{view.provider}]", style="magenta")
    lines.append(answer)
    mark = Text("✓ " if view.right else "✗ ", style="green" if view.right else "bold red")
    lines.append(mark + Text(f"expected: {view.expect}", style="dim"))
    lines.append(
        Text(f"rounds  {len(view.rounds)} ({view.stopped}, {view.seconds:.1f}s)", style="bold")
    )
    for i, r in enumerate(view.rounds, 1):
        note = f" — {r.note}" if r.note else ""
        lines.append(Text(f"  {i}. {r.memory_type:<8} {r.query!r} → {r.hits} hits{note}"))
    lines.append(Text(f"evidence  {len(view.evidence)} segments", style="bold"))
    for e in view.evidence[:max_evidence]:
        text = " ".join(e.text.split())
        text = text if len(text) <= 90 else text[:87] + "..."
        lines.append(
            Text(
                f"  {_scale(e.scale):>6}  {_clock(e.start, origin)} – {_clock(e.end, origin)}  "
                f"{text}"
            )
        )
    if len(view.evidence) > max_evidence:
        lines.append(Text(f"  ... and {len(view.evidence) - max_evidence} more", style="dim"))
    if view.frames:
        shown = ", ".join(_clock(f.ts, origin) for f in view.frames[:max_evidence])
        extra = len(view.frames) - max_evidence
        more = f" and {extra} more" if extra > 0 else ""
        lines.append(Text(f"frames  {shown}{more}", style="bold"))
    return Panel(Group(*lines), title=f"Q{n}. {view.question}", title_align="left")
