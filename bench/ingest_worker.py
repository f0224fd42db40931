"""The ingest and chaos benchmarks' dataflow process: the real ingest flow (one Bytewax
worker) with :mod:`bench.ingest_sim`'s models, settings from ``WORLDMM_*``. Each finished
window is appended to ``--report`` as a JSON line with the wall time its write committed."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

from bytewax.outputs import DynamicSink, StatelessSinkPartition

from worldmm.deps import Deps, build_deps
from worldmm.memory.window_outcome import WindowOutcome
from worldmm.redact import configure_logging
from worldmm.settings import Settings

# The face-blurring totals each report line carries: (seconds, frames) blurred, then frames
# searched, frames veiled and the searches' CPU seconds (what the budget limits).
_BLUR = (("worldmm_face_blur_seconds_sum", None), ("worldmm_face_blur_seconds_count", None))
_FACES = (
    ("worldmm_face_blur_frames_total", "detected"),
    ("worldmm_face_blur_frames_total", "veiled"),
    ("worldmm_face_detect_cpu_seconds_total", None),
)


class _ReportPartition(StatelessSinkPartition[WindowOutcome]):
    def __init__(self, path: Path) -> None:
        self._file = path.open("a", encoding="utf-8")

    def write_batch(self, items: list[WindowOutcome]) -> None:
        at, face = time.time(), _face_samples()
        blur, faces = [face.get(k, 0) for k in _BLUR], [face.get(k, 0) for k in _FACES]
        for o in items:
            window = {"user": o.user_id, "scale": o.scale_s, "start_ms": o.start_ms}
            line = {**window, "status": o.status, "at": at, "blur": blur, "faces": faces}
            self._file.write(json.dumps(line) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def _face_samples() -> dict[tuple[str, str | None], float]:
    """(sample name, outcome label) -> value of the face-blurring metrics, read from those
    alone: ``REGISTRY.get_sample_value`` collects the whole registry (/proc reads included)
    on every call, ~1 ms of the measured worker's CPU per window."""
    from worldmm import metrics

    wanted = (metrics.FACE_BLUR_SECONDS, metrics.FACE_BLUR_FRAMES, metrics.FACE_DETECT_CPU_SECONDS)
    return {
        (s.name, s.labels.get("outcome")): s.value
        for metric in wanted
        for family in metric.collect()
        for s in family.samples
    }


class ReportSink(DynamicSink[WindowOutcome]):
    """One JSON line per finished window, with the wall time it was reported."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _ReportPartition:
        return _ReportPartition(self.path)


def simulated_deps(settings: Settings, latency_s: float, real_encoder: bool = False) -> Deps:
    """Real store and blob store; simulated model calls and a hash embedder; the encoder
    simulated too, or with ``real_encoder`` the service's HTTP client."""
    from bench.ingest_sim import (
        HashEmbedder,
        SimulatedEncoder,
        SimulatedRoles,
        SimulatedTranscriber,
    )

    real = real_encoder and settings.gpu_worker_url
    return build_deps(
        settings,
        role="ingest",
        roles=SimulatedRoles(latency_s),
        embedder=HashEmbedder(settings.text_embed_dim),
        transcriber=SimulatedTranscriber(latency_s),
        # None: build_deps builds the encoder the settings name (the service's HTTP client)
        encoder=None if real else SimulatedEncoder(settings.visual_embed_dim, latency_s),
    )


def main(argv: Sequence[str] | None = None) -> None:
    from bytewax._bytewax import cli_main
    from bytewax.recovery import RecoveryConfig, init_db_dir
    from bytewax.testing import run_main

    from dataflows.ingest import build_flow
    from worldmm.settings import load_settings

    p = argparse.ArgumentParser(prog="python -m bench.ingest_worker")
    p.add_argument("--latency-s", type=float, required=True, help="simulated model latency")
    p.add_argument("--report", type=Path, required=True, help="JSON lines, one per window")
    p.add_argument("--recovery-dir", type=Path, help="Bytewax recovery dir (recovery on)")
    p.add_argument("--real-encoder", action="store_true", help="the encoder service over HTTP")
    args = p.parse_args(argv)
    configure_logging(logging.WARNING)
    flow = build_flow(
        load_settings(),
        report_sink=ReportSink(args.report),
        deps_factory=lambda s: simulated_deps(s, args.latency_s, args.real_encoder),
        flow_id="worldmm_bench_chaos" if args.recovery_dir else "worldmm_bench_ingest",
    )
    with contextlib.suppress(KeyboardInterrupt):  # the benchmark stops us with SIGINT
        if args.recovery_dir is None:
            run_main(flow)
            return
        args.recovery_dir.mkdir(parents=True, exist_ok=True)
        if not any(args.recovery_dir.iterdir()):
            init_db_dir(args.recovery_dir, 1)
        recovery = RecoveryConfig(str(args.recovery_dir))
        epoch = timedelta(seconds=1)  # a snapshot every second
        cli_main(flow, workers_per_process=1, epoch_interval=epoch, recovery_config=recovery)


if __name__ == "__main__":
    main()
