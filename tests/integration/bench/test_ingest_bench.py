"""The ingest benchmark at its smallest: one level of two users streaming 30 s in real time
through a real worker process; the JSON has the promised fields and sane values."""

from __future__ import annotations

import json

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_tiny_ingest_benchmark(settings, tmp_path) -> None:
    from bench.ingest import BenchConfig, run_benchmark

    settings = settings.model_copy(update={"allowed_lateness_s": 2.0, "face_blur": True})
    cfg = BenchConfig(users_start=2, users_max=2, minutes=0.5, model_latency_s=0.2,
                      concurrency=8)  # fmt: skip
    lines: list[str] = []
    result = json.loads(json.dumps(run_benchmark(settings, cfg, lines.append)))

    for key in ("users_realtime_max", "cpu_ms_per_window", "close_to_queryable_p50_s",
                "close_to_queryable_p95_s", "settings", "machine", "levels"):  # fmt: skip
        assert key in result, key
    (level,) = result["levels"]
    assert level["users"] == 2 and level["windows_expected"] == 2
    assert level["windows_complete"] == 2 and level["windows_failed"] == 0
    assert result["cpu_ms_per_window"] > 0
    p50, p95 = result["close_to_queryable_p50_s"], result["close_to_queryable_p95_s"]
    # At least the watermark's wait (lateness) plus four chained 0.2 s calls; far below 30 s.
    assert 2.0 + 4 * 0.2 <= p50 <= p95 < 30
    assert result["users_realtime_max"] == 2
    assert result["settings"]["model_latency_s"] == 0.2
    assert len(result["machine"]["loadavg_start"]) == 3
    # one object per window: 2 windows of 30 s for 2 wearers (plus a closing window at most)
    assert 0 < result["object_store_requests_per_wearer_hour"] <= 3 * 120
    # blurring on, budget to spare at 2 wearers: every frame searched, none veiled; the CPU of
    # a search and the wearers one core keeps searching at 1 fps
    assert result["face_blur_ms_per_frame"] > 0
    assert level["face_frames_detected"] >= 2 * 30 and level["face_frames_veiled"] == 0
    assert result["face_frames_detected_share"] == 1.0
    cpu_ms = result["face_detect_cpu_ms_per_frame"]
    assert cpu_ms > 0 and result["wearers_per_core_blur_on"] == pytest.approx(
        1000 / cpu_ms, rel=0.01
    )
    assert level["producer_cpu_ms_per_window"] > 0 and "broker_cpu_ms_per_window" in level
    # the embedded PostgreSQL profiles statements: the window's writes are among the top ones
    statements = level["db_statements"]
    assert statements and any("INSERT INTO segments" in s["query"] for s in statements)
