"""`worldmm bench egolife` (= ``python -m bench.egolife.run``): load, ingest, ask every
question of every method, score, write JSON + plot (docs/benchmarks/egolife.md)."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

import typer
from pydantic import Field
from rich.console import Console
from rich.progress import MofNCompleteColumn, Progress, TimeElapsedColumn

from bench import harness
from bench.egolife import data, truth
from bench.egolife import memory_method as mm
from bench.egolife.agent_method import AGENT, AgentAnswers, run_agent_method, with_look_weight
from bench.egolife.data import DataError, EgoLifeData, Question, Window
from bench.egolife.misses import report_misses
from bench.egolife.truth import QuestionScore, Ranked
from bench.egolife.tune import LOOK_GRID, Picks, accuracy, answer_cv, folds, grid_letters
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
MEMORY_METHODS = (*mm.VARIANTS, mm.LIVE)
BASELINES = ("bm25", "dense")
# agent: the served path, each question asked as POST /v1/users/{id}/query asks it
METHODS = (AGENT, *MEMORY_METHODS, *BASELINES, "random")
METRICS = ("hit@1", "hit@3", "tiou", "accuracy")
TOP3_ONLY = "worldmm-top3-only"  # worldmm's answer from its top 3 alone (reported in its info)
INGEST_MEMO_TEXTS = 100_000  # 384-d float32: about 150 MB
Hits = dict[str, list[list[SegmentHit]]]  # per method, per question


class BenchError(ValueError):
    """The run cannot start as asked (unknown method, nothing selected)."""


class BenchConfig(EgoLifeData):
    out: Path = Field(description="Where to write the JSON report.")
    methods: StrList = Field(
        METHODS,
        description=f"Comma-separated subset of: {', '.join(METHODS)} (random: accuracy only;"
        " docs/benchmarks/egolife.md says what each is).",
    )
    reuse: bool = Field(
        False,
        description="Keep this user's stored memory and ingest only the hours not stored yet"
        " (without it the user's memory is purged and the week ingested afresh).",
    )
    speech_in_caption: bool = Field(
        True, description="Give the transcript lines to the caption text too (as a live captioner)."
    )
    plot: Path | None = Field(None, description="PNG figure path (default: --out with .png).")
    top_k: int = Field(default=3, ge=1)
    cache_dir: Path | None = None  # dense window embeddings kept between runs

    @property
    def plot_path(self) -> Path:
        return self.plot or self.out.with_suffix(".png")


def offered(q: Question) -> list[tuple[str, str]]:
    """The question's (letter, text) choices that are not blank, in letter order."""
    return [(k, v) for k, v in sorted(q.choices.items()) if v and v.strip()]


def asked(q: Question) -> Asked:
    return Asked(q.query_time, ZoneInfo("UTC"))


def run_baselines(
    cfg: BenchConfig,
    windows: Sequence[Window],
    questions: Sequence[Question],
    embedder: Callable[[], TextEmbedder],
    progress: Progress,
) -> tuple[Hits, dict[str, dict]]:
    """Each baseline's ranked windows per question, as evidence for the answerer (the text it
    searched), and its index and query times."""
    from bench.egolife.baselines import Bm25Search, DenseSearch

    by_start = {w.start: w for w in windows}
    evidence, timings = {}, {}
    for name in [m for m in BASELINES if m in cfg.methods]:
        started = time.perf_counter()
        if name == "bm25":
            index: Bm25Search | DenseSearch = Bm25Search(windows)
        else:
            task = progress.add_task("embed windows (dense)", total=len(windows))
            step = lambda n, task=task: progress.advance(task, n)  # noqa: E731
            index = DenseSearch(windows, embedder(), step, cache_dir=cfg.cache_dir)
        searched = time.perf_counter()
        evidence[name] = [
            [
                SegmentHit(
                    segment_id=-(i + 1),
                    scale=r.scale,
                    start=r.start,
                    end=r.end,
                    text=w.caption or w.transcript,
                    transcript=w.transcript or None,
                    score=0.0,
                )
                for i, r in enumerate(index.search(q.query_text, q.query_time, cfg.top_k))
                if (w := by_start.get(r.start)) is not None
            ]
            for q in progress.track(questions, description=f"ask {name}")
        ]
        per_q = (time.perf_counter() - searched) / max(1, len(questions))
        timings[name] = {
            "index_s": round(searched - started, 2),
            "query_ms": round(1000 * per_q, 2),
        }
    return evidence, timings


@contextmanager
def memory_deps(settings: Settings, echo: harness.Echo) -> Iterator[Deps]:
    """Ingest dependencies on the configured services, or on the embedded stack (started if
    needed, like `worldmm up`, and left running so `--reuse` finds the memory next time)."""
    from worldmm.deps import build_deps
    from worldmm.embed import build_embedder
    from worldmm.llm.rule_based.memo import MemoEmbedder

    with harness.stack_or_start(settings, echo, keep=True) as resolved:
        # A week repeats its entity names, triples and merged sentences: embedded once each
        # (the same vectors, so the same memory, in about half the embedding time).
        memo = MemoEmbedder(build_embedder(resolved), max_texts=INGEST_MEMO_TEXTS)
        deps = build_deps(resolved, role="ingest", embedder=memo)
        try:
            yield deps
        finally:
            deps.close()


async def run_worldmm(
    cfg: BenchConfig,
    deps: Deps,
    windows: Sequence[Window],
    questions: Sequence[Question],
    progress: Progress,
    echo: harness.Echo,
) -> tuple[Hits, Hits, dict, AgentAnswers | None]:
    """The memory of ``windows`` built, then every question through its variants: their
    hits, what the API's answerer looks up per question for ``worldmm`` and ``worldmm-live``
    besides those (one search per option), the ingest and question figures, and (method
    ``agent``) every question asked of the served agent."""
    ingest = await mm.build_memory(
        deps, cfg.user_id, windows, cfg.reuse, echo, progress, cfg.speech_in_caption
    )
    info = {"user_id": cfg.user_id, "ingest": ingest, "rows": mm.memory_counts(deps, cfg.user_id)}
    rdeps = mm.retrieval_deps(deps)
    served = None
    if AGENT in cfg.methods:
        served = await run_agent_method(rdeps, cfg.user_id, questions, offered, progress)
        info[AGENT] = served.info()
    names = [m for m in MEMORY_METHODS if m in cfg.methods]
    hits: Hits = {n: [] for n in names}
    if names:
        full_s: list[float] = []
        started = time.perf_counter()
        for q in progress.track(questions, description="ask worldmm (+ variants)"):
            found, seconds = await mm.search_variants(
                rdeps, cfg.user_id, q.query_text, q.question, q.query_time, names
            )
            for n in names:
                hits[n].append(found[n])
            full_s.append(seconds)
        ms = harness.summary(full_s, digits=1, scale=1000)
        stats = (("", "mean"), ("_p50", "p50"), ("_p95", "p95"))
        info |= {f"query_ms{k}": ms.get(s) for k, s in stats}
        info["questions_s"] = round(time.perf_counter() - started, 1)
    # worldmm and worldmm-live answer from what the API's answerer reads (its option look)
    looked: Hits = {}
    for name in [n for n in ("worldmm", mm.LIVE) if n in hits]:
        looked[name] = []
        for q in progress.track(questions, description=f"look per option ({name})"):
            texts = [t for _, t in offered(q)]
            args = (rdeps, cfg.user_id, q.question, texts, q.query_time, name == mm.LIVE)
            looked[name].append(await mm.option_evidence(*args) if len(texts) > 1 else [])
    return hits, looked, info, served


async def answer_all(
    roles, deps: Deps | None, cfg: BenchConfig, questions, evidence: Hits, looked: Hits, progress
) -> tuple[dict[str, list[str | None]], Picks]:
    """Each method's chosen letter per question: the same answerer reads each method's top
    hits (and, for a method in ``looked``, what the options' own searches found), told the
    question's time and what the memory says about each option (as the API's answerer is;
    unknown when no memory was run); ``random`` picks uniformly (seeded). With the offline
    answerer, also the letter each pair of weights of the cross-validation grid picks."""
    from worldmm.agent.choices import answer_choices
    from worldmm.agent.hit_passages import hit_passages
    from worldmm.agent.option_notes import option_notes
    from worldmm.providers.errors import ModelCallError

    notes: list[list[OptionNote] | None] = []
    for q in questions:
        texts = [t for _, t in offered(q)]
        known = deps is not None and texts
        notes.append(await option_notes(deps, cfg.user_id, texts, asked(q)) if known else None)
    out: dict[str, list[str | None]] = {}
    grid: Picks = {}
    for method, per_q in evidence.items():
        out[method] = []
        looks = looked.get(method) or [[] for _ in questions]
        for i in progress.track(range(len(questions)), description=f"answer {method}"):
            q, choices, look = questions[i], offered(questions[i]), looks[i]
            keys, texts = [k for k, _ in choices], [t for _, t in choices]
            try:
                got = await answer_choices(
                    roles, q.question, texts, per_q[i], looked=look, asked=asked(q), notes=notes[i]
                )
                out[method].append(keys[got.index])
            except (ValueError, ModelCallError):
                out[method].append(None)
            if not hasattr(roles, "weigh_choices"):
                continue
            row: dict = {}  # one weighing per look weight; a method that does not look weighs once
            for lw in LOOK_GRID if look else (1.0,):
                passages = hit_passages(per_q[i], (), look, lw)
                weighing = await roles.weigh_choices(
                    q.question, passages, texts, asked=asked(q), notes=notes[i]
                )
                for w in LOOK_GRID if not look else (lw,):
                    row |= grid_letters(weighing, keys, out[method][-1], w)
            grid.setdefault(method, []).append(row)
    rng = random.Random(0)
    out["random"] = [rng.choice(offered(q))[0] if offered(q) else None for q in questions]
    return out, grid


async def agent_grid(roles, questions, served: AgentAnswers) -> tuple[list[dict], dict]:
    """The letter each pair of the answerer's weights picks from what the served agent's
    response role weighed (its own rounds' segments and facts, its options' lookups at each
    look weight), and how many questions the shipped pair picks the agent's own letter on
    (it must be all: the grid reweighs the same evidence)."""
    from worldmm.agent.choices import OPTION_LOOK_WEIGHT
    from worldmm.llm.rule_based.weighing import BASE_RATE_WEIGHT

    rows: list[dict] = []
    same = 0
    for q, letter, done in zip(questions, served.letters, served.responded, strict=True):
        keys = [k for k, _ in offered(q)]
        row: dict = {}
        for lw in LOOK_GRID:
            weighing = None
            if done is not None:
                passages = with_look_weight(done.passages, lw)
                weighing = await roles.weigh_choices(
                    done.question, passages, done.choices, asked=done.asked, notes=done.notes
                )
            row |= grid_letters(weighing, keys, letter, lw)
        same += row.get((OPTION_LOOK_WEIGHT, BASE_RATE_WEIGHT)) == letter
        rows.append(row)
    return rows, {"questions": len(rows), "shipped_pair_matches_served": same}


def question_rows(
    questions: Sequence[Question], rankings: dict[str, list[list[Ranked]]], answers: dict
) -> list[dict]:
    """Per question: its truth, and per method its scores, top segments and answer."""
    rows = []
    for i, q in enumerate(questions):
        g = truth.truth_intervals(q.targets)
        methods: dict[str, dict] = {}
        for m in [m for m in METHODS if m in rankings or m in answers]:
            row = methods[m] = {}
            if m in rankings:
                row |= truth.score(rankings[m][i], g).model_dump()
                row["top"] = [
                    [r.start.isoformat(), r.end.isoformat(), r.scale] for r in rankings[m][i]
                ]
            if m in answers:
                row["answer"] = answers[m][i]
        moments = [[datetime.fromtimestamp(x, tz=UTC).isoformat() for x in iv] for iv in g]
        rows.append(
            {"id": q.id, "type": q.type, "query_time": q.query_time.isoformat(), "answer": q.answer}
            | {"truth": moments, "methods": methods}
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

    by_type = {t: block(idx) for t, idx in folds(questions, "type").items()}
    return {"overall": block(list(range(len(questions)))), "by_type": by_type}


SCORING = {
    "truth": "union of the 30 s windows holding the target points",
    "hit@k": f"a top-k segment of <= {truth.HIT_MAX_SCALE_S} s overlaps the truth",
    "tiou": f"|R ∩ G| / |R ∪ G| over the top {truth.TIOU_TOP} (any scale)",
    "as_of": "only windows (segments) ending at or before the question time "
    "(worldmm: the question time as as_of; worldmm-live: as the clock's now)",
    "accuracy": "the offline answerer's letter from the method's top hits equals the "
    "question's answer; worldmm reads its top hits and one search per option, as the "
    "API's answerer does (random: a seeded uniform pick)",
}


def run_benchmark(cfg: BenchConfig, settings: Settings, console: Console | None = None) -> dict:
    """Run the chosen methods and write ``cfg.out`` (JSON) and ``cfg.plot_path`` (PNG)."""
    run, console = harness.Run(), console or Console(stderr=True)
    if cfg.cache_dir is None:
        cfg = cfg.model_copy(update={"cache_dir": settings.resolved_state_dir / "bench-cache"})
    if unknown := set(cfg.methods) - set(METHODS):
        raise BenchError(f"unknown methods {sorted(unknown)}; choose from {list(METHODS)}")
    windows, days, questions = cfg.selection()
    console.print(f"{len(windows)} windows over days {sorted(days)}; {len(questions)} questions")
    if not windows or not questions:
        raise BenchError("nothing to run: no windows or no questions for these days")
    evidence: Hits = {}
    looked: Hits = {}
    # The retriever's parameters as run (chosen on days 1-3; see docs/benchmarks/egolife.md).
    dumped = settings.model_dump()
    episodic = {k: v for k, v in dumped.items() if k.startswith("episodic_") or k == "rerank_keep"}
    used = {k: dumped[k] for k in ("llm_provider", "embed_backend")}
    extra: dict = {
        "settings": used
        | {"speech_in_caption": cfg.speech_in_caption, "top_k": cfg.top_k, "episodic": episodic}
    }
    memory = any(m in cfg.methods for m in (AGENT, *MEMORY_METHODS))
    served: AgentAnswers | None = None
    columns = (*Progress.get_default_columns(), MofNCompleteColumn(), TimeElapsedColumn())
    with (
        Progress(*columns, console=console) as progress,
        memory_deps(settings, console.print) if memory else nullcontext() as deps,
    ):
        if deps is not None:
            built = run_worldmm(cfg, deps, windows, questions, progress, console.print)
            evidence, looked, extra["worldmm"], served = asyncio.run(built)
            roles, embedder = deps.roles, (lambda: deps.embedder)
        else:
            from worldmm.embed import build_embedder
            from worldmm.llm.roles import build_roles

            shared = build_embedder(settings)
            roles, embedder = build_roles(settings, shared), (lambda: shared)
        base, extra["baselines"] = run_baselines(cfg, windows, questions, embedder, progress)
        evidence |= base
        answered = {m: v for m, v in evidence.items() if m in cfg.methods}
        if "worldmm" in looked:  # its top 3 alone kept for comparison
            answered[TOP3_ONLY] = evidence["worldmm"]
        started = time.perf_counter()
        answer = answer_all(roles, deps, cfg, questions, answered, looked, progress)
        answers, grid = asyncio.run(answer)
        if grid and served is not None:
            grid[AGENT], extra["worldmm"]["agent_grid"] = asyncio.run(
                agent_grid(roles, questions, served)
            )
        extra["answer_s"] = round(time.perf_counter() - started, 1)
        if TOP3_ONLY in answers:
            extra["worldmm"]["accuracy_top3_only"] = accuracy(questions, answers.pop(TOP3_ONLY))
        if grid:
            extra["answerer_cv"] = answer_cv(questions, grid)
            if AGENT in grid:  # the served agent's weights chosen on its own answers
                extra["answerer_cv_agent"] = answer_cv(questions, grid, by=AGENT)
    if "random" not in cfg.methods:
        answers.pop("random", None)
    rankings = {m: [mm.ranked(h) for h in evidence[m]] for m in METHODS if m in answered}
    if served is not None:
        rankings[AGENT], answers[AGENT] = served.ranked, served.letters
    rows = question_rows(questions, rankings, answers)
    report = {
        "benchmark": "egolife-retrieval",
        "questions": len(questions),
        "methods": {
            m: summarise(questions, rows, m) for m in METHODS if m in rankings or m in answers
        },
        "days": sorted({data.day_of(w.start) for w in windows}),
        "windows": len(windows),
        "question_file": str(cfg.questions),
        "sync_dir": str(cfg.sync_dir),
        "calendar": f"DAY1 = {data.BASE_DATE.isoformat()} UTC",
        "scoring": SCORING,
        **extra,
        "misses": report_misses({"per_question": rows}),
        "per_question": rows,
    }
    harness.write_report(run.stamp(report), cfg.out, show=False)
    plot_report(report, cfg.plot_path)
    return report


_PALETTE = (
    "#d62728 #1f77b4 #9ecae1 #6baed6 #4292c6 #3182bd #2171b5 #08519c #17becf #ff7f0e #2ca02c"
    " #7f7f7f"
)
COLOURS = dict(zip(METHODS, _PALETTE.split(), strict=True))  # the served agent red, the rest blue


def days_label(days: list[int]) -> str:
    """[1, 2, 3, 5] -> "1-3, 5"."""
    runs: list[list[int]] = []
    for d in sorted(days):
        if runs and d == runs[-1][-1] + 1:
            runs[-1].append(d)
        else:
            runs.append([d])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs) or "none"


def _bars(ax, groups: Sequence[str], methods: list[str], value: Callable) -> None:
    width = 0.8 / max(1, len(methods))
    for j, method in enumerate(methods):
        xs = [i + (j - (len(methods) - 1) / 2) * width for i in range(len(groups))]
        ys = [value(method, g) or 0.0 for g in groups]  # None: not measured for the method
        bars = ax.bar(xs, ys, width, label=method, color=COLOURS.get(method))
        ax.bar_label(bars, fmt="%.2f", fontsize=5, padding=1, rotation=90)
    ax.set_xticks(range(len(groups)), groups)
    ax.set_ylim(0, 1.05)
    ax.grid(axis="y", alpha=0.3)


def plot_report(report: dict, path: Path) -> Path:
    """Overall hit@1 / hit@3 / tIoU / accuracy per method, and hit@3 per question type."""
    plt = harness.pyplot()
    figures = report["methods"]
    methods = list(figures)
    types = sorted({t for m in methods for t in figures[m]["by_type"]})
    fig, (left, right) = plt.subplots(
        1, 2, figsize=(16, 5.5), gridspec_kw={"width_ratios": [1.2, 1.7]}
    )
    _bars(left, METRICS, methods, lambda m, k: figures[m]["overall"].get(k))
    left.set_title(f"overall ({report['questions']} questions)")
    left.legend(loc="upper left", fontsize=7, ncols=2)
    by_type = lambda m, t: figures[m]["by_type"].get(t, {}).get("hit@3")  # noqa: E731
    _bars(right, types, [m for m in methods if m != "random"], by_type)
    counts = [figures[methods[0]]["by_type"].get(t, {}).get("n", 0) for t in types]
    labels = [f"{t}\n(n={n})" for t, n in zip(types, counts, strict=True)]
    right.set_xticks(range(len(types)), labels, fontsize=8)
    right.set_title("hit@3 by question type")
    fig.suptitle(
        f"EgoLife A1_JAKE retrieval — day(s) {days_label(report.get('days') or [])}, "
        f"{report.get('windows', '?')} windows of 30 s"
    )
    return harness.save_figure(fig, path)


def summary_table(report: dict) -> str:
    """A plain-text table of the overall and per-type figures (what the CLI prints)."""
    lines = [
        f"{report['questions']} questions, days {report['days']}, {report['windows']} windows",
        f"{'method':<15} {'type':<14} {'n':>4} {'hit@1':>6} {'hit@3':>6} {'tIoU':>6} {'acc':>6}",
    ]
    for method, block in report["methods"].items():
        for name, agg in [("overall", block["overall"]), *block["by_type"].items()]:
            cells = [agg.get(k) for k in METRICS]
            figures = " ".join(
                f"{v:>6.3f}" if isinstance(v, float | int) else f"{'-':>6}" for v in cells
            )
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
