"""Settings validation and the docs generated from them."""

from __future__ import annotations

import pytest

from worldmm import config_docs
from worldmm.settings import SettingsError, load_settings, parse_scale_map


def test_defaults_load_and_are_offline():
    s = load_settings()
    assert s.llm_provider == "offline"
    assert s.episodic_top_k_map() == {30: 10, 180: 5, 600: 5, 3600: 3}


def test_invalid_value_names_the_variable(monkeypatch):
    monkeypatch.setenv("WORLDMM_LLM_CONCURRENCY", "-3")
    with pytest.raises(SettingsError, match="WORLDMM_LLM_CONCURRENCY"):
        load_settings()


def test_invalid_scale_map_is_rejected(monkeypatch):
    monkeypatch.setenv("WORLDMM_EPISODIC_TOP_K", "30:ten")
    with pytest.raises(SettingsError, match="WORLDMM_EPISODIC_TOP_K"):
        load_settings()
    with pytest.raises(ValueError):
        parse_scale_map("30:0")


def test_state_under_private_home_moves_postgres_to_tmp(tmp_path):
    s = load_settings(state_dir="/root/some/checkout/.worldmm")
    assert not str(s.postgres_data_parent).startswith("/root")
    assert load_settings(state_dir=tmp_path).postgres_data_parent == tmp_path.resolve()


def test_readme_table_and_env_example_match_settings():
    readme = (config_docs.ROOT / "README.md").read_text()
    assert config_docs.readme_with_table(readme) == readme, (
        "README configuration table is stale: run `python -m worldmm.config_docs`"
    )
    env = (config_docs.ROOT / ".env.example").read_text()
    assert env == config_docs.env_example(), ".env.example is stale: run the same command"
