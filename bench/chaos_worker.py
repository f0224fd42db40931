"""The dataflow process of the chaos benchmark: the real ingest flow with recovery on, the
ingest bench's simulated models, and the real encoder service over HTTP (so killing the
encoder is felt as it would be in production).

    WORLDMM_... python -m bench.chaos_worker --latency-s 0.2 --report windows.jsonl \\
        --recovery-dir rec --epoch-s 1

Killed with SIGKILL and started again with the same ``--recovery-dir``, it resumes from its
last snapshot. Every finished window is appended to the report (see bench.ingest_worker).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

from bench.ingest_worker import ReportSink, simulated_deps
from worldmm.deps import Deps
from worldmm.settings import Settings


def chaos_deps(settings: Settings, latency_s: float) -> Deps:
    """Simulated models and embedder; the encoder is the HTTP client of the real service."""
    from worldmm.encoder import build_visual_encoder

    deps = simulated_deps(settings, latency_s)
    if settings.gpu_worker_url:
        deps.encoder = build_visual_encoder(settings)
    return deps


def main(argv: Sequence[str] | None = None) -> None:
    from bytewax._bytewax import cli_main
    from bytewax.recovery import RecoveryConfig, init_db_dir

    from apps.dataflows.ingest import build_flow
    from worldmm.settings import load_settings

    p = argparse.ArgumentParser(prog="python -m bench.chaos_worker")
    p.add_argument("--latency-s", type=float, required=True, help="simulated model latency")
    p.add_argument("--report", type=Path, required=True, help="JSON lines, one per window")
    p.add_argument("--recovery-dir", type=Path, required=True, help="Bytewax recovery dir")
    p.add_argument("--epoch-s", type=float, default=1.0, help="snapshot interval")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    settings = load_settings()
    args.recovery_dir.mkdir(parents=True, exist_ok=True)
    if not any(args.recovery_dir.iterdir()):
        init_db_dir(args.recovery_dir, 1)
    flow = build_flow(
        settings,
        report_sink=ReportSink(args.report),
        deps_factory=lambda s: chaos_deps(s, args.latency_s),
        flow_id="worldmm_bench_chaos",
    )
    with contextlib.suppress(KeyboardInterrupt):
        cli_main(
            flow,
            workers_per_process=1,
            epoch_interval=timedelta(seconds=args.epoch_s),
            recovery_config=RecoveryConfig(str(args.recovery_dir)),
        )


if __name__ == "__main__":
    main()
