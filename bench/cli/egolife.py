"""CLI: `worldmm bench egolife` — the EgoLife retrieval benchmark (code in bench/egolife/)."""

from __future__ import annotations

import importlib
from pathlib import Path

import typer

from apps.cli.common import settings_or_exit


def register(bench_app: typer.Typer) -> None:
    bench_app.command("egolife")(egolife)


def _import_run():
    # bench/ is an installed package (pyproject's include); imported late to keep --help fast.
    return importlib.import_module("bench.egolife.run")


def egolife(
    out: Path = typer.Option(..., "--out", help="Where to write the JSON report."),
    sync_dir: Path | None = typer.Option(
        None,
        "--sync-dir",
        help="Folder of A1_JAKE_DAY*_*.json sync files "
        "(default: ../shared/data/egolife/sync beside the checkout).",
    ),
    questions: Path | None = typer.Option(
        None,
        "--questions",
        help="EgoLifeQA-format question file "
        "(default: ../shared/data/egolife/questions_dev.json beside the checkout).",
    ),
    days: str | None = typer.Option(
        None,
        "--days",
        help="Days to ingest and questions to keep, e.g. 1-7, 1,3 or 2 "
        "(default: every day in --sync-dir).",
    ),
    limit_questions: int | None = typer.Option(
        None, "--limit-questions", min=1, help="Ask only the first N selected questions."
    ),
    methods: str = typer.Option(
        "worldmm,lane-lexical,lane-dense,lane-graph,fused-no-graph,fused-no-drill,bm25,dense,random",
        "--methods",
        help="Comma-separated subset of: worldmm (the fused retriever the API uses), "
        "lane-lexical, lane-dense, lane-graph (each lane alone), fused-no-graph, "
        "fused-no-drill, bm25, dense, random (accuracy only).",
    ),
    user_id: str = typer.Option(
        "egolife-A1_JAKE", "--user-id", help="Memory user id the week is ingested as."
    ),
    reuse: bool = typer.Option(
        False,
        "--reuse",
        help="Keep this user's stored memory and ingest only the hours "
        "not stored yet (without it the user's memory is purged and the week ingested afresh).",
    ),
    speech_in_caption: bool = typer.Option(
        True,
        "--speech-in-caption/--no-speech-in-caption",
        help="Give the transcript lines to the caption text too (as a live captioner would).",
    ),
    plot: Path | None = typer.Option(
        None, "--plot", help="PNG figure path (default: --out with .png)."
    ),
) -> None:
    """EgoLife retrieval: WorldMM episodic memory vs BM25 and dense MiniLM; hit@1/3, tIoU."""
    run = _import_run()
    from pydantic import ValidationError

    from bench.egolife.data import DataError, parse_days

    data_dir = run.default_data_dir()
    try:
        cfg = run.BenchConfig(
            sync_dir=sync_dir or data_dir / "sync",
            questions=questions or data_dir / "questions_dev.json",
            out=out,
            plot=plot,
            days=sorted(parse_days(days)) if days else None,
            limit_questions=limit_questions,
            methods=[m.strip() for m in methods.split(",") if m.strip()],
            user_id=user_id,
            reuse=reuse,
            speech_in_caption=speech_in_caption,
        )
        report = run.run_benchmark(cfg, settings_or_exit())
    except (DataError, ValidationError, run.BenchError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(run.summary_table(report))
    typer.echo(f"wrote {cfg.out} and {cfg.plot_path}")
