"""The API load benchmark's pure parts: what each route sends, and the per-route summary."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import typer

from bench.api_load import ROUTES, ApiLoadOptions, Tally, main, request_for

START = datetime(2025, 5, 5, tzinfo=UTC)


def test_every_route_has_its_request():
    seen = {}
    for i, route in enumerate(ROUTES):
        method, path, payload = request_for(route, "u-1", i, 24, START)
        assert path.startswith("/v1/users/u-1/")
        seen[route] = (method, path.rsplit("/", 1)[1])
    assert seen == {
        "ask": ("POST", "query"),
        "segments": ("GET", "segments"),
        "semantic": ("GET", "semantic"),
        "visual": ("POST", "search"),
    }
    _, _, visual = request_for("visual", "u-1", 0, 24, START)
    assert visual["memory_type"] == "visual" and visual["query"]
    with pytest.raises(ValueError, match="unknown route"):
        request_for("nope", "u-1", 0, 24, START)


def test_segments_ask_for_one_hour_inside_the_memory():
    for i in range(50):
        _, _, params = request_for("segments", "u", i, 24, START)
        start = datetime.fromisoformat(params["start"])
        end = datetime.fromisoformat(params["end"])
        assert START <= start < end <= START.replace(day=6)
        assert (end - start).total_seconds() == 3600


def test_summary_counts_errors_and_percentiles():
    t = Tally(ms=[float(x) for x in range(1, 101)])
    t.errors.update(["500", "500", "ReadTimeout"])
    s = t.summary(10.0)
    assert (s["requests"], s["ok"], s["errors"]) == (103, 100, 3)
    assert s["errors_by_kind"] == {"500": 2, "ReadTimeout": 1}
    assert s["throughput_per_s"] == 10.0
    assert (s["p50_ms"], s["p95_ms"], s["p99_ms"]) == (50.5, 95.0, 99.0)  # rounded to 0.1
    assert Tally().summary(5.0)["ok"] == 0 and "p50_ms" not in Tally().summary(5.0)


def test_arguments_are_checked(tmp_path):
    with pytest.raises(typer.BadParameter, match="--clients"):
        main(["--out", str(tmp_path / "x.json"), "--clients", "0"])
    with pytest.raises(typer.BadParameter, match="--reuse needs --user"):
        main(["--out", str(tmp_path / "x.json"), "--reuse"])
    args = ApiLoadOptions(out=tmp_path / "x.json")
    assert (args.clients, args.processes, args.duration) == (8, 2, 30.0)
