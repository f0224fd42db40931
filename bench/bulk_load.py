"""Bulk-load :class:`SyntheticMemory` into PostgreSQL with binary COPY, timed per table (row
generation timed apart). The database assigns the ids, so parents load first and their ids are
read back (entities, then segments from the hour down); semantic ``replaced_by`` links are set
by one UPDATE after their COPY."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from itertools import chain
from typing import Any

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from bench.bulk import HNSW_BUILD_MEM_MAX, copy_rows, vector_indexes_dropped
from bench.harness import words
from bench.query_synth import LITERALS, PREDICATES, SyntheticMemory, TripleSpecs, unit_rows
from worldmm.models import SCALES
from worldmm.store.users import ensure_user, user_exists

VECTOR_TABLES = ("entities", "triples", "visual_embeddings", "segment_embeddings")
_VERSIONS = Jsonb({"generator": "bench.query_synth"})
_STEPS = ("fixup", "index_rebuild", "commit", "analyze", "generate", "wall")
_SEGMENT_COLUMNS = words(
    "user_id, session_id, scale_seconds, window_start, window_end, caption, transcript,"
    " parent_segment_id, processing_status, visual_status, model_versions"
)
_TRIPLE_COLUMNS = words(
    "user_id, memory_type, segment_id, scale_seconds, subject_entity_id, predicate,"
    " object_entity_id, object_literal, embedding, valid_from, invalidated_at,"
    " evidence_segment_ids, origin"
)
Rows = Iterable[Sequence[Any]]


# A spilled HNSW build is much slower than one in memory. One wearer's twelve weeks of clip
# vectors (the largest index since migration 0018) fit the library's 6 GB budget; several
# wearers hashed to one partition (`--users`) can outgrow it.
BUILD_MEM_CEILING = 16 << 30


def build_memory_cap(meminfo: str = "/proc/meminfo") -> int:
    """maintenance_work_mem cap for the index rebuild: half of this machine's available memory
    (the embedded server shares it), between the library's cap and 16 GiB."""
    try:
        with open(meminfo) as f:
            kib = next(int(line.split()[1]) for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return HNSW_BUILD_MEM_MAX
    return max(HNSW_BUILD_MEM_MAX, min(BUILD_MEM_CEILING, (kib << 10) // 2))


def _chunked(total: int, size: int, make: Callable[[int, int], np.ndarray]) -> Iterator[Any]:
    """The rows of ``make(lo, hi)`` over [0, total) in slices of ``size``, made as needed."""
    return chain.from_iterable(make(lo, min(total, lo + size)) for lo in range(0, total, size))


@dataclass
class LoadReport:
    """Rows and COPY seconds per table (generation excluded), and the seconds of each other
    step: id read-backs and the replaced_by UPDATE (``fixup``), index rebuild, commit, VACUUM
    ANALYZE, generation, and the whole load's wall time."""

    rows: Counter[str] = field(default_factory=Counter)
    copy_s: Counter[str] = field(default_factory=Counter)
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(_STEPS, 0.0))
    dropped_indexes: list[str] = field(default_factory=list)

    @property
    def total_rows(self) -> int:
        return sum(self.rows.values())

    @property
    def load_s(self) -> float:
        """Database time: COPY + fix-ups + index rebuild + commit (not generation, not VACUUM)."""
        s = self.seconds
        return sum(self.copy_s.values()) + s["fixup"] + s["index_rebuild"] + s["commit"]

    def as_dict(self) -> dict[str, Any]:
        seconds = {"load": self.load_s, "copy": sum(self.copy_s.values()), **self.seconds}
        per_table = {}
        for table, n in self.rows.items():
            s = self.copy_s[table]
            per_table[table] = {
                "rows": n,
                "s": round(s, 3),
                "rows_per_s": round(n / s) if s else None,
            }
        return {
            "total_rows": self.total_rows,
            **{f"{k}_s": round(v, 3) for k, v in seconds.items()},
            "dropped_indexes": self.dropped_indexes,
            "per_table": per_table,
        }


class Loader:
    """Loads one user's memory over one connection (the caller's transaction) into ``report``."""

    def __init__(
        self, conn: psycopg.Connection, memory: SyntheticMemory, user_id: str, report: LoadReport
    ) -> None:
        self.conn, self.mem, self.user, self.report = conn, memory, user_id, report
        self.entity_ids: list[int] = []
        self.segment_ids: dict[int, list[int]] = {}

    def copy(self, table: str, columns: Sequence[str], make: Callable[[], Rows]) -> None:
        """COPY the rows ``make()`` gives; the time spent making them counts as generation."""
        seconds = self.report.seconds

        def generated() -> Iterator[Sequence[Any]]:
            t = time.perf_counter()
            rows = iter(make())
            while (row := next(rows, None)) is not None:
                seconds["generate"] += time.perf_counter() - t
                yield row
                t = time.perf_counter()
            seconds["generate"] += time.perf_counter() - t

        before, t = seconds["generate"], time.perf_counter()
        self.report.rows[table] += copy_rows(self.conn, table, columns, generated())
        self.report.copy_s[table] += time.perf_counter() - t - (seconds["generate"] - before)

    def _fixup(self, query: str, params: Any) -> list[tuple]:
        t = time.perf_counter()
        try:
            return self.conn.execute(query, params).fetchall()
        finally:
            self.report.seconds["fixup"] += time.perf_counter() - t

    def load_all(self) -> None:
        """Every table, parents first."""
        self.users_and_sessions()
        self.entities()
        self.segments()
        self.frames()
        self.visual()
        self.segment_text()
        self.copy("triples", _TRIPLE_COLUMNS, self._episodic_rows)
        self.semantic()

    def users_and_sessions(self) -> None:
        t = time.perf_counter()
        ensure_user(self.conn, self.user)
        self.report.rows["users"] += 1
        self.report.copy_s["users"] += time.perf_counter() - t
        first_hour = {self.mem.session_of(s): s for s in reversed(self.mem.segments.starts[3600])}
        rows = [(self.user, sid, first_hour[sid]) for sid in self.mem.session_ids()]
        self.copy("sessions", ("user_id", "session_id", "started_at"), lambda: rows)

    def entities(self) -> None:
        v = self.mem.vocab
        canonical = [(self.user, n, n, v.vectors[i]) for i, n in enumerate(v.names)]
        columns = ("user_id", "surface_form", "canonical_name", "embedding")
        self.copy("entities", columns, lambda: canonical)
        query = (
            "SELECT lower(surface_form), id FROM entities"
            " WHERE user_id = %s AND canonical_entity_id IS NULL"
        )
        got = dict(self._fixup(query, (self.user,)))
        self.entity_ids = [int(got[n.lower()]) for n in v.names]
        aliases = [
            (self.user, self.entity_ids[i], alias, v.alias_vectors[k])
            for k, (alias, i) in enumerate(v.aliases)
        ]
        columns = ("user_id", "canonical_entity_id", "surface_form", "embedding")
        self.copy("entities", columns, lambda: aliases)

    def segments(self) -> None:
        mem, segs = self.mem, self.mem.segments
        query = "SELECT window_start, id FROM segments WHERE user_id = %s AND scale_seconds = %s"
        for scale in sorted(SCALES, reverse=True):

            def rows(scale: int = scale) -> Iterator[tuple]:
                captions = mem.captions(scale)
                status = ("complete", "complete" if scale == 30 else "none", _VERSIONS)
                for i, (start, p) in enumerate(
                    zip(segs.starts[scale], segs.parent[scale], strict=True)
                ):
                    parent = None if p is None else self.segment_ids[p[0]][p[1]]
                    speech = "(speech) " + captions[i][:80] if scale == 30 and i % 3 else None
                    window = (mem.session_of(start), scale, start, segs.end(scale, i))
                    yield (self.user, *window, captions[i], speech, parent, *status)

            self.copy("segments", _SEGMENT_COLUMNS, rows)
            got = dict(self._fixup(query, (self.user, scale)))
            self.segment_ids[scale] = [int(got[s]) for s in segs.starts[scale]]

    def frames(self) -> None:
        n, segs = self.mem.cfg.frames_per_segment, self.mem.segments
        step = 30.0 / max(1, n)

        def rows() -> Iterator[tuple]:
            for i, start in enumerate(segs.starts[30]):
                session = self.mem.session_of(start)
                for j in range(n):
                    ts = start + timedelta(seconds=j * step)
                    key = f"frames/{self.user}/{session}/{int(ts.timestamp() * 1000)}-{j}.jpg"
                    yield (self.user, session, ts, i * n + j, key)

        if n > 0:
            self.copy("frames", ("user_id", "session_id", "captured_at", "seq", "blob_key"), rows)

    def visual(self) -> None:
        segs, ids = self.mem.segments, self.segment_ids[30]

        def rows() -> Iterator[tuple]:
            vectors = _chunked(len(ids), 2048, self.mem.visual_vectors)
            for k, (sid, vec) in enumerate(zip(ids, vectors, strict=True)):
                yield (self.user, sid, segs.starts[30][k], segs.end(30, k), vec)

        columns = ("user_id", "segment_id", "window_start", "window_end", "embedding")
        self.copy("visual_embeddings", columns, rows)

    def segment_text(self) -> None:
        """The dense lane's rows: one seeded random unit vector per segment (latency depends on
        how many the HNSW index holds, not on what they mean)."""
        segs, dim = self.mem.segments, self.mem.cfg.text_dim
        rng = np.random.default_rng(self.mem.cfg.seed + 104729)

        def unit(lo: int, hi: int) -> np.ndarray:
            return unit_rows(rng.standard_normal((hi - lo, dim)))

        def rows() -> Iterator[tuple]:
            for scale in sorted(SCALES):
                ids = self.segment_ids[scale]
                vectors = _chunked(len(ids), 2048, unit)
                for k, (sid, vec) in enumerate(zip(ids, vectors, strict=True)):
                    start, end = segs.starts[scale][k], segs.end(scale, k)
                    yield (sid, self.user, scale, start, end, "synthetic", vec)

        columns = ("segment_id", "user_id", "scale_seconds", "window_start", "window_end")
        self.copy("segment_embeddings", (*columns, "model", "embedding"), rows)

    def _triple_rows(
        self, specs: TripleSpecs, memory_type: str, stream: int, invalidated: list, origin: list
    ) -> Iterator[tuple]:
        segs, ent = self.mem.segments, self.entity_ids

        def vectors(lo: int, hi: int) -> np.ndarray:
            return self.mem.triple_vectors(specs, lo, hi, stream)

        for i, vec in enumerate(_chunked(len(specs), 4096, vectors)):
            scale, seg = int(specs.scale[i]), int(specs.segment[i])
            sid, obj, lit = self.segment_ids[scale][seg], int(specs.obj[i]), int(specs.literal[i])
            subject = (ent[specs.subj[i]], PREDICATES[specs.pred[i]])
            objects = (ent[obj] if obj >= 0 else None, LITERALS[lit] if lit >= 0 else None)
            valid = (segs.end(scale, seg), invalidated[i], [sid], origin[i])
            yield (self.user, memory_type, sid, scale, *subject, *objects, vec, *valid)

    def _episodic_rows(self) -> Iterator[tuple]:
        n = len(self.mem.episodic)
        return self._triple_rows(self.mem.episodic, "episodic", 0, [None] * n, ["extracted"] * n)

    def semantic(self) -> None:
        sem, segs = self.mem.semantic, self.mem.segments
        specs, replaced = sem.triples, sem.replaced_by
        invalidated = [segs.end(600, int(specs.segment[r])) if r >= 0 else None for r in replaced]
        replacing = {int(r) for r in replaced if r >= 0}
        origin = ["consolidated" if i in replacing else "extracted" for i in range(len(specs))]
        where = "WHERE user_id = %s AND memory_type = 'semantic'"
        (before,) = self._fixup(f"SELECT coalesce(max(id), 0) FROM triples {where}", (self.user,))
        rows = partial(self._triple_rows, specs, "semantic", 1, invalidated, origin)
        self.copy("triples", _TRIPLE_COLUMNS, rows)
        query = f"SELECT id FROM triples {where} AND id > %s ORDER BY id"
        ids = [int(r[0]) for r in self._fixup(query, (self.user, before[0]))]
        if len(ids) != len(specs):
            raise RuntimeError(f"read back {len(ids)} semantic ids, wrote {len(specs)}")
        old = [ids[i] for i, r in enumerate(replaced) if r >= 0]
        new = [ids[int(r)] for r in replaced if r >= 0]
        self._fixup(
            "UPDATE triples t SET replaced_by = m.new FROM unnest(%s::bigint[], %s::bigint[])"
            " AS m(old, new) WHERE t.user_id = %s AND t.id = m.old RETURNING t.id",
            (old, new, self.user),
        )


def check_users(
    conn: psycopg.Connection, user_id: str, others: Sequence[str] = (), *, reuse: bool
) -> None:
    """Refuse, before anything is loaded, to load over someone's memory or to reuse none."""
    exists = user_exists(conn, user_id)
    if exists and not reuse:
        raise ValueError(f"user {user_id!r} already exists; pick another --user")
    if reuse and not exists:
        raise ValueError(f"--reuse: user {user_id!r} does not exist (load it with --keep)")
    if taken := [name for name in others if user_exists(conn, name)]:
        raise ValueError(f"users {taken} already exist; pick another --user")


def load_memories(
    conn: psycopg.Connection,
    memories: Sequence[tuple[SyntheticMemory, str]],
    *,
    drop_indexes: bool = True,
) -> LoadReport:
    """Load several users' memories in one transaction on ``conn`` (autocommit off), with one
    rebuild of the vector indexes for all (``drop_indexes`` locks the tables for the whole
    load: a benchmark database only), then VACUUM ANALYZE; the report sums them. The semantic
    read-back relies on identity values following COPY order within one session."""
    if not memories:
        raise ValueError("no memories to load")
    started = time.perf_counter()
    report = LoadReport()
    seconds = report.seconds
    with conn.transaction():
        guard = (
            vector_indexes_dropped(conn, VECTOR_TABLES, max_build_memory=build_memory_cap())
            if drop_indexes
            else nullcontext([])
        )
        with guard as dropped:
            report.dropped_indexes = list(dropped)
            for memory, user_id in memories:
                Loader(conn, memory, user_id, report).load_all()
            t = time.perf_counter()
        seconds["index_rebuild"] = time.perf_counter() - t
        t = time.perf_counter()
    seconds["commit"] = time.perf_counter() - t
    t = time.perf_counter()
    # VACUUM, not only ANALYZE: right after a bulk load the visibility map is empty (autovacuum
    # keeps it current for a memory written over a week), so index-only scans visit the heap.
    conn.commit()
    autocommit, conn.autocommit = conn.autocommit, True
    try:
        conn.execute(
            "VACUUM (ANALYZE) users, sessions, entities, segments, frames, visual_embeddings,"
            " segment_embeddings, triples"
        )
    finally:
        conn.autocommit = autocommit
    seconds["analyze"] = time.perf_counter() - t
    seconds["wall"] = time.perf_counter() - started
    return report
