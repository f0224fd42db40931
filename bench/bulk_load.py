"""Bulk-load a :class:`SyntheticMemory` into PostgreSQL with binary COPY, timed per table.

Identity ids are assigned by the database, so tables load parents first and read the new
ids back (entities, then segments from the hour down, so children can point at parents),
and the ``replaced_by`` links of semantic triples are set with one UPDATE after their COPY.
HNSW indexes can be dropped for the load and rebuilt once (``drop_indexes``): that locks the
tables for the whole load, so do it on a benchmark database, not a live one.

Time spent generating rows (numpy embeddings, captions) is measured inside the row
iterators and reported apart from the COPY time.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from bench.query_synth import SyntheticMemory, TripleSpecs, iter_slices, unit_rows
from worldmm.models import SCALES
from worldmm.store.bulk import copy_rows, vector_indexes_dropped
from worldmm.store.users import ensure_user

VECTOR_TABLES = ("entities", "triples", "visual_embeddings", "segment_embeddings")
_VERSIONS = Jsonb({"generator": "bench.query_synth"})


@dataclass
class LoadReport:
    rows: dict[str, int] = field(default_factory=dict)  # per table
    copy_s: dict[str, float] = field(default_factory=dict)  # per table, generation excluded
    generate_s: float = 0.0
    fixup_s: float = 0.0  # id read-backs and the replaced_by UPDATE
    index_rebuild_s: float = 0.0
    commit_s: float = 0.0
    analyze_s: float = 0.0
    total_s: float = 0.0  # wall time of the load, generation included
    dropped_indexes: list[str] = field(default_factory=list)

    def add(self, other: LoadReport) -> None:
        """Sum another loader's rows and times into this report."""
        for table, n in other.rows.items():
            self.rows[table] = self.rows.get(table, 0) + n
            self.copy_s[table] = self.copy_s.get(table, 0.0) + other.copy_s.get(table, 0.0)
        self.generate_s += other.generate_s
        self.fixup_s += other.fixup_s

    @property
    def total_rows(self) -> int:
        return sum(self.rows.values())

    @property
    def load_s(self) -> float:
        """Database time: COPY + fix-ups + index rebuild + commit (not generation, not VACUUM)."""
        return sum(self.copy_s.values()) + self.fixup_s + self.index_rebuild_s + self.commit_s

    def as_dict(self) -> dict[str, Any]:
        per_table = {
            t: {
                "rows": n,
                "s": round(self.copy_s[t], 3),
                "rows_per_s": round(n / self.copy_s[t]) if self.copy_s[t] > 0 else None,
            }
            for t, n in self.rows.items()
        }
        seconds = {
            "load_s": self.load_s, "copy_s": sum(self.copy_s.values()), "fixup_s": self.fixup_s,
            "index_rebuild_s": self.index_rebuild_s, "commit_s": self.commit_s,
            "analyze_s": self.analyze_s, "generate_s": self.generate_s, "wall_s": self.total_s,
        }  # fmt: skip
        return {
            "total_rows": self.total_rows,
            **{k: round(v, 3) for k, v in seconds.items()},
            "dropped_indexes": self.dropped_indexes,
            "per_table": per_table,
        }


class _Timed:
    """Wraps a row iterator and adds the time spent producing rows to the report."""

    def __init__(self, rows: Iterable[Sequence[Any]], report: LoadReport) -> None:
        self._it = iter(rows)
        self._report = report

    def __iter__(self) -> Iterator[Sequence[Any]]:
        return self

    def __next__(self) -> Sequence[Any]:
        t = time.perf_counter()
        try:
            return next(self._it)
        finally:
            self._report.generate_s += time.perf_counter() - t


class Loader:
    """Loads one user's synthetic memory over one connection (caller owns the transaction)."""

    def __init__(self, conn: psycopg.Connection, memory: SyntheticMemory, user_id: str) -> None:
        self.conn, self.mem, self.user = conn, memory, user_id
        self.report = LoadReport()
        self.entity_ids: list[int] = []
        self.segment_ids: dict[int, list[int]] = {}

    def copy(self, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
        gen_before = self.report.generate_s
        t = time.perf_counter()
        n = copy_rows(self.conn, table, columns, _Timed(rows, self.report))
        spent = time.perf_counter() - t - (self.report.generate_s - gen_before)
        self.report.rows[table] = self.report.rows.get(table, 0) + n
        self.report.copy_s[table] = self.report.copy_s.get(table, 0.0) + spent

    def _fixup(self, query: str, params: Any) -> list[tuple]:
        t = time.perf_counter()
        try:
            return self.conn.execute(query, params).fetchall()
        finally:
            self.report.fixup_s += time.perf_counter() - t

    # --- tables, parents first ------------------------------------------------------------

    def users_and_sessions(self) -> None:
        t = time.perf_counter()
        ensure_user(self.conn, self.user)
        self.report.rows["users"] = 1
        self.report.copy_s["users"] = time.perf_counter() - t
        starts = self.mem.segments.starts[3600]
        day = {self.mem.session_of(s): s for s in reversed(starts)}  # first hour of each day
        rows = [(self.user, sid, day[sid]) for sid in self.mem.session_ids()]
        self.copy("sessions", ("user_id", "session_id", "started_at"), rows)

    def entities(self) -> None:
        v = self.mem.vocab
        self.copy(
            "entities",
            ("user_id", "surface_form", "canonical_name", "embedding"),
            ((self.user, n, n, v.vectors[i]) for i, n in enumerate(v.names)),
        )
        got = dict(
            self._fixup(
                "SELECT lower(surface_form), id FROM entities"
                " WHERE user_id = %s AND canonical_entity_id IS NULL",
                (self.user,),
            )
        )
        self.entity_ids = [int(got[n.lower()]) for n in v.names]
        self.copy(
            "entities",
            ("user_id", "canonical_entity_id", "surface_form", "embedding"),
            (
                (self.user, self.entity_ids[i], alias, v.alias_vectors[k])
                for k, (alias, i) in enumerate(v.aliases)
            ),
        )

    def segments(self) -> None:
        segs = self.mem.segments
        cols = ("user_id", "session_id", "scale_seconds", "window_start", "window_end", "caption",
                "transcript", "parent_segment_id", "processing_status", "visual_status",
                "model_versions")  # fmt: skip
        for scale in sorted(SCALES, reverse=True):

            def rows(scale: int = scale) -> Iterator[tuple]:
                captions = self.mem.captions(scale)
                for i, start in enumerate(segs.starts[scale]):
                    p = segs.parent[scale][i]
                    parent = None if p is None else self.segment_ids[p[0]][p[1]]
                    transcript = "(speech) " + captions[i][:80] if scale == 30 and i % 3 else None
                    visual = "complete" if scale == 30 else "none"
                    yield (self.user, self.mem.session_of(start), scale, start,
                           segs.end(scale, i), captions[i], transcript, parent, "complete",
                           visual, _VERSIONS)  # fmt: skip

            self.copy("segments", cols, rows())
            got = dict(
                self._fixup(
                    "SELECT window_start, id FROM segments"
                    " WHERE user_id = %s AND scale_seconds = %s",
                    (self.user, scale),
                )
            )
            self.segment_ids[scale] = [int(got[s]) for s in segs.starts[scale]]

    def frames(self) -> None:
        n = self.mem.cfg.frames_per_segment
        if n <= 0:
            return
        step = 30.0 / n
        segs = self.mem.segments

        def rows() -> Iterator[tuple]:
            from datetime import timedelta

            for i, start in enumerate(segs.starts[30]):
                session = self.mem.session_of(start)
                for j in range(n):
                    ts = start + timedelta(seconds=j * step)
                    key = f"frames/{self.user}/{session}/{int(ts.timestamp() * 1000)}-{j}.jpg"
                    yield (self.user, session, ts, i * n + j, key)

        self.copy("frames", ("user_id", "session_id", "captured_at", "seq", "blob_key"), rows())

    def visual(self) -> None:
        segs, ids = self.mem.segments, self.segment_ids[30]

        def rows() -> Iterator[tuple]:
            for lo, hi in iter_slices(len(ids), 2048):
                vecs = self.mem.visual_vectors(lo, hi)
                for k in range(lo, hi):
                    yield (self.user, ids[k], segs.starts[30][k], segs.end(30, k), vecs[k - lo])

        cols = ("user_id", "segment_id", "window_start", "window_end", "embedding")
        self.copy("visual_embeddings", cols, rows())

    def segment_text(self) -> None:
        """One text vector per segment of every scale: the dense lane's rows. Seeded random
        unit vectors: what matters for latency is how many the HNSW index holds."""
        segs = self.mem.segments
        dim = self.mem.cfg.text_dim
        rng = np.random.default_rng(self.mem.cfg.seed + 104729)

        def rows() -> Iterator[tuple]:
            for scale in sorted(SCALES):
                ids = self.segment_ids[scale]
                for lo, hi in iter_slices(len(ids), 2048):
                    vecs = unit_rows(rng.standard_normal((hi - lo, dim))).astype(np.float32)
                    for k in range(lo, hi):
                        start, end = segs.starts[scale][k], segs.end(scale, k)
                        yield (ids[k], self.user, scale, start, end, "synthetic", vecs[k - lo])

        cols = ("segment_id", "user_id", "scale_seconds", "window_start", "window_end", "model")
        self.copy("segment_embeddings", (*cols, "embedding"), rows())

    _TRIPLE_COLS = ("user_id", "memory_type", "segment_id", "scale_seconds", "subject_entity_id",
                    "predicate", "object_entity_id", "object_literal", "embedding", "valid_from",
                    "invalidated_at", "evidence_segment_ids", "origin")  # fmt: skip

    def _triple_rows(
        self,
        specs: TripleSpecs,
        memory_type: str,
        stream: int,
        invalidated_at: list | None = None,
        origin: list[str] | None = None,
    ) -> Iterator[tuple]:
        v, segs, ent = self.mem.vocab, self.mem.segments, self.entity_ids
        for lo, hi in iter_slices(len(specs), 4096):
            vecs = self.mem.triple_vectors(specs, lo, hi, stream)
            for i in range(lo, hi):
                scale, seg = int(specs.scale[i]), int(specs.segment[i])
                sid = self.segment_ids[scale][seg]
                o, lit = int(specs.obj[i]), int(specs.literal[i])
                yield (self.user, memory_type, sid, scale, ent[specs.subj[i]],
                       v.predicates[specs.pred[i]], ent[o] if o >= 0 else None,
                       v.literals[lit] if lit >= 0 else None, vecs[i - lo], segs.end(scale, seg),
                       invalidated_at[i] if invalidated_at else None, [sid],
                       origin[i] if origin else "extracted")  # fmt: skip

    def episodic(self) -> None:
        self.copy("triples", self._TRIPLE_COLS, self._triple_rows(self.mem.episodic, "episodic", 0))

    def semantic(self) -> None:
        sem, segs = self.mem.semantic, self.mem.segments
        specs, replaced = sem.triples, sem.replaced_by
        ends = [segs.end(600, int(s)) for s in specs.segment]
        invalidated = [ends[int(r)] if r >= 0 else None for r in replaced]
        replacing = set(int(r) for r in replaced if r >= 0)
        origin = ["consolidated" if i in replacing else "extracted" for i in range(len(specs))]
        before = self._fixup(
            "SELECT coalesce(max(id), 0) FROM triples WHERE user_id = %s"
            " AND memory_type = 'semantic'",
            (self.user,),
        )[0][0]
        rows = self._triple_rows(specs, "semantic", 1, invalidated, origin)
        self.copy("triples", self._TRIPLE_COLS, rows)
        ids = [
            int(r[0])
            for r in self._fixup(
                "SELECT id FROM triples WHERE user_id = %s AND memory_type = 'semantic' AND id > %s"
                " ORDER BY id",
                (self.user, before),
            )
        ]
        if len(ids) != len(specs):
            raise RuntimeError(f"read back {len(ids)} semantic ids, wrote {len(specs)}")
        old = [ids[i] for i, r in enumerate(replaced) if r >= 0]
        new = [ids[int(r)] for r in replaced if r >= 0]
        self._fixup(
            "UPDATE triples t SET replaced_by = m.new FROM unnest(%s::bigint[], %s::bigint[])"
            " AS m(old, new) WHERE t.user_id = %s AND t.id = m.old RETURNING t.id",
            (old, new, self.user),
        )

    def load_all(self) -> None:
        """Every table, parents first."""
        for table in (self.users_and_sessions, self.entities, self.segments, self.frames,
                      self.visual, self.segment_text, self.episodic, self.semantic):  # fmt: skip
            table()


def load_memory(
    conn: psycopg.Connection, memory: SyntheticMemory, user_id: str, *, drop_indexes: bool = True
) -> LoadReport:
    """Load one user's memory in one transaction on ``conn`` (autocommit off), then VACUUM
    ANALYZE (see :func:`load_memories`)."""
    return load_memories(conn, [(memory, user_id)], drop_indexes=drop_indexes)


def load_memories(
    conn: psycopg.Connection,
    memories: Sequence[tuple[SyntheticMemory, str]],
    *,
    drop_indexes: bool = True,
) -> LoadReport:
    """Load several users' memories in one transaction on ``conn`` (autocommit off), with
    one rebuild of the vector indexes for all of them, then VACUUM ANALYZE. The report sums
    the users' rows and times.

    Identity values follow COPY order within one session, which the semantic read-back
    relies on (ids above the user's previous highest, in order).
    """
    if not memories:
        raise ValueError("no memories to load")
    started = time.perf_counter()
    report = LoadReport()
    with conn.transaction():
        guard = vector_indexes_dropped(conn, VECTOR_TABLES) if drop_indexes else nullcontext([])
        with guard as dropped:
            report.dropped_indexes = list(dropped)
            for memory, user_id in memories:
                loader = Loader(conn, memory, user_id)
                loader.load_all()
                report.add(loader.report)
            rebuild_started = time.perf_counter()
        report.index_rebuild_s = time.perf_counter() - rebuild_started
        commit_started = time.perf_counter()
    report.commit_s = time.perf_counter() - commit_started
    t = time.perf_counter()
    # VACUUM, not only ANALYZE: a memory written over a week has its visibility map kept
    # current by autovacuum; right after a bulk load it is empty, and every index-only scan
    # visits the heap (430 ms instead of 45 ms per episodic query when the graph fingerprint
    # was such a scan).
    conn.commit()
    autocommit = conn.autocommit
    conn.autocommit = True
    try:
        conn.execute(
            "VACUUM (ANALYZE) users, sessions, entities, segments, frames, visual_embeddings,"
            " segment_embeddings, triples"
        )
    finally:
        conn.autocommit = autocommit
    report.analyze_s = time.perf_counter() - t
    report.total_s = time.perf_counter() - started
    return report
