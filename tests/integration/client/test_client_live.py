"""apps.client against the real API on the embedded stack: every call returns the API's
own models, paging follows the cursors, and keys are scoped (a bad key and another user's
key are typed errors)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from apps.client import AsyncWorldMMClient, AuthError, NotFoundError, WorldMMClient
from tests.fixtures.wearers import DAY, seed_wearer
from worldmm.wire.schemas import QueryResponse, SegmentOut, SemanticList

pytestmark = pytest.mark.integration


def test_sync_client_reads_asks_and_forgets(served):
    alice = seed_wearer(served.deps, "cl-alice")
    day = {"start": DAY, "end": DAY + timedelta(hours=1)}
    with WorldMMClient(served.url, alice.key) as mm:
        assert mm.whoami().user_id == alice.user_id
        assert mm.health().status == "ok"
        pages = [s.id for s in mm.iter_segments(**day, scale=30, limit=3)]  # two pages
        assert pages == alice.segments
        one = mm.segment(alice.parent)
        assert isinstance(one, SegmentOut) and one.scale == 180
        frames = mm.frames(**day)
        assert [f.key for f in frames.items] == [alice.frame_key]
        assert mm.frame(frames.items[0].url)[:2] == b"\xff\xd8"  # a JPEG, by its URL
        assert mm.frame(alice.frame_key)[:2] == b"\xff\xd8"  # and by its key
        found = mm.search("episodic", "basil plant")
        assert alice.segments[2] in {h["segment_id"] for h in found.results}
        # the other two memories answer too (typed, even when they find nothing here)
        assert mm.search("semantic", "car keys", as_of=DAY + timedelta(days=1)).memory_type == (
            "semantic"
        )
        seen = mm.search("visual", "2026-11-20T10:00:00Z to 2026-11-20T10:01:00Z")
        assert [h["key"] for h in seen.results] == [alice.frame_key]  # frames by time range
        assert mm.frame(seen.results[0]["url"])[:2] == b"\xff\xd8"
        reply = mm.query("Where did I put my car keys?")
        assert isinstance(reply, QueryResponse)
        assert reply.timezone == "UTC" and reply.asked_at is not None  # asked live, no as_of
        assert mm.profile().timezone == "UTC"
        assert mm.update_profile(timezone="Europe/Paris").timezone == "Europe/Paris"
        assert mm.profile().timezone == "Europe/Paris"
        assert mm.query("Where did I put my car keys?").timezone == "Europe/Paris"
        assert alice.segments[0] in {e.segment_id for e in reply.evidence}
        gone = mm.forget(DAY, DAY + timedelta(seconds=30))
        assert gone.rows_deleted["segments"] >= 1
        with pytest.raises(NotFoundError):
            mm.segment(alice.segments[0])


async def test_async_client_and_key_scoping(served):
    alice = seed_wearer(served.deps, "cl-owner")
    bob = seed_wearer(served.deps, "cl-other")
    async with AsyncWorldMMClient(served.url, bob.key, alice.user_id) as wrong:
        with pytest.raises(AuthError) as err:
            await wrong.segments()
        assert err.value.status == 403 and "another user" in err.value.detail
    async with AsyncWorldMMClient(served.url, "wmm_not-a-key") as bad:
        with pytest.raises(AuthError) as err:
            await bad.segments()
        assert err.value.status == 401
    async with AsyncWorldMMClient(served.url, bob.key) as mm:
        ids = [s.id async for s in mm.iter_segments(scale=30)]
        assert ids == bob.segments
        note = await mm.remember("The spare key is under the green flower pot.")
        assert ["spare key", "is under", "green flower"] in note.episodic_triples
        assert note.segment_id in {s.id async for s in mm.iter_segments(scale=30)}
        facts = await mm.semantic(history=True)
        assert isinstance(facts, SemanticList)
