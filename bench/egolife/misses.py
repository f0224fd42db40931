"""Where a method's retrieval misses, from an EgoLife report's ``per_question`` rows (issue 41
asks to look before choosing what to build): hit@3 by question type, by how long before the
question its target happened, and by the scale of the segments returned; and, for each miss,
how far the nearest returned segment lies from the target (a neighbouring window, the same
hour, the same day, or another day), which says whether the right event was found at the
wrong grain or a wrong event was found.

``python -m bench.egolife.misses --report REPORT.json --out misses.json``; ``worldmm bench
egolife`` puts the same breakdown in its report (``misses``)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import Field

from bench import harness

# (label, upper bound in hours) for the time from a target to its question
BEFORE = (("<1h", 1.0), ("1-6h", 6.0), ("6-24h", 24.0), ("1-3d", 72.0), (">3d", float("inf")))
# (label, upper bound in minutes) for a miss: the gap from the target to the nearest returned
GAP = (("adjacent (<=1 min)", 1.0), ("same hour", 60.0), ("same day", 1440.0))
OTHER_DAY = "another day"


def _t(value: str) -> datetime:
    return datetime.fromisoformat(value)


def _bucket(value: float, bounds: Sequence[tuple[str, float]], rest: str | None = None) -> str:
    for name, upper in bounds:
        if value <= upper:
            return name
    assert rest is not None
    return rest


def hours_before(row: dict[str, Any]) -> float:
    """Hours from the end of the question's latest target span to the question."""
    end = max(_t(b) for _, b in row["truth"])
    return (_t(row["query_time"]) - end).total_seconds() / 3600


def gap_minutes(row: dict[str, Any], top: Iterable[Sequence[Any]]) -> float | None:
    """Minutes between the target spans and the nearest returned segment (0 when they
    overlap); None without any returned."""
    best = None
    for start, end, *_ in top:
        s, e = _t(start), _t(end)
        for a, b in row["truth"]:
            ta, tb = _t(a), _t(b)
            gap = max(0.0, (max(s, ta) - min(e, tb)).total_seconds() / 60)
            best = gap if best is None else min(best, gap)
    return best


def _rate(hits: list[bool]) -> dict[str, Any]:
    return {"n": len(hits), "hit@3": round(sum(hits) / len(hits), 3) if hits else None}


def breakdown(rows: Sequence[dict[str, Any]], method: str) -> dict[str, Any]:
    """One method's hit@3 by type, by time before the question, by returned scale, and its
    misses by gap to the target."""
    by_type: dict[str, list[bool]] = defaultdict(list)
    by_before: dict[str, list[bool]] = defaultdict(list)
    by_scale: dict[str, list[bool]] = defaultdict(list)
    gaps: Counter[str] = Counter()
    scored = [r for r in rows if method in r["methods"] and "hit3" in r["methods"][method]]
    for row in scored:
        got = row["methods"][method]
        hit = bool(got["hit3"])
        by_type[row["type"]].append(hit)
        by_before[_bucket(hours_before(row), BEFORE)].append(hit)
        for scale in {int(t[2]) for t in got["top"][:3] if len(t) > 2}:
            by_scale[f"{scale} s"].append(hit)
        if not hit:
            gap = gap_minutes(row, got["top"][:3])
            gaps["nothing returned" if gap is None else _bucket(gap, GAP, OTHER_DAY)] += 1
    order = [name for name, _ in BEFORE]
    return {
        "questions": len(scored),
        "by_type": {k: _rate(v) for k, v in sorted(by_type.items())},
        "by_time_before": {k: _rate(by_before[k]) for k in order if k in by_before},
        "by_returned_scale": {
            k: _rate(v) for k, v in sorted(by_scale.items(), key=lambda kv: int(kv[0][:-2]))
        },
        "misses_by_gap": dict(gaps.most_common()),
    }


def report_misses(report: dict[str, Any]) -> dict[str, Any]:
    """:func:`breakdown` for every method of ``report`` that retrieves (has ``hit3``)."""
    rows = report.get("per_question", [])
    methods = sorted({m for r in rows for m, v in r["methods"].items() if "hit3" in v})
    return {m: breakdown(rows, m) for m in methods}


class MissesOptions(harness.Options):
    report: Path = Field(description="An EgoLife report (worldmm bench egolife --out).")


@harness.main(MissesOptions, required=("report", "out"))
def main(opts: MissesOptions) -> dict[str, Any]:
    """Where each method's retrieval misses, from an EgoLife report's per-question rows."""
    import json

    result = report_misses(json.loads(opts.report.read_text()))
    harness.write_report(result, opts.out)
    return result


if __name__ == "__main__":
    main()
