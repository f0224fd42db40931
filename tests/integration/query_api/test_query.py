"""Queries through the API: evidence with time ranges, as_of, notes, forgetting, failures."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient

from query_api.app import create_app
from tests.fixtures.api import ADMIN
from tests.fixtures.wearers import seed_segment
from worldmm.providers.errors import ModelCallError

pytestmark = pytest.mark.integration

BASE = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


def iso(ts: datetime) -> str:
    return ts.isoformat()


def evidence_ids(body: dict) -> set[int]:
    return {e["segment_id"] for e in body["evidence"]}


def round_segment_ids(body: dict) -> set[int]:
    return {h["segment_id"] for r in body["rounds"] for h in r["results"] if "segment_id" in h}


def test_as_of_hides_later_memory(client, api_deps, make_user):
    a = make_user()
    early = seed_segment(
        api_deps, a.user_id, BASE, "I met Anna at the Blue Door bakery and we bought croissants.",
        [("I", "met", "Anna"), ("Anna", "at", "Blue Door bakery"), ("I", "bought", "croissants")],
    )  # fmt: skip
    later = BASE + timedelta(hours=2)
    late = seed_segment(
        api_deps, a.user_id, later, "Anna gave me a red umbrella at the Central station.",
        [("Anna", "gave me", "red umbrella"), ("Anna", "at", "Central station")],
    )  # fmt: skip
    url = f"/v1/users/{a.user_id}/query"
    question = {"question": "Where did I meet Anna?"}

    # without as_of the later memory is reachable, so hiding it below means something
    now = client.post(url, json=question, headers=a.headers)
    assert now.status_code == 200, now.text
    assert {early, late} <= evidence_ids(now.json())

    as_of = BASE + timedelta(hours=1)
    then = client.post(url, json={**question, "as_of": iso(as_of)}, headers=a.headers)
    assert then.status_code == 200, then.text
    body = then.json()
    assert early in evidence_ids(body)
    assert late not in evidence_ids(body) | round_segment_ids(body)
    assert "umbrella" not in then.text
    assert body["provider"] == "offline" and body["as_of"] is not None
    seg = next(e for e in body["evidence"] if e["segment_id"] == early)
    assert (seg["start"], seg["end"], seg["scale"]) == (
        "2025-03-01T09:00:00Z",
        "2025-03-01T09:00:30Z",
        30,
    )

    listed = client.get(
        f"/v1/users/{a.user_id}/segments", params={"as_of": iso(as_of)}, headers=a.headers
    )
    assert [s["id"] for s in listed.json()["items"]] == [early]
    everything = client.get(f"/v1/users/{a.user_id}/segments", headers=a.headers)
    assert [s["id"] for s in everything.json()["items"]] == [early, late]


def test_remember_then_query_finds_it_and_forget_removes_it(client, make_user):
    a = make_user()
    at = BASE + timedelta(days=1)
    note = "My bike lock code is 4711. My sister Marta lives in Porto."
    r = client.post(
        f"/v1/users/{a.user_id}/memories", json={"text": note, "at": iso(at)}, headers=a.headers
    )
    assert r.status_code == 201, r.text
    made = r.json()
    assert made["end"] == "2025-03-02T09:00:00Z"
    assert made["episodic_triples"], made  # the note became graph memory, not only text
    assert made["semantic_triples"], made
    facts = client.get(f"/v1/users/{a.user_id}/semantic", headers=a.headers).json()["items"]
    assert {f["origin"] for f in facts} == {"remembered"}
    assert any("Porto" in f["object"] for f in facts), facts

    seg = client.get(f"/v1/users/{a.user_id}/segments/{made['segment_id']}", headers=a.headers)
    assert seg.status_code == 200 and seg.json()["note"] is True
    assert seg.json()["caption"] == note

    url = f"/v1/users/{a.user_id}/query"
    found = client.post(url, json={"question": "What is my bike lock code?"}, headers=a.headers)
    assert found.status_code == 200, found.text
    assert made["segment_id"] in evidence_ids(found.json())
    assert "4711" in found.json()["answer"]
    before = client.post(
        url,
        json={"question": "What is my bike lock code?", "as_of": iso(at - timedelta(minutes=1))},
        headers=a.headers,
    )
    assert made["segment_id"] not in evidence_ids(before.json())

    gone = client.delete(
        f"/v1/users/{a.user_id}/memories",
        params={"from": iso(at - timedelta(minutes=5)), "to": iso(at + timedelta(minutes=5))},
        headers=a.headers,
    )
    assert gone.status_code == 200, gone.text
    assert gone.json()["rows_deleted"]["segments"] == 1
    after = client.post(url, json={"question": "What is my bike lock code?"}, headers=a.headers)
    assert after.status_code == 200
    assert "4711" not in after.text
    assert client.get(f"/v1/users/{a.user_id}/segments", headers=a.headers).json()["items"] == []
    facts = client.get(
        f"/v1/users/{a.user_id}/semantic", params={"history": True}, headers=a.headers
    )
    assert "4711" not in facts.text and facts.json()["items"] == []
    assert (
        client.get(
            f"/v1/users/{a.user_id}/segments/{made['segment_id']}", headers=a.headers
        ).status_code
        == 404
    )


class FlakyRoles:
    """The real (offline) roles, except that the next ``fail`` calls of ``respond`` raise."""

    def __init__(self, inner, fail: int) -> None:
        self._inner = inner
        self.fail = fail
        self.label = inner.label
        self.versions = inner.versions

    def __getattr__(self, name):
        return getattr(self._inner, name)

    async def respond(self, question, context, choices, *, asked=None, notes=None):
        if self.fail > 0:
            self.fail -= 1
            raise ModelCallError(
                "upstream returned 503 after 3 retries", role="response", status=503
            )
        return await self._inner.respond(question, context, choices, asked=asked, notes=notes)


def test_failing_model_is_502_and_the_service_stays_up(api_settings, api_deps, make_user):
    a = make_user()
    roles = FlakyRoles(api_deps.roles, fail=1)
    deps = dataclasses.replace(api_deps, roles=roles)
    with TestClient(create_app(api_settings, deps=deps)) as flaky:
        url = f"/v1/users/{a.user_id}/query"
        r = flaky.post(url, json={"question": "What did I do?"}, headers=a.headers)
        assert r.status_code == 502
        assert "model call failed" in r.json()["detail"] and "503" in r.json()["detail"]
        assert roles.fail == 0
        r = flaky.post(url, json={"question": "What did I do?"}, headers=a.headers)
        assert r.status_code == 200, r.text
        assert r.json()["answer"]
        metrics = flaky.get("/metrics", headers=ADMIN).text
        assert 'worldmm_api_model_errors_total{route="/v1/users/{user_id}/query"}' in metrics


def test_choices_and_max_rounds(client, api_deps, make_user):
    a = make_user()
    seed_segment(
        api_deps, a.user_id, BASE, "I drank green tea with Omar in the kitchen.",
        [("I", "drank", "green tea"), ("Omar", "in", "kitchen")],
    )  # fmt: skip
    r = client.post(
        f"/v1/users/{a.user_id}/query",
        json={
            "question": "What did I drink with Omar?",
            "choices": ["coffee", "green tea"],
            "max_rounds": 1,
        },
        headers=a.headers,
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["answer"].startswith("B. green tea")
    # max_rounds bounds the agent's own rounds; the multiple-choice answerer then looks once
    # per option (issue 23), each such look kept as a round with its note
    option_notes = ["looked up for option A", "looked up for option B"]
    agent_rounds = [r for r in body["rounds"] if r.get("note") not in option_notes]
    assert len(agent_rounds) <= 1
    assert [r["note"] for r in body["rounds"] if r.get("note") in option_notes] == option_notes
