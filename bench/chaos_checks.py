"""What the chaos benchmark checks once the stream has drained: the memory against the windows
the stream implies, against itself (duplicates) and against a fault-free run of the same input.
:func:`fetch_memory` reads one database; the comparisons are pure functions over its result."""

from __future__ import annotations

import re
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import psycopg

from worldmm.memory.windows import SCALES, align

WindowKey = tuple[str, int, int]  # user, scale seconds, window start (epoch ms)


def implied_windows(users: list[str], t0_ms: int, stream_ms: int) -> set[WindowKey]:
    """Every window, at every scale, that overlaps [t0, t0 + stream): a session end flushes
    all of them, the ones cut short as partial."""
    times = range(t0_ms, t0_ms + stream_ms, 30_000)
    return {(user, scale, align(t, scale)) for t in times for scale in SCALES for user in users}


@dataclass
class Memory:
    """One database's memory of the benchmark's users, ids and wall times left out."""

    segments: dict[WindowKey, tuple[str, str | None, str | None, bool]] = field(
        default_factory=dict
    )  # status, caption, transcript, partial
    segment_rows: Counter[WindowKey] = field(default_factory=Counter)
    visual: Counter[str] = field(default_factory=Counter)  # visual_status of 30 s segments
    duplicated_entities: int = 0
    duplicated_triples: int = 0
    episodic: dict[WindowKey, Counter[tuple[str, str, str]]] = field(default_factory=dict)
    semantic_active: Counter[tuple[str, str, str, str]] = field(default_factory=Counter)


def fetch_memory(database_url: str, users: list[str]) -> Memory:
    mem = Memory()
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT user_id, scale_seconds, (extract(epoch FROM window_start) * 1000)::bigint,"
            " processing_status, caption, transcript, partial, visual_status"
            " FROM segments WHERE user_id = ANY(%s)",
            (users,),
        ).fetchall()
        mem.duplicated_entities = conn.execute(
            "SELECT coalesce(sum(n - 1), 0) FROM (SELECT count(*) AS n FROM entities"
            " WHERE user_id = ANY(%s) AND canonical_entity_id IS NULL"
            " GROUP BY user_id, lower(canonical_name) HAVING count(*) > 1) d",
            (users,),
        ).fetchone()[0]
        mem.duplicated_triples = conn.execute(
            "SELECT coalesce(sum(n - 1), 0) FROM (SELECT count(*) AS n FROM triples"
            " WHERE user_id = ANY(%s) AND invalidated_at IS NULL"
            " GROUP BY user_id, memory_type, segment_id, subject_entity_id, lower(predicate),"
            " object_entity_id, object_literal HAVING count(*) > 1) d",
            (users,),
        ).fetchone()[0]
        triples = conn.execute(
            "SELECT t.user_id, t.memory_type, s.scale_seconds,"
            " (extract(epoch FROM s.window_start) * 1000)::bigint,"
            " lower(coalesce(su.canonical_name, su.surface_form)), lower(t.predicate),"
            " lower(coalesce(ob.canonical_name, ob.surface_form, t.object_literal))"
            " FROM triples t JOIN entities su ON su.id = t.subject_entity_id"
            " LEFT JOIN entities ob ON ob.id = t.object_entity_id"
            " LEFT JOIN segments s ON s.id = t.segment_id"
            " WHERE t.user_id = ANY(%s) AND t.invalidated_at IS NULL",
            (users,),
        ).fetchall()
    for user, scale, start, status, caption, transcript, partial, visual in rows:
        key = (user, int(scale), int(start))
        mem.segment_rows[key] += 1
        mem.segments[key] = (status, caption, transcript, partial)
        if scale == 30:
            mem.visual[visual] += 1
    for user, kind, scale, start, subj, pred, obj in triples:
        if kind == "episodic" and scale is not None:
            key = (user, int(scale), int(start))
            mem.episodic.setdefault(key, Counter())[(subj, pred, obj)] += 1
        elif kind == "semantic":
            mem.semantic_active[(user, subj, pred, obj)] += 1
    return mem


def window_figures(expected: set[WindowKey], mem: Memory) -> dict[str, int]:
    complete = {k for k, v in mem.segments.items() if v[0] == "complete"}
    return {
        "expected": len(expected),
        "built": len(expected & complete),
        "missing": len(expected - complete),
        "failed": sum(1 for k in expected if mem.segments.get(k, ("",))[0] == "failed"),
        "duplicated": sum(n - 1 for n in mem.segment_rows.values() if n > 1),
        "unexpected": len(set(mem.segments) - expected),
    }


def _counter_diff(a: Counter, b: Counter) -> int:
    """How many items (with multiplicity) are in one and not the other."""
    return sum(((a - b) + (b - a)).values())


def compare_with_reference(chaos: Memory, ref: Memory) -> dict[str, Any]:
    """Where the chaos run's memory differs from the fault-free run's over the same input.
    Visual status is left out: an encoder outage leaves clips pending by design."""
    keys = set(chaos.segments) | set(ref.segments)
    text_diff = sorted(
        k for k in keys if (chaos.segments.get(k) or ())[1:3] != (ref.segments.get(k) or ())[1:3]
    )
    episodic_diff = sum(
        _counter_diff(chaos.episodic.get(k, Counter()), ref.episodic.get(k, Counter()))
        for k in set(chaos.episodic) | set(ref.episodic)
    )
    return {
        "windows_with_other_text": len(text_diff),
        "windows_with_other_text_sample": [list(k) for k in text_diff[:5]],
        "episodic_triples_differing": episodic_diff,
        "semantic_facts_differing": _counter_diff(chaos.semantic_active, ref.semantic_active),
    }


_INPUT_LOST = re.compile(r"input_lost topic=\S+ partition=\d+ offsets=\[\d+, \d+\) records=(\d+)")


def input_lost(worker_log: str, database_url: str, users: list[str]) -> dict[str, int]:
    """Input the worker reported lost (records and gaps of its log) and the 30 s windows it
    marked "input may be missing" (the store's gap spans; dataflows/input_gaps.py)."""
    from worldmm.store.input_gaps import marked_windows

    with psycopg.connect(database_url) as conn:
        return {**reported_lost(worker_log), "windows": marked_windows(conn, users)}


def reported_lost(worker_log: str) -> dict[str, int]:
    """Records and gaps of the worker's ``input_lost`` log lines."""
    found = [int(n) for n in _INPUT_LOST.findall(worker_log)]
    return {"records": sum(found), "gaps": len(found)}


def fact_integrity(database_url: str, users: list[str]) -> dict[str, int]:
    """The note users' semantic facts: notes written, facts active twice (same triple), and
    facts invalidated by more than one consolidation (both must be 0)."""
    with psycopg.connect(database_url) as conn:
        notes, twice = conn.execute(
            "SELECT (SELECT count(*) FROM segments WHERE user_id = ANY(%(u)s)"
            " AND source_topic = 'note'), (SELECT coalesce(sum(n - 1), 0) FROM (SELECT count(*)"
            " AS n FROM triples t JOIN entities s ON s.id = t.subject_entity_id"
            " WHERE t.user_id = ANY(%(u)s) AND t.memory_type = 'semantic'"
            " AND t.invalidated_at IS NULL GROUP BY t.user_id,"
            " lower(coalesce(s.canonical_name, s.surface_form)), lower(t.predicate),"
            " t.object_entity_id, lower(t.object_literal)) c)",
            {"u": users},
        ).fetchone()
        removed = conn.execute(
            "SELECT coalesce(sum(n - 1), 0) FROM (SELECT count(*) AS n FROM consolidation_audit,"
            " jsonb_array_elements(outputs->'removed_ids') r WHERE user_id = ANY(%s)"
            " GROUP BY user_id, r) c",
            (users,),
        ).fetchone()[0]
    return {"notes": notes, "facts_active_twice": int(twice), "invalidated_twice": int(removed)}


def dlq_by_reason(brokers: str, topic: str, timeout_s: float = 10.0) -> dict[str, int]:
    """Every record on the DLQ topic, counted by its ``reason`` header."""
    from connectors.kafka_io import consume_all

    group = f"chaos-dlq-{uuid.uuid4().hex[:8]}"
    records = consume_all(brokers, topic, group=group, timeout=timeout_s)
    return dict(Counter(r.header("reason") or "?" for r in records))
