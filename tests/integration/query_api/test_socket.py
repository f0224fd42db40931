"""The service over a real uvicorn socket (what `worldmm serve` runs)."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest

from tests.fixtures.api import ADMIN, stack_env

pytestmark = pytest.mark.integration


def test_query_over_a_real_socket(served):
    with httpx.Client(base_url=served.url, timeout=60) as http:
        assert http.get("/healthz").json() == {"status": "ok"}
        assert http.get("/readyz").status_code == 200
        user = f"socket-{uuid.uuid4().hex[:10]}"
        made = http.post("/v1/users", json={"user_id": user}, headers=ADMIN)
        assert made.status_code == 201, made.text
        key = {"Authorization": f"Bearer {made.json()['api_key']}"}
        note = http.post(
            f"/v1/users/{user}/memories",
            json={"text": "I left my passport in the top drawer of the desk."},
            headers=key,
        )
        assert note.status_code == 201, note.text
        r = http.post(
            f"/v1/users/{user}/query", json={"question": "Where is my passport?"}, headers=key
        )
        assert r.status_code == 200, r.text
        assert r.headers["content-type"] == "application/json"
        assert note.json()["segment_id"] in {e["segment_id"] for e in r.json()["evidence"]}
        assert http.post(f"/v1/users/{user}/query", json={"question": "x"}).status_code == 401
        assert http.delete(f"/v1/users/{user}", headers=ADMIN).status_code == 200


def test_ask_command_over_the_api_and_in_process(served, api_settings, monkeypatch):
    from typer.testing import CliRunner

    from apps.cli import app

    with httpx.Client(base_url=served.url, timeout=60) as http:
        user = f"cli-{uuid.uuid4().hex[:10]}"
        key = http.post("/v1/users", json={"user_id": user}, headers=ADMIN).json()["api_key"]
        made = http.post(
            f"/v1/users/{user}/memories",
            json={
                "text": "The spare house key is under the green flower pot.",
                "at": "2025-06-01T12:00:00+00:00",
            },
            headers={"Authorization": f"Bearer {key}"},
        )
        assert made.status_code == 201, made.text
    monkeypatch.setenv("COLUMNS", "240")  # rich wraps to the terminal width
    runner = CliRunner()
    question = "Where is the spare house key?"

    r = runner.invoke(
        app, ["ask", "--user", user, "--api", served.url, "--key", key, "--json", question]
    )
    assert r.exit_code == 0, r.output
    body = json.loads(r.stdout)
    assert made.json()["segment_id"] in {e["segment_id"] for e in body["evidence"]}

    r = runner.invoke(app, ["ask", "-u", user, "--api", served.url, "--key", key, question])
    assert r.exit_code == 0, r.output
    assert "evidence" in r.stdout and "2025-06-01T12:00:00Z" in r.stdout
    assert "via the API" in r.stdout

    r = runner.invoke(app, ["ask", "-u", user, "--api", served.url, "--key", "wrong", question])
    assert r.exit_code == 1 and "401" in r.stderr

    stack_env(monkeypatch, api_settings)
    r = runner.invoke(
        app, ["ask", "-u", user, "--as-of", "2025-06-01T11:00:00+00:00", "--json", question]
    )
    assert r.exit_code == 0, r.output
    early = json.loads(r.stdout)
    assert early["evidence"] == [] or made.json()["segment_id"] not in {
        e["segment_id"] for e in early["evidence"]
    }
    r = runner.invoke(app, ["ask", "-u", user, question])
    assert r.exit_code == 0, r.output
    assert "in-process" in r.stdout and "green flower pot" in r.stdout
