"""The importance and recall priors over a hand-built memory in PostgreSQL (real MiniLM):
each moves ranking the expected way, and the recall prior pays off on a synthetic "asked
again" workload: a wearer asks a specific question, the answer's evidence is recalled, and a
later vaguer question about the same thing finds that window among look-alikes."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from tests.fixtures.store import make_segment
from worldmm.memory.backfill import backfill_segment_embeddings
from worldmm.memory.recall_queue import RecallQueue
from worldmm.memory.retrieval.episodic import EpisodicOptions, search_episodic
from worldmm.store import users

# the episodic lanes' bundle: the offline roles over the real MiniLM, no visual encoder
pytestmark = [
    pytest.mark.integration,
    pytest.mark.deps(roles="rule_based_roles", embedder="minilm", encoder=None),
]

DAY = datetime(2025, 4, 7, 8, 0, tzinfo=UTC)
# Routine look-alikes: the same act, day after day, with one detail that tells them apart.
TOPICS = {
    "keys": ("I put my car keys in the bowl by the door", ["blue", "red", "green", "white"]),
    "pills": (
        "I took my vitamin pills with a glass of water",
        ["orange", "apple", "grape", "lime"],
    ),
    "bike": ("I locked my bike at the rack near the office", ["north", "south", "east", "west"]),
    "plant": ("I watered the plant on the kitchen shelf", ["fern", "cactus", "basil", "ivy"]),
}


def _memory(deps, user_id):
    """Every topic on four days (its detail differing), 30 s windows; ids by (topic, day)."""
    ids: dict[tuple[str, int], int] = {}
    with deps.db.transaction() as conn:
        users.ensure_user(conn, user_id)
        for k, (topic, (text, details)) in enumerate(TOPICS.items()):
            for day, detail in enumerate(details):
                start = DAY + timedelta(days=day, minutes=10 * k)
                ids[topic, day] = make_segment(
                    conn,
                    user_id,
                    start,
                    caption=f"{text}, the {detail} one.",
                    processing_status="complete",
                )
    backfill_segment_embeddings(deps.db, deps.embedder, user_id=user_id, batch_size=8)
    return ids


def _options(deps, **prior) -> EpisodicOptions:
    base = EpisodicOptions.from_settings(deps.settings)
    flat = replace(base.prior, default_weight=0.0, weight=0.0)  # no time pull: priors alone
    return replace(base, prior=replace(flat, **prior), drill_parents=0, keep=3)


def _top(deps, user_id, question, options, as_of) -> list[int]:
    result = asyncio.run(search_episodic(deps, user_id, question, as_of, options=options))
    return [h.segment_id for h in result.hits]


def test_importance_lifts_the_important_look_alike(deps, user_id) -> None:
    ids = _memory(deps, user_id)
    as_of = DAY + timedelta(days=10)
    target = ids["keys", 2]
    with deps.db.transaction() as conn:
        conn.execute(
            "UPDATE segments SET importance = CASE WHEN id = %s THEN 0.95 ELSE 0.1 END"
            " WHERE user_id = %s",
            (target, user_id),
        )
    question = "Where did I put my car keys?"
    off = _top(deps, user_id, question, _options(deps, importance_weight=0.0), as_of)
    on = _top(deps, user_id, question, _options(deps, importance_weight=2.0), as_of)
    assert off[0] != target  # without the prior another look-alike leads
    assert on[0] == target
    assert set(on) <= {ids["keys", d] for d in range(4)}  # no other topic is pulled in


def test_recall_prior_on_an_asked_again_workload(deps, user_id) -> None:
    ids = _memory(deps, user_id)
    as_of = DAY + timedelta(days=10)
    queue = RecallQueue(deps.db, flush_s=1.0, max_pending=1000)
    # First, specific questions (the detail names the window); the answer's evidence (its top
    # window, the one it cites) is recalled once per answer, written in one batch.
    asked = {"keys": 1, "pills": 3, "bike": 0, "plant": 2}
    for topic, day in asked.items():
        text, details = TOPICS[topic]
        specific = f"{text.replace('I ', 'Did I ', 1)}, the {details[day]} one?"
        top = _top(deps, user_id, specific, _options(deps), as_of)
        assert top[0] == ids[topic, day]
        queue.add(user_id, [top[0]])
    assert asyncio.run(queue.flush()) == len(asked)

    # Then the same things asked again, vaguely: only the recall history tells them apart.
    vague = {
        "keys": "Where are my car keys?",
        "pills": "Which vitamin pills did I take?",
        "bike": "Where did I lock my bike?",
        "plant": "Which plant did I water?",
    }
    hits = {}
    for weight in (0.0, deps.settings.episodic_recall_weight):
        options = _options(deps, recall_weight=weight)
        tops = {t: _top(deps, user_id, q, options, as_of)[0] for t, q in vague.items()}
        hits[weight] = sum(tops[t] == ids[t, asked[t]] for t in vague)
    assert hits[deps.settings.episodic_recall_weight] == len(vague)  # every one found again
    assert hits[0.0] <= 2  # without it, at best chance among the look-alikes
