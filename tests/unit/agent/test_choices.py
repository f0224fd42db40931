"""Multiple choice and readable answers with the offline roles and the real MiniLM embedder,
on hand-built hits: no agent loop, as the EgoLife benchmark calls it."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from worldmm.agent.choices import answer_choices
from worldmm.agent.hit_passages import hit_passages
from worldmm.agent.option_notes import hours_before
from worldmm.llm.schemas import OptionNote
from worldmm.localtime import Asked
from worldmm.memory.retrieval.results import SegmentHit
from worldmm.models import choice_texts

T0 = datetime(2025, 5, 1, 4, 0, 5, tzinfo=UTC)


def hit(i: int, text: str, transcript: str | None = None, context: str | None = None):
    start = T0 + timedelta(minutes=i)
    return SegmentHit(
        segment_id=i,
        scale=30,
        start=start,
        end=start + timedelta(seconds=30),
        text=text,
        transcript=transcript,
        context=context,
        score=0.1,
    )


def ask(rule_based_roles, question, choices, hits):
    return asyncio.run(answer_choices(rule_based_roles, question, choices, hits))


def test_picks_the_supported_choice_and_says_where_it_comes_from(rule_based_roles):
    hits = [
        hit(1, "I walked to the fridge and took out the milk."),
        hit(2, 'I heard: "I parked the car on level two". I saw text reading "LEVEL 2".'),
        hit(3, "I was somewhere bright; white and grey dominated what I saw."),
    ]
    chosen = ask(
        rule_based_roles, "Where did I park the car?", ["Level 1", "Level 2", "Level 3"], hits
    )
    assert (chosen.letter, chosen.index, chosen.text) == ("B", 1, "Level 2")
    assert chosen.evidence_segment_ids[0] == 2 and not chosen.guess
    assert chosen.answer.startswith("B. Level 2 — ")
    assert "04:02:05 on 1 May 2025" in chosen.answer


def test_question_relevance_outweighs_how_often_a_choice_is_mentioned(rule_based_roles):
    # "coffee" appears three times, in passages about something else; the one passage about
    # drinking with Omar names green tea once. Counting overlap alone would pick coffee.
    hits = [
        hit(1, 'I heard: "The office coffee machine is broken again, no coffee today".'),
        hit(2, "Someone left a coffee cup on the meeting room table."),
        hit(3, "A quiet walk to the kitchen.", transcript="I drank green tea with Omar."),
    ]
    chosen = ask(rule_based_roles, "What did I drink with Omar?", ["coffee", "green tea"], hits)
    assert chosen.text == "green tea" and chosen.evidence_segment_ids[0] == 3
    assert '"I drank green tea with Omar"' in chosen.answer


def test_a_paraphrase_wins_by_meaning_when_no_choice_is_named(rule_based_roles):
    hits = [hit(1, 'I heard: "I bought strawberries and bananas at the market".')]
    chosen = ask(
        rule_based_roles, "What did I buy at the market?", ["shoes", "fruit", "a bicycle"], hits
    )
    assert chosen.text == "fruit"
    assert "closest match by meaning" in chosen.answer


def test_no_evidence_still_answers_and_says_it_is_a_guess(rule_based_roles):
    chosen = ask(rule_based_roles, "Where did I park the car?", ["A. Level 1", "B. Level 2"], [])
    assert chosen.guess and chosen.evidence_segment_ids == []
    assert chosen.text in {"Level 1", "Level 2"}  # labels dropped, letters positional
    assert chosen.answer.startswith(f"{chosen.letter}. {chosen.text} — a guess")
    again = ask(rule_based_roles, "Where did I park the car?", ["A. Level 1", "B. Level 2"], [])
    assert again == chosen  # deterministic


def test_identical_choices_tie_to_the_first(rule_based_roles):
    hits = [hit(1, "I drank green tea with Omar.")]
    chosen = ask(rule_based_roles, "What did I drink?", ["green tea", "green tea", "coffee"], hits)
    assert chosen.index == 0


@pytest.mark.parametrize(
    ("question", "hits", "starts"),
    [
        (
            "Where did I put the mug?",
            [hit(1, 'I heard: "I put the mug on the kitchen table". I was somewhere bright.')],
            "On the kitchen table — you heard it at 04:01:05 on 1 May 2025",
        ),
        (
            "What did Alice say about the meeting?",
            [hit(2, "Budget review.", transcript="Alice: the meeting moved to three pm")],
            "Moved to three pm — Alice said so at 04:02:05",
        ),
        (
            "What was written on the note on the fridge?",
            [hit(3, 'I saw text reading "BUY MILK", "EGGS". I was somewhere bright.')],
            '"BUY MILK", "EGGS" — you saw it written at 04:03:05',
        ),
    ],
)
def test_free_form_answer_starts_with_the_answer(rule_based_roles, question, hits, starts):
    reply = asyncio.run(rule_based_roles.respond(question, hit_passages(hits), None))
    assert reply.answer.startswith(starts), reply.answer
    for internal in ("From your memory", "Search 1", "query", "I was somewhere"):
        assert internal not in reply.answer
    assert reply.evidence == [f"S{hits[0].segment_id}"]


def test_a_coarse_context_counts_less_than_the_moment_itself(rule_based_roles):
    hits = [
        hit(
            1,
            'I heard: "the keys are in the white bowl".',
            context="Earlier the keys were on the shelf by the door.",
        )
    ]
    reply = asyncio.run(rule_based_roles.respond("Where are the keys?", hit_passages(hits), None))
    assert reply.answer.startswith("In the white bowl")


@pytest.mark.parametrize(
    ("choices", "message"),
    [
        (["only"], "2 to 8 choices, got 1"),
        ([f"c{i}" for i in range(9)], "2 to 8 choices, got 9"),
        (["tea", " "], "choice B is blank"),
        (["tea", "B. "], "choice B is blank"),
    ],
)
def test_bad_choices_are_refused_with_a_message(choices, message):
    with pytest.raises(ValueError, match=message):
        choice_texts(choices)


def test_labels_are_dropped_only_when_they_match_the_position():
    assert choice_texts(["A. tea", "(B) coffee", "D: water"]) == ["tea", "coffee", "D: water"]


WHO = "Who helped me carry the whiteboard upstairs?"
HOUSEMATES = ["Shure", "Tasha", "Alice", "Lucia"]


def test_only_the_option_the_question_evidence_supports_wins(rule_based_roles):
    # Every option is named somewhere in the pooled evidence (as each option's own search
    # brings a window naming it), but only one window is about the whiteboard.
    hits = [
        hit(1, "Shure and Alice were chopping onions in the kitchen. Shure laughed."),
        hit(2, "Lucia sang while Alice washed the dishes; Lucia waved at Shure."),
        hit(3, "Tasha and I carried the whiteboard up the stairs to the second floor."),
        hit(4, "Alice and Lucia watched a movie; Shure brought popcorn."),
    ]
    chosen = ask(rule_based_roles, WHO, HOUSEMATES, hits)
    assert chosen.text == "Tasha" and chosen.evidence_segment_ids[0] == 3


def test_a_name_in_every_window_does_not_win_by_frequency(rule_based_roles):
    # Shure is named in every window, each about the whiteboard; Katrina only where it was
    # carried. By how often it is found Shure wins; against how common each name is in the
    # memory (the notes the agent gives the answerer), Katrina does.
    hits = [
        hit(1, "Shure and I talked about where the whiteboard should go."),
        hit(2, "Katrina and I carried the whiteboard upstairs while Shure held the door."),
        hit(3, "Shure wiped the whiteboard clean upstairs."),
        hit(4, "Shure ordered takeout for everyone."),
    ]
    choices = ["Shure", "Katrina", "Alice"]
    notes = [
        OptionNote(word_shares={"shure": 0.9}),
        OptionNote(word_shares={"katrina": 0.1}),
        OptionNote(word_shares={"alice": 0.3}),
    ]
    assert ask(rule_based_roles, WHO, choices, hits).text == "Shure"  # without the memory's shares
    chosen = asyncio.run(answer_choices(rule_based_roles, WHO, choices, hits, notes=notes))
    assert chosen.text == "Katrina" and chosen.evidence_segment_ids[0] == 2


def test_time_options_are_answered_by_when_the_evidence_happened(rule_based_roles):
    asked = Asked(T0 + timedelta(hours=4, minutes=30), ZoneInfo("UTC"))
    hits = [hit(5, "I watered the basil plants on the balcony."), hit(40, "I read a book.")]
    choices = ["About an hour ago", "About four hours ago", "About eight hours ago"]
    notes = [OptionNote(hours_before=hours_before(c, asked)) for c in choices]
    chosen = asyncio.run(
        answer_choices(
            rule_based_roles,
            "When did I water the plants?",
            choices,
            hits,
            asked=asked,
            notes=notes,
        )
    )
    assert chosen.text == "About four hours ago" and chosen.evidence_segment_ids[0] == 5
    assert "when it happened" in chosen.answer


@pytest.mark.parametrize(
    ("texts", "expected"),
    [
        (["I parked the car on level two."], "Level 2"),
        (["I bought bread at the bakery."], "None of the above"),
    ],
)
def test_none_of_the_above_wins_only_when_no_option_is_found(rule_based_roles, texts, expected):
    hits = [hit(i, t) for i, t in enumerate(texts)]
    choices = ["Level 1", "Level 2", "None of the above"]
    assert ask(rule_based_roles, "Where did I park the car?", choices, hits).text == expected
