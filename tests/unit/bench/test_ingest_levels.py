"""Pure pieces of the ingest benchmark: the user levels and which windows a stream covers."""

from __future__ import annotations

from datetime import UTC, datetime

from bench.harness import percentile
from bench.ingest import expected_windows, user_levels

T10 = int(datetime(2026, 5, 4, 9, 20, tzinfo=UTC).timestamp() * 1000)  # a 10 min boundary


def test_user_levels_double_up_to_the_most() -> None:
    assert user_levels(1, 64) == [1, 2, 4, 8, 16, 32, 64]
    assert user_levels(1, 48) == [1, 2, 4, 8, 16, 32, 48]
    assert user_levels(4, 4) == [4]
    assert user_levels(8, 4) == []
    assert user_levels(1, 2048, factor=4) == [1, 4, 16, 64, 256, 1024, 2048]


def test_expected_windows_inside_the_measured_stream() -> None:
    one_minute = expected_windows(T10, 60_000)
    assert one_minute == [(30, T10), (30, T10 + 30_000)]
    ten = expected_windows(T10, 600_000)
    scales = [s for s, _ in ten]
    assert scales.count(30) == 20 and scales.count(180) == 3 and scales.count(600) == 1
    assert 3600 not in scales  # the hour started before the stream
    # A stream starting mid 3 min window does not claim that window.
    assert (180, T10) not in expected_windows(T10 + 30_000, 300_000)


def test_percentile() -> None:
    assert percentile([], 50) is None
    assert percentile([1.0, 2.0, 3.0], 50) == 2.0


def test_the_command_measures_on_the_stacks_settings(monkeypatch) -> None:
    """``worldmm bench ingest`` hands its options to the measurement as the stack's settings
    come in (a keyword there once made every run fail before it started)."""
    import bench.ingest as ingest

    seen = {}

    def measure(settings, cfg, echo) -> dict:
        seen.update(settings=settings, cfg=cfg, echo=echo)
        return {"levels": []}

    monkeypatch.setattr(ingest, "run_benchmark", measure)
    monkeypatch.setattr(ingest.harness, "report_on_stack", lambda out, run, **_: run("S", print))
    cfg = ingest.BenchConfig(users_start=1, users_max=1)
    assert ingest.main.body(cfg) == {"levels": []}
    assert seen == {"settings": "S", "cfg": cfg, "echo": print}
