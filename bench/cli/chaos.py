"""CLI: ``worldmm bench chaos`` (registered on the bench sub-app by bench/cli/__init__.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def register(bench_app: typer.Typer) -> None:
    @bench_app.command("chaos")
    def chaos(
        out: Annotated[Path, typer.Option(help="Where to write the JSON report.")],
        users: Annotated[int, typer.Option(help="Simulated wearers streaming at once.")] = 8,
        minutes: Annotated[float, typer.Option(help="Real-time stream (multiple of 0.5).")] = 10.0,
        seed: Annotated[int, typer.Option(help="Seed of the fault schedule and frames.")] = 0,
        faults_per_target: Annotated[
            int,
            typer.Option(help="Kills of each target (worker, kafka, postgres, redis, encoder)."),
        ] = 2,
        targets: Annotated[
            str, typer.Option(help="Comma-separated subset of the targets.")
        ] = "worker,kafka,postgres,redis,encoder",
        model_latency_s: Annotated[
            float, typer.Option(help="Simulated latency of every model call (s).")
        ] = 0.2,
        keep: Annotated[bool, typer.Option(help="Keep the run's temp dir and logs.")] = False,
        fuzz_dir: Annotated[
            Path | None,
            typer.Option(help="Fuzz counts to include (tests/fuzz, WORLDMM_FUZZ_REPORT_DIR)."),
        ] = None,
    ) -> None:
        """Stream while every server is SIGKILLed and restarted on a seeded schedule; report
        missing and duplicated windows, entities, triples, DLQ reasons and query statuses."""
        from bench.chaos import main

        argv = [
            "--out", str(out),
            "--users", str(users),
            "--minutes", str(minutes),
            "--seed", str(seed),
            "--faults-per-target", str(faults_per_target),
            "--targets", targets,
            "--model-latency-s", str(model_latency_s),
        ]  # fmt: skip
        if keep:
            argv.append("--keep")
        if fuzz_dir is not None:
            argv += ["--fuzz-dir", str(fuzz_dir)]
        main(argv)
