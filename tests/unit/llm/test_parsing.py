from __future__ import annotations

import json

import pytest

from worldmm.llm.parsing import extract_json, parse_reply
from worldmm.llm.schemas import ROLE_REPLIES, AgentAction
from worldmm.providers.errors import ParseError

GOOD: dict[str, dict] = {
    "caption": {"caption": "I poured coffee while Lucia talked about the trip."},
    "ner": {"named_entities": ["I", "Lucia", "coffee"]},
    "episodic_triples": {"triples": [["I", "pours", "coffee"], ["Lucia", "talks about", "trip"]]},
    "merge_captions": {"summary": "I made coffee and planned the trip with Lucia."},
    "semantic_triples": {
        "semantic_triples": [["I", "usually drinks", "coffee in the morning"]],
        "episodic_evidence": [[0]],
    },
    "consolidation": {"updated_triple": ["Alice", "likes", "coffee"], "triples_to_remove": [1, 3]},
    "cross_scale_rerank": {"ranked_ids": ["s30-4", "s180-1"]},
    "reasoning_agent": {"action": "SEARCH", "memory_type": "semantic", "query": "Lucia's habits"},
    "response": {
        "answer": "B. milk — you bought it at the supermarket at 10:00:05 on 1 May 2025.",
        "choice": "B",
        "evidence": ["S3"],
    },
    "entity_confirm": {"same_entity": True},
}
# Valid JSON of the wrong shape for each role.
WRONG: dict[str, dict] = {
    "caption": {"text": "I poured coffee."},
    "ner": {"named_entities": "Lucia, coffee"},
    "episodic_triples": {"triples": [["I", "pours"]]},
    "merge_captions": {"summary": ""},
    "semantic_triples": {
        "semantic_triples": [["I", "likes", "tea"], ["I", "owns", "a bike"]],
        "episodic_evidence": [[0]],
    },
    "consolidation": {"updated_triple": ["Alice", "likes"], "triples_to_remove": [1]},
    "cross_scale_rerank": {"ranked": ["a"]},
    "reasoning_agent": {"action": "SEARCH", "memory_type": "episodic"},
    "response": {"reply": "B"},
    "entity_confirm": {"same_entity": "perhaps"},
}


def test_every_role_has_samples():
    assert set(GOOD) == set(ROLE_REPLIES) == set(WRONG)


@pytest.mark.parametrize("role", sorted(ROLE_REPLIES))
def test_good_reply(role):
    parsed = parse_reply(ROLE_REPLIES[role], json.dumps(GOOD[role]), role=role)
    assert parsed.model_dump(mode="json", exclude_none=True) == GOOD[role]


@pytest.mark.parametrize("role", sorted(ROLE_REPLIES))
def test_fenced_reply_with_prose(role):
    text = f"Sure, here it is:\n```json\n{json.dumps(GOOD[role], indent=2)}\n```\nDone."
    parsed = parse_reply(ROLE_REPLIES[role], text, role=role)
    assert parsed == ROLE_REPLIES[role].model_validate(GOOD[role])


@pytest.mark.parametrize("role", sorted(ROLE_REPLIES))
def test_json_inside_prose_without_fence(role):
    text = f"My answer is {json.dumps(GOOD[role])} -- hope it helps {{not json}}"
    assert parse_reply(ROLE_REPLIES[role], text) == ROLE_REPLIES[role].model_validate(GOOD[role])


@pytest.mark.parametrize("role", sorted(ROLE_REPLIES))
def test_truncated_reply_is_a_parse_error(role):
    text = json.dumps(GOOD[role])
    with pytest.raises(ParseError) as info:
        parse_reply(ROLE_REPLIES[role], text[: len(text) // 2], role=role)
    assert info.value.role == role
    assert info.value.raw == text[: len(text) // 2]


@pytest.mark.parametrize("role", sorted(ROLE_REPLIES))
def test_wrong_shape_is_a_parse_error(role):
    with pytest.raises(ParseError, match="schema"):
        parse_reply(ROLE_REPLIES[role], json.dumps(WRONG[role]), role=role)


def test_empty_reply():
    with pytest.raises(ParseError, match="empty"):
        parse_reply(ROLE_REPLIES["ner"], "   ")


def test_bare_list_for_single_field_model():
    parsed = parse_reply(ROLE_REPLIES["ner"], '["Lucia", "Jake"]')
    assert parsed.named_entities == ["Lucia", "Jake"]


def test_agent_answer_drops_search_fields_and_normalises_case():
    action = parse_reply(AgentAction, '{"action": "answer", "memory_type": "visual"}')
    assert action.action == "ANSWER" and action.memory_type is None and action.query is None


def test_extract_prefers_first_complete_object():
    assert extract_json('noise {"a": 1} {"b": 2}') == {"a": 1}
