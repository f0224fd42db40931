from __future__ import annotations

import json

import pytest

from worldmm.llm.prompts import (
    PROMPTS_DIR,
    ROLES,
    compact_schema,
    load_prompt,
    parse_template,
    schema_text,
)
from worldmm.llm.schemas import ROLE_REPLIES
from worldmm.providers.errors import PromptError


@pytest.mark.parametrize("role", ROLES)
def test_schema_file_matches_wire_model(role):
    hint = "regenerate: python -c 'from worldmm.llm.prompts import write_schemas; write_schemas()'"
    assert (PROMPTS_DIR / f"{role}.schema.json").read_text() == schema_text(role), hint


@pytest.mark.parametrize("role", ROLES)
def test_every_template_renders_with_its_variables(role):
    template = load_prompt(role)
    values = {name: f"<{name}>" for name in template.variables - {"response_schema"}}
    rendered = template.render(**values)
    assert rendered.version == template.version
    assert rendered.version.startswith(f"{role}/v")
    assert "{{" not in rendered.system + rendered.user
    for value in values.values():
        assert value in rendered.system + rendered.user
    assert '"properties"' in rendered.system  # the reply schema is embedded


@pytest.mark.parametrize("role", ROLES)
def test_the_prompt_carries_the_whole_schema_in_fewer_characters(role):
    sent = load_prompt(role).schema
    assert "\n" not in sent and '"title"' not in sent
    assert len(sent) < 0.7 * len(schema_text(role))
    full = ROLE_REPLIES[role].model_json_schema()

    def without_titles(node):
        if isinstance(node, dict):
            return {k: without_titles(v) for k, v in node.items() if k != "title"}
        return [without_titles(v) for v in node] if isinstance(node, list) else node

    # nothing but the derived titles is dropped: every field, type, bound and description stays
    assert json.loads(sent) == without_titles(full)


def test_a_field_named_title_is_kept():
    schema = {
        "title": "Note",
        "properties": {"title": {"title": "Title", "type": "string"}},
        "required": ["title"],
        "type": "object",
    }
    assert json.loads(compact_schema(json.dumps(schema))) == {
        "properties": {"title": {"type": "string"}},
        "required": ["title"],
        "type": "object",
    }


def test_missing_variable_is_an_error():
    template = load_prompt("ner")
    with pytest.raises(PromptError, match="missing variables \\['text'\\]"):
        template.render()


def test_unexpected_variable_is_an_error():
    with pytest.raises(PromptError, match="unexpected \\['txt'\\]"):
        load_prompt("ner").render(text="x", txt="y")


def test_values_are_not_substituted_twice():
    rendered = load_prompt("ner").render(text="literal {{response_schema}} here")
    assert "literal {{response_schema}} here" in rendered.user


def test_version_hash_follows_the_text():
    text = "# version: 2\n[system]\nsys\n[user]\n{{x}}\n"
    a = parse_template("r", text, "{}")
    b = parse_template("r", text.replace("\nsys\n", "\nsystem text\n"), "{}")
    assert a.version.startswith("r/v2-") and a.version != b.version


def test_template_without_version_is_rejected():
    with pytest.raises(PromptError, match="version"):
        parse_template("r", "[system]\na\n[user]\nb\n", "{}")
