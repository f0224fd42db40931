"""Orchestration: load, ingest, ask every question of every method, score, write JSON + plot."""

from __future__ import annotations

import asyncio
import json
import platform
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from bench.egolife import truth
from bench.egolife.data import (
    BASE_DATE,
    Question,
    Window,
    day_of,
    load_questions,
    load_windows,
    select_questions,
)
from bench.egolife.truth import Interval, QuestionScore, Ranked

if TYPE_CHECKING:
    from worldmm.embed.base import TextEmbedder
    from worldmm.memory.deps import IngestDeps
    from worldmm.settings import Settings

METHODS = ("worldmm", "bm25", "dense")
DEFAULT_USER = "egolife-A1_JAKE"
REPO_ROOT = Path(__file__).resolve().parents[2]


class BenchError(ValueError):
    """The run cannot start as asked (unknown method, nothing selected)."""


def default_data_dir() -> Path:
    """``../shared/data/egolife`` beside the checkout (not the working directory)."""
    return (REPO_ROOT.parent / "shared" / "data" / "egolife").resolve()


class BenchConfig(BaseModel):
    sync_dir: Path
    questions: Path
    out: Path
    plot: Path | None = None  # default: the --out path with .png
    days: list[int] | None = None  # None: every day found in sync_dir
    limit_questions: int | None = Field(default=None, ge=1)
    methods: list[str] = Field(default_factory=lambda: list(METHODS))
    user_id: str = DEFAULT_USER
    reuse: bool = False
    speech_in_caption: bool = True
    top_k: int = Field(default=3, ge=1)
    cache_dir: Path | None = None  # dense window embeddings kept between runs

    @property
    def plot_path(self) -> Path:
        return self.plot or self.out.with_suffix(".png")


def progress_bar(console: Console) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    )


# --- the methods ------------------------------------------------------------------------


def ask_all(
    questions: Sequence[Question],
    search: Callable[[Question], list[Ranked]],
    progress: Progress,
    label: str,
) -> tuple[list[list[Ranked]], float]:
    """Every question through one method; returns the rankings and the mean seconds/query."""
    task = progress.add_task(f"ask {label}", total=len(questions))
    ranked, started = [], time.perf_counter()
    for q in questions:
        ranked.append(search(q))
        progress.advance(task)
    return ranked, (time.perf_counter() - started) / max(1, len(questions))


def run_baselines(
    cfg: BenchConfig,
    windows: Sequence[Window],
    questions: Sequence[Question],
    embedder: Callable[[], TextEmbedder],
    progress: Progress,
) -> tuple[dict[str, list[list[Ranked]]], dict[str, dict]]:
    from bench.egolife.baselines import Bm25Search, DenseSearch

    rankings: dict[str, list[list[Ranked]]] = {}
    timings: dict[str, dict] = {}
    if "bm25" in cfg.methods:
        started = time.perf_counter()
        bm25 = Bm25Search(windows)
        build = time.perf_counter() - started
        rankings["bm25"], per_q = ask_all(
            questions,
            lambda q: bm25.search(q.query_text, q.query_time, cfg.top_k),
            progress,
            "bm25",
        )
        timings["bm25"] = {"index_s": round(build, 2), "query_ms": round(1000 * per_q, 2)}
    if "dense" in cfg.methods:
        task = progress.add_task("embed windows (dense)", total=len(windows))
        started = time.perf_counter()
        dense = DenseSearch(
            windows, embedder(), lambda n: progress.advance(task, n), cache_dir=cfg.cache_dir
        )
        build = time.perf_counter() - started
        rankings["dense"], per_q = ask_all(
            questions,
            lambda q: dense.search(q.query_text, q.query_time, cfg.top_k),
            progress,
            "dense",
        )
        timings["dense"] = {"index_s": round(build, 2), "query_ms": round(1000 * per_q, 2)}
    return rankings, timings


@contextmanager
def memory_deps(settings: Settings, console: Console) -> Iterator[IngestDeps]:
    """Ingest dependencies on the configured services, or on the embedded stack (started if
    needed, like `worldmm up`, and left running so `--reuse` finds the memory next time)."""
    from worldmm import stack
    from worldmm.memory.deps import build_ingest_deps
    from worldmm.store.migrate import apply_migrations

    try:
        urls = stack.resolve_urls(settings)
    except stack.StackError:
        console.print("starting the embedded stack (stop it with `worldmm down`)")
        urls = stack.up(settings)
    apply_migrations(urls.database_url, settings)
    settings = settings.model_copy(
        update={"database_url": urls.database_url, "redis_url": urls.redis_url or "none"}
    )
    deps = build_ingest_deps(settings)
    try:
        yield deps
    finally:
        deps.close()


def run_worldmm(
    cfg: BenchConfig,
    deps: IngestDeps,
    windows: Sequence[Window],
    questions: Sequence[Question],
    progress: Progress,
    console: Console,
) -> tuple[list[list[Ranked]], dict]:
    from bench.egolife import memory_method as mm

    info: dict = {"user_id": cfg.user_id}
    stored = mm.stored_base_starts(deps, cfg.user_id)
    todo = list(windows)
    if cfg.reuse:
        todo = mm.missing_hours(windows, stored)
        console.print(
            f"reusing the memory of {cfg.user_id}: {len(stored)} 30 s segments "
            f"stored, {len(todo)} of {len(windows)} windows to ingest"
        )
    elif stored:
        purged = mm.purge(deps, cfg.user_id)
        console.print(f"purged the previous memory of {cfg.user_id}: {purged}")
    if todo:
        task = progress.add_task("ingest (caption-level)", total=len(todo))
        report = asyncio.run(
            mm.ingest_windows(
                deps,
                cfg.user_id,
                todo,
                speech_in_caption=cfg.speech_in_caption,
                on_hour=lambda n: progress.advance(task, n),
            )
        )
        info["ingest"] = {"reused_windows": len(windows) - len(todo), **report.as_dict()}
    else:
        info["ingest"] = {"reused_windows": len(windows), "windows": 0}
    info["rows"] = mm.memory_counts(deps, cfg.user_id)
    rdeps = mm.retrieval_deps(deps)

    async def ask_every() -> tuple[list[list[Ranked]], float]:
        task = progress.add_task("ask worldmm", total=len(questions))
        out, started = [], time.perf_counter()
        for q in questions:
            out.append(await mm.search(rdeps, cfg.user_id, q.query_text, q.query_time))
            progress.advance(task)
        return out, (time.perf_counter() - started) / max(1, len(questions))

    rankings, per_q = asyncio.run(ask_every())
    info["query_ms"] = round(1000 * per_q, 1)
    return rankings, info


# --- scoring and the report -------------------------------------------------------------


def summarise(questions: Sequence[Question], scores: Sequence[QuestionScore]) -> dict:
    by_type: dict[str, list[QuestionScore]] = {}
    for q, s in zip(questions, scores, strict=True):
        by_type.setdefault(q.type, []).append(s)
    return {
        "overall": truth.aggregate(scores),
        "by_type": {t: truth.aggregate(v) for t, v in sorted(by_type.items())},
    }


def _iso(iv: Interval) -> list[str]:
    return [datetime.fromtimestamp(x, tz=UTC).isoformat() for x in iv]


def question_rows(
    questions: Sequence[Question],
    truths: Sequence[list[Interval]],
    rankings: dict[str, list[list[Ranked]]],
    scores: dict[str, list[QuestionScore]],
) -> list[dict]:
    rows = []
    for i, q in enumerate(questions):
        rows.append(
            {
                "id": q.id,
                "type": q.type,
                "query_time": q.query_time.isoformat(),
                "truth": [_iso(iv) for iv in truths[i]],
                "methods": {
                    m: {
                        **scores[m][i].model_dump(),
                        "top": [
                            [r.start.isoformat(), r.end.isoformat(), r.scale]
                            for r in rankings[m][i]
                        ],
                    }
                    for m in rankings
                },
            }
        )
    return rows


def build_report(
    cfg: BenchConfig,
    windows: Sequence[Window],
    questions: Sequence[Question],
    rankings: dict[str, list[list[Ranked]]],
    extra: dict,
) -> dict:
    truths = [truth.truth_intervals(q.targets) for q in questions]
    scores = {
        m: [truth.score(r, g) for r, g in zip(rankings[m], truths, strict=True)] for m in rankings
    }
    return {
        "benchmark": "egolife-retrieval",
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "questions": len(questions),
        "methods": {m: summarise(questions, scores[m]) for m in rankings},
        "days": sorted({day_of(w.start) for w in windows}),
        "windows": len(windows),
        "question_file": str(cfg.questions),
        "sync_dir": str(cfg.sync_dir),
        "calendar": f"DAY1 = {BASE_DATE.isoformat()} UTC",
        "scoring": {
            "truth": "union of the 30 s windows holding the target points",
            "hit@k": f"a top-k segment of <= {truth.HIT_MAX_SCALE_S} s overlaps the truth",
            "tiou": f"|R ∩ G| / |R ∪ G| over the top {truth.TIOU_TOP} (any scale)",
            "as_of": "only windows (segments) ending at or before the question time",
        },
        "host": {"machine": platform.machine(), "python": platform.python_version()},
        **extra,
        "per_question": question_rows(questions, truths, rankings, scores),
    }


def run_benchmark(cfg: BenchConfig, settings: Settings, console: Console | None = None) -> dict:
    """Run the chosen methods and write ``cfg.out`` (JSON) and ``cfg.plot_path`` (PNG)."""
    from bench.egolife.plot import plot_report

    console = console or Console(stderr=True)
    if cfg.cache_dir is None:
        cfg = cfg.model_copy(update={"cache_dir": settings.resolved_state_dir / "bench-cache"})
    unknown = set(cfg.methods) - set(METHODS)
    if unknown:
        raise BenchError(f"unknown methods {sorted(unknown)}; choose from {list(METHODS)}")
    windows = load_windows(cfg.sync_dir, cfg.days)
    days = set(cfg.days) if cfg.days else {day_of(w.start) for w in windows}
    questions = select_questions(load_questions(cfg.questions), days, cfg.limit_questions)
    console.print(f"{len(windows)} windows over days {sorted(days)}; {len(questions)} questions")
    if not windows or not questions:
        raise BenchError("nothing to run: no windows or no questions for these days")

    rankings: dict[str, list[list[Ranked]]] = {}
    extra: dict = {
        "settings": {
            "llm_provider": settings.llm_provider,
            "embed_backend": settings.embed_backend,
            "speech_in_caption": cfg.speech_in_caption,
            "top_k": cfg.top_k,
        }
    }
    with progress_bar(console) as progress:
        if "worldmm" in cfg.methods:
            with memory_deps(settings, console) as deps:
                rankings["worldmm"], extra["worldmm"] = run_worldmm(
                    cfg, deps, windows, questions, progress, console
                )
                base, extra["baselines"] = run_baselines(
                    cfg, windows, questions, lambda: deps.embedder, progress
                )
        else:
            from worldmm.embed import build_embedder

            base, extra["baselines"] = run_baselines(
                cfg, windows, questions, lambda: build_embedder(settings), progress
            )
        rankings.update(base)

    rankings = {m: rankings[m] for m in METHODS if m in rankings}
    report = build_report(cfg, windows, questions, rankings, extra)
    cfg.out.parent.mkdir(parents=True, exist_ok=True)
    cfg.out.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    plot_report(report, cfg.plot_path)
    return report


def summary_table(report: dict) -> str:
    """A plain-text table of the overall and per-type figures (what the CLI prints)."""
    lines = [
        f"{report['questions']} questions, days {report['days']}, {report['windows']} windows",
        f"{'method':<9} {'type':<14} {'n':>4} {'hit@1':>6} {'hit@3':>6} {'tIoU':>6}",
    ]
    for method, block in report["methods"].items():
        rows = [("overall", block["overall"]), *block["by_type"].items()]
        for name, agg in rows:
            lines.append(
                f"{method:<9} {name:<14} {agg['n']:>4} {agg['hit@1']:>6.3f} "
                f"{agg['hit@3']:>6.3f} {agg['tiou']:>6.3f}"
            )
    return "\n".join(lines)
