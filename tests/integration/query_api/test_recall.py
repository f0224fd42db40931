"""Memories that carry weight and grow stronger when recalled, through the API: importance
served with segments, recall counts raised once per answer (batched, never blocking the
answer), duplicate notes merged, forgetting resetting."""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from tests.fixtures.api import ApiUser
from tests.fixtures.wearers import seed_wearer
from worldmm.memory.recall_queue import answer_evidence

# the API of this module's own (the served fixture) writes what answers recalled at once
pytestmark = [pytest.mark.integration, pytest.mark.served_settings(recall_flush_s=0.05)]

AT = datetime(2025, 6, 2, 9, 0, tzinfo=UTC)
QUESTIONS = [
    "Where did I put my car keys?",
    "Who called about the dentist appointment?",
    "What did I water on the window sill?",
    "What did I read at the station?",
]


def recall_counts(deps, user_id: str, table: str = "segments") -> dict[int, int]:
    with deps.db.connection() as conn:
        rows = conn.execute(
            f"SELECT id, recall_count FROM {table} WHERE user_id = %s", (user_id,)
        ).fetchall()
    return {int(i): int(n) for i, n in rows}


def wait_for(condition, timeout_s: float = 20.0) -> None:
    """Poll a condition on the database (the flush runs on the server's own clock)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the recalls were not written in time"
        time.sleep(0.02)


def test_recalls_count_once_per_answer_under_concurrent_questions_without_blocking(served):
    url, app, deps = served.url, served.app, served.deps
    w = seed_wearer(deps, "recall")
    headers = {"Authorization": f"Bearer {w.key}"}
    asks = QUESTIONS * 3

    # Every segment row of the wearer is locked by another transaction: a recall write would
    # wait for it, so answers that come back now did not wait for their bookkeeping.
    with deps.db.transaction() as blocker:
        blocker.execute("SELECT id FROM segments WHERE user_id = %s FOR UPDATE", (w.user_id,))

        def ask(q: str) -> dict:
            with httpx.Client(base_url=url, timeout=60) as c:
                r = c.post(f"/v1/users/{w.user_id}/query", json={"question": q}, headers=headers)
            assert r.status_code == 200, r.text
            return r.json()

        with ThreadPoolExecutor(max_workers=6) as pool:
            replies = list(pool.map(ask, asks))
        assert set(recall_counts(deps, w.user_id).values()) == {0}  # nothing written yet
    expected: Counter[int] = Counter()
    expected_facts: Counter[int] = Counter()
    for body in replies:
        cited = [c["segment_id"] for c in body["cited"]]
        segs = cited or [e["segment_id"] for e in body["evidence"]]
        expected.update(set(segs))
        expected_facts.update({t["triple_id"] for t in body["triples"]})
    assert sum(expected.values()) >= len(asks)  # every answer recalled something

    wait_for(lambda: sum(recall_counts(deps, w.user_id).values()) >= sum(expected.values()))
    wait_for(lambda: app.state.recalls.pending() == 0)
    counts = recall_counts(deps, w.user_id)
    assert {i: n for i, n in counts.items() if n} == dict(expected)  # once per answer, exactly
    facts = recall_counts(deps, w.user_id, "triples")
    assert {i: n for i, n in facts.items() if n} == dict(expected_facts)

    with httpx.Client(base_url=url, timeout=30) as c:
        seg = c.get(f"/v1/users/{w.user_id}/segments/{w.segments[0]}", headers=headers).json()
    assert seg["recall_count"] == expected[w.segments[0]]
    if seg["recall_count"]:
        assert datetime.fromisoformat(seg["last_recalled_at"]) > AT


def test_answer_evidence_prefers_cited_windows() -> None:
    from worldmm.agent.result import AgentResult
    from worldmm.memory.retrieval.results import SegmentHit

    ev = [
        SegmentHit(
            segment_id=i, scale=30, start=AT, end=AT + timedelta(seconds=30), text="x", score=1.0
        )
        for i in (1, 2, 3)
    ]
    base = dict(answer="a", rounds=[], evidence=ev, triples=[], frames=[], label="t")
    cited = AgentResult(**base, stopped="answer", cited_segment_ids=[2])
    assert answer_evidence(cited) == ([2], [])
    assert answer_evidence(AgentResult(**base, stopped="max_rounds")) == ([1, 2, 3], [])
    assert answer_evidence(AgentResult(**base, stopped="model_error")) == ([], [])


def remember(client, user: ApiUser, text: str, at: datetime):
    r = client.post(
        f"/v1/users/{user.user_id}/memories",
        json={"text": text, "at": at.isoformat()},
        headers=user.headers,
    )
    assert r.status_code == 201, r.text
    return r.json()


def notes_of(client, user: ApiUser) -> list[dict]:
    items = client.get(f"/v1/users/{user.user_id}/segments", headers=user.headers).json()["items"]
    return [s for s in items if s["note"]]


def test_a_duplicate_note_merges_a_different_one_does_not(client, make_user, api_settings):
    u = make_user()
    strength = api_settings.note_recall_strength
    text = "I parked the car on level two of the Lindenhof garage."
    first = remember(client, u, text, AT)
    assert first["merged_into"] is None
    (note,) = notes_of(client, u)
    assert (note["importance"], note["importance_source"]) == (1.0, "note")
    assert note["recall_count"] == strength  # the wearer's own note: a strong recall

    again = remember(client, u, text, AT + timedelta(hours=3))  # said again, later
    assert again["merged_into"] == first["segment_id"] == again["segment_id"]
    assert again["episodic_triples"] == first["episodic_triples"]
    other = remember(client, u, "My locker code at the gym is 4711.", AT + timedelta(hours=4))
    assert other["merged_into"] is None and other["segment_id"] != first["segment_id"]
    notes = {n["id"]: n for n in notes_of(client, u)}
    assert set(notes) == {first["segment_id"], other["segment_id"]}
    assert notes[first["segment_id"]]["recall_count"] == 2 * strength

    # the same note at the same time is a retry: the same memory, neither merged nor recalled
    retry = remember(client, u, text, AT)
    assert retry["segment_id"] == first["segment_id"] and retry["merged_into"] is None
    assert {n["id"]: n for n in notes_of(client, u)}[first["segment_id"]]["recall_count"] == (
        2 * strength
    )

    # beyond the span it is a new note
    far = remember(client, u, text, AT + timedelta(hours=api_settings.note_merge_span_h + 1))
    assert far["merged_into"] is None and far["segment_id"] != first["segment_id"]


def test_copies_of_a_note_sent_at_once_store_one_note(client, make_user):
    u = make_user()
    text = "The spare house key is under the green flower pot."

    def send(k: int) -> dict:
        return remember(client, u, text, AT + timedelta(minutes=k))

    with ThreadPoolExecutor(max_workers=3) as pool:
        replies = list(pool.map(send, range(3)))
    (note,) = notes_of(client, u)
    assert sorted(r["merged_into"] is None for r in replies) == [False, False, True]
    assert {r["segment_id"] for r in replies} == {note["id"]}


def test_forgetting_resets_what_was_recalled(client, make_user, api_settings):
    u = make_user()
    text = "My passport is in the top drawer of the desk."
    first = remember(client, u, text, AT)
    remember(client, u, text, AT + timedelta(minutes=30))  # recalled again: merged
    gone = client.delete(
        f"/v1/users/{u.user_id}/memories",
        params={
            "from": (AT - timedelta(hours=1)).isoformat(),
            "to": (AT + timedelta(hours=1)).isoformat(),
        },
        headers=u.headers,
    )
    assert gone.status_code == 200, gone.text
    anew = remember(client, u, text, AT + timedelta(hours=2))
    assert anew["merged_into"] is None and anew["segment_id"] != first["segment_id"]
    (note,) = notes_of(client, u)
    assert note["recall_count"] == api_settings.note_recall_strength  # counted from zero again
