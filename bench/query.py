"""Query benchmark: retrieval latency over a synthetic week of one user's memory.

Loads a :class:`~bench.query_synth.SyntheticMemory` (a week: 24,360 segments over four scales,
about 350k episodic triples, 3k semantic triples, 20k clip embeddings) with binary COPY, then
measures, per memory type, the latency of ``worldmm.memory.retrieval.search`` with the graphs
warm (in the process's memo) and cold (a new process: the memo emptied before each query, so
graphs come from Redis), plus the time to fetch and build each time-masked graph. Run:

    python -m bench.query --out query.json              # a week (the default)
    python -m bench.query --days 1 --queries 20 --out day.json
    worldmm bench query --out query.json

Model time is excluded: NER, the reranker, the text embedder and the visual encoder are
stand-ins that answer from a table the generator filled (no model runs), so the figures are
store + graph cache + graph build + PageRank + Python around them. The user is purged at the
end unless ``--keep``; ``--user U --reuse`` measures a kept user again without reloading.
Prints the JSON report and writes it to ``--out``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

import numpy as np
from pydantic import Field

from bench import harness
from bench.bulk_load import LoadReport, load_memories, load_memory
from bench.harness import Echo, summary
from bench.query_synth import Query, SynthConfig, SyntheticMemory, expected_counts, hours_of
from bench.query_timed import (
    measure_as_of,
    measure_new_segments,
    measure_ppr_overlap,
    measure_timed_builds,
)
from worldmm.graph.cache import CacheRead, GraphCache, GraphMemo, NullCache, make_cache
from worldmm.models import SCALES
from worldmm.settings import Settings

MEMORY_TYPES = ("episodic", "semantic", "visual")


# --- stand-in models (no model time) ------------------------------------------------------


class StubModels:
    """NER, rerank, text embedder and visual encoder answering from the queries' tables.

    Unknown texts raise: a benchmark query that reached a real model path would be a bug.
    """

    label = "bench-stub"
    versions: dict[str, str] = {}
    name = "bench-stub"

    def __init__(self, queries: Sequence[Query], text_dim: int, visual_dim: int) -> None:
        self.dim = text_dim
        self.visual_dim = visual_dim
        self._vectors: dict[str, np.ndarray] = {}
        self._entities: dict[str, list[str]] = {}
        self._visual: dict[str, np.ndarray] = {}
        for q in queries:
            self._vectors.update(q.vectors)
            self._entities[q.text] = list(q.entities)
            if q.visual_vector is not None:
                self._visual[q.text] = q.visual_vector

    # ModelRoles (the two roles retrieval calls)
    async def ner(self, text: str) -> list[str]:
        return list(self._entities[text])

    async def rerank(self, query: str, candidates: list[tuple[str, str]], keep: int) -> list[str]:
        return [cid for cid, _ in candidates[:keep]]

    def __getattr__(self, role: str) -> Any:
        raise AttributeError(f"the query benchmark's stand-in models have no {role!r}")

    # TextEmbedder
    def embed(self, texts: list[str]) -> np.ndarray:
        return np.stack([self._vectors[t] for t in texts]).astype(np.float32)

    def teach(self, text: str, entities: list[str], vectors: dict[str, np.ndarray]) -> None:
        """Answers for a query made during the run (the new-segment check)."""
        self._entities[text] = list(entities)
        self._vectors.update(vectors)

    # VisualEncoder (``dim`` is the text one; nothing reads the encoder's)
    async def encode_text(self, text: str) -> np.ndarray:
        return self._visual[text]

    async def encode_video(self, frames: list[bytes]) -> np.ndarray:
        raise NotImplementedError("the query benchmark encodes no video")


class Stopwatch:
    """Seconds spent per named step, summed until taken."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}

    def add(self, name: str, seconds: float) -> None:
        self.spent[name] = self.spent.get(name, 0.0) + seconds

    def take(self) -> dict[str, float]:
        out, self.spent = self.spent, {}
        return out


class TimingReader:
    """Wraps a MemoryReader and times each method (where a query's store time goes)."""

    def __init__(self, inner: Any, watch: Stopwatch) -> None:
        self._inner = inner
        self._watch = watch

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self._inner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self._watch.add(f"reader.{name}", time.perf_counter() - t)

        return timed


class CountingCache:
    """Wraps the graph cache (Redis), counts hits and misses (a cold run must hit) and times
    reads (Redis GET + load) and writes (serialise + compare-and-set). Graphs served by the
    process's memo never reach it."""

    def __init__(self, inner: GraphCache | NullCache, watch: Stopwatch | None = None) -> None:
        self.inner = inner
        self.watch = watch or Stopwatch()
        self.hits = 0
        self.misses = 0

    def get(self, user_id: str, memory_type: str, scale: int | None = None) -> CacheRead:
        t = time.perf_counter()
        read = self.inner.get(user_id, memory_type, scale)
        self.watch.add("cache.get", time.perf_counter() - t)
        if read.graph is None:
            self.misses += 1
        else:
            self.hits += 1
        return read

    def put(self, user_id, memory_type, scale, graph, token) -> bool:  # noqa: ANN001
        t = time.perf_counter()
        try:
            return self.inner.put(user_id, memory_type, scale, graph, token)
        finally:
            self.watch.add("cache.put", time.perf_counter() - t)

    def purge_user(self, user_id: str) -> int:
        return self.inner.purge_user(user_id)

    def take(self) -> dict[str, int]:
        out = {"hits": self.hits, "misses": self.misses}
        self.hits = self.misses = 0
        return out


# --- measurements --------------------------------------------------------------------------


def breakdown(spent_s: dict[str, float], times_ms: Sequence[float]) -> dict[str, float]:
    """Mean milliseconds per query in each timed step; ``other`` is the rest (graph build
    from fetched rows, PageRank, ranking, Python and thread hand-offs)."""
    n = max(1, len(times_ms))
    out = {k: round(1000 * v / n, 2) for k, v in sorted(spent_s.items())}
    out["other"] = round(sum(times_ms) / n - sum(out.values()), 2)
    return out


async def _time_queries(
    deps: Any, user_id: str, queries: Sequence[Query], before: Callable[[], None] | None
) -> tuple[list[float], list[int]]:
    from worldmm.memory.retrieval import search

    times, hits = [], []
    for q in queries:
        if before is not None:
            before()
        t = time.perf_counter()
        result = await search(deps, q.memory_type, user_id, q.text)  # type: ignore[arg-type]
        times.append(1000 * (time.perf_counter() - t))
        hits.append(len(result.hits))
    return times, hits


def measure_retrieval(
    deps: Any,
    cache: CountingCache,
    user_id: str,
    queries: dict[str, list[Query]],
    cold_n: int,
    echo: Echo,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Warm (graphs in the process memo, primed by one untimed query) and cold (the memo
    emptied before each query: a new process)."""
    latency: dict[str, Any] = {}
    detail: dict[str, Any] = {}
    for memory_type in MEMORY_TYPES:
        qs = queries[memory_type]
        asyncio.run(_time_queries(deps, user_id, qs[:1], None))  # prime the cache
        cache.take()
        cache.watch.take()
        warm, warm_hits = asyncio.run(_time_queries(deps, user_id, qs, None))
        warm_cache = cache.take()
        warm_steps = breakdown(cache.watch.take(), warm)

        def new_process() -> None:
            # What a process that has not yet served this user pays: graphs from Redis
            # (numpy buffers), or built from PostgreSQL when no Redis is configured.
            deps.graphs = GraphMemo(deps.settings.graph_memo_elements)

        cold, cold_hits = asyncio.run(_time_queries(deps, user_id, qs[:cold_n], new_process))
        cold_cache = cache.take()
        cold_steps = breakdown(cache.watch.take(), cold)
        latency[memory_type] = {"warm": summary(warm), "cold": summary(cold)}
        detail[memory_type] = {
            "warm": {
                "cache": warm_cache,
                "mean_hits": float(np.mean(warm_hits)),
                "mean_ms_per_step": warm_steps,
            },
            "cold": {
                "cache": cold_cache,
                "mean_hits": float(np.mean(cold_hits or [0])),
                "mean_ms_per_step": cold_steps,
            },
        }
        echo(
            f"  {memory_type}: warm p50 {latency[memory_type]['warm'].get('p50')} ms,"
            f" cold p50 {latency[memory_type]['cold'].get('p50')} ms"
        )
    return latency, detail


def measure_queries(
    deps: Any,
    cache: CountingCache,
    user_id: str,
    queries: dict[str, list[Query]],
    cold_n: int,
    end: Any,
    seed: int,
    echo: Echo,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """:func:`measure_retrieval` plus the episodic questions asked as of a past time."""
    latency, detail = measure_retrieval(deps, cache, user_id, queries, cold_n, echo)
    cache.take()
    cache.watch.take()
    as_of = measure_as_of(deps, user_id, queries["episodic"], end, seed)
    latency["episodic"]["as_of"] = summary(as_of)
    detail["episodic"]["as_of"] = {
        "cache": cache.take(),
        "mean_ms_per_step": breakdown(cache.watch.take(), as_of),
    }
    echo(f"  episodic as_of (past week): p50 {latency['episodic']['as_of'].get('p50')} ms")
    return latency, detail


def load_others(
    db: Any, cfg: SynthConfig, user_ids: Sequence[str], drop_indexes: bool, echo: Echo
) -> dict[str, Any]:
    """Other wearers' memory over the same hours (other seeds), in one transaction with one
    rebuild of the vector indexes. Returns the load's figures."""
    memories = [
        (SyntheticMemory(dataclasses.replace(cfg, seed=cfg.seed + 1000 * i)), uid)
        for i, uid in enumerate(user_ids, start=1)
    ]
    echo(f"loading {len(memories)} other users' memory")
    with db.connection() as conn:
        report = load_memories(conn, memories, drop_indexes=drop_indexes)
    echo(f"  loaded {report.total_rows} rows in {report.load_s:.1f} s")
    return {"user_ids": list(user_ids), "load": report.as_dict()}


def compare_latency(alone: dict[str, Any], shared: dict[str, Any]) -> dict[str, Any]:
    """Per memory and phase, p50 and p95 with the others' memory over the same alone."""
    out: dict[str, Any] = {}
    for memory_type, phases in shared.items():
        for phase, figures in phases.items():
            before = alone.get(memory_type, {}).get(phase, {})
            ratios = {
                f"{q}_ratio": round(figures[q] / before[q], 2)
                for q in ("p50", "p95")
                if figures.get(q) and before.get(q)
            }
            if ratios:
                out.setdefault(memory_type, {})[phase] = ratios
    return out


# --- counts ---------------------------------------------------------------------------------


def db_counts(conn: Any, user_id: str) -> dict[str, int]:
    """The user's rows, keyed like :func:`bench.query_synth.expected_counts`."""
    out: dict[str, int] = {f"segments_{s}": 0 for s in SCALES}
    out.update({f"episodic_{s}": 0 for s in SCALES})
    for scale, n in conn.execute(
        "SELECT scale_seconds, count(*) FROM segments WHERE user_id = %s GROUP BY 1", (user_id,)
    ).fetchall():
        out[f"segments_{scale}"] = int(n)
    out["segments"] = sum(out[f"segments_{s}"] for s in SCALES)
    for scale, n in conn.execute(
        "SELECT scale_seconds, count(*) FROM triples WHERE user_id = %s"
        " AND memory_type = 'episodic' GROUP BY 1",
        (user_id,),
    ).fetchall():
        out[f"episodic_{scale}"] = int(n)
    out["episodic"] = sum(out[f"episodic_{s}"] for s in SCALES)

    def one(query: str) -> int:
        return int(conn.execute(query, (user_id,)).fetchone()[0])

    out["semantic"] = one(
        "SELECT count(*) FROM triples WHERE user_id = %s AND memory_type = 'semantic'"
    )
    out["semantic_invalidated"] = one(
        "SELECT count(*) FROM triples WHERE user_id = %s AND memory_type = 'semantic'"
        " AND invalidated_at IS NOT NULL AND replaced_by IS NOT NULL"
    )
    out["entities_canonical"] = one(
        "SELECT count(*) FROM entities WHERE user_id = %s AND canonical_entity_id IS NULL"
    )
    out["entities_alias"] = one(
        "SELECT count(*) FROM entities WHERE user_id = %s AND canonical_entity_id IS NOT NULL"
    )
    out["visual"] = one("SELECT count(*) FROM visual_embeddings WHERE user_id = %s")
    out["frames"] = one("SELECT count(*) FROM frames WHERE user_id = %s")
    out["sessions"] = one("SELECT count(*) FROM sessions WHERE user_id = %s")
    return out


# --- the run -------------------------------------------------------------------------------


class QueryOptions(harness.Options):
    days: float = Field(7.0, description="Days of synthetic memory (whole hours).")
    queries: int = Field(20, description="Warm queries per memory type.")
    cold_queries: int = Field(5, description="Cold queries per memory type.")
    users: int = Field(1, description="Users loaded: the measured one plus N-1 others.")
    new_segments: int = Field(5, description="New 30 s segments written, each timed to visibility.")
    seed: int = Field(0, description="Generator seed.")
    user: str | None = Field(None, description="User id to load (default: a fresh one).")
    keep: bool = Field(False, description="Keep the loaded user (and a stack this run started).")
    reuse: bool = Field(
        False,
        description="Measure an existing --user kept by an earlier --keep run with the same"
        " --days and --seed (its rows are checked) instead of loading it again.",
    )
    keep_indexes: bool = Field(
        False, description="Load into live HNSW indexes (no drop and rebuild)."
    )


def run_benchmark(
    settings: Settings, cfg: SynthConfig, opts: QueryOptions, echo: Echo = lambda _: None
) -> dict[str, Any]:
    """Generate, load, measure and (unless ``opts.keep``) purge; return the report.
    ``settings.database_url`` must point at a migrated database."""
    from bench.query_synth import make_queries
    from worldmm.blobs import build_blob_store
    from worldmm.deps import Deps
    from worldmm.memory.retrieval.reader import MemoryReader
    from worldmm.store.db import Database
    from worldmm.store.purge import purge_user
    from worldmm.store.users import user_exists

    if not settings.database_url:
        raise ValueError("settings.database_url is not set")
    queries, cold_queries, users, reuse = opts.queries, opts.cold_queries, opts.users, opts.reuse
    if reuse and not opts.user:
        raise ValueError("--reuse needs the --user of an earlier --keep run")
    user_id = opts.user or f"bench-query-{uuid.uuid4().hex[:8]}"
    drop_indexes = not opts.keep_indexes
    run = harness.Run()
    result: dict[str, Any] = {
        "benchmark": "query",
        "user_id": user_id,
        "config": {
            "hours": cfg.hours,
            "days": round(cfg.hours / 24, 3),
            "seed": cfg.seed,
            "queries_warm": queries,
            "queries_cold": min(cold_queries, queries),
            "drop_indexes": drop_indexes,
            "triples_per_segment": {str(s): n for s, n in cfg.triples_per_segment},
            "frames_per_segment": cfg.frames_per_segment,
            "text_dim": cfg.text_dim,
            "visual_dim": cfg.visual_dim,
            "episodic_top_k": settings.episodic_top_k,
            "semantic_top_k": settings.semantic_top_k,
            "visual_top_k": settings.visual_top_k,
            "rerank_keep": settings.rerank_keep,
        },
        "loadavg": {"start": harness.loadavg()},
    }
    db = Database(settings.database_url, max_size=2)
    inner_cache = make_cache(settings.redis_url)
    cache = CountingCache(inner_cache)
    loaded = False
    others: list[str] = []
    if users < 1:
        raise ValueError("--users must be at least 1")
    try:
        with db.connection() as conn:
            pgvector = "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
            result["machine"] = {
                "postgres": conn.execute("SHOW server_version").fetchone()[0],
                "pgvector": conn.execute(pgvector).fetchone()[0],
            }
            exists = user_exists(conn, user_id)
            if exists and not reuse:
                raise ValueError(f"user {user_id!r} already exists; pick another --user")
            if reuse and not exists:
                raise ValueError(f"--reuse: user {user_id!r} does not exist (load it with --keep)")
            names = [f"{user_id}-other{i}" for i in range(1, users)]
            taken = [name for name in names if user_exists(conn, name)]
            if taken:  # someone's kept memory: never load over it, never purge it
                raise ValueError(f"users {taken} already exist; pick another --user")
        echo(f"generating {cfg.hours} h of memory (seed {cfg.seed})")
        t = time.perf_counter()
        memory = SyntheticMemory(cfg)
        _ = memory.episodic, memory.semantic
        result["generate_s"] = round(time.perf_counter() - t, 2)
        expected = expected_counts(cfg)
        echo(
            f"loading {expected['segments']} segments, {expected['episodic']} episodic and"
            f" {expected['semantic']} semantic triples, {expected['visual']} clip vectors"
        )
        if reuse:
            with db.connection() as conn:
                counts = db_counts(conn, user_id)
            if counts != expected:  # someone else's memory: leave it as it is
                raise ValueError(
                    f"--reuse: {user_id!r} does not hold this --days/--seed memory"
                    f" ({counts} != {expected})"
                )
            loaded = True
            result["load"] = None  # not loaded by this run: no load figures
            echo(f"reusing {user_id}: rows match this configuration")
        else:
            loaded = True
            with db.connection() as conn:
                report: LoadReport = load_memory(conn, memory, user_id, drop_indexes=drop_indexes)
                counts = db_counts(conn, user_id)
            result["load"] = report.as_dict()
            result["load_rows_per_s"] = round(report.total_rows / report.load_s)
            result["copy_rows_per_s"] = round(report.total_rows / sum(report.copy_s.values()))
            echo(
                f"loaded {report.total_rows} rows in {report.load_s:.1f} s"
                f" ({result['load_rows_per_s']} rows/s; rows match: {counts == expected})"
            )
        result["rows"] = counts
        result["expected_rows"] = expected
        result["rows_match"] = counts == expected
        result["users"] = users
        result["loadavg"]["after_load"] = harness.loadavg()

        reader = MemoryReader(db)
        end = cfg.start + timedelta(hours=cfg.hours)
        qs = make_queries(memory, queries, seed=cfg.seed)
        stub = StubModels([q for group in qs.values() for q in group], cfg.text_dim, cfg.visual_dim)
        deps = Deps(
            settings=settings,
            db=db,
            roles=stub,  # type: ignore[arg-type]
            embedder=stub,
            encoder=stub,  # type: ignore[arg-type]
            blobs=build_blob_store(settings),
            cache=cache,
            graphs=GraphMemo(settings.graph_memo_elements),
        )
        deps.reader = TimingReader(reader, cache.watch)  # where a query's store time goes
        echo(f"retrieval: {queries} warm and {min(cold_queries, queries)} cold queries per type")
        if users > 1:
            # The same questions before and after the others' memory is in the same tables:
            # what the user's queries pay for sharing the store.
            echo(f"retrieval with {user_id}'s memory alone")
            alone, _ = measure_queries(deps, cache, user_id, qs, cold_queries, end, cfg.seed, echo)
            result["retrieval_ms_alone"] = alone
            others = names
            result["others"] = load_others(db, cfg, others, drop_indexes, echo)
            result["loadavg"]["after_others"] = harness.loadavg()
        echo("time-masked graph builds")
        builds = measure_timed_builds(reader, user_id)
        result["graph_build"] = builds
        result["graph_build_ms"] = {k: v["total_ms"] for k, v in builds.items()}
        echo("  " + ", ".join(f"{k}: {v} ms" for k, v in result["graph_build_ms"].items()))
        latency, detail = measure_queries(
            deps, cache, user_id, qs, cold_queries, end, cfg.seed, echo
        )
        if users > 1:
            result["others_effect"] = compare_latency(result["retrieval_ms_alone"], latency)
            echo(f"  with the others' memory / alone: {result['others_effect']}")
        result["retrieval_ms"] = latency
        result["retrieval"] = detail
        result["ppr"] = {
            "method": settings.ppr_method,
            "push_epsilon": settings.ppr_push_epsilon,
            "push_vs_prpack": measure_ppr_overlap(
                deps, user_id, qs["episodic"], settings.ppr_push_epsilon
            ),
        }
        echo(f"  push vs prpack: {result['ppr']['push_vs_prpack']}")
        if opts.new_segments > 0:
            n = opts.new_segments
            fresh = measure_new_segments(db, deps, stub, user_id, end, cfg.text_dim, n)
            result["new_segment_visible_ms"] = summary(fresh["ms"])
            result["new_segment_visible"] = fresh["visible"]
            echo(
                f"  new 30 s segment visible: {result['new_segment_visible_ms']} {fresh['visible']}"
            )
        result["graph_cache"] = "redis" if isinstance(inner_cache, GraphCache) else "none"
        result["loadavg"]["after_queries"] = harness.loadavg()
    finally:
        if loaded and not opts.keep:
            t = time.perf_counter()
            for uid in [user_id, *others]:
                with db.transaction() as conn:
                    purge_user(conn, uid)
                inner_cache.purge_user(uid)
            result["purge_s"] = round(time.perf_counter() - t, 2)
        if isinstance(inner_cache, GraphCache):
            inner_cache.close()
        db.close()
    result["kept"] = opts.keep
    result["loadavg"]["end"] = harness.loadavg()
    return run.stamp(result)


ALL_LANES = "lexical:1.0,dense:1.0,graph:0.5"


@harness.main(QueryOptions)
def main(opts: QueryOptions) -> dict[str, Any]:
    """Retrieval latency (p50/p95; warm, cold and as of a past time) over a synthetic week
    of one user's memory, time-masked graph builds and bulk-load rows/s; no model time."""
    from worldmm.settings import load_settings

    echo = harness.stamped_echo()
    # All three episodic lanes, the graph's too (its default weight is 0 with the offline
    # triples): this measures the path a deployment with LLM-built triples runs. The cold
    # child processes inherit it through the environment; an explicit setting wins.
    os.environ.setdefault("WORLDMM_EPISODIC_LANE_WEIGHTS", ALL_LANES)
    cfg = SynthConfig(hours=hours_of(opts.days), seed=opts.seed)
    with harness.stack_or_start(load_settings(), echo, keep=opts.keep) as settings:
        result = run_benchmark(settings, cfg, opts, echo)
    harness.write_report(result, opts.out)
    return result


if __name__ == "__main__":
    main()
