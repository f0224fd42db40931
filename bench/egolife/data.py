"""EgoLife data as the benchmark sees it: 30 s windows with absolute times, and questions.

Pure parsing. DAY1 is :data:`BASE_DATE` (UTC), each later day the next date. Times are
``HHMMSS`` plus hundredths (some above 99), so comparisons are at whole seconds. A window sits
on the day's 30 s grid, in the cell holding its start, where live ingest would put its frames.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path

from pydantic import AwareDatetime, BaseModel

BASE_DATE = date(2025, 1, 1)  # DAY1
WINDOW_S = 30
CHOICE_KEYS = ("choice_a", "choice_b", "choice_c", "choice_d")

_DAY_RE = re.compile(r"^\s*day\s*(\d+)\s*$", re.IGNORECASE)
# "11153417DAY1_11181201": the first point uses the question's date, the others name theirs
_POINT_SEP_RE = re.compile(r"DAY(\d+)_", re.IGNORECASE)
_VIDEO_RE = re.compile(r"^DAY(\d+)_.*_(\d{6})\d*\.\w+$", re.IGNORECASE)


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


# --- calendar ---------------------------------------------------------------------------


def parse_day(label: str) -> int:
    """``"DAY3"`` / ``"Day3"`` / ``"day 3"`` → 3."""
    m = _DAY_RE.match(str(label))
    if not m or int(m.group(1)) < 1:
        raise DataError(f"expected a day label like 'DAY3', got {label!r}")
    return int(m.group(1))


def clock_seconds(code: str | int) -> int:
    """Seconds since midnight of ``HHMMSS`` or ``HHMMSSFF`` (hundredths dropped).

    An ``int`` is taken as ``HHMMSS`` (the sync files' line times, leading zeros lost)."""
    if isinstance(code, int):
        digits = f"{code:06d}"
    else:
        digits = str(code).strip()
        if not digits.isdigit() or len(digits) < 6:
            raise DataError(f"expected HHMMSS[FF], got {code!r}")
    hh, mm, ss = int(digits[0:2]), int(digits[2:4]), int(digits[4:6])
    if hh > 23 or mm > 59 or ss > 59:
        raise DataError(f"not a time of day: {code!r}")
    return hh * 3600 + mm * 60 + ss


def at(day: int, seconds: int) -> datetime:
    """The absolute UTC moment ``seconds`` after midnight of ``DAY{day}``."""
    midnight = datetime.combine(BASE_DATE + timedelta(days=day - 1), time(0), tzinfo=UTC)
    return midnight + timedelta(seconds=seconds)


def day_of(moment: datetime) -> int:
    return (moment.astimezone(UTC).date() - BASE_DATE).days + 1


def floor_window(moment: datetime) -> datetime:
    """Start of the 30 s grid cell holding ``moment`` (whole seconds)."""
    ts = int(moment.timestamp())
    return datetime.fromtimestamp(ts - ts % WINDOW_S, tz=UTC)


def parse_days(spec: str) -> set[int]:
    """``"1-7"``, ``"2"``, ``"1,3,5-6"`` → a set of day numbers."""
    days: set[int] = set()
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        try:
            first, last = int(lo), int(hi or lo)
        except ValueError:
            raise DataError(f"bad day range {part!r} in {spec!r}") from None
        if first < 1 or last < first:
            raise DataError(f"bad day range {part!r} in {spec!r}")
        days.update(range(first, last + 1))
    if not days:
        raise DataError(f"no days in {spec!r}")
    return days


# --- sync files -> windows --------------------------------------------------------------


def parse_clip(clip: dict) -> Window:
    """One sync-file clip → its window (caption lines and transcript lines kept in order)."""
    try:
        video = str(clip["video_file"])
        lines = clip["data"]
    except (KeyError, TypeError):
        raise DataError(f"clip without video_file/data: {str(clip)[:120]}") from None
    m = _VIDEO_RE.match(Path(video).name)
    if not m:
        raise DataError(f"cannot read day and start from video_file {video!r}")
    start = floor_window(at(int(m.group(1)), clock_seconds(m.group(2))))
    captions, transcripts = [], []
    for line in lines:
        text = " ".join(str(line.get("text", "")).split())
        if not text:
            continue
        kind = line.get("type")
        if kind == "caption":
            captions.append(text)
        elif kind == "transcript":
            transcripts.append(text)
        else:
            raise DataError(f"{video}: unknown line type {kind!r}")
    return Window(
        start=start,
        end=start + timedelta(seconds=WINDOW_S),
        caption=" ".join(captions),
        transcript="\n".join(transcripts),
        source=video,
    )


def _json_list(path: Path, of: str) -> list:
    try:
        items = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise DataError(f"{path}: {exc}") from None
    if not isinstance(items, list):
        raise DataError(f"{path}: expected a JSON list of {of}")
    return items


def parse_sync_file(path: Path) -> list[Window]:
    return [parse_clip(c) for c in _json_list(path, "clips")]


def sync_files(sync_dir: Path, days: Iterable[int] | None = None) -> list[Path]:
    """The sync files of ``days`` (all if None), in time order."""
    wanted = set(days) if days is not None else None
    picked = []
    for path in sorted(sync_dir.glob("*_DAY*_*.json")):
        m = re.search(r"_DAY(\d+)_(\d+)\.json$", path.name, re.IGNORECASE)
        if m and (wanted is None or int(m.group(1)) in wanted):
            picked.append((int(m.group(1)), m.group(2), path))
    return [p for *_, p in sorted(picked)]


def load_windows(sync_dir: Path, days: Iterable[int] | None = None) -> list[Window]:
    """All windows of the chosen days, sorted, one per grid cell (a repeated cell is an error:
    two clips claiming the same 30 s would make the ground truth ambiguous)."""
    if not sync_dir.is_dir():
        raise DataError(f"sync dir not found: {sync_dir}")
    windows: dict[datetime, Window] = {}
    for path in sync_files(sync_dir, days):
        for w in parse_sync_file(path):
            if w.start in windows:
                raise DataError(
                    f"{path.name}: two clips in the window {w.start.isoformat()} "
                    f"({windows[w.start].source}, {w.source})"
                )
            windows[w.start] = w
    return [windows[k] for k in sorted(windows)]


# --- questions --------------------------------------------------------------------------


def parse_moment(field: dict) -> datetime:
    """``{"date": "DAY3", "time": "11210217"}`` → an absolute moment."""
    try:
        return at(parse_day(field["date"]), clock_seconds(field["time"]))
    except (KeyError, TypeError):
        raise DataError(f"expected {{date, time}}, got {field!r}") from None


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
        return [at(day, clock_seconds(str(c))) for c in codes]
    if "time" not in field:
        raise DataError(f"target_time without time or time_list: {field!r}")
    parts = _POINT_SEP_RE.split(str(field["time"]))
    points = [at(day, clock_seconds(parts[0]))]
    for i in range(1, len(parts), 2):
        points.append(at(int(parts[i]), clock_seconds(parts[i + 1])))
    return points


def parse_question(raw: dict) -> Question:
    try:
        return Question(
            id=str(raw["ID"]),
            type=str(raw.get("type") or "unknown"),
            question=str(raw["question"]),
            choices={k[-1].upper(): str(raw[k]) for k in CHOICE_KEYS if raw.get(k)},
            answer=raw.get("answer"),
            query_time=parse_moment(raw["query_time"]),
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
    picked = [q for q in questions if days is None or q.days <= days]
    return picked[:limit] if limit is not None else picked
