"""Settings validation and the docs generated from them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from worldmm import config_docs
from worldmm import settings as settings_module
from worldmm.settings import (
    GROUPS,
    Settings,
    SettingsError,
    load_settings,
    must_set,
    parse_lane_weights,
)


def test_defaults_load_and_are_offline():
    s = load_settings()
    assert s.llm_provider == "offline"
    assert s.ocr_frames == 4 and (s.in_flight_start, s.in_flight_max) == (16, 1024)


def test_invalid_value_names_the_variable(monkeypatch):
    monkeypatch.setenv("WORLDMM_IN_FLIGHT_START", "-3")
    with pytest.raises(SettingsError, match="WORLDMM_IN_FLIGHT_START: .* \\(got '-3'\\)"):
        load_settings()


@pytest.mark.parametrize(
    ("old", "field"),
    [
        ("WORLDMM_GPU_OCR_FRAMES", "ocr_frames"),
        ("WORLDMM_OFFLINE_OCR_FRAMES", "ocr_frames"),
        ("WORLDMM_LLM_CONCURRENCY", "in_flight_start"),
        ("WORLDMM_LLM_CONCURRENCY_MAX", "in_flight_max"),
    ],
)
def test_older_variable_names_are_still_read(monkeypatch, old, field):
    """Deployments that set a merged or renamed setting by its old name keep working."""
    monkeypatch.setenv(old, "2")
    assert getattr(load_settings(), field) == 2
    new = f"WORLDMM_{field.upper()}"
    monkeypatch.setenv(new, "3")  # the new name wins
    assert getattr(load_settings(), field) == 3
    assert getattr(load_settings(**{field: 1}), field) == 1  # and the field's own name
    monkeypatch.delenv(new)
    monkeypatch.setenv(old, "-1")  # an error names the variable that was set
    with pytest.raises(SettingsError, match=f"{old}: .*\\(got '-1'\\)"):
        load_settings()


def test_state_under_private_home_moves_postgres_to_tmp(tmp_path):
    s = load_settings(state_dir="/root/some/checkout/.worldmm")
    assert not str(s.postgres_data_parent).startswith("/root")
    assert load_settings(state_dir=tmp_path).postgres_data_parent == tmp_path.resolve()


def test_generated_docs_match_settings():
    for relative, make in config_docs.GENERATED.items():
        text = (config_docs.ROOT / relative).read_text()
        assert make(text) == text, f"{relative} is stale: run `python -m worldmm.config_docs`"


def test_every_setting_is_in_exactly_one_group_and_the_docs_list_them_by_group():
    grouped = [name for group in GROUPS for name in group.model_fields]
    assert sorted(grouped) == sorted(Settings.model_fields), "a setting outside every group"
    assert len(grouped) == len(set(grouped)), "a setting in two groups"
    page = _settings_page()
    env = config_docs.env_example()
    for group in GROUPS:
        # each group's heading, then its own variables before the next group's heading
        section = page.split(f"### {group.title}\n", 1)[1].split("\n### ", 1)[0]
        env_section = env.split(f"# --- {group.title} ", 1)[1].split("\n# --- ", 1)[0]
        for name in group.model_fields:
            assert f"`WORLDMM_{name.upper()}`" in section, (group.title, name)
            assert f"#WORLDMM_{name.upper()}=" in env_section, (group.title, name)


def _settings_section() -> str:
    """The README's settings: the ones production must set."""
    readme = (config_docs.ROOT / "README.md").read_text()
    return readme.split(config_docs.START, 1)[1].split(config_docs.END, 1)[0]


def _settings_page() -> str:
    """docs/settings.md: every setting."""
    return (config_docs.ROOT / "docs/settings.md").read_text()


def _rows(text: str) -> dict[str, str]:
    return {row.split("`", 2)[1]: row for row in text.splitlines() if row[:3] == "| `"}


# What a production deployment must set: the services' URLs, the blob store, the model
# provider and its key, the admin key, and how long media is kept.
MUST_SET = {
    "kafka_brokers",
    "database_url",
    "redis_url",
    "gpu_worker_url",
    "blob_s3_uri",
    "llm_provider",
    "openai_api_key",
    "admin_api_key",
    "media_retention_days",
}


def test_the_settings_production_must_set_are_marked_in_every_generated_doc():
    marked = {name for name, field in Settings.model_fields.items() if must_set(field)}
    assert marked == MUST_SET
    rows = _rows(_settings_page())
    readme = _rows(_settings_section())  # the README lists exactly these, with an example
    assert set(readme) == {f"WORLDMM_{name.upper()}" for name in MUST_SET}
    production = (config_docs.ROOT / "deploy/production.env.example").read_text()
    for name in Settings.model_fields:
        var = f"WORLDMM_{name.upper()}"
        marked = "| **Must set in production.** " in rows[var]
        assert marked == (name in MUST_SET), var
        if name in MUST_SET:
            assert f"\n{var}=" in production, var  # set there, with an example value
            assert readme[var].split("`")[3], var


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
    """Each property/method of Settings and its groups, and the ``self.`` names it reads."""
    tree = ast.parse(Path(settings_module.__file__).read_text())
    return {
        fn.name: {
            n.attr
            for n in ast.walk(fn)
            if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name)
            and n.value.id == "self"
        }
        for cls in tree.body
        if isinstance(cls, ast.ClassDef)
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
