"""A dataflow process serves its Prometheus metrics while it runs, and they show a built window.

The real ingest flow (Kafka in, blob store, windows, construction, PostgreSQL) runs as its
own process with the simulated model (bench/ingest_worker.py, 50 ms per call); a one-minute
session goes through the gateway; ``/metrics`` is scraped until it reports the windows.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from deploy.stack.process import free_port
from tests.fixtures.ingest_runs import cheap, produce_session, session_frames
from tests.fixtures.processes import REPO, env_for, wait_for


def _scrape(port: int) -> dict[tuple[str, frozenset], float]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return {}  # not serving yet
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_metrics_endpoint_reports_built_windows(settings, tmp_path: Path, user_id: str) -> None:
    from connectors.topics import create_topics, topic_names

    s = cheap(settings)
    create_topics(s.kafka_brokers, s)
    frames_dir = session_frames(tmp_path / "gen", minutes=1.0)
    port = free_port()
    env = {**env_for(s), "WORLDMM_DATAFLOW_METRICS_PORT": str(port)}
    log = (tmp_path / "worker.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.ingest_worker", "--latency-s", "0.05",
         "--report", str(tmp_path / "windows.jsonl")],
        cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    frames_topic = topic_names(s)["frames"]
    built = ("worldmm_ingest_windows_total", frozenset({("scale", "30"), ("status", "complete")}))
    lag = ("worldmm_ingest_consumer_lag", frozenset({("topic", frames_topic), ("partition", "0")}))
    try:
        produce_session(s, user_id, frames_dir)

        def ready() -> dict | None:
            assert proc.poll() is None, (tmp_path / "worker.log").read_text()[-3000:]
            got = _scrape(port)
            # the lag gauge reaches 0 once the prober has seen everything produced read
            return got if got.get(built, 0) >= 2 and got.get(lag) == 0 else None

        got = wait_for(ready, 120, "two built 30 s windows and no consumer lag in /metrics", 0.5)
    finally:
        proc.send_signal(signal.SIGINT)  # our child, by its pid
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()

    # Each built window is observed once in the close → queryable histogram, and was
    # captioned by the (timed) model.
    close = ("worldmm_ingest_close_to_queryable_seconds_count", frozenset({("scale", "30")}))
    assert got[close] == got[built]
    ok = frozenset({("role", "caption"), ("outcome", "ok")})
    assert got[("worldmm_ingest_model_calls_total", ok)] >= got[built]
    assert got[("worldmm_concurrency_limit", frozenset({("scope", "windows")}))] >= 1
