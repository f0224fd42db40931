"""A wearer's memory moves between Citus workers, and a worker stops, while the flow writes
and the API answers: nothing is lost and nothing is written twice.

Two wearers send the same session; one of them is moved (or has its worker stopped) while
the ingest flow builds it, the other is left alone. Both memories must come out the same:
every window once, every frame once, the same captions and facts. Runs in the Citus lane
(`pytest -m on_citus --database citus`); skipped on single-node PostgreSQL.
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psycopg
import pytest

from deploy.stack import postgres
from deploy.stack.process import wait_until
from tests.fixtures.ingest_runs import base_count, fed_settings, session_frames
from worldmm.store.db import Database
from worldmm.store.distribute import is_citus

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MINUTES = 6  # twelve windows: the move or the stop lands while the flow writes


@pytest.fixture
def cluster(stack) -> str:
    with psycopg.connect(stack.database_url) as conn:
        if not is_citus(conn):
            pytest.skip("needs the Citus lane: pytest -m on_citus --database citus")
    return stack.database_url


def _placement(conn: psycopg.Connection, user: str) -> tuple[int, str, int]:
    """The wearer's shard group (its users shard) and the worker that holds it."""
    row = conn.execute(
        "SELECT shardid, nodename, nodeport FROM citus_shards WHERE shardid ="
        " get_shard_id_for_distribution_column('users', %s::text)",
        (user,),
    ).fetchone()
    return int(row[0]), str(row[1]), int(row[2])


def _other_worker(conn: psycopg.Connection, port: int) -> tuple[str, int]:
    host, other = conn.execute(
        "SELECT nodename, nodeport FROM pg_dist_node WHERE shouldhaveshards AND nodeport <> %s"
        " AND groupid <> 0 ORDER BY nodeport LIMIT 1",
        (port,),
    ).fetchone()
    return str(host), int(other)


def _memory(db: Database, user: str) -> dict:
    """What a run built for ``user``, in a form two wearers' runs can be compared by."""
    with db.connection() as conn:
        segs = conn.execute(
            "SELECT scale_seconds, window_start, caption, processing_status FROM segments"
            " WHERE user_id = %s ORDER BY scale_seconds, window_start",
            (user,),
        ).fetchall()
        frames = conn.execute(
            "SELECT captured_at, count(*) FROM frames WHERE user_id = %s GROUP BY 1 ORDER BY 1",
            (user,),
        ).fetchall()
        facts = conn.execute(
            "SELECT t.memory_type, t.predicate, coalesce(t.object_literal, o.surface_form)"
            " FROM triples t LEFT JOIN entities o"
            " ON o.user_id = t.user_id AND o.id = t.object_entity_id"
            " WHERE t.user_id = %s ORDER BY 1, 2, 3",
            (user,),
        ).fetchall()
    return {"segments": segs, "frames": frames, "facts": facts}


@contextmanager
def _flow_running(settings) -> Iterator[threading.Thread]:
    """The ingest flow, in a thread, reading the topics to their end."""
    from bytewax.testing import TestingSink, run_main

    from dataflows.ingest import build_flow

    outcomes: list = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            run_main(build_flow(settings, tail=False, report_sink=TestingSink(outcomes)))
        except BaseException as exc:  # reported below
            errors.append(exc)

    thread = threading.Thread(target=run, name="flow")
    thread.start()
    try:
        yield thread
    finally:
        thread.join(timeout=600)
    assert not thread.is_alive(), "the flow did not finish"
    assert errors == []
    assert [o for o in outcomes if o.status == "failed"] == []


def _answering(db: Database, user: str, stop: threading.Event, failures: list[str]) -> None:
    """The API's reads of the wearer, over and over, until ``stop``: each must answer."""
    while not stop.is_set():
        try:
            with db.connection() as conn:
                conn.execute(
                    "SELECT count(*) FROM segments WHERE user_id = %s AND scale_seconds = 30",
                    (user,),
                ).fetchone()
        except psycopg.OperationalError:
            pass  # an outage (the stopped worker): the API answers 503 and is asked again
        except psycopg.Error as exc:
            failures.append(f"{type(exc).__name__}: {exc}")


def _run_beside(
    settings, tmp_path, act: Callable[[Database, str], None]
) -> tuple[dict, dict, list[str]]:
    """The same session for two wearers; ``act(db, moved)`` runs once ``moved`` has some
    windows and before the flow is done. Returns both memories and the readers' failures."""
    moved, alone = (f"move-{uuid.uuid4().hex[:10]}" for _ in range(2))
    frames_dir = session_frames(tmp_path / "session", MINUTES)
    settings = fed_settings(settings, [moved, alone], frames_dir, ingest_create_users=True)
    failures: list[str] = []
    stop = threading.Event()
    with Database(settings.database_url, max_size=4) as db:
        reader = threading.Thread(target=_answering, args=(db, moved, stop, failures))
        reader.start()
        try:
            with _flow_running(settings):
                wait_until(
                    lambda: _windows(db, moved) >= 2, timeout_s=300, what="the first windows"
                )
                act(db, moved)
        finally:
            stop.set()
            reader.join(timeout=60)
        return _memory(db, moved), _memory(db, alone), failures


def _windows(db: Database, user: str) -> int:
    try:
        with db.connection() as conn:
            row = conn.execute(
                "SELECT count(*) FROM segments WHERE user_id = %s AND scale_seconds = 30",
                (user,),
            ).fetchone()
    except psycopg.OperationalError:
        return 0
    return int(row[0])


def _same_memory(moved: dict, alone: dict) -> None:
    assert Counter(s[0] for s in moved["segments"])[30] == base_count(MINUTES)
    assert all(s[3] == "complete" for s in moved["segments"])
    assert all(n == 1 for _, n in moved["frames"]), "a frame was written twice"
    assert moved == alone


def test_a_wearer_moves_to_another_worker_while_the_flow_writes(cluster, settings, tmp_path):
    moves: list[tuple[int, int]] = []

    def move(db: Database, user: str) -> None:
        with db.connection() as conn:
            conn.autocommit = True
            shard, host, port = _placement(conn, user)
            to_host, to_port = _other_worker(conn, port)
            # logical replication: the wearer's writes go on while the shard group copies
            conn.execute(
                "SELECT citus_move_shard_placement(%s, %s, %s, %s, %s, 'force_logical')",
                (shard, host, port, to_host, to_port),
            )
            moves.append((port, _placement(conn, user)[2]))

    moved, alone, failures = _run_beside(settings, tmp_path, move)

    ((before, after),) = moves
    assert before != after
    assert failures == []
    _same_memory(moved, alone)


def test_a_worker_stopped_mid_stream_is_waited_out(cluster, settings, tmp_path, stack):
    stopped: list[int] = []

    def stop_and_restart(db: Database, user: str) -> None:
        with db.connection() as conn:
            _, _, port = _placement(conn, user)
        node = next(
            d
            for d in (stack.state_dir / "citus").iterdir()
            if (d / "port").exists() and int((d / "port").read_text()) == port
        )
        postgres.stop(node)  # the wearer's worker goes away mid-stream
        stopped.append(port)
        wait_until(lambda: _windows(db, user) == 0, timeout_s=30, what="reads to fail")
        postgres.start(node, port, citus=True)

    moved, alone, failures = _run_beside(settings, tmp_path, stop_and_restart)

    assert stopped
    assert failures == []
    _same_memory(moved, alone)
