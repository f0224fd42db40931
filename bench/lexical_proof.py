"""What the lexical lane's proof budget changes in served episodic search, on a kept synthetic
memory (``worldmm bench query --keep`` leaves one): every question searched twice, with the
covering-set proof always run (the exact lexical ranking) and as shipped (run only within
its budget, ``segment_search.proof_postings``). The questions are the query bench's, as the
served agent asks them (question + four lettered options), and, with ``--answer-option``,
as the agent's own lookup of the right option (question + that option).

Reported per variant: the search's p50 / p95, how many top lists hold a window of the
asked fact (any window whose triples include the same subject, predicate and object),
their mean reciprocal rank, and how many top lists the two variants share. Nothing is
written to the memory."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import numpy as np
from pydantic import Field

from bench import harness
from bench.query_synth import (
    _S_QUERY,
    Query,
    SynthConfig,
    SyntheticMemory,
    _rng,
    hours_of,
    make_queries,
)

VARIANTS = ("exact", "shipped")


class LexicalProofOptions(harness.Options):
    user: str = Field(description="A kept synthetic wearer (bench query --keep).")
    days: float = Field(7.0, gt=0, description="Days of the kept memory (as loaded).")
    seed: int = Field(0, description="Seed of the kept memory (as loaded).")
    queries: int = Field(100, ge=1, description="Episodic questions.")
    answer_option: bool = Field(
        False, description="Search the question with its right option, as the agent's lookup."
    )


def asked_facts(memory: SyntheticMemory, n: int, seed: int) -> np.ndarray:
    """The episodic triples the first ``n`` questions of :func:`make_queries` ask about (its
    first draw from its stream)."""
    return _rng(memory.cfg.seed, _S_QUERY, seed).choice(len(memory.episodic), size=n, replace=False)


def fact_windows(memory: SyntheticMemory, asked: np.ndarray) -> list[set[tuple[int, datetime]]]:
    """For each asked episodic triple: the windows (scale, start) holding a triple with its
    subject, predicate and object."""
    ep = memory.episodic
    key = np.stack([ep.subj, ep.pred, ep.obj, ep.literal], axis=1)
    starts = memory.segments.starts
    out = []
    for i in asked:
        same = np.flatnonzero((key == key[i]).all(axis=1))
        out.append({(int(ep.scale[j]), starts[int(ep.scale[j])][int(ep.segment[j])]) for j in same})
    return out


def answer_option_queries(
    memory: SyntheticMemory, questions: Sequence[Query], asked: np.ndarray
) -> list[Query]:
    """Each question as the agent's lookup of its right option (``asked``: the triple it
    asks about): the question, then the fact's object
    (``worldmm.agent.choices.option_query``), with the question's vectors."""
    ep = memory.episodic
    out = []
    for q, i in zip(questions, asked, strict=True):
        head = q.text.split(" (A) ", 1)[0]
        text = f"{head} {memory.triple_text(ep, int(i))[2]}"
        vectors = {k: v for k, v in q.vectors.items() if k != q.text} | {text: q.vectors[q.text]}
        out.append(Query("episodic", text, q.entities, vectors))
    return out


@contextmanager
def proof_always_run() -> Iterator[None]:
    """The covering-set proof runs whatever its posting lists hold (the exact ranking)."""
    from worldmm.store import segment_search

    shipped = segment_search.proof_postings
    segment_search.proof_postings = lambda *_args: 0  # type: ignore[assignment]
    try:
        yield
    finally:
        segment_search.proof_postings = shipped


def compare(tops: dict[str, list[list[int]]]) -> dict[str, Any]:
    """How many top lists the variants share, and their mean overlap."""
    a, b = (tops[v] for v in VARIANTS)
    overlap = [len(set(x) & set(y)) / max(1, len(x)) for x, y in zip(a, b, strict=True)]
    same = sum(x == y for x, y in zip(a, b, strict=True))
    return {"identical": same, "mean_overlap": round(float(np.mean(overlap or [1.0])), 3)}


async def _searches(deps: Any, user_id: str, questions, windows) -> dict[str, Any]:
    from worldmm.memory.retrieval import search

    ms, ranks, tops = [], [], []
    for q, held in zip(questions, windows, strict=True):
        t = time.perf_counter()
        result = await search(deps, "episodic", user_id, q.text, None)
        ms.append(1000 * (time.perf_counter() - t))
        hits = [(h.scale, h.start) for h in result.hits]
        ranks.append(next((n for n, h in enumerate(hits) if h in held), None))
        tops.append([h.segment_id for h in result.hits])
    found = [r for r in ranks if r is not None]
    return {
        "ms": harness.summary(ms),
        "fact_found": len(found),
        "mrr": round(sum(1 / (r + 1) for r in found) / max(1, len(ranks)), 4),
        "tops": tops,
    }


def run_study(settings: Any, opts: LexicalProofOptions, echo: harness.Echo) -> dict[str, Any]:
    from bench.query import StubModels, stub_deps
    from worldmm.deps import API_POOL_SIZE
    from worldmm.graph.cache import make_cache
    from worldmm.store.db import Database
    from worldmm.store.users import user_exists

    cfg = SynthConfig(hours=hours_of(opts.days), seed=opts.seed)
    echo(f"generating {cfg.hours} h of memory (seed {cfg.seed})")
    memory = SyntheticMemory(cfg)
    questions = make_queries(memory, opts.queries, seed=cfg.seed)["episodic"]
    asked = asked_facts(memory, len(questions), cfg.seed)
    windows = fact_windows(memory, asked)
    if opts.answer_option:
        questions = answer_option_queries(memory, questions, asked)
    del memory
    stub = StubModels(questions, cfg.text_dim, cfg.visual_dim)
    db = Database(settings.database_url, max_size=API_POOL_SIZE)
    try:
        with db.connection() as conn:
            if not user_exists(conn, opts.user):
                raise ValueError(f"no kept wearer {opts.user!r} (bench query --keep)")
        deps = stub_deps(settings, db, stub, make_cache(settings.redis_url))
        # untimed: the graphs into the memo and the indexes' pages into memory
        asyncio.run(_searches(deps, opts.user, questions, windows))
        variants: dict[str, Any] = {}
        for name in VARIANTS:
            if name == "exact":
                with proof_always_run():
                    variants[name] = asyncio.run(_searches(deps, opts.user, questions, windows))
            else:
                variants[name] = asyncio.run(_searches(deps, opts.user, questions, windows))
            v = variants[name]
            echo(f"  {name}: fact found {v['fact_found']}, p95 {v['ms'].get('p95')} ms")
    finally:
        db.close()
    shared = compare({k: v.pop("tops") for k, v in variants.items()})
    return {
        "benchmark": "lexical_proof",
        "user_id": opts.user,
        "config": opts.model_dump(mode="json", exclude={"out"}),
        "loadavg": harness.loadavg(),
        "variants": variants,
        "top_lists": shared,
    }


@harness.main(LexicalProofOptions)
def main(opts: LexicalProofOptions) -> dict[str, Any]:
    """Served episodic search with the lexical proof always run against as shipped."""
    run = harness.Run()
    measure_on = lambda settings, echo: run.stamp(run_study(settings, opts, echo))  # noqa: E731
    return harness.report_on_stack(opts.out, measure_on, keep=True)


if __name__ == "__main__":
    main()
