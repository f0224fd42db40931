"""Query benchmark: retrieval latency over synthetic weeks of one user's memory, bulk-loaded
(:mod:`bench.query_synth`); ``search`` timed per memory type warm, cold and as of a past time
with stand-in models, and how soon a new 30 s segment is visible; docs/benchmarks/query.md."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import os
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from pydantic import Field, field_validator, model_validator

from bench import harness
from bench.bulk_load import check_users, load_memories
from bench.harness import Echo, summary
from bench.query_synth import (
    Query,
    SynthConfig,
    SyntheticMemory,
    expected_counts,
    hours_of,
    make_queries,
)
from worldmm.graph.cache import GraphCache, GraphMemo, make_cache
from worldmm.models import SCALES
from worldmm.settings import Settings, parse_lane_weights

MEMORY_TYPES = ("episodic", "semantic", "visual")
# Every episodic lane, the graph's too (weight 0 with the offline triples): what a deployment
# with LLM-built triples runs.
ALL_LANES = "lexical:1.0,dense:1.0,graph:0.5"


class StubModels:
    """NER, rerank, text embedder and visual encoder answering from the queries' tables.
    Unknown texts raise: a benchmark query that reached a real model path would be a bug."""

    label = name = "bench-stub"
    versions: dict[str, str] = {}

    def __init__(self, queries: Sequence[Query], text_dim: int, visual_dim: int) -> None:
        self.dim, self.visual_dim = text_dim, visual_dim
        self._vectors: dict[str, np.ndarray] = {}
        self._entities: dict[str, list[str]] = {}
        self._visual = {q.text: q.visual_vector for q in queries if q.visual_vector is not None}
        for q in queries:
            self.teach(q.text, q.entities, q.vectors)

    def teach(self, text: str, entities: list[str], vectors: dict[str, np.ndarray]) -> None:
        """What to answer for a query (also one made during the run)."""
        self._entities[text] = list(entities)
        self._vectors.update(vectors)

    def __getattr__(self, role: str) -> Any:
        raise AttributeError(f"the query benchmark's stand-in models have no {role!r}")

    async def ner(self, text: str) -> list[str]:
        return list(self._entities[text])

    async def rerank(self, query: str, candidates: list[tuple[str, str]], keep: int) -> list[str]:
        return [cid for cid, _ in candidates[:keep]]

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.stack([self._vectors[t] for t in texts]).astype(np.float32)

    async def encode_text(self, text: str) -> np.ndarray:
        return self._visual[text]

    async def encode_video(self, frames: list[bytes]) -> np.ndarray:
        raise NotImplementedError("the query benchmark encodes no video")


def stub_deps(settings: Settings, db: Any, stub: StubModels, cache: Any) -> Any:
    """The query API's dependencies with ``stub`` for every model and ``cache`` for graphs."""
    from worldmm.blobs import build_blob_store
    from worldmm.deps import Deps

    return Deps(
        settings=settings,
        db=db,
        roles=stub,  # type: ignore[arg-type]
        embedder=stub,
        encoder=stub,  # type: ignore[arg-type]
        blobs=build_blob_store(settings),
        cache=cache,
        graphs=GraphMemo(settings.graph_memo_elements),
    )


class Steps(Counter):
    """Where a query's time goes: seconds per method of the :class:`Timed` store reader and
    graph cache, and the cache's ``hits`` and ``misses`` (a cold run must hit; graphs served
    by the process's memo never reach it)."""

    def take(self) -> tuple[dict[str, float], dict[str, int]]:
        """The seconds and the cache's counts so far; counting starts again."""
        cache = {k: int(self.pop(k, 0)) for k in ("hits", "misses")}
        spent = dict(self)
        self.clear()
        return spent, cache


class Timed:
    """``inner`` (the store reader or the graph cache), each method call timed into ``steps``
    as ``<name>.<method>``."""

    def __init__(self, inner: Any, name: str, steps: Steps) -> None:
        self._inner, self._name, self._steps = inner, name, steps

    def __getattr__(self, method: str) -> Any:
        fn = getattr(self._inner, method)

        def timed(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                result = fn(*args, **kwargs)
            finally:
                self._steps[f"{self._name}.{method}"] += time.perf_counter() - t
            if self._name == "cache" and method == "get":
                self._steps["misses" if result.graph is None else "hits"] += 1
            return result

        return timed


def stage_seconds() -> Counter[str]:
    """Seconds so far in each episodic search stage (``worldmm_retrieval_stage_seconds``)."""
    from prometheus_client import REGISTRY

    out: Counter[str] = Counter()
    for metric in REGISTRY.collect():
        if metric.name == "worldmm_retrieval_stage_seconds":
            for s in metric.samples:
                if s.name.endswith("_sum"):
                    out[s.labels["stage"]] += s.value
    return out


async def timed_searches(
    deps: Any,
    user_id: str,
    queries: Sequence[Query],
    as_of: Sequence[datetime | None],
    fresh: bool,
    probe: Any = None,
) -> tuple[list[float], list[int], list[dict[str, float]]]:
    """Milliseconds and hits of each query's search (``as_of`` one per query); with ``fresh``
    the graph memo is emptied first, as in a process that has not served this user (graphs
    come from Redis, or are built from PostgreSQL when no Redis is configured). ``probe``
    returns running totals (seconds per step); each search's share of them is returned."""
    from worldmm.memory.retrieval import search

    times, hits, shares = [], [], []
    for q, when in zip(queries, as_of, strict=True):
        if fresh:
            deps.graphs = GraphMemo(deps.settings.graph_memo_elements)
        before = probe() if probe else {}
        t = time.perf_counter()
        result = await search(deps, q.memory_type, user_id, q.text, when)  # type: ignore[arg-type]
        times.append(1000 * (time.perf_counter() - t))
        hits.append(len(result.hits))
        if probe:
            after = probe()
            shares.append({k: v - before.get(k, 0.0) for k, v in after.items()})
    return times, hits, shares


def _mean_ms(step: str, values: Sequence[float]) -> float:
    """The mean of ``values``: in ms (seconds given), ``gc`` as a count."""
    return round(float(np.mean(values)) * (1 if step == "gc" else 1000), 2)


def tail_profile(times: Sequence[float], shares: Sequence[dict[str, float]]) -> dict[str, Any]:
    """What the slowest tenth of searches spend that the middle ones do not: mean ms per
    step over searches at or above the 90th percentile against those between the 40th and
    60th (steps overlap where lanes run at once; ``gc``: collections during a search)."""
    if len(times) < 10 or len(shares) != len(times):
        return {}
    a = np.asarray(times)
    lo, mid, hi = np.percentile(a, [40, 60, 90])
    groups = {"tail": a >= hi, "middle": (a >= lo) & (a <= mid)}
    keys = sorted({k for s in shares for k in s})
    out: dict[str, Any] = {}
    for name, mask in groups.items():
        picked = [s for s, m in zip(shares, mask, strict=True) if m]
        out[name] = {
            "n": len(picked),
            "ms": round(float(a[mask].mean()), 2),
            "per_step": {k: _mean_ms(k, [s.get(k, 0.0) for s in picked]) for k in keys},
        }
    return out


def as_of_times(end: datetime, n: int, seed: int) -> list[datetime]:
    """``n`` question times drawn uniformly from the memory's last week."""
    return [end - timedelta(days=7) * float(x) for x in np.random.default_rng(seed).random(n)]


PRIMERS = 200  # untimed questions per memory type at most, asked before the warm phase
PRIMER_BATCH = 25


def primed(batches: Sequence[dict[str, float]]) -> bool:
    """Whether priming is done (each batch's ``p50`` and ``p95``): the last batch was not a
    fifth faster at p95 than the one before, and its p95 is at most twice its median (a
    search reading pages from disk is many times one that finds them in memory). Then the
    pages the searches need are in memory, as on a server answering this wearer. At twelve
    weeks the visual index (1.9 GB) is displaced by the episodic and semantic phases' reads:
    fifty primers left the warm p95 at 300-400 ms, two batches falling slowly at 54."""
    if len(batches) < 2:
        return False
    last, before = batches[-1], batches[-2]
    return last["p95"] >= 0.8 * before["p95"] and last["p95"] <= 2 * last["p50"]


def primer_queries(
    memory: SyntheticMemory, measured: dict[str, list[Query]], seed: int, *, choices: bool = True
) -> dict[str, list[Query]]:
    """Questions other than the measured ones (another seed; any text the measured ones
    also ask left out). After a restart or another wearer's load, the first searches read
    the indexes from disk: at twelve weeks that put 484 ms into "warm" searches."""
    asked = {q.text for group in measured.values() for q in group}
    others = make_queries(memory, PRIMERS, seed=seed + 1, choices=choices)
    return {kind: [q for q in group if q.text not in asked] for kind, group in others.items()}


@dataclass
class Retrieval:
    """The searches the benchmark times over one user's memory."""

    deps: Any
    steps: Steps
    user_id: str
    queries: dict[str, list[Query]]
    primers: dict[str, list[Query]]  # other questions, asked untimed before the warm phase
    cold: int  # cold queries per memory type
    end: datetime  # the memory's end: ``as_of`` questions fall in the week before it
    seed: int
    echo: Echo

    def phase(
        self, queries: Sequence[Query], as_of: Sequence[datetime] | None = None, fresh: bool = False
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Time ``queries``: their latency summary; the cache's hits and misses, the mean hits,
        mean ms per search stage and per timed step (``other``: graph build from fetched rows,
        PageRank, ranking, Python and thread hand-offs)."""
        self.steps.take()
        before = stage_seconds()
        when = as_of or [None] * len(queries)
        times, hits, shares = asyncio.run(
            timed_searches(self.deps, self.user_id, queries, when, fresh, self._totals)
        )
        spent, cache = self.steps.take()
        n = max(1, len(times))
        per_step = {k: round(1000 * v / n, 2) for k, v in sorted(spent.items())}
        per_step["other"] = round(sum(times) / n - sum(per_step.values()), 2)
        where = {"cache": cache, "mean_hits": float(np.mean(hits or [0]))}
        stages = {k: round(1000 * v / n, 2) for k, v in (stage_seconds() - before).items()}
        if stages:  # episodic: where the search's time went (the lanes overlap)
            where["mean_ms_per_stage"] = stages
        where["tail"] = tail_profile(times, shares)
        return summary(times), {**where, "mean_ms_per_step": per_step}

    def _totals(self) -> dict[str, float]:
        """Running totals per search step: the reader's and cache's calls, the episodic
        stages (prefixed ``stage.``) and garbage collections (``gc``)."""
        steps = {k: float(v) for k, v in self.steps.items() if k not in ("hits", "misses")}
        stages = {f"stage.{k}": v for k, v in stage_seconds().items()}
        return {**steps, **stages, "gc": float(sum(g["collections"] for g in gc.get_stats()))}

    def measure(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """Per memory type: warm (graphs in the process memo and the indexes' pages in
        memory, as on a server that has been answering: :func:`primer_queries` are asked
        untimed first), cold (the memo emptied before each query) and, for episodic
        questions, each asked as of a time in the memory's last week (warm graphs)."""
        latency: dict[str, Any] = {}
        detail: dict[str, Any] = {}
        for memory_type in MEMORY_TYPES:
            queries = self.queries[memory_type]
            primers = self.prime(memory_type)
            phases = {"warm": self.phase(queries)}
            phases["cold"] = self.phase(queries[: self.cold], fresh=True)
            if memory_type == "episodic":
                when = as_of_times(self.end, len(queries), self.seed)
                phases["as_of"] = self.phase(queries, when)
            latency[memory_type] = {k: figures for k, (figures, _) in phases.items()}
            detail[memory_type] = {k: where for k, (_, where) in phases.items()}
            detail[memory_type]["primed"] = {"batches": len(primers), "ms": primers}
            p50 = ", ".join(f"{k} p50 {v.get('p50')} ms" for k, v in latency[memory_type].items())
            self.echo(f"  {memory_type}: {p50}")
        return latency, detail

    def prime(self, memory_type: str) -> list[dict[str, float]]:
        """Untimed batches of primer questions until :func:`primed` (or none are left); each
        batch's p50 and p95."""
        questions = self.primers[memory_type] or self.queries[memory_type][:1]
        batches: list[dict[str, float]] = []
        for i in range(0, len(questions), PRIMER_BATCH):
            figures, _ = self.phase(questions[i : i + PRIMER_BATCH])
            batches.append({"p50": figures["p50"], "p95": figures["p95"]})
            if primed(batches):
                break
        return batches

    def plans(self) -> dict[str, Any]:
        """Per memory type (and episodic ``as_of``): the plan of every statement one search
        runs, EXPLAINed with its parameters and settings, and its problems
        (:func:`bench.plans.check`: a memory table read whole, an index search
        without its HNSW index)."""
        from bench import plans

        last_week = as_of_times(self.end, 1, self.seed)
        asked = [(t, t, [None]) for t in MEMORY_TYPES] + [("episodic_as_of", "episodic", last_week)]
        out: dict[str, Any] = {}
        for name, memory_type, when in asked:
            with plans.recording() as log:
                first = self.queries[memory_type][:1]
                asyncio.run(timed_searches(self.deps, self.user_id, first, when, False))
            with self.deps.db.connection() as conn:
                out[name] = plans.check(conn, log)
        return out

    def new_segments(self, n: int, dim: int) -> dict[str, Any]:
        """Write a new 30 s segment (3 triples about a new entity) after the memory's end, then
        time the next episodic search; it must rank the segment in the 30 s graph for a query
        about its entity (checked after the timed search, from the same graph). The rows are
        deleted at the end, so a later ``--reuse`` run finds the memory as loaded."""
        from worldmm.graph.types import entity_node
        from worldmm.memory.retrieval.frequencies import TERM_STATS_CHECK_S
        from worldmm.memory.retrieval.graph_lanes import rank_scale
        from worldmm.store import entities, segments, triples
        from worldmm.store.models import SegmentWrite, TripleWrite

        deps, user_id, end = self.deps, self.user_id, self.end
        rng = np.random.default_rng(7)

        def unit() -> list[float]:
            v = rng.normal(size=dim)
            return (v / np.linalg.norm(v)).astype(np.float32).tolist()

        times, visible, written = [], [], {"segments": [], "entities": []}
        for i in range(n):
            start = end + timedelta(seconds=30 * i)
            name, other = f"bench new thing {i}", f"bench new place {i}"
            vec = unit()
            segment = SegmentWrite(
                user_id=user_id,
                session_id="bench-new",
                scale_seconds=30,
                window_start=start,
                window_end=start + timedelta(seconds=30),
                caption=f"I put the {name} in the {other}.",
                processing_status="complete",
            )
            with deps.db.transaction() as conn:
                sid = segments.upsert_segment(conn, segment)
                a = entities.insert_canonical_entity(conn, user_id, name, vec).id
                b = entities.insert_canonical_entity(conn, user_id, other, unit()).id
                pair = {"subject_entity_id": a, "object_entity_id": b}
                said = ("is in", "was put in", "stays in")
                facts = [TripleWrite(predicate=p, embedding=unit(), **pair) for p in said]
                triples.insert_triples(conn, user_id, sid, "episodic", facts)
            written["segments"].append(sid)
            written["entities"] += [a, b]
            text, query_vec = f"where is the {name}", np.asarray(vec, np.float32)
            deps.roles.teach(text, [name], {text: query_vec, name: query_vec})
            # A live question comes a while after the last window was written: the lanes' term
            # statistics are then old enough to be checked and brought up to date, as here.
            time.sleep(TERM_STATS_CHECK_S)
            asked = [Query("episodic", text, [name], {})]
            times += asyncio.run(timed_searches(deps, user_id, asked, [None], fresh=False))[0]
            ranked = rank_scale(deps, user_id, 30, 10, query_vec, {entity_node(name): 1.0}, None)
            visible.append(sid in [s for s, _ in ranked])
        with deps.db.transaction() as conn:  # their triples go with them (ON DELETE CASCADE)
            for table, ids in written.items():
                delete = f"DELETE FROM {table} WHERE user_id = %s AND id = ANY(%s)"
                conn.execute(delete, (user_id, ids))
            where = "WHERE user_id = %s AND session_id = 'bench-new'"
            conn.execute(f"DELETE FROM sessions {where}", (user_id,))
        return {"ms": times, "visible": visible}


def compare_latency(alone: dict[str, Any], shared: dict[str, Any]) -> dict[str, Any]:
    """Per memory and phase, p50 and p95 with the others' memory over the same alone."""
    out: dict[str, Any] = {}
    for memory_type, phases in shared.items():
        for phase_name, figures in phases.items():
            before = alone.get(memory_type, {}).get(phase_name, {})
            ratios = {
                f"{q}_ratio": round(figures[q] / before[q], 2)
                for q in ("p50", "p95")
                if figures.get(q) and before.get(q)
            }
            if ratios:
                out.setdefault(memory_type, {})[phase_name] = ratios
    return out


# The rows :func:`db_counts` counts besides segments and episodic triples per scale.
_COUNTED = {
    "semantic": "triples WHERE user_id = %s AND memory_type = 'semantic'",
    "semantic_invalidated": "triples WHERE user_id = %s AND memory_type = 'semantic'"
    " AND invalidated_at IS NOT NULL AND replaced_by IS NOT NULL",
    "entities_canonical": "entities WHERE user_id = %s AND canonical_entity_id IS NULL",
    "entities_alias": "entities WHERE user_id = %s AND canonical_entity_id IS NOT NULL",
    "visual": "visual_embeddings WHERE user_id = %s",
    "frames": "frames WHERE user_id = %s",
    "sessions": "sessions WHERE user_id = %s",
}


def db_counts(conn: Any, user_id: str) -> dict[str, int]:
    """The user's rows, keyed like :func:`bench.query_synth.expected_counts`."""
    out: dict[str, int] = {}
    per_scale = {
        "segments": "segments WHERE user_id = %s",
        "episodic": "triples WHERE user_id = %s AND memory_type = 'episodic'",
    }
    for name, where in per_scale.items():
        query = f"SELECT scale_seconds, count(*) FROM {where} GROUP BY 1"
        got = dict(conn.execute(query, (user_id,)).fetchall())
        out |= {f"{name}_{s}": int(got.get(s, 0)) for s in SCALES}
        out[name] = sum(out[f"{name}_{s}"] for s in SCALES)
    for name, where in _COUNTED.items():
        out[name] = int(conn.execute(f"SELECT count(*) FROM {where}", (user_id,)).fetchone()[0])
    return out


class MemoryOptions(harness.Options):
    """The synthetic user a benchmark measures (``query``, ``api-load``)."""

    days: float = Field(7.0, description="Days of synthetic memory (whole hours).")
    seed: int = Field(0, description="Generator seed.")
    user: str | None = Field(None, description="User id to load (default: a fresh one).")
    keep: bool = Field(False, description="Keep the loaded user (and a stack this run started).")
    reuse: bool = Field(
        False,
        description="Measure an existing --user kept by an earlier --keep run with the same"
        " --days and --seed instead of loading it again.",
    )

    @model_validator(mode="after")
    def _reuse_needs_user(self) -> MemoryOptions:
        if self.reuse and not self.user:
            raise ValueError("--reuse needs --user (one kept by an earlier --keep run)")
        return self


class QueryOptions(MemoryOptions):
    queries: int = Field(20, description="Warm queries per memory type.")
    cold_queries: int = Field(5, description="Cold queries per memory type.")
    users: int = Field(1, ge=1, description="Users loaded: the measured one plus N-1 others.")
    new_segments: int = Field(5, description="New 30 s segments written, each timed to visibility.")
    choices: bool = Field(
        True,
        description="Ask episodic questions as the served agent searches a multiple-choice"
        " one (the question and four lettered options); --no-choices: the question alone.",
    )
    settle_s: float = Field(
        600.0,
        ge=0,
        description="Before each timed phase wait at most this long for the 1-minute load"
        " average to fall under 1 (a load's index builds finishing); 0: no wait.",
    )
    keep_indexes: bool = Field(
        False, description="Load into live HNSW indexes (no drop and rebuild)."
    )
    lanes: str | None = Field(
        None,
        description="Episodic lane weights to measure instead of the shipped defaults, e.g."
        f" '{ALL_LANES}' (every lane, as with LLM-built triples).",
    )

    @field_validator("lanes")
    @classmethod
    def _known_lanes(cls, value: str | None) -> str | None:
        if value is not None:
            parse_lane_weights(value)  # ValueError names the bad lane or weight
        return value


def _load(db: Any, memory: SyntheticMemory, user_id: str, opts: QueryOptions, echo: Echo) -> dict:
    """Load the user's memory (or, with ``--reuse``, check its rows); the report's fields."""
    expected = expected_counts(memory.cfg)
    if opts.reuse:
        with db.connection() as conn:
            counts = db_counts(conn, user_id)
        if counts != expected:  # someone else's memory: leave it as it is
            raise ValueError(
                f"--reuse: {user_id!r} does not hold this --days/--seed memory"
                f" ({counts} != {expected})"
            )
        echo(f"reusing {user_id}: rows match this configuration")
        return {"load": None, "rows": counts, "expected_rows": expected, "rows_match": True}
    sizes = ", ".join(f"{expected[k]} {k}" for k in ("segments", "episodic", "semantic", "visual"))
    echo(f"loading {sizes} rows")
    with db.connection() as conn:
        report = load_memories(conn, [(memory, user_id)], drop_indexes=not opts.keep_indexes)
        counts = db_counts(conn, user_id)
    echo(f"loaded {report.total_rows} rows in {report.load_s:.1f} s (match: {counts == expected})")
    return {
        "load": report.as_dict(),
        "load_rows_per_s": round(report.total_rows / report.load_s),
        "copy_rows_per_s": round(report.total_rows / sum(report.copy_s.values())),
        "rows": counts,
        "expected_rows": expected,
        "rows_match": counts == expected,
    }


def run_benchmark(
    settings: Settings, cfg: SynthConfig, opts: QueryOptions, echo: Echo = lambda _: None
) -> dict[str, Any]:
    """Generate, load, measure and (unless ``opts.keep``) purge; return the report.
    ``settings.database_url`` must point at a migrated database."""
    from bench.plans import RecordingCursor
    from worldmm.deps import API_POOL_SIZE
    from worldmm.store.db import Database
    from worldmm.store.purge import purge_user

    if not settings.database_url:
        raise ValueError("settings.database_url is not set")
    user_id = opts.user or f"bench-query-{uuid.uuid4().hex[:8]}"
    others = [f"{user_id}-other{i}" for i in range(1, opts.users)]
    run = harness.Run()
    fields = ("frames_per_segment", "text_dim", "visual_dim")
    top_k = ("semantic_top_k", "visual_top_k", "rerank_keep")
    loadavg = {"start": harness.loadavg()}
    result: dict[str, Any] = {
        "benchmark": "query",
        "user_id": user_id,
        "config": {
            **opts.model_dump(mode="json", exclude={"out", "user"}),
            "hours": cfg.hours,
            "triples_per_segment": {str(s): n for s, n in cfg.triples_per_segment},
            **{k: getattr(cfg, k) for k in fields},
            **{k: getattr(settings, k) for k in top_k},
        },
        "users": opts.users,
        "episodic_lane_weights": settings.episodic_lane_weight_map(),
        "loadavg": loadavg,
    }
    # the query API's pool: with fewer connections than lanes, a lane waited for one
    db = Database(settings.database_url, max_size=API_POOL_SIZE, cursor_factory=RecordingCursor)
    inner_cache = make_cache(settings.redis_url)
    loaded: list[str] = []
    try:
        with db.connection() as conn:
            pgvector = "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
            result["machine"] = {
                "postgres": conn.execute("SHOW server_version").fetchone()[0],
                "pgvector": conn.execute(pgvector).fetchone()[0],
            }
            check_users(conn, user_id, others, reuse=opts.reuse)
        echo(f"generating {cfg.hours} h of memory (seed {cfg.seed})")
        t = time.perf_counter()
        memory = SyntheticMemory(cfg)
        _ = memory.episodic, memory.semantic
        result["generate_s"] = round(time.perf_counter() - t, 2)
        if not opts.reuse:  # a load that fails half-way is purged too
            loaded.append(user_id)
        result |= _load(db, memory, user_id, opts, echo)
        if opts.reuse:  # only once its rows proved it this configuration's memory
            loaded.append(user_id)
        loadavg["after_load"] = harness.loadavg()
        end = cfg.start + timedelta(hours=cfg.hours)
        qs = make_queries(memory, opts.queries, seed=cfg.seed, choices=opts.choices)
        primers = primer_queries(memory, qs, cfg.seed, choices=opts.choices)
        # A server does not hold the generated memory (millions of objects the collector's
        # full passes would walk inside the timed searches).
        del memory
        gc.collect()
        gc.freeze()
        # the measured questions last: an entity both name gets the measured one's vector
        asked = [q for groups in (primers, qs) for group in groups.values() for q in group]
        stub = StubModels(asked, cfg.text_dim, cfg.visual_dim)
        steps = Steps()
        deps = stub_deps(settings, db, stub, Timed(inner_cache, "cache", steps))
        deps.reader = Timed(deps.reader, "reader", steps)  # type: ignore[assignment]
        cold = min(opts.cold_queries, opts.queries)
        echo(f"retrieval: {opts.queries} warm and {cold} cold queries per type")
        retrieval = Retrieval(deps, steps, user_id, qs, primers, cold, end, cfg.seed, echo)
        if others:
            # The same questions before and after the others' memory is in the same tables:
            # what the user's queries pay for sharing the store.
            echo(f"retrieval with {user_id}'s memory alone")
            loadavg["settle_alone"] = harness.settle(echo, timeout_s=opts.settle_s)
            result["retrieval_ms_alone"], _ = retrieval.measure()
            echo(f"loading {len(others)} other users' memory")
            loaded += others
            # their memory over the same hours (other seeds), with one index rebuild
            memories = [
                (SyntheticMemory(dataclasses.replace(cfg, seed=cfg.seed + 1000 * i)), uid)
                for i, uid in enumerate(others, start=1)
            ]
            with db.connection() as conn:
                report = load_memories(conn, memories, drop_indexes=not opts.keep_indexes)
            result["others"] = {"user_ids": others, "load": report.as_dict()}
            loadavg["after_others"] = harness.loadavg()
        # a timed phase starts on a quiet machine: a load's index builds have finished
        loadavg["settle"] = harness.settle(echo, timeout_s=opts.settle_s)
        result["retrieval_ms"], result["retrieval"] = retrieval.measure()
        result["plans"] = retrieval.plans()
        result["plan_problems"] = [
            f"{name}: {p}"
            for name, stmts in result["plans"].items()
            for s in stmts
            for p in s["problems"]
        ]
        echo(f"  plans: {result['plan_problems'] or 'every search uses its indexes'}")
        if others:
            alone = result["retrieval_ms_alone"]
            result["others_effect"] = compare_latency(alone, result["retrieval_ms"])
            echo(f"  with the others' memory / alone: {result['others_effect']}")
        result["ppr"] = {"method": settings.ppr_method, "push_epsilon": settings.ppr_push_epsilon}
        if opts.new_segments > 0:
            fresh = retrieval.new_segments(opts.new_segments, cfg.text_dim)
            result["new_segment_visible_ms"] = summary(fresh["ms"])
            result["new_segment_visible"] = fresh["visible"]
            echo(f"  new 30 s segment visible: {result['new_segment_visible_ms']}")
        result["graph_cache"] = "redis" if isinstance(inner_cache, GraphCache) else "none"
        loadavg["after_queries"] = harness.loadavg()
    finally:
        if loaded and not opts.keep:
            t = time.perf_counter()
            for uid in loaded:
                with db.transaction() as conn:
                    purge_user(conn, uid)
                inner_cache.purge_user(uid)
            result["purge_s"] = round(time.perf_counter() - t, 2)
        if isinstance(inner_cache, GraphCache):
            inner_cache.close()
        db.close()
    result["kept"] = opts.keep
    loadavg["end"] = harness.loadavg()
    return run.stamp(result)


@harness.main(QueryOptions)
def main(opts: QueryOptions) -> dict[str, Any]:
    """Retrieval latency (p50/p95; warm, cold and as of a past time) over a synthetic week
    of one user's memory, new-segment visibility and bulk-load rows/s; no model time."""
    if opts.lanes:  # the settings are read from the environment
        os.environ["WORLDMM_EPISODIC_LANE_WEIGHTS"] = opts.lanes
    cfg = SynthConfig(hours=hours_of(opts.days), seed=opts.seed)
    measure = lambda settings, echo: run_benchmark(settings, cfg, opts, echo)  # noqa: E731
    result = harness.report_on_stack(opts.out, measure, keep=opts.keep)
    if result["plan_problems"]:  # correct but slow, and slower with every day of memory
        raise SystemExit(f"query plans read a memory whole: {result['plan_problems']}")
    return result


if __name__ == "__main__":
    main()
