"""Settings validation and the docs generated from them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from worldmm import config_docs
from worldmm import settings as settings_module
from worldmm.settings import (
    Settings,
    SettingsError,
    load_settings,
    parse_lane_weights,
    parse_scale_map,
)


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


def test_an_omitted_lane_weighs_zero_and_no_lane_at_all_is_refused(monkeypatch):
    # a lane left out does not run: `lexical:1,dense:0.5` must not turn the graph lane on
    assert parse_lane_weights("lexical:1,dense:0.5") == {
        "lexical": 1.0,
        "dense": 0.5,
        "graph": 0.0,
        "entity": 0.0,
    }
    monkeypatch.setenv("WORLDMM_EPISODIC_LANE_WEIGHTS", "graph:0.5")
    assert load_settings().episodic_lane_weight_map() == {
        "lexical": 0.0,
        "dense": 0.0,
        "graph": 0.5,
        "entity": 0.0,
    }
    for every_lane_off in ("lexical:0", "lexical:0,dense:0,graph:0"):
        monkeypatch.setenv("WORLDMM_EPISODIC_LANE_WEIGHTS", every_lane_off)
        with pytest.raises(SettingsError, match="needs a weight above 0"):
            load_settings()
    with pytest.raises(ValueError, match="lane:weight"):
        parse_lane_weights("lexical:1,smell:1")


PRODUCTION = ("worldmm", "connectors", "dataflows", "gpu_worker", "query_api", "apps", "deploy")


def _names_read(path: Path) -> set[str]:
    """Attribute names and plain strings (``getattr(settings, "x")``) in one module: comments
    and prose never count as a read."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.add(node.value)
    return names


def _settings_accessors() -> dict[str, set[str]]:
    """Each property/method of Settings and the ``self.`` names it reads."""
    tree = ast.parse(Path(settings_module.__file__).read_text())
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Settings"]
    return {
        fn.name: {
            n.attr
            for n in ast.walk(fn)
            if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name)
            and n.value.id == "self"
        }
        for fn in cls.body
        if isinstance(fn, ast.FunctionDef)
    }


def test_every_setting_is_read_by_production_code():
    """A setting nothing reads is a promise the code does not keep: each field must be read
    in worldmm/, connectors/ or apps/ outside settings.py, by name or through a Settings
    property/method that reads it."""
    root = config_docs.ROOT
    settings_py = Path(settings_module.__file__).resolve()
    read: set[str] = set()
    for package in PRODUCTION:
        for path in (root / package).rglob("*.py"):
            if path.resolve() != settings_py:
                read |= _names_read(path)
    accessors = _settings_accessors()
    changed = True
    while changed:  # an accessor read in production reads what it reads (transitively)
        before = len(read)
        for name, reads in accessors.items():
            if name in read:
                read |= reads
        changed = len(read) != before
    unread = [name for name in Settings.model_fields if name not in read]
    assert unread == [], f"settings no production code reads: {unread}"
