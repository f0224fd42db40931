"""Model calls failing after retries leave the window ``failed`` with the error and a DLQ
record, and ``worldmm retrigger`` re-runs it (and the summary above it); with the GPU worker
unreachable the text memory completes, the clips stay ``pending``, and ``worldmm retrigger
--visual`` encodes them once the worker is back."""

from __future__ import annotations

import socket
from datetime import timedelta

import pytest
from typer.testing import CliRunner

from tests.fixtures.ingest_runs import START, cheap, session_frames
from tests.fixtures.processes import set_env
from tests.fixtures.store_reads import memory_rows, segment_states

pytestmark = [pytest.mark.integration, pytest.mark.slow]


class FailingCaptions:
    """The real roles, except that captioning any of ``poisoned`` frames always fails."""

    def __init__(self, roles, poisoned: set[bytes]) -> None:
        self._roles = roles
        self._poisoned = poisoned
        self.failures = 0

    def __getattr__(self, name: str):
        return getattr(self._roles, name)

    async def caption(self, frames, transcript, seen_text=None):
        from worldmm.providers.errors import ModelCallError

        if self._poisoned.intersection(frames):
            self.failures += 1
            raise ModelCallError("provider returned 503 three times", role="caption", status=503)
        return await self._roles.caption(frames, transcript, seen_text)


def _send(settings, user: str, frames_dir) -> list:
    from apps.gateway.recording import plan_recording
    from apps.gateway.send import run_gateway
    from connectors.gateway import GlassesProducer

    plan = plan_recording(
        frames_dir=frames_dir, audio=frames_dir.parent / "silence.wav", fps=1, start=START
    )
    items = list(plan.frames)
    with GlassesProducer(settings) as producer:
        run_gateway(producer, user=user, session="s1", start=START, frames=items, audio=plan.audio)
    return items


def _segments(settings, user: str) -> dict:
    return segment_states(settings.database_url, user, "caption", "updated_at", "visual_status")


def test_failed_model_call_is_recorded_and_retriggered(
    settings, user_id, tmp_path, monkeypatch
) -> None:
    from bytewax.testing import run_main

    from connectors import kafka_io
    from connectors.dlq import parse_dlq_record
    from connectors.topics import create_topics, topic_names
    from dataflows.ingest import build_flow
    from worldmm.deps import build_deps
    from worldmm.memory.windows import dt_to_ms

    # frames sent as captured and every window captioned (no carrying): a poisoned frame is
    # one the caption call gets
    settings = cheap(settings, window_max_attempts=2, caption_frame_side=0, still_window_change=0.0)
    create_topics(settings.kafka_brokers, settings)
    items = _send(settings, user_id, session_frames(tmp_path / "session", 1))
    bad_start = START + timedelta(seconds=30)
    poisoned = {i.jpeg for i in items if bad_start <= i.ts < bad_start + timedelta(seconds=30)}
    roles: list[FailingCaptions] = []

    def deps_factory(s):
        deps = build_deps(s, role="ingest")
        deps.roles = FailingCaptions(deps.roles, poisoned)
        roles.append(deps.roles)
        return deps

    run_main(build_flow(settings, tail=False, deps_factory=deps_factory))
    assert roles[0].failures == settings.window_max_attempts

    segs = _segments(settings, user_id)
    status, error, caption = segs[(30, bad_start)][:3]
    assert (status, caption) == ("failed", None)
    assert "ModelCallError" in error and "503" in error
    assert segs[(30, START)][0] == "complete"
    three = segs[(180, START)]
    assert three[0] == "complete" and "children failed" in three[1]  # the rest still summarised
    dlq = kafka_io.consume_all(settings.kafka_brokers, topic_names(settings)["dlq"])
    entries = [parse_dlq_record(r.key, r.value, r.headers) for r in dlq]
    assert [(e.kind, e.reason, e.scale_seconds, e.window_start) for e in entries] == [
        ("window", "window_failed", 30, bad_start)
    ]
    assert "ModelCallError" in entries[0].body["error"]
    assert entries[0].body["window_start_ms"] == dt_to_ms(bad_start)

    # -- the provider is back: retrigger that window (its parents follow) ----------------
    from apps.cli import app

    set_env(monkeypatch, settings)
    lo, hi = bad_start.isoformat(), (bad_start + timedelta(seconds=30)).isoformat()
    result = CliRunner().invoke(app, ["retrigger", "--user", user_id, "--from", lo, "--to", hi])
    assert result.exit_code == 0, result.output
    after = _segments(settings, user_id)
    assert {v[0] for v in after.values()} == {"complete"}
    assert after[(30, bad_start)][2]  # captioned now, from the stored frames
    assert after[(180, START)][1] is None and after[(180, START)][3] > three[3]
    assert after[(30, START)][2] == segs[(30, START)][2]  # outside the range: not re-run
    assert "re-ran 4 windows (0 failed)" in result.output  # the window + 3 min, 10 min, 1 h
    # nothing left to do; --force re-runs complete windows too (old aliases still work)
    result = CliRunner().invoke(app, ["retrigger", "--user", user_id])
    assert result.exit_code == 0 and "re-ran 0 windows" in result.output, result.output
    first = ["--start", START.isoformat(), "--end", (START + timedelta(seconds=30)).isoformat()]
    result = CliRunner().invoke(app, ["retrigger", "--user", user_id, "--force", *first])
    assert result.exit_code == 0 and "re-ran 4 windows (0 failed)" in result.output, result.output
    assert _segments(settings, user_id)[(30, START)][2] == segs[(30, START)][2]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_gpu_worker_down_leaves_clips_pending_until_retrigger_visual(
    settings, user_id, tmp_path, monkeypatch
) -> None:
    from bytewax.testing import run_main

    from connectors.topics import create_topics
    from dataflows.ingest import build_flow
    from gpu_worker.app import WorkerConfig, create_app
    from gpu_worker.backends.offline import OfflineBackend
    from gpu_worker.threaded import ThreadedServer

    settings = cheap(
        settings,
        gpu_worker_url=f"http://127.0.0.1:{_closed_port()}",
        gpu_max_retries=0,
        gpu_timeout_s=2.0,
    )
    create_topics(settings.kafka_brokers, settings)
    _send(settings, user_id, session_frames(tmp_path / "session", 1))
    run_main(build_flow(settings, tail=False))

    down = memory_rows(settings.database_url, user_id)
    assert {s[4] for s in down["segments"]} == {"complete"}  # the text memory did not wait
    assert [s[5] for s in down["segments"] if s[0] == 30] == ["pending", "pending"]
    assert all(s[6] for s in down["segments"] if s[0] == 30)
    assert down["visual_embeddings"] == 0

    backend = OfflineBackend(settings.visual_embed_dim, ocr_frames=0)
    with ThreadedServer(create_app(backend, WorkerConfig())) as server:
        from apps.cli import app

        set_env(monkeypatch, settings.model_copy(update={"gpu_worker_url": server.url}))
        result = CliRunner().invoke(app, ["retrigger", "--user", user_id, "--visual"])
    assert result.exit_code == 0, result.output
    assert "re-ran 0 windows" in result.output and "2 done, 0 still pending" in result.output
    up = memory_rows(settings.database_url, user_id)
    assert up["visual_embeddings"] == 2
    assert [s[5] for s in up["segments"] if s[0] == 30] == ["complete", "complete"]
    assert [s[6] for s in up["segments"]] == [s[6] for s in down["segments"]]
