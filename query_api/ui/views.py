"""What the browser's pages show, shaped from store rows: pure functions, no I/O."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo

from worldmm.models import SCALES
from worldmm.store.input_gaps import InputGapSpan, gaps_in
from worldmm.store.models import SegmentRow, TripleRow
from worldmm.wire.schemas import EARLIEST, LATEST

SCALE_NAMES = {30: "30 s", 180: "3 min", 600: "10 min", 3600: "1 h"}
LANE_PAGE = 120  # segments per lane request: an hour of 30 s windows


def day_bounds(day: date, tz: tzinfo = UTC) -> tuple[datetime, datetime]:
    """The wearer's day: from their midnight to the next (23 or 25 hours on a day the clocks
    change), as UTC instants."""
    start = datetime.combine(day, time(0), tzinfo=tz)
    end = datetime.combine(day + timedelta(days=1), time(0), tzinfo=tz)
    return start.astimezone(UTC), end.astimezone(UTC)


def parse_day(value: str) -> date:
    """A day of the query string; ValueError when it is not one, or so near the ends of the
    calendar that the page's previous/next day could not be written."""
    try:
        day = date.fromisoformat(value)
    except ValueError:
        raise ValueError(f"not a day (YYYY-MM-DD): {value!r}") from None
    if not EARLIEST.date() <= day <= LATEST.date():
        raise ValueError(f"day out of range: between {EARLIEST:%Y-%m-%d} and {LATEST:%Y-%m-%d}")
    return day


def status_of(row: SegmentRow) -> str:
    """One word for the card: paused, failed, partial, pending, visual pending, or
    complete."""
    if row.processing_status == "paused":
        return "paused"
    if row.processing_status == "failed":
        return "failed"
    if row.processing_status == "pending":
        return "pending"
    if row.partial:
        return "partial"
    if row.visual_status == "pending":
        return "visual pending"
    return "complete"


@dataclass(frozen=True)
class Card:
    id: int
    scale: int
    start: datetime
    end: datetime
    caption: str
    status: str
    note: bool
    importance: float | None
    input_lost: bool = False  # lost input overlaps the window: input may be missing here


def card_of(row: SegmentRow, is_note: bool, gaps: list[InputGapSpan] | None = None) -> Card:
    return Card(
        id=row.id,
        scale=row.scale_seconds,
        start=row.window_start,
        end=row.window_end,
        caption=(row.caption or "").strip()
        or (
            "privacy pause: nothing recorded"
            if row.processing_status == "paused"
            else "(no caption)"
        ),
        status=status_of(row),
        note=is_note,
        importance=row.importance,
        input_lost=bool(gaps_in(gaps or [], row.window_start, row.window_end)),
    )


@dataclass(frozen=True)
class FactVersion:
    fact: TripleRow
    current: bool


def fact_histories(rows: list[TripleRow]) -> list[list[FactVersion]]:
    """Semantic facts grouped into chains: each chain starts at its oldest version and follows
    ``replaced_by`` to the newest; the newest chains first."""
    by_id = {r.id: r for r in rows}
    replaced = {r.replaced_by for r in rows if r.replaced_by is not None}
    chains: list[list[FactVersion]] = []
    placed: set[int] = set()
    starts = [r for r in rows if r.id not in replaced]
    # then whatever no start reaches (a cycle, or a chain cut by the fact limit): never hide one
    for row in starts + rows:
        if row.id in placed:
            continue
        chain, cur = [], row
        while cur is not None and cur.id not in placed:
            placed.add(cur.id)
            chain.append(FactVersion(cur, cur.invalidated_at is None))
            cur = by_id.get(cur.replaced_by) if cur.replaced_by is not None else None
        chains.append(chain)
    chains.sort(key=lambda c: c[-1].fact.valid_from, reverse=True)
    return chains


def lanes() -> list[tuple[int, str]]:
    """Coarsest lane first: the hour lane is the day's overview."""
    return [(s, SCALE_NAMES[s]) for s in sorted(SCALES, reverse=True)]
