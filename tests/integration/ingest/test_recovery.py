"""The dataflow killed mid-stream (SIGKILL) and restarted from its recovery dir builds exactly
the memory a clean run builds from the same input; a replay of one user's time range with
``--fresh`` rebuilds that part and leaves other users alone."""

from __future__ import annotations

import signal
from collections import Counter
from datetime import timedelta

import psycopg
import pytest

from tests.fixtures.ingest_runs import (
    START,
    base_count,
    fed_settings,
    produce_session,
    session_frames,
)
from tests.fixtures.processes import set_env, wait_for, worldmm
from tests.fixtures.store_reads import complete_bases, memory_rows

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MINUTES = 3


def duplicates(counter: Counter) -> list:
    return [k for k, n in counter.items() if n > 1]


def _segment_ids(database_url: str, user_id: str, other: str) -> tuple[dict, list]:
    """The user's 30 s segment ids by window start, and the other user's (id, updated_at)."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        ids = dict(
            conn.execute(
                "SELECT window_start, id FROM segments WHERE user_id = %s AND scale_seconds = 30",
                (user_id,),
            ).fetchall()
        )
        others = conn.execute(
            "SELECT id, updated_at FROM segments WHERE user_id = %s ORDER BY id", (other,)
        ).fetchall()
    return ids, others


def _clean_run(settings) -> None:
    from bytewax.testing import run_main

    from dataflows.ingest import build_flow

    run_main(build_flow(settings, tail=False))


def test_kill_and_resume_builds_the_same_memory_as_a_clean_run(
    settings, user_id, tmp_path, monkeypatch
) -> None:
    frames = session_frames(tmp_path / "session", MINUTES)
    other = f"{user_id}-other"
    victim = f"{user_id}-killed"
    clean = fed_settings(settings, [user_id], frames)
    # replay --user must not touch this one (shorter: it only has to exist)
    produce_session(clean, other, session_frames(tmp_path / "other", 1))
    killed = fed_settings(settings, [victim], frames, topic_prefix=settings.topic_prefix + "k.")

    _clean_run(clean)
    expected = memory_rows(clean.database_url, user_id)
    scales = [s[0] for s in expected["segments"]]
    assert scales == [30] * base_count(MINUTES) + [180, 600, 3600]
    assert {s[4] for s in expected["segments"]} == {"complete"}
    assert expected["triples"], "the offline captioner should yield entities and triples"

    # -- killed with SIGKILL once some, not all, windows are written; then resumed ---------
    # The first run tails the topics like a live deployment (reading to the end would do the
    # rest of the work inside end-of-input, where no snapshot is taken); the restart reads to
    # the end so that the test ends.
    recovery = tmp_path / "recovery"
    args = ["dataflow", "--recovery-dir", str(recovery), "--epoch-s", "0.2"]
    first = worldmm(args, killed, tmp_path / "first.log")
    with psycopg.connect(killed.database_url, autocommit=True) as conn:

        def two_done_or_exited():
            rc = first.poll()
            return ("exited", rc) if rc is not None else complete_bases(conn, victim) >= 2

        done = wait_for(
            two_done_or_exited,
            timeout_s=180,
            what="two complete windows in the first run",
            poll_s=0.02,
        )
        assert first.poll() is None, (done, (tmp_path / "first.log").read_text()[-3000:])
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
        at_kill = complete_bases(conn, victim)
    assert 2 <= at_kill < base_count(MINUTES), f"killed too late to prove anything: {at_kill}"
    partial = memory_rows(killed.database_url, victim)
    assert len(partial["segments"]) < len(expected["segments"])

    second = worldmm([*args, "--to-end"], killed, tmp_path / "second.log")
    assert second.wait(timeout=300) == 0, (tmp_path / "second.log").read_text()[-3000:]
    # it resumed from a snapshot: windows finished before it were not redone
    redone = (tmp_path / "second.log").read_text().count("window_complete")
    assert redone < len(expected["segments"]), redone
    resumed = memory_rows(killed.database_url, victim)
    assert duplicates(resumed["entities"]) == []
    assert duplicates(resumed["triples"]) == []
    assert resumed == expected

    # -- replay one user's range from the topics, starting fresh ----------------------------
    ids_before, other_before = _segment_ids(clean.database_url, user_id, other)
    lo, hi = START + timedelta(seconds=30), START + timedelta(seconds=90)
    set_env(monkeypatch, clean)
    from typer.testing import CliRunner

    from apps.cli import app

    result = CliRunner().invoke(
        app,
        ["replay", "--user", user_id, "--from", lo.isoformat(), "--to", hi.isoformat(), "--fresh"],
    )
    assert result.exit_code == 0, result.output
    assert memory_rows(clean.database_url, user_id) == expected
    ids_after, other_after = _segment_ids(clean.database_url, user_id, other)
    rebuilt = {ts for ts in ids_after if ids_after[ts] != ids_before[ts]}
    assert rebuilt == {lo, lo + timedelta(seconds=30)}  # only the range was deleted and rebuilt
    assert other_after == other_before
