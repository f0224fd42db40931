"""The dataflow process of the ingest benchmark: the real ingest flow (Kafka in, PostgreSQL
out, one Bytewax worker) with the simulated model of :mod:`bench.ingest_sim`.

    WORLDMM_... python -m bench.ingest_worker --latency-s 2.0 --report windows.jsonl

Settings come from ``WORLDMM_*`` variables. Every finished window is appended to the report
file as one JSON line with the wall time at which its write had committed (queryable).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path

from bytewax.outputs import DynamicSink, StatelessSinkPartition

from worldmm.deps import Deps, build_deps
from worldmm.memory.construct import WindowOutcome
from worldmm.settings import Settings


class _ReportPartition(StatelessSinkPartition[WindowOutcome]):
    def __init__(self, path: Path) -> None:
        self._file = path.open("a", encoding="utf-8")

    def write_batch(self, items: list[WindowOutcome]) -> None:
        at = time.time()
        for o in items:
            line = {"user": o.user_id, "scale": o.scale_s, "start_ms": o.start_ms,
                    "status": o.status, "at": at}  # fmt: skip
            self._file.write(json.dumps(line) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


class ReportSink(DynamicSink[WindowOutcome]):
    """One JSON line per finished window, with the wall time it was reported."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _ReportPartition:
        return _ReportPartition(self.path)


def simulated_deps(settings: Settings, latency_s: float) -> Deps:
    """Real store, blob store and graph cache; simulated model calls and a hash embedder."""
    from bench.ingest_sim import (
        HashEmbedder,
        SimulatedEncoder,
        SimulatedRoles,
        SimulatedTranscriber,
    )

    return build_deps(
        settings,
        role="ingest",
        roles=SimulatedRoles(latency_s),
        embedder=HashEmbedder(settings.text_embed_dim),
        transcriber=SimulatedTranscriber(latency_s),
        encoder=SimulatedEncoder(settings.visual_embed_dim, latency_s),
    )


def main(argv: Sequence[str] | None = None) -> None:
    from bytewax.testing import run_main

    from apps.dataflows.ingest import build_flow
    from worldmm.settings import load_settings

    p = argparse.ArgumentParser(prog="python -m bench.ingest_worker")
    p.add_argument("--latency-s", type=float, required=True, help="simulated model latency")
    p.add_argument("--report", type=Path, required=True, help="JSON lines, one per window")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    settings = load_settings()
    flow = build_flow(
        settings,
        report_sink=ReportSink(args.report),
        deps_factory=lambda s: simulated_deps(s, args.latency_s),
        flow_id="worldmm_bench_ingest",
    )
    with contextlib.suppress(KeyboardInterrupt):  # the benchmark stops us with SIGINT
        run_main(flow)


if __name__ == "__main__":
    main()
