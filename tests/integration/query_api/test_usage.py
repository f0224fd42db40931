"""Usage per user against the real store: what the provider reported is what is recorded, the
usage route adds it up and prices it, and a daily budget spent mid-session degrades the
windows after it (and says so)."""

from __future__ import annotations

import asyncio
import hashlib
import io
import itertools
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from PIL import Image
from pydantic import SecretStr

from fakes.openai_server import FakeOpenAI
from fakes.protocol import ProtocolResponder, rough_usage
from worldmm import metrics
from worldmm.blobs import LocalBlobStore
from worldmm.deps import Deps
from worldmm.llm.prices import load_prices
from worldmm.llm.roles import build_roles
from worldmm.llm.usage_ledger import UsageLedger, UsageRecord, for_user
from worldmm.memory.window_inputs import CaptureRef
from worldmm.memory.window_status import process_window
from worldmm.memory.windows import BaseWindow, Item, dt_to_ms
from worldmm.settings import Settings
from worldmm.store.db import Database

pytestmark = pytest.mark.integration

T10 = datetime(2026, 5, 4, 9, 10, tzinfo=UTC)


def counted_usage():
    """Usage that differs from call to call (cached and reasoning tokens included)."""
    n = itertools.count(1)

    def usage(body, content):
        k = next(n)
        base = rough_usage(body, content)
        prompt = base["prompt_tokens"] + 10 * k
        details = {"cached_tokens": prompt // 3}
        thought = {"reasoning_tokens": base["completion_tokens"] // 2 + k}
        return {
            **base,
            "completion_tokens": base["completion_tokens"] + k,
            "prompt_tokens": prompt,
            "prompt_tokens_details": details,
            "completion_tokens_details": thought,
        }

    return usage


def remote(api_settings: Settings, fake: FakeOpenAI, **update) -> Settings:
    return api_settings.model_copy(
        update={
            "llm_provider": "compatible",
            "llm_base_url": fake.base_url,
            "openai_api_key": SecretStr("test-key"),
            "llm_max_retries": 0,
            "llm_batch_poll_s": 0.05,
            "llm_batch_flush_s": 0.05,
            **update,
        }
    )


def _db_rows(db: Database, users: list[str]) -> list[tuple]:
    with db.connection() as conn:  # one wearer per statement (a router query on Citus)
        return [
            row
            for user in sorted(users)
            for row in conn.execute(
                "SELECT user_id, role, dispatch, sum(calls), sum(prompt_tokens),"
                " sum(completion_tokens), sum(cached_tokens), sum(reasoning_tokens)"
                " FROM llm_usage WHERE user_id = %s GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
                (user,),
            ).fetchall()
        ]


def test_recorded_usage_equals_what_the_provider_reported(
    api_settings, api_deps, client, make_user
) -> None:
    alice, bob = make_user(), make_user()
    ledger = UsageLedger(api_deps.db, flush_s=3600)
    with FakeOpenAI(ProtocolResponder(usage=counted_usage())) as fake:
        direct = build_roles(remote(api_settings, fake), None, ledger)
        batch = build_roles(remote(api_settings, fake, llm_dispatch="batch"), None, ledger)

        async def calls() -> None:
            with for_user(alice.user_id):
                await direct.ner("Alice met Bob in Paris.")
                await direct.agent_step("Where did I meet Bob?", [])
                await batch.ner("Carol rode to Berlin with Dan.")  # a Batch API line
            with for_user(bob.user_id):
                await direct.episodic_triples("Bob saw Erin.", ["Bob", "Erin"])

        asyncio.run(calls())
        reported = list(fake.reported_usage)
    ledger.flush()

    assert len(reported) == 4
    # each call's reported usage, in call order: alice's three, then bob's one
    by_call = [
        (
            r["prompt_tokens"],
            r["completion_tokens"],
            r["prompt_tokens_details"]["cached_tokens"],
            r["completion_tokens_details"]["reasoning_tokens"],
        )
        for r in reported
    ]
    calls = [
        (alice.user_id, "ner", "direct"),
        (alice.user_id, "reasoning_agent", "direct"),
        (alice.user_id, "ner", "batch"),
        (bob.user_id, "episodic_triples", "direct"),
    ]
    rows = _db_rows(api_deps.db, [alice.user_id, bob.user_id])
    assert {(u, role, d): (n, *t) for u, role, d, n, *t in rows} == {
        key: (1, *tokens) for key, tokens in zip(calls, by_call, strict=True)
    }

    # the route adds the same numbers up and prices them with the table
    r = client.get(f"/v1/users/{alice.user_id}/usage", headers=alice.headers)
    assert r.status_code == 200, r.text
    got = r.json()
    mine = by_call[:3]
    assert got["total"]["calls"] == 3
    assert got["total"]["prompt_tokens"] == sum(p for p, _, _, _ in mine)
    assert got["total"]["completion_tokens"] == sum(c for _, c, _, _ in mine)
    assert got["total"]["cached_tokens"] == sum(k for _, _, k, _ in mine)
    # reasoning tokens apart: part of the completion, reported and priced with it
    assert got["total"]["reasoning_tokens"] == sum(r for _, _, _, r in mine) > 0
    prices = load_prices()
    batch_row = next(x for x in got["by_role"] if x["dispatch"] == "batch")
    p, c, k, _ = by_call[2]
    assert batch_row["model"] == "gpt-5-mini"
    assert batch_row["cost"] == pytest.approx(prices.cost("gpt-5-mini", p, k, c, "batch"), abs=1e-9)
    assert batch_row["cost"] == pytest.approx(prices.cost("gpt-5-mini", p, k, c) / 2, abs=1e-9)
    assert [d["calls"] for d in got["by_day"]] == [3]
    assert got["prices"]["as_of"] == prices.as_of.isoformat() and got["budget"] is None


def test_usage_route_checks_the_user_and_the_range(client, make_user) -> None:
    alice, bob = make_user(), make_user()
    path = f"/v1/users/{alice.user_id}/usage"
    assert client.get(path).status_code == 401
    assert client.get(path, headers=bob.headers).status_code == 403
    empty = client.get(path, headers=alice.headers).json()
    assert empty["total"]["calls"] == 0 and empty["total"]["cost"] == 0
    bad = [
        {"start": "2026-05-02T00:00:00Z", "end": "2026-05-01T00:00:00Z"},
        {"start": "2024-01-01T00:00:00Z", "end": "2026-01-01T00:00:00Z"},
        {"start": "2026-05-02T00:00:00"},  # no zone
    ]
    for params in bad:
        r = client.get(path, headers=alice.headers, params=params)
        assert r.status_code == 422, (params, r.text)
        assert r.json()["detail"]


def test_buffered_usage_survives_an_outage_and_a_purged_users_is_dropped(
    api_settings, api_deps, make_user
) -> None:
    alice = make_user()
    gone = f"user-purged-{alice.user_id[-6:]}"  # never created (or purged meanwhile)
    down = Database(api_settings.database_url, max_size=1)
    down.close()
    ledger = UsageLedger(down, flush_s=3600)
    at = datetime.now(UTC)
    for user in (alice.user_id, gone, None):
        ledger.record(UsageRecord(at, user, "ner", "gpt-5-mini", "compatible", "direct", 9, 2, 1))
    assert ledger.flush() == 0  # the database is unreachable: kept for the next flush
    ledger.db = api_deps.db
    assert ledger.flush() == 3
    assert [r[0] for r in _db_rows(api_deps.db, [alice.user_id, gone])] == [alice.user_id]
    ledger.close()


# --- the daily budget -----------------------------------------------------------------------


class HashEmbedder:
    name, dim = "test-hash", 384

    def embed(self, texts):
        seeds = [int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little") for t in texts]
        rows = [np.random.default_rng(s).standard_normal(self.dim) for s in seeds]
        m = np.asarray(rows, dtype=np.float32).reshape(len(texts), self.dim)
        return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-9)


def _window(blobs: LocalBlobStore, user_id: str, start: datetime) -> BaseWindow:
    buf = io.BytesIO()
    Image.new("RGB", (32, 24), (200, 40, 40)).save(buf, format="JPEG")
    items = []
    for k in range(4):
        ts = dt_to_ms(start) + k * 5000
        key = f"frames/{user_id}/s1/{ts}-{k}.jpg"
        blobs.put(key, buf.getvalue())
        items.append(Item("frames", key, "s1", ts, ts, CaptureRef(key, seq=k)))
    return BaseWindow(user_id, dt_to_ms(start), tuple(items), False, "s1")


def test_a_budget_spent_mid_session_degrades_the_next_windows(
    api_settings, client, make_user, tmp_path
) -> None:
    alice = make_user()
    fixed = lambda body, content: {"prompt_tokens": 300, "completion_tokens": 50}  # noqa: E731
    responder = ProtocolResponder(captions=["Alice handed me a mug."] * 5, usage=fixed)
    degraded_before = metrics.WINDOWS_DEGRADED.labels("daily_token_budget")._value.get()
    with FakeOpenAI(responder) as fake:
        # every window captioned (still, silent ones would take the caption before them)
        budget = {"llm_user_daily_token_budget": 500, "ocr_frames": 1, "still_window_change": 0}
        settings = remote(api_settings, fake, **budget)
        db = Database(settings.database_url, max_size=2)
        ledger = UsageLedger(db, flush_s=3600, daily_budget=500)
        deps = Deps(
            settings=settings,
            db=db,
            roles=build_roles(settings, None, ledger),
            embedder=HashEmbedder(),
            encoder=None,
            blobs=LocalBlobStore(tmp_path / "blobs"),
            usage=ledger,
        )
        try:
            starts = [T10 + timedelta(seconds=30 * i) for i in range(3)]
            outcomes = [
                asyncio.run(process_window(deps, _window(deps.blobs, alice.user_id, s)))
                for s in starts
            ]
            assert ledger.used_today(alice.user_id) >= 500
        finally:
            deps.close()
    assert [o.status for o in outcomes] == ["complete"] * 3
    assert [o.counts["degraded"] for o in outcomes] == [0, 1, 1]
    assert responder.calls["caption"] == 1  # no vision call once the budget was spent
    assert metrics.WINDOWS_DEGRADED.labels("daily_token_budget")._value.get() == degraded_before + 2

    r = client.get(
        f"/v1/users/{alice.user_id}/segments",
        headers=alice.headers,
        params={"scale": 30, "from": T10.isoformat()},
    )
    segs = r.json()["items"]
    assert [s["degraded"] for s in segs] == [None, "daily_token_budget", "daily_token_budget"]
    assert segs[0]["caption"].startswith("Alice handed me a mug.")
    assert all("Alice handed me" not in s["caption"] for s in segs[1:])
    usage = client.get(
        f"/v1/users/{alice.user_id}/usage",
        headers=alice.headers,
        params={"start": T10.isoformat(), "end": (T10 + timedelta(minutes=2)).isoformat()},
    ).json()
    assert usage["degraded_windows"] == 2
