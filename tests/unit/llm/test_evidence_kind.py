"""Evidence by kind: a question about what was written, shown or read is answered from the
text read in the frames, one about what was said from the transcript, when one window holds
both (the offline answerer's rules, and what the real provider's prompts say)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from fakes.openai_server import Reply
from tests.fixtures.fake_openai import make_roles
from worldmm.llm.rule_based import scoring
from worldmm.llm.schemas import Passage

T0 = datetime(2025, 5, 1, 8, 0, tzinfo=UTC)
READ = 'I saw text reading "KITCHEN", "Buy milk", "Eggs", "08:01:00", "Buymilk", "08:01:10".'


def _window(ref: int, said: str, text: str) -> Passage:
    start = T0 + timedelta(minutes=ref)
    return Passage(
        ref=f"S{ref}",
        kind="segment",
        start=start,
        end=start + timedelta(seconds=30),
        said=said,
        text=text,
        segment_id=ref,
    )


def _kitchen() -> Passage:
    """Another moment in the same room: its sign is read there too."""
    said = "I am putting the red mug on the kitchen table."
    return _window(0, said, f'I heard: "{said}". I saw text reading "KITCHEN", "08:00:00".')


def ask(roles, question: str, passages: list[Passage]) -> str:
    return asyncio.run(roles.respond(question, passages, None)).answer


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("What was written on the note on the fridge?", "read"),
        ("What did the note on the fridge say?", "read"),
        ("What did the sign say?", "read"),
        ("What was shown on the screen?", "read"),
        ("What did Alice say about the meeting?", "said"),
        ("What did Alice say about the note?", "said"),
        ("What did Bob tell me?", "said"),
        ("Where did I put the mug?", None),
    ],
)
def test_what_a_question_asks_about(question, kind):
    assert scoring.asked_kind(question) == kind


def test_the_asked_kind_takes_its_windows_relevance():
    # window S1: what was said matches the question; the text read there does not
    rel = scoring.kind_relevance(
        np.array([0.6, 0.1, 0.3]),
        "What was written on the note?",
        ["said", "read", "read"],
        ["S1", "S1", "S2"],
    )
    assert rel.tolist() == pytest.approx([0.6, 0.6 + scoring.SOURCE_BONUS, 0.3 + 0.25])
    plain = scoring.kind_relevance(np.array([0.6, 0.1]), "Where is it?", ["said", "read"], "ab")
    assert plain.tolist() == [0.6, 0.1]


def test_written_is_read_off_the_frames_even_when_the_speech_was_misheard(rule_based_roles):
    """The demo's fridge: the recogniser heard "by milk and bags"; the note reads otherwise."""
    said = "The note on the fridge says by milk and bags."
    fridge = _window(1, said, f'I heard: "{said}". {READ}')
    for question in (
        "What was written on the note on the fridge?",
        "What did the note on the fridge say?",
    ):
        answer = ask(rule_based_roles, question, [_kitchen(), fridge])
        # the note's texts, not the sign read in both kitchen windows nor the clock
        assert answer.startswith('"Buy milk", "Eggs" — you saw it written at 08:01:00'), answer
        assert answer.endswith('beside "KITCHEN".') and "08:01:10" not in answer
    # what was said about it is still what was heard
    heard = ask(rule_based_roles, "What did I say about the note on the fridge?", [fridge])
    assert heard.startswith("By milk and bags — you heard it"), heard


def test_one_window_holding_both_kinds_answers_each_from_its_own(rule_based_roles):
    """The note on the fridge says one thing while Alice says another."""
    said = "Alice: can you check the fridge? We are out of bread."
    caption = 'Alice said: "can you check the fridge? We are out of bread".'
    window = _window(1, said, f"{caption} {READ}")
    passages = [_kitchen(), window]
    written = ask(rule_based_roles, "What was written on the note on the fridge?", passages)
    assert written.startswith('"Buy milk", "Eggs" — you saw it written at 08:01:00'), written
    spoken = ask(rule_based_roles, "What did Alice say about bread?", passages)
    assert spoken.startswith("We are out of bread — Alice said so at 08:01:00"), spoken


def test_text_glimpsed_at_the_windows_edge_is_not_the_answer(rule_based_roles):
    """The demo's five-minute session: the fridge scene starts 10 s into the window where the
    note is mentioned (its first frame still shows the meeting room) and fills the next one."""
    said = "The note on the fridge says buy milk and bags."
    edge = 'I saw text reading "MEETINGROOM3", "Budgetreview", "KITCHEN", "Buy milk", "Eggs".'
    first = _window(1, said, f'I heard: "{said}". {edge}')
    second = _window(1, "", 'I saw text reading "KITCHEN", "Buy milk", "Eggs", "08:01:44".')
    second = second.model_copy(
        update={"ref": "S9", "start": first.end, "end": first.end + timedelta(seconds=30)}
    )
    question = "What was written on the note on the fridge?"
    answer = ask(rule_based_roles, question, [first, _kitchen(), second])
    assert answer.startswith('"Buy milk", "Eggs" — you saw it written at 08:01:00'), answer
    assert answer.endswith('beside "MEETINGROOM3", "Budgetreview", "KITCHEN".'), answer


def test_a_line_heard_may_hold_a_question_word_misheard(rule_based_roles):
    """Whisper base hears the demo's "red mug" as "red mud"."""
    assert scoring.heard_alike({"mug", "put"}, {"red", "mud", "kitchen"}) == {"mug"}
    assert scoring.heard_alike({"mug"}, {"bug", "mugs", "mu"}) == set()  # first letter, length
    mud = "I am putting the red mud on the kitchen table."
    keys = "I left my car keys in the white bowl by the front door."
    passages = [_window(0, mud, f'I heard: "{mud}".'), _window(4, keys, f'I heard: "{keys}".')]
    answer = ask(rule_based_roles, "Where did I put the mug?", passages)
    assert "on the kitchen table" in answer.split(" — ")[0], answer


def test_the_providers_prompt_gets_both_kinds_and_says_which_answers_what(fake_openai):
    roles = make_roles(fake_openai)
    window = _window(
        1,
        "Alice: we are out of bread.",
        'I saw a yellow note on the fridge reading "Buy milk, Eggs" while Alice spoke.',
    )
    for reply in ('"Buy milk, Eggs"', "We are out of bread"):
        fake_openai.chat.push(Reply.chat(json.dumps({"answer": reply, "evidence": ["S1"]})))
    written = asyncio.run(
        roles.respond("What was written on the note on the fridge?", [window], None)
    )
    spoken = asyncio.run(roles.respond("What did Alice say?", [window], None))
    assert (written.answer, spoken.answer) == ('"Buy milk, Eggs"', "We are out of bread")
    for body in fake_openai.chat_requests():
        system, user = (m["content"] for m in body["messages"])
        assert "what was written, shown or read" in system
        assert "is answered from the text seen" in system
        assert "was said, told or asked is answered from what was said" in system
        # the window goes in whole: what was said beside what was seen
        assert "said: Alice: we are out of bread." in user
        assert 'seen: I saw a yellow note on the fridge reading "Buy milk, Eggs"' in user
