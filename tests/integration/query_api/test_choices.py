"""Multiple choice through the query route and `worldmm ask --choice`: the reply names the
letter and the evidence; bad choices are a 422 (or a CLI error) with a message."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from tests.fixtures.api import stack_env
from tests.fixtures.wearers import seed_segment
from worldmm.models import MAX_CHOICES
from worldmm.wire.schemas import MAX_CHOICE_CHARS, MAX_QUESTION_CHARS

pytestmark = pytest.mark.integration

BASE = datetime(2025, 4, 2, 9, 0, tzinfo=UTC)
QUESTION = "What did I drink with Omar?"


@pytest.fixture
def tea_user(api_deps, make_user):
    a = make_user()
    seg = seed_segment(
        api_deps, a.user_id, BASE, 'I heard: "I drank green tea with Omar in the kitchen".',
        [("I", "drank", "green tea"), ("Omar", "in", "kitchen")],
    )  # fmt: skip
    return a, seg


def test_choices_round_trip_with_the_letter_and_the_evidence(client, tea_user):
    a, seg = tea_user
    r = client.post(
        f"/v1/users/{a.user_id}/query",
        json={"question": QUESTION, "choices": ["coffee", "B. green tea", "water"]},
        headers=a.headers,
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["choice"] == {
        "letter": "B",
        "index": 1,
        "text": "green tea",
        "evidence_segment_ids": [seg],
        "guess": False,
    }
    assert body["answer"].startswith("B. green tea — you heard it at 09:00:00 on 2 Apr 2025")
    (evidence,) = [e for e in body["evidence"] if e["segment_id"] == seg]
    assert {"transcript", "score", "lanes", "context", "context_segment_id"} <= evidence.keys()

    free = client.post(
        f"/v1/users/{a.user_id}/query", json={"question": QUESTION}, headers=a.headers
    ).json()
    assert free["choice"] is None
    assert not free["answer"].startswith(("From your memory", "Search 1"))


def test_the_longest_question_with_eight_longest_choices_is_answered(client, tea_user):
    """The agent searches the question with its options: at every length the API accepts
    (a question of 2,000 characters, eight choices of 500, thousands of distinct words) that
    is an answer, not a server error."""
    a, _ = tea_user
    words = iter(f"w{i}x" for i in range(100_000))

    def text(chars: int) -> str:
        out = ""
        while len(out) + 8 < chars:
            out += next(words) + " "
        return out.strip()

    question = (QUESTION + " " + text(MAX_QUESTION_CHARS))[:MAX_QUESTION_CHARS]
    choices = [text(MAX_CHOICE_CHARS) for _ in range(MAX_CHOICES)]
    r = client.post(
        f"/v1/users/{a.user_id}/query",
        json={"question": question, "choices": choices},
        headers=a.headers,
    )
    assert r.status_code == 200, r.text
    assert r.json()["choice"]["letter"] in "ABCDEFGH"


@pytest.mark.parametrize(
    ("choices", "message"),
    [
        ([], "at least 2"),
        (["green tea"], "at least 2"),
        ([f"option {i}" for i in range(9)], "at most 8"),
        (["coffee", "   "], "choice B is blank"),
        (["coffee", ""], "at least 1 character"),
    ],
)
def test_bad_choices_are_422_with_a_message(client, make_user, choices, message):
    a = make_user()
    r = client.post(
        f"/v1/users/{a.user_id}/query",
        json={"question": QUESTION, "choices": choices},
        headers=a.headers,
    )
    assert r.status_code == 422, r.text
    assert message in json.dumps(r.json())


def test_ask_command_passes_choices(api_settings, tea_user, monkeypatch):
    from typer.testing import CliRunner

    from apps.cli import app

    a, seg = tea_user
    stack_env(monkeypatch, api_settings)
    runner = CliRunner()
    r = runner.invoke(
        app,
        ["ask", "-u", a.user_id, "--choice", "coffee", "--choice", "green tea", "--json", QUESTION],
    )
    assert r.exit_code == 0, r.output
    body = json.loads(r.stdout)
    assert (body["choice"]["letter"], body["choice"]["text"]) == ("B", "green tea")
    assert body["choice"]["evidence_segment_ids"] == [seg]

    r = runner.invoke(app, ["ask", "-u", a.user_id, "--choice", "coffee", QUESTION])
    assert r.exit_code != 0 and "at least 2" in r.stderr
