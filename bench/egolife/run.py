"""`worldmm bench egolife` (= ``python -m bench.egolife``): load, ingest, ask every question of
every method, score, write JSON + plot (docs/benchmarks/egolife.md)."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated
from zoneinfo import ZoneInfo

import typer
from pydantic import BeforeValidator, Field
from rich.console import Console
from rich.progress import MofNCompleteColumn, Progress, TimeElapsedColumn

from bench import harness
from bench.egolife import data, folds, truth
from bench.egolife.answer_cv import LOOK_GRID, Picks, accuracy, cross_validate, grid_letters
from bench.egolife.data import DataError, Question, Window
from bench.egolife.memory_method import LIVE, VARIANTS, ranked
from bench.egolife.truth import QuestionScore, Ranked
from bench.harness import StrList
from worldmm.llm.schemas import OptionNote
from worldmm.localtime import Asked
from worldmm.memory.retrieval.results import SegmentHit

if TYPE_CHECKING:
    from worldmm.deps import Deps
    from worldmm.embed.base import TextEmbedder
    from worldmm.settings import Settings

# worldmm (the fused retriever, asked with as_of), its ablations, and worldmm-live (the same
# retriever asked as the API asks a live question: no as_of, the clock set to the question time)
MEMORY_METHODS = (*VARIANTS, LIVE)
BASELINES = ("bm25", "dense")
METHODS = (*MEMORY_METHODS, *BASELINES, "random")
RANDOM_SEED = 0
TOP3_ONLY = "worldmm-top3-only"  # worldmm's answer from its top 3 alone (reported in its info)
DEFAULT_USER = "egolife-A1_JAKE"
REPO_ROOT = Path(__file__).resolve().parents[2]
INGEST_MEMO_TEXTS = 100_000  # 384-d float32: about 150 MB


class BenchError(ValueError):
    """The run cannot start as asked (unknown method, nothing selected)."""


def default_data_dir() -> Path:
    """``../shared/data/egolife`` beside the checkout (not the working directory)."""
    return (REPO_ROOT.parent / "shared" / "data" / "egolife").resolve()


def _days(spec: object) -> object:
    return sorted(data.parse_days(spec)) if isinstance(spec, str) else spec


Days = Annotated[list[int] | None, BeforeValidator(_days)]  # --days 1-3,5


class EgoLifeData(harness.Options):
    """What the EgoLife benchmark and its tuning read: the sync files, the questions, the days
    and the memory user."""

    sync_dir: Path = Field(
        default_factory=lambda: default_data_dir() / "sync",
        description="Folder of A1_JAKE_DAY*_*.json sync files"
        " (default: ../shared/data/egolife/sync beside the checkout).",
    )
    questions: Path = Field(
        default_factory=lambda: default_data_dir() / "questions_dev.json",
        description="EgoLifeQA-format question file"
        " (default: ../shared/data/egolife/questions_dev.json beside the checkout).",
    )
    days: Days = Field(
        None,
        description="Days to ingest and questions to keep, e.g. 1-7, 1,3 or 2"
        " (default: every day in --sync-dir).",
    )
    user_id: str = Field(DEFAULT_USER, description="Memory user id the week is ingested as.")
    limit_questions: int | None = Field(
        None, ge=1, description="Use only the first N selected questions (a smoke run)."
    )

    def selection(self) -> tuple[list[Window], set[int], list[Question]]:
        """The windows of the chosen days, those days, and the questions asked on them."""
        windows = data.load_windows(self.sync_dir, self.days)
        days = set(self.days) if self.days else {data.day_of(w.start) for w in windows}
        asked = data.load_questions(self.questions)
        return windows, days, data.select_questions(asked, days, self.limit_questions)


class BenchConfig(EgoLifeData):
    out: Path = Field(description="Where to write the JSON report.")
    methods: StrList = Field(
        METHODS,
        description="Comma-separated subset of: worldmm (the fused retriever the API uses,"
        " asked with as_of), worldmm-live (the API's episodic search asked live: no as_of,"
        " the question time as the clock's now), lane-lexical, lane-dense, lane-graph,"
        " lane-entity (each lane alone), fused-no-graph, fused-no-drill, bm25, dense,"
        " random (accuracy only).",
    )
    reuse: bool = Field(
        False,
        description="Keep this user's stored memory and ingest only the hours not stored yet"
        " (without it the user's memory is purged and the week ingested afresh).",
    )
    speech_in_caption: bool = Field(
        True,
        description="Give the transcript lines to the caption text too (as a live captioner).",
    )
    plot: Path | None = Field(None, description="PNG figure path (default: --out with .png).")
    top_k: int = Field(default=3, ge=1)
    cache_dir: Path | None = None  # dense window embeddings kept between runs

    @property
    def plot_path(self) -> Path:
        return self.plot or self.out.with_suffix(".png")


# --- the methods ------------------------------------------------------------------------


def window_hits(windows: Sequence[Window], ranking: Sequence[Ranked]) -> list[SegmentHit]:
    """A baseline's ranked windows as evidence for the answerer (same text it searched)."""
    by_start = {w.start: w for w in windows}
    return [
        SegmentHit(
            segment_id=-(i + 1),
            scale=r.scale,
            start=r.start,
            end=r.end,
            text=w.caption or w.transcript,
            transcript=w.transcript or None,
            score=0.0,
        )
        for i, r in enumerate(ranking)
        if (w := by_start.get(r.start)) is not None
    ]


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
    for name in [m for m in BASELINES if m in cfg.methods]:
        started = time.perf_counter()
        if name == "bm25":
            index: Bm25Search | DenseSearch = Bm25Search(windows)
        else:
            task = progress.add_task("embed windows (dense)", total=len(windows))
            step = lambda n, task=task: progress.advance(task, n)  # noqa: E731
            index = DenseSearch(windows, embedder(), step, cache_dir=cfg.cache_dir)
        asked = time.perf_counter()
        rankings[name] = [
            index.search(q.query_text, q.query_time, cfg.top_k)
            for q in progress.track(questions, description=f"ask {name}")
        ]
        per_q = (time.perf_counter() - asked) / max(1, len(questions))
        timings[name] = {"index_s": round(asked - started, 2), "query_ms": round(1000 * per_q, 2)}
    return rankings, timings


@contextmanager
def memory_deps(settings: Settings, console: Console) -> Iterator[Deps]:
    """Ingest dependencies on the configured services, or on the embedded stack (started if
    needed, like `worldmm up`, and left running so `--reuse` finds the memory next time)."""
    from worldmm.deps import build_deps
    from worldmm.embed import build_embedder
    from worldmm.llm.offline.memo import MemoEmbedder

    with harness.stack_or_start(settings, console.print, keep=True) as resolved:
        # A week repeats its entity names, triples and merged sentences: embedded once each
        # (the same vectors, so the same memory, in about half the embedding time).
        memo = MemoEmbedder(build_embedder(resolved), max_texts=INGEST_MEMO_TEXTS)
        deps = build_deps(resolved, role="ingest", embedder=memo)
        try:
            yield deps
        finally:
            deps.close()


def run_worldmm(
    cfg: BenchConfig,
    deps: Deps,
    windows: Sequence[Window],
    questions: Sequence[Question],
    progress: Progress,
    console: Console,
) -> tuple[dict[str, list[list[SegmentHit]]], dict[str, list[list[SegmentHit]]], dict]:
    """Ingest the windows not stored yet, then every question through the memory's
    variants; their hits, what the API's answerer looks up per question for ``worldmm`` and
    ``worldmm-live`` besides those (one search per option), and the ingest and question
    figures."""
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
        console.print(f"purged the previous memory of {cfg.user_id}: {mm.purge(deps, cfg.user_id)}")
    info["ingest"] = {"reused_windows": len(windows) - len(todo)}
    if todo:
        task = progress.add_task("ingest (caption-level)", total=len(todo))
        step = lambda n: progress.advance(task, n)  # noqa: E731
        ingest = mm.ingest_windows(deps, cfg.user_id, todo, cfg.speech_in_caption, on_hour=step)
        info["ingest"] |= asyncio.run(ingest)
    else:
        info["ingest"]["windows"] = 0
    info["rows"] = mm.memory_counts(deps, cfg.user_id)
    rdeps = mm.retrieval_deps(deps)
    names = [m for m in MEMORY_METHODS if m in cfg.methods]

    async def ask_every() -> tuple[dict[str, list[list[SegmentHit]]], list[float]]:
        out: dict[str, list[list[SegmentHit]]] = {n: [] for n in names}
        full_s: list[float] = []
        for q in progress.track(questions, description="ask worldmm (+ variants)"):
            hits, seconds = await mm.search_variants(
                rdeps, cfg.user_id, q.query_text, q.question, q.query_time, names
            )
            for n in names:
                out[n].append(hits[n])
            full_s.append(seconds)
        return out, full_s

    async def look_every(name: str) -> list[list[SegmentHit]]:
        out: list[list[SegmentHit]] = []
        for i in progress.track(range(len(questions)), description=f"look per option ({name})"):
            q, texts = questions[i], [t for _, t in offered(questions[i])]
            if len(texts) < 2:
                out.append([])
                continue
            look = mm.option_evidence(
                rdeps, cfg.user_id, q.question, texts, q.query_time, live=name == LIVE
            )
            out.append(await look)
        return out

    started = time.perf_counter()
    hits, full_s = asyncio.run(ask_every())
    ms = harness.summary(full_s, digits=1, scale=1000)
    info.update(query_ms=ms.get("mean"), query_ms_p50=ms.get("p50"), query_ms_p95=ms.get("p95"))
    info["questions_s"] = round(time.perf_counter() - started, 1)
    # worldmm and worldmm-live answer from what the API's answerer reads (its option look)
    looked = {n: asyncio.run(look_every(n)) for n in ("worldmm", LIVE) if n in hits}
    return hits, looked, info


# --- answers ------------------------------------------------------------------------------


def offered(q: Question) -> list[tuple[str, str]]:
    """The question's (letter, text) choices that are not blank, in letter order."""
    return [(k, v) for k, v in sorted(q.choices.items()) if v and v.strip()]


async def answer_all(
    roles,
    questions: Sequence[Question],
    evidence: dict[str, list[list[SegmentHit]]],
    progress: Progress,
    notes: Sequence[list[OptionNote] | None],
    looked: dict[str, list[list[SegmentHit]]],
) -> tuple[dict[str, list[str | None]], Picks]:
    """Each method's chosen letter per question: the same answerer reads each method's top
    hits (and, for a method in ``looked``, what the options' own searches found), told the
    question's time and what the memory says about each option (``notes``, per question);
    ``random`` picks uniformly (seeded). With the offline answerer, also the letter each
    pair of weights of the cross-validation grid picks (:mod:`bench.egolife.answer_cv`)."""
    from worldmm.agent.choices import answer_choices
    from worldmm.providers.errors import ModelCallError

    out: dict[str, list[str | None]] = {}
    grid: Picks = {}
    for method, per_q in evidence.items():
        letters: list[str | None] = []
        looks = looked.get(method) or [[] for _ in questions]
        for i in progress.track(range(len(questions)), description=f"answer {method}"):
            q, choices = questions[i], offered(questions[i])
            texts = [t for _, t in choices]
            asked = Asked(q.query_time, ZoneInfo("UTC"))
            try:
                got = await answer_choices(
                    roles, q.question, texts, per_q[i], looked=looks[i], asked=asked, notes=notes[i]
                )
                letters.append(choices[got.index][0])
            except (ValueError, ModelCallError):
                letters.append(None)
            if hasattr(roles, "weigh_choices"):
                row = await weigh_grid(roles, q, per_q[i], looks[i], asked, notes[i], letters[-1])
                grid.setdefault(method, []).append(row)
        out[method] = letters
    rng = random.Random(RANDOM_SEED)
    out["random"] = [rng.choice(offered(q))[0] if offered(q) else None for q in questions]
    return out, grid


async def weigh_grid(roles, q: Question, hits, look, asked, note, fallback) -> dict:
    """The letter every pair of weights picks for one question (one weighing per look
    weight; a method that does not look weighs once)."""
    from worldmm.agent.passages import hit_passages

    keys, texts = zip(*offered(q), strict=True)
    row: dict = {}
    for lw in LOOK_GRID if look else (1.0,):
        passages = hit_passages(hits, (), look, lw)
        weighing = await roles.weigh_choices(
            q.question, passages, list(texts), asked=asked, notes=note
        )
        for w in LOOK_GRID if not look else (lw,):
            row |= grid_letters(weighing, list(keys), fallback, w)
    return row


async def all_notes(
    deps: Deps | None, user_id: str, questions: Sequence[Question]
) -> list[list[OptionNote] | None]:
    """What the memory says about each question's options (as the API's answerer is told);
    None for every question when no memory was run (the base rate is then unknown)."""
    if deps is None:
        return [None] * len(questions)
    from worldmm.agent.option_notes import option_notes

    out: list[list[OptionNote] | None] = []
    for q in questions:
        texts = [t for _, t in offered(q)]
        asked = Asked(q.query_time, ZoneInfo("UTC"))
        out.append(await option_notes(deps, user_id, texts, asked) if texts else None)
    return out


# --- scoring and the report -------------------------------------------------------------


def question_rows(
    questions: Sequence[Question],
    rankings: dict[str, list[list[Ranked]]],
    answers: dict[str, list[str | None]],
) -> list[dict]:
    """Per question: its truth, and per method its scores, top segments and answer."""
    rows = []
    for i, q in enumerate(questions):
        g = truth.truth_intervals(q.targets)
        methods: dict[str, dict] = {}
        for m in [m for m in METHODS if m in rankings or m in answers]:
            row: dict = {}
            if m in rankings:
                row |= truth.score(rankings[m][i], g).model_dump()
                row["top"] = [
                    [r.start.isoformat(), r.end.isoformat(), r.scale] for r in rankings[m][i]
                ]
            if m in answers:
                row["answer"] = answers[m][i]
            methods[m] = row
        moments = [[datetime.fromtimestamp(x, tz=UTC).isoformat() for x in iv] for iv in g]
        rows.append(
            {
                "id": q.id,
                "type": q.type,
                "query_time": q.query_time.isoformat(),
                "answer": q.answer,
                "truth": moments,
                "methods": methods,
            }
        )
    return rows


def summarise(questions: Sequence[Question], rows: Sequence[dict], method: str) -> dict:
    """Overall and per-type figures of one method; a method without retrieval (random) has
    None for hit@k and tIoU, a method not answered has no accuracy."""

    def block(idx: list[int]) -> dict:
        cells = [rows[i]["methods"][method] for i in idx]
        if "tiou" in cells[0]:
            agg: dict = truth.aggregate([QuestionScore.model_validate(c) for c in cells])
        else:
            agg = {"hit@1": None, "hit@3": None, "tiou": None, "n": len(idx)}
        if "answer" in cells[0]:
            agg["accuracy"] = accuracy([questions[i] for i in idx], [c["answer"] for c in cells])
        return agg

    by_type = folds.folds(questions, "type").items()  # sorted by type
    return {
        "overall": block(list(range(len(questions)))),
        "by_type": {t: block(v) for t, v in by_type},
    }


def build_report(
    cfg: BenchConfig,
    windows: Sequence[Window],
    questions: Sequence[Question],
    rankings: dict[str, list[list[Ranked]]],
    answers: dict[str, list[str | None]],
    extra: dict,
) -> dict:
    rows = question_rows(questions, rankings, answers)
    names = [m for m in METHODS if m in rankings or m in answers]
    return {
        "benchmark": "egolife-retrieval",
        "questions": len(questions),
        "methods": {m: summarise(questions, rows, m) for m in names},
        "days": sorted({data.day_of(w.start) for w in windows}),
        "windows": len(windows),
        "question_file": str(cfg.questions),
        "sync_dir": str(cfg.sync_dir),
        "calendar": f"DAY1 = {data.BASE_DATE.isoformat()} UTC",
        "scoring": {
            "truth": "union of the 30 s windows holding the target points",
            "hit@k": f"a top-k segment of <= {truth.HIT_MAX_SCALE_S} s overlaps the truth",
            "tiou": f"|R ∩ G| / |R ∪ G| over the top {truth.TIOU_TOP} (any scale)",
            "as_of": "only windows (segments) ending at or before the question time "
            "(worldmm: the question time as as_of; worldmm-live: as the clock's now)",
            "accuracy": "the offline answerer's letter from the method's top hits equals the "
            "question's answer; worldmm reads its top hits and one search per option, as the "
            "API's answerer does (random: a seeded uniform pick)",
        },
        **extra,
        "per_question": rows,
    }


def run_benchmark(cfg: BenchConfig, settings: Settings, console: Console | None = None) -> dict:
    """Run the chosen methods and write ``cfg.out`` (JSON) and ``cfg.plot_path`` (PNG)."""
    from bench.egolife.plot import plot_report

    run, console = harness.Run(), console or Console(stderr=True)
    if cfg.cache_dir is None:
        cfg = cfg.model_copy(update={"cache_dir": settings.resolved_state_dir / "bench-cache"})
    if unknown := set(cfg.methods) - set(METHODS):
        raise BenchError(f"unknown methods {sorted(unknown)}; choose from {list(METHODS)}")
    windows, days, questions = cfg.selection()
    console.print(f"{len(windows)} windows over days {sorted(days)}; {len(questions)} questions")
    if not windows or not questions:
        raise BenchError("nothing to run: no windows or no questions for these days")

    evidence: dict[str, list[list[SegmentHit]]] = {}
    looked: dict[str, list[list[SegmentHit]]] = {}
    # The retriever's parameters as run (chosen on days 1-3; see docs/benchmarks/egolife.md).
    episodic = {
        k: v
        for k, v in settings.model_dump().items()
        if k.startswith("episodic_") or k == "rerank_keep"
    }
    used = settings.model_dump(include={"llm_provider", "embed_backend"})
    extra: dict = {
        "settings": {
            **used,
            "speech_in_caption": cfg.speech_in_caption,
            "top_k": cfg.top_k,
            "episodic": episodic,
        }
    }
    memory = any(m in cfg.methods for m in MEMORY_METHODS)
    with (
        Progress(
            *Progress.get_default_columns(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
        ) as progress,
        memory_deps(settings, console) if memory else nullcontext() as deps,
    ):
        if deps is not None:
            evidence, looked, extra["worldmm"] = run_worldmm(
                cfg, deps, windows, questions, progress, console
            )
            roles, embedder = deps.roles, (lambda: deps.embedder)
        else:
            from worldmm.embed import build_embedder
            from worldmm.llm.roles import build_roles

            shared = build_embedder(settings)
            roles, embedder = build_roles(settings, shared), (lambda: shared)
        base, extra["baselines"] = run_baselines(cfg, windows, questions, embedder, progress)
        for m, per_q in base.items():
            evidence[m] = [window_hits(windows, r) for r in per_q]
        answered = {m: v for m, v in evidence.items() if m in cfg.methods}
        if "worldmm" in looked:  # its top 3 alone kept for comparison
            answered[TOP3_ONLY] = evidence["worldmm"]
        answer_started = time.perf_counter()
        notes = asyncio.run(all_notes(deps, cfg.user_id, questions))
        answers, grid = asyncio.run(answer_all(roles, questions, answered, progress, notes, looked))
        extra["answer_s"] = round(time.perf_counter() - answer_started, 1)
        if TOP3_ONLY in answers:
            extra["worldmm"]["accuracy_top3_only"] = accuracy(questions, answers.pop(TOP3_ONLY))
        if grid:
            extra["answerer_cv"] = cross_validate(questions, grid)
    if "random" not in cfg.methods:
        answers.pop("random", None)
    rankings = {
        m: [ranked(h) for h in evidence[m]] for m in METHODS if m in evidence and m in cfg.methods
    }
    report = run.stamp(build_report(cfg, windows, questions, rankings, answers, extra))
    harness.write_report(report, cfg.out, show=False)
    plot_report(report, cfg.plot_path)
    return report


def summary_table(report: dict) -> str:
    """A plain-text table of the overall and per-type figures (what the CLI prints)."""

    def cell(value: object) -> str:
        return f"{value:>6.3f}" if isinstance(value, (int, float)) else f"{'-':>6}"

    lines = [
        f"{report['questions']} questions, days {report['days']}, {report['windows']} windows",
        f"{'method':<15} {'type':<14} {'n':>4} {'hit@1':>6} {'hit@3':>6} {'tIoU':>6} {'acc':>6}",
    ]
    for method, block in report["methods"].items():
        for name, agg in [("overall", block["overall"]), *block["by_type"].items()]:
            figures = " ".join(cell(agg.get(k)) for k in ("hit@1", "hit@3", "tiou", "accuracy"))
            lines.append(f"{method:<15} {name:<14} {agg['n']:>4} {figures}")
    return "\n".join(lines)


@harness.main(BenchConfig)
def main(cfg: BenchConfig) -> dict:
    """EgoLife retrieval: WorldMM episodic memory vs BM25 and dense MiniLM; hit@1/3, tIoU."""
    from apps.cli.common import settings_or_exit

    try:
        report = run_benchmark(cfg, settings_or_exit())
    except (DataError, BenchError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(summary_table(report))
    typer.echo(f"wrote {cfg.out} and {cfg.plot_path}")
    return report


if __name__ == "__main__":
    main()
