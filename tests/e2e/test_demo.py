"""`worldmm demo` end to end, in-process, on a stack of its own in a temporary state dir
(never the developer's .worldmm): a short session, its memory in PostgreSQL, the questions
answered through the HTTP API, and nothing left running afterwards."""

from __future__ import annotations

import io
import shutil
import tempfile
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from rich.console import Console

from apps.demo.run import DemoOptions, run_demo
from apps.demo.script import expected_windows
from worldmm.settings import load_settings

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.slow]

MINUTES = 5.0  # what `make demo` runs: six scenes, every demo question asked


@pytest.fixture
def demo_state_dir():
    # Not pytest's tmp dir: PostgreSQL runs as another OS user and must enter it.
    path = Path(tempfile.mkdtemp(prefix="worldmm-demo-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_demo_runs_end_to_end_and_stops_everything(demo_state_dir: Path) -> None:
    settings = load_settings(
        state_dir=demo_state_dir,
        kafka_brokers="",
        database_url="",
        redis_url="",
        llm_provider="offline",
        asr_backend="local",
        embed_backend="local",
        gpu_worker_url="",
    )
    out = io.StringIO()
    console = Console(file=out, width=120, force_terminal=False)
    result = run_demo(settings, DemoOptions(minutes=MINUTES, seed=3), console)
    text = out.getvalue()

    assert result.exit_code == 0, f"{result.failed_step}: {result.error}\n{text}"
    for n in range(1, 7):
        assert f"[{n}/6]" in text
    assert {"kafka", "postgres", "redis", "dataflow", "api"} <= set(result.started_pids)

    # the memory: one 30 s segment per 30 s of session, every level up to the hour
    assert result.start is not None and result.start.minute % 10 == 0
    expected = expected_windows(result.start, MINUTES * 60)
    assert expected[30] == MINUTES * 60 / 30
    assert result.segments == expected

    # the five questions (one per scene), answered offline, each grounded on episodic
    # segments inside the session's hour, with the rounds the agent made, and each right:
    # its short answer says what the question expects (Q3 from the note's text read in the
    # frames, Q5 from the speech heard as said)
    session_end = result.start + timedelta(minutes=MINUTES)
    assert len(result.answers) == 5
    wrong = [(v.question, v.answer, v.expect) for v in result.answers if not v.right]
    assert wrong == [], f"answers that do not say what was expected: {wrong}\n{text}"
    for view in result.answers:
        # the short answer first, then its evidence; never the agent's search log
        assert view.answer.strip() and " — " in view.answer, view.answer
        assert not view.answer.startswith(("From your memory", "Search 1")), view.answer
        # every demo scene speaks: previews lead with the words, not the colours
        assert not view.evidence[0].text.startswith("I was somewhere"), view.evidence[0].text
        assert view.provider == "offline"
        assert view.rounds
        assert view.evidence, view.question
        for e in view.evidence:  # every range overlaps the session
            assert e.start < e.end
            assert e.start < session_end and e.end > result.start
        assert view.question in text
    assert "[offline]" in text

    # afterwards nothing of ours runs: stack servers, dataflow and API are all gone
    alive = {name: pid for name, pid in result.started_pids.items() if _running(pid)}
    assert alive == {}
    assert not (demo_state_dir / "demo-api.pid").exists()
    assert str(demo_state_dir) in text  # it says where the data is
    last = text.rstrip().splitlines()[-1]  # and ends with where to browse the memory
    assert last.startswith(f"memory browser: {result.api_url}/ui/"), last
    # the windows' frames and audio are kept, one container object per window
    assert list((demo_state_dir / "blobs" / "media" / result.user_id).rglob("*.wmc"))
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(result.database_url, connect_timeout=2).close()


def _running(pid: int) -> bool:
    """The process exists and has not exited (a zombie only waits for its parent to reap
    it: PostgreSQL's postmaster is re-parented when pg_ctl exits)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"
