"""Consolidation of one user never interleaves across processes (#24): the ingest dataflow
and two API processes (real `worldmm` processes) write semantic facts for the same user at
the same time, from notes whose facts overlap ("I like tea." twice) and contradict ("I
dislike tea."), while the dataflow's 10 min summary holds both tea facts too. Afterwards no
fact is active twice, every invalidation is recorded once, and replaying the same facts one
by one in the order the lock let them through builds the same memory."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta
from pathlib import Path

import httpx
import numpy as np
import pytest

from deploy.stack.process import free_port
from tests.fixtures.ingest_runs import START, cheap, produce_session
from tests.fixtures.processes import api_healthy, wait_for, worldmm

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NOTES = [
    "I like tea.",
    "I dislike tea.",
    "I like coffee.",
    "I like tea.",
    "I dislike coffee.",
    "Alice likes tea.",
    "I dislike tea.",
    "I like coffee.",
]
WRITERS_PER_API = 3
MAX_ROUNDS = 150  # each round: every writer posts one note at the same moment
Fact = tuple[str, str, str]


def _session(root: Path) -> Path:
    """One minute in two scenes whose sticky notes read "like tea" and "dislike tea": the
    offline captioner reads them, so the 10 min summary yields "I likes tea" and its
    opposite (two 30 s windows; the session end flushes the 10 min window)."""
    from apps.demo.synthetic import SceneSpec, generate_session, write_wav

    script = [
        SceneSpec(sign="KITCHEN", notes=["like", "tea", "the"], duration_s=30),
        SceneSpec(sign="OFFICE", notes=["dislike", "tea", "the"], duration_s=30),
    ]
    files = generate_session(
        root, minutes=1, fps=1, start=START, seed=3, audio=False, script=script
    )
    write_wav(root / "silence.wav", np.zeros(60 * 16_000, dtype=np.int16))
    return files.frames_dir


class NoteTraffic:
    """Rounds of notes: in each, every writer thread (several per API process) posts one
    note at the same moment, so consolidations of the user meet in both processes."""

    def __init__(self, urls: list[str], user: str, key: str) -> None:
        self.user, self.key = user, key
        self.statuses: Counter[int] = Counter()
        self.rounds = 0
        self.stop = threading.Event()
        self._urls = [u for u in urls for _ in range(WRITERS_PER_API)]
        self._start = threading.Barrier(len(self._urls), action=self._next_round)
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._writer, args=(i, u), daemon=True)
            for i, u in enumerate(self._urls)
        ]

    def _next_round(self) -> None:
        self.rounds += 1
        if self.rounds > MAX_ROUNDS:
            self.stop.set()

    def answered(self) -> int:
        with self._lock:
            return sum(self.statuses.values())

    def _writer(self, index: int, url: str) -> None:
        with httpx.Client(base_url=url, timeout=60.0) as client:
            while not self.stop.is_set():
                try:
                    self._start.wait(timeout=120)
                except threading.BrokenBarrierError:
                    return
                if self.stop.is_set():
                    return
                n = (self.rounds - 1) * len(self._urls) + index
                at = START + timedelta(minutes=2, milliseconds=100 * n)  # its own moment
                r = client.post(
                    f"/v1/users/{self.user}/memories",
                    json={"text": NOTES[n % len(NOTES)], "at": at.isoformat()},
                    headers={"Authorization": f"Bearer {self.key}"},
                )
                with self._lock:
                    self.statuses[r.status_code] += 1

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def finish(self) -> None:
        self.stop.set()
        self._start.abort()
        for t in self._threads:
            t.join(timeout=120)


def _facts(conn, user: str) -> tuple[Counter[Fact], Counter[Fact], list[dict]]:
    """Active and invalidated semantic facts (lower-case names), and the audit in lock order."""
    rows = conn.execute(
        "SELECT lower(coalesce(s.canonical_name, s.surface_form)), lower(t.predicate),"
        " lower(coalesce(o.canonical_name, o.surface_form, t.object_literal)),"
        " t.invalidated_at IS NULL FROM triples t"
        " JOIN entities s ON s.user_id = t.user_id AND s.id = t.subject_entity_id"
        " LEFT JOIN entities o ON o.user_id = t.user_id AND o.id = t.object_entity_id"
        " WHERE t.user_id = %s AND t.memory_type = 'semantic'",
        (user,),
    ).fetchall()
    active = Counter(r[:3] for r in rows if r[3])
    gone = Counter(r[:3] for r in rows if not r[3])
    audit = conn.execute(
        "SELECT a.id, a.segment_id, a.inputs, a.decision, a.outputs, s.scale_seconds,"
        " s.window_end, s.caption FROM consolidation_audit a JOIN segments s"
        " ON s.user_id = a.user_id AND s.id = a.segment_id WHERE a.user_id = %s ORDER BY a.id",
        (user,),
    ).fetchall()
    keys = ("id", "segment_id", "inputs", "decision", "outputs", "scale", "end", "caption")
    return active, gone, [dict(zip(keys, r, strict=True)) for r in audit]


def _invalidations_recorded_once(conn, user: str, audit: list[dict]) -> None:
    removed = Counter(i for a in audit for i in a["outputs"]["removed_ids"])
    assert [i for i, n in removed.items() if n > 1] == [], "a fact invalidated twice"
    rows = conn.execute(
        "SELECT id, replaced_by FROM triples WHERE user_id = %s AND memory_type = 'semantic'"
        " AND invalidated_at IS NOT NULL",
        (user,),
    ).fetchall()
    by_audit = {i: a["outputs"]["written_id"] for a in audit for i in a["outputs"]["removed_ids"]}
    assert {r[0]: r[1] for r in rows} == by_audit  # each one by exactly the audit that says so


def _serial_replay(settings, audit: list[dict], user: str) -> None:
    """The audited facts again, one at a time in the lock's order, for a fresh user."""
    import asyncio

    from worldmm.deps import build_deps
    from worldmm.llm.schemas import looks_literal
    from worldmm.memory.consolidation import consolidate_semantic
    from worldmm.models import Triple
    from worldmm.store import segments as segment_store
    from worldmm.store.models import SegmentWrite
    from worldmm.store.users import ensure_user

    deps = build_deps(settings, role="api")
    try:
        segments: dict[int, int] = {}
        with deps.db.transaction() as conn:
            ensure_user(conn, user)
            for a in audit:
                if a["segment_id"] in segments:
                    continue
                segments[a["segment_id"]] = segment_store.upsert_segment(
                    conn,
                    SegmentWrite(
                        user_id=user,
                        scale_seconds=a["scale"],
                        window_start=a["end"] - timedelta(seconds=a["scale"]),
                        window_end=a["end"],
                        caption=a["caption"],
                        processing_status="complete",
                    ),
                )

        async def replay() -> None:
            for a in audit:
                s, p, o = a["inputs"]["new"]
                fact = Triple(subject=s, predicate=p, object=o, object_is_literal=looks_literal(o))
                seg = segments[a["segment_id"]]
                await consolidate_semantic(deps, user, seg, a["end"], [fact], a["caption"])

        asyncio.run(replay())
    finally:
        deps.close()


def test_dataflow_and_two_api_processes_consolidate_one_user_serially(
    settings, user_id, tmp_path
) -> None:
    from connectors.topics import create_topics
    from worldmm.store.db import Database
    from worldmm.store.users import create_user

    # every note stored and consolidated on its own: merging a repeated note into the earlier
    # one (#27) skips its consolidation, and the notes would run out before the dataflow ends
    settings = cheap(settings, note_merge_span_h=0.0)
    create_topics(settings.kafka_brokers, settings)
    produce_session(settings, user_id, _session(tmp_path / "session"))
    with Database(settings.database_url, max_size=1) as db, db.transaction() as conn:
        key = create_user(conn, user_id)

    ports = [free_port(), free_port()]
    apis = [
        worldmm(["serve", "--port", str(p)], settings, tmp_path / f"api{i}.log")
        for i, p in enumerate(ports)
    ]
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    traffic = NoteTraffic(urls, user_id, key)
    flow = None
    try:
        for url in urls:
            wait_for(lambda u=url: api_healthy(u), 180, f"the API at {url}", poll_s=0.5)
        traffic.start()
        wait_for(lambda: traffic.answered() >= 12, 120, "the first notes")
        flow = worldmm(["dataflow", "--to-end", "--no-recovery"], settings, tmp_path / "flow.log")
        assert flow.wait(timeout=600) == 0, (tmp_path / "flow.log").read_text()[-3000:]
        after = traffic.answered()
        assert not traffic.stop.is_set(), "the notes ran out before the dataflow finished"
        wait_for(lambda: traffic.answered() >= after + 12, 120, "notes after the dataflow")
    finally:
        traffic.finish()
        for proc in [*apis, *([flow] if flow else [])]:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=30)
    assert set(traffic.statuses) == {201}, traffic.statuses

    with Database(settings.database_url, max_size=1) as db, db.connection() as conn:
        active, gone, audit = _facts(conn, user_id)
        _invalidations_recorded_once(conn, user_id, audit)
    assert [f for f, n in active.items() if n > 1] == [], "a fact is active twice"
    flow_audits = [a["id"] for a in audit if a["scale"] == 600]
    note_audits = [a["id"] for a in audit if a["scale"] == 30]
    assert flow_audits, "the dataflow consolidated nothing"
    # the dataflow's facts went in while the notes' were being written, not before or after
    assert min(note_audits) < min(flow_audits) and max(flow_audits) < max(note_audits)
    assert ("i", "likes", "tea") in active | gone and ("i", "dislikes", "tea") in active | gone

    serial = f"{user_id}-serial"
    _serial_replay(settings, audit, serial)
    with Database(settings.database_url, max_size=1) as db, db.connection() as conn:
        s_active, s_gone, s_audit = _facts(conn, serial)
    assert [a["decision"] for a in s_audit] == [a["decision"] for a in audit]
    assert (s_active, s_gone) == (active, gone)
