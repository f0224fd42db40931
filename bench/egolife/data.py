"""EgoLife data as the benchmark sees it: 30 s windows with absolute times, and questions;
:class:`EgoLifeData`, the options that select them.

DAY1 is :data:`BASE_DATE` (UTC), each later day the next date. Times are ``HHMMSS`` plus
hundredths (some above 99), so comparisons are at whole seconds. A window sits on the day's
30 s grid, in the cell holding its start, where live ingest would put its frames.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Annotated

from pydantic import AwareDatetime, BaseModel, BeforeValidator, Field

from bench import harness

BASE_DATE = date(2025, 1, 1)  # DAY1
WINDOW_S = 30
DEFAULT_USER = "egolife-A1_JAKE"
DATA_DIR = Path(__file__).resolve().parents[3] / "shared" / "data" / "egolife"  # beside the repo

_DAY_RE = re.compile(r"^\s*day\s*(\d+)\s*$", re.IGNORECASE)
# "11153417DAY1_11181201": the first point uses the question's date, the others name theirs
_POINT_SEP_RE = re.compile(r"DAY(\d+)_", re.IGNORECASE)
_VIDEO_RE = re.compile(r"^DAY(\d+)_.*_(\d{6})\d*\.\w+$", re.IGNORECASE)
_SYNC_RE = re.compile(r"_DAY(\d+)_(\d+)\.json$", re.IGNORECASE)


class DataError(ValueError):
    """A sync or question file does not have the documented shape."""


class Window(BaseModel):
    """One 30 s window of the stream in text form: what captioner and ASR would have said."""

    start: AwareDatetime
    end: AwareDatetime
    caption: str
    transcript: str
    source: str  # the clip's video_file, for provenance

    @property
    def text(self) -> str:
        return "\n".join(part for part in (self.caption, self.transcript) if part)


class Question(BaseModel):
    id: str
    type: str
    question: str
    choices: dict[str, str]  # letter -> text
    answer: str | None
    query_time: AwareDatetime
    targets: list[AwareDatetime]

    @property
    def query_text(self) -> str:
        """The retrieval query: the question and its choices."""
        options = " ".join(f"({k}) {v}" for k, v in self.choices.items() if v)
        return f"{self.question} {options}".strip()

    @property
    def days(self) -> set[int]:
        """Days (1-based) this question touches: its query day and every target day."""
        return {day_of(t) for t in [self.query_time, *self.targets]}


def parse_day(label: str) -> int:
    """``"DAY3"`` / ``"Day3"`` / ``"day 3"`` → 3."""
    m = _DAY_RE.match(str(label))
    if not m or int(m.group(1)) < 1:
        raise DataError(f"expected a day label like 'DAY3', got {label!r}")
    return int(m.group(1))


def clock_seconds(code: str) -> int:
    """Seconds since midnight of ``HHMMSS`` or ``HHMMSSFF`` (hundredths dropped)."""
    digits = str(code).strip()
    if not digits.isdigit() or len(digits) < 6:
        raise DataError(f"expected HHMMSS[FF], got {code!r}")
    hh, mm, ss = int(digits[0:2]), int(digits[2:4]), int(digits[4:6])
    if hh > 23 or mm > 59 or ss > 59:
        raise DataError(f"not a time of day: {code!r}")
    return hh * 3600 + mm * 60 + ss


def at(day: int, code: str) -> datetime:
    """The absolute UTC moment of clock time ``code`` on ``DAY{day}``."""
    midnight = datetime.combine(BASE_DATE + timedelta(days=day - 1), time(0), tzinfo=UTC)
    return midnight + timedelta(seconds=clock_seconds(code))


def day_of(moment: datetime) -> int:
    return (moment.astimezone(UTC).date() - BASE_DATE).days + 1


def floor_window(moment: datetime) -> datetime:
    """Start of the 30 s grid cell holding ``moment`` (whole seconds)."""
    ts = int(moment.timestamp())
    return datetime.fromtimestamp(ts - ts % WINDOW_S, tz=UTC)


def parse_days(spec: str) -> set[int]:
    """``"1-7"``, ``"2"``, ``"1,3,5-6"`` → a set of day numbers."""
    days: set[int] = set()
    for part in filter(None, (p.strip() for p in spec.split(","))):
        lo, _, hi = part.partition("-")
        try:
            first, last = int(lo), int(hi or lo)
        except ValueError:
            first, last = 0, 0
        if first < 1 or last < first:
            raise DataError(f"bad day range {part!r} in {spec!r}")
        days.update(range(first, last + 1))
    if not days:
        raise DataError(f"no days in {spec!r}")
    return days


def parse_clip(clip: dict) -> Window:
    """One sync-file clip → its window (caption lines and transcript lines kept in order)."""
    try:
        video, lines = str(clip["video_file"]), clip["data"]
    except (KeyError, TypeError):
        raise DataError(f"clip without video_file/data: {str(clip)[:120]}") from None
    m = _VIDEO_RE.match(Path(video).name)
    if not m:
        raise DataError(f"cannot read day and start from video_file {video!r}")
    start = floor_window(at(int(m.group(1)), m.group(2)))
    texts: dict[str, list[str]] = {"caption": [], "transcript": []}
    for line in lines:
        if text := " ".join(str(line.get("text", "")).split()):
            if line.get("type") not in texts:
                raise DataError(f"{video}: unknown line type {line.get('type')!r}")
            texts[line["type"]].append(text)
    end = start + timedelta(seconds=WINDOW_S)
    caption, transcript = " ".join(texts["caption"]), "\n".join(texts["transcript"])
    return Window(start=start, end=end, caption=caption, transcript=transcript, source=video)


def _json_list(path: Path, of: str) -> list:
    try:
        items = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise DataError(f"{path}: {exc}") from None
    if not isinstance(items, list):
        raise DataError(f"{path}: expected a JSON list of {of}")
    return items


def load_windows(sync_dir: Path, days: Iterable[int] | None = None) -> list[Window]:
    """All windows of the chosen days (all if None), sorted, one per grid cell (a repeated
    cell is an error: two clips claiming the same 30 s would make the ground truth
    ambiguous)."""
    if not sync_dir.is_dir():
        raise DataError(f"sync dir not found: {sync_dir}")
    wanted = set(days) if days is not None else None
    files = []
    for path in sync_dir.glob("*_DAY*_*.json"):
        m = _SYNC_RE.search(path.name)
        if m and (wanted is None or int(m.group(1)) in wanted):
            files.append((int(m.group(1)), m.group(2), path))
    windows: dict[datetime, Window] = {}
    for *_, path in sorted(files):
        for w in map(parse_clip, _json_list(path, "clips")):
            if w.start in windows:
                raise DataError(
                    f"{path.name}: two clips in the window {w.start.isoformat()} "
                    f"({windows[w.start].source}, {w.source})"
                )
            windows[w.start] = w
    return [windows[k] for k in sorted(windows)]


def parse_target_time(field: dict) -> list[datetime]:
    """Every evidence point of a ``target_time``, in the three shapes the data uses:
    a point, ``time_list``, or several points in one string (``"11153417DAY1_11181201"``).
    A multi-day question that carries one date gets that date for all its listed points."""
    try:
        day = parse_day(field["date"])
    except (KeyError, TypeError):
        raise DataError(f"target_time without a date: {field!r}") from None
    if "time_list" in field:
        codes = field["time_list"]
        if not isinstance(codes, list) or not codes:
            raise DataError(f"empty or malformed time_list: {field!r}")
        return [at(day, str(c)) for c in codes]
    if "time" not in field:
        raise DataError(f"target_time without time or time_list: {field!r}")
    parts = _POINT_SEP_RE.split(str(field["time"]))
    points = [at(day, parts[0])]
    for i in range(1, len(parts), 2):
        points.append(at(int(parts[i]), parts[i + 1]))
    return points


def parse_question(raw: dict) -> Question:
    try:
        asked = raw["query_time"]
        if not isinstance(asked, dict) or not {"date", "time"} <= asked.keys():
            raise DataError(f"expected {{date, time}}, got {asked!r}")
        return Question(
            id=str(raw["ID"]),
            type=str(raw.get("type") or "unknown"),
            question=str(raw["question"]),
            choices={c.upper(): str(raw[f"choice_{c}"]) for c in "abcd" if raw.get(f"choice_{c}")},
            answer=raw.get("answer"),
            query_time=at(parse_day(asked["date"]), asked["time"]),
            targets=parse_target_time(raw["target_time"]),
        )
    except KeyError as exc:
        raise DataError(f"question {raw.get('ID', '?')}: missing {exc}") from None
    except DataError as exc:
        raise DataError(f"question {raw.get('ID', '?')}: {exc}") from None


def load_questions(path: Path) -> list[Question]:
    return [parse_question(r) for r in _json_list(path, "questions")]


def select_questions(
    questions: Sequence[Question], days: set[int] | None, limit: int | None = None
) -> list[Question]:
    """Questions whose query day and every target day were ingested (all if ``days`` is
    None), in file order, at most ``limit``."""
    return [q for q in questions if days is None or q.days <= days][:limit]


def _days(spec: object) -> object:
    return sorted(parse_days(spec)) if isinstance(spec, str) else spec


class EgoLifeData(harness.Options):
    """What the EgoLife benchmarks read: the sync files, the questions, the days, the user."""

    sync_dir: Path = Field(
        default_factory=lambda: DATA_DIR / "sync",
        description="Folder of A1_JAKE_DAY*_*.json sync files"
        " (default: ../shared/data/egolife/sync beside the checkout).",
    )
    questions: Path = Field(
        default_factory=lambda: DATA_DIR / "questions_dev.json",
        description="EgoLifeQA-format question file"
        " (default: ../shared/data/egolife/questions_dev.json beside the checkout).",
    )
    days: Annotated[list[int] | None, BeforeValidator(_days)] = Field(
        None,
        description="Days to ingest and questions to keep, e.g. 1-7, 1,3 or 2"
        " (default: every day in --sync-dir).",
    )
    user_id: str = Field(DEFAULT_USER, description="Memory user id the week is ingested as.")
    limit_questions: int | None = Field(
        None, ge=1, description="Use only the first N selected questions (a smoke run)."
    )

    def selection(self) -> tuple[list[Window], set[int], list[Question]]:
        """The windows of the chosen days, those days, and the questions asked on them."""
        windows = load_windows(self.sync_dir, self.days)
        days = set(self.days) if self.days else {day_of(w.start) for w in windows}
        asked = load_questions(self.questions)
        return windows, days, select_questions(asked, days, self.limit_questions)
