"""`worldmm db migrate` against a fresh database: applies, then reports up to date."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from apps.cli import app

pytestmark = pytest.mark.integration


def test_db_migrate_command(fresh_database_url, monkeypatch, tmp_path) -> None:
    url = fresh_database_url()
    monkeypatch.setenv("WORLDMM_DATABASE_URL", url)
    monkeypatch.setenv("WORLDMM_STATE_DIR", str(tmp_path))
    runner = CliRunner()
    first = runner.invoke(app, ["db", "migrate"])
    assert first.exit_code == 0, first.output
    assert "applied migrations: 0001, 0002" in first.output
    second = runner.invoke(app, ["db", "migrate"])
    assert second.exit_code == 0 and "up to date" in second.output
    monkeypatch.setenv("WORLDMM_TEXT_EMBED_DIM", "768")
    third = runner.invoke(app, ["db", "migrate"])
    assert third.exit_code == 1
