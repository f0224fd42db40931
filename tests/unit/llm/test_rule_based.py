"""The rule-based roles (llm_provider=offline) on real inputs: a drawn frame with text, spoken
or written transcripts."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from tests.fixtures.media import make_frame_jpeg
from worldmm.llm import AgentRound
from worldmm.llm.schemas import AgentAction, Passage
from worldmm.models import Triple

TRANSCRIPT = "Lucia: we should buy eggs and flour for the cake.\nJake: I will pay at Hema."


def run(coro):
    return asyncio.run(coro)


@pytest.fixture(scope="module")
def frame_caption(rule_based_roles) -> str:
    frames = [make_frame_jpeg("BAKERY"), make_frame_jpeg("BAKERY", color=(190, 40, 40))]
    return run(rule_based_roles.caption(frames, TRANSCRIPT))


def test_label_and_versions(rule_based_roles):
    assert rule_based_roles.label == "offline"
    assert rule_based_roles.versions["caption"].endswith("offline-v2")  # words before colours
    assert rule_based_roles.versions["ner"].endswith("offline-v1")
    assert {"caption", "ner", "response", "reasoning_agent"} <= rule_based_roles.versions.keys()


def test_caption_reads_the_frame_and_the_transcript(frame_caption):
    assert "BAKERY" in frame_caption  # OCR of the drawn text
    assert "red" in frame_caption and "blue" in frame_caption  # dominant colours
    assert 'Lucia said: "we should buy eggs and flour for the cake"' in frame_caption
    # what was said, then what was read, then the colours
    assert frame_caption.startswith('Lucia said: "we should buy')
    assert frame_caption.index("Jake said") < frame_caption.index("BAKERY")
    assert frame_caption.index("BAKERY") < frame_caption.index("I was somewhere")


def test_caption_of_dark_frame_without_speech_is_still_a_sentence(rule_based_roles):
    caption = run(rule_based_roles.caption([make_frame_jpeg("", color=(5, 5, 5))], ""))
    assert "dim" in caption and "nothing was said" in caption


def test_ner_and_triples_on_the_caption(rule_based_roles, frame_caption):
    entities = run(rule_based_roles.ner(frame_caption))
    assert {"I", "BAKERY", "Lucia", "Jake", "Hema"} <= set(entities)
    triples = run(rule_based_roles.episodic_triples(frame_caption, entities))
    assert triples and all(isinstance(t, Triple) for t in triples)
    facts = {tuple(t.as_list()) for t in triples}
    assert ("I", "saw text reading", "BAKERY") in facts
    assert any(t.subject == "Lucia" and t.object == "cake" for t in triples)


def test_ner_triples_from_plain_sentences(rule_based_roles):
    text = "I picked up my phone and walked to the kitchen table. Then Jake handed me the red cup."
    triples = {
        tuple(t.as_list())
        for t in run(rule_based_roles.episodic_triples(text, run(rule_based_roles.ner(text))))
    }
    assert ("I", "picked up", "phone") in triples
    assert ("I", "walked to", "kitchen table") in triples
    assert ("Jake", "handed", "red cup") in triples


def test_merge_is_extractive_ordered_and_shorter(rule_based_roles):
    captions = [
        f"I was at the desk at minute {i}. I typed a report about {topic}."
        for i, topic in enumerate(["budgets", "hiring", "travel", "budgets", "the garden", "taxes"])
    ] + ["I was at the desk at minute 0. I typed a report about budgets."]  # a repeat
    summary = run(rule_based_roles.merge_captions(captions, 180))
    sentences = [s.strip() + "." for s in summary.split(".") if s.strip()]
    all_sentences = [s.strip() + "." for c in captions for s in c.split(".") if s.strip()]
    assert 0 < len(sentences) <= 6
    assert all(s in all_sentences for s in sentences)
    positions = [all_sentences.index(s) for s in sentences]
    assert positions == sorted(positions)
    longer = run(rule_based_roles.merge_captions(captions * 3, 3600))
    assert len(longer) >= len(summary)


def test_semantic_triples_with_aligned_evidence(rule_based_roles):
    summary = "Lucia likes strawberry cake. I usually drink coffee after lunch with Jake."
    episodic = [
        Triple(subject="I", predicate="talks with", object="Jake"),
        Triple(subject="Lucia", predicate="eats", object="strawberry cake"),
        Triple(subject="I", predicate="walks with", object="Jake"),
    ]
    result = run(rule_based_roles.semantic_triples(summary, episodic))
    facts = {tuple(t.as_list()) for t in result.semantic_triples}
    assert ("Lucia", "likes", "strawberry cake") in facts
    assert ("I", "usually drink", "coffee") in facts
    assert ("I", "often deals with", "Jake") in facts
    assert len(result.episodic_evidence) == len(result.semantic_triples)
    by_fact = dict(
        zip(
            map(tuple, (t.as_list() for t in result.semantic_triples)),
            result.episodic_evidence,
            strict=True,
        )
    )
    assert by_fact[("Lucia", "likes", "strawberry cake")] == [1]
    assert by_fact[("I", "often deals with", "Jake")] == [0, 2]


def test_consolidation_removes_duplicates_and_conflicts_only(rule_based_roles):
    new = Triple(subject="Lucia", predicate="likes", object="strawberry cake")
    candidates = [
        Triple(subject="Jake", predicate="owns", object="a blue bicycle"),
        Triple(subject="Lucia", predicate="dislikes", object="strawberry cake"),
        Triple(subject="Lucia", predicate="likes", object="strawberry cakes"),
    ]
    decision = run(rule_based_roles.consolidate(new, candidates))
    assert decision.updated_triple == new
    assert sorted(decision.triples_to_remove) == [1, 2]
    assert run(rule_based_roles.consolidate(new, [])).triples_to_remove == []


def test_entity_confirm(rule_based_roles):
    assert run(rule_based_roles.entity_confirm("Lucia", "Lucia Chen", "Lucia said hi"))
    assert not run(rule_based_roles.entity_confirm("Lucia", "Jake", "Lucia said hi"))


def test_rerank_prefers_the_relevant_passage(rule_based_roles):
    candidates = [
        ("a", "I watered the plants on the balcony."),
        ("b", "I bought milk and eggs at the Hema supermarket."),
        ("c", "Jake fixed the bicycle chain."),
    ]
    assert run(rule_based_roles.rerank("where did I buy eggs", candidates, 2))[0] == "b"
    assert len(run(rule_based_roles.rerank("where did I buy eggs", candidates, 2))) == 2
    assert run(rule_based_roles.rerank("x", [], 3)) == []


@pytest.mark.parametrize(
    ("question", "memory"),
    [
        ("What does Lucia usually eat for breakfast?", "semantic"),
        ("Who is Jake's friend?", "semantic"),
        ("What colour was the cup on the table?", "visual"),
        ("Where did I leave the keys?", "episodic"),
    ],
)
def test_agent_routes_first_search(rule_based_roles, question, memory):
    action = run(rule_based_roles.agent_step(question, []))
    assert action == AgentAction(action="SEARCH", memory_type=memory, query=question)


def test_agent_answers_after_results_and_always_terminates(rule_based_roles):
    q = "Where did I leave the keys?"
    found = [AgentRound(memory_type="episodic", query=q, results_text="[10:02] I put keys down.")]
    assert run(rule_based_roles.agent_step(q, found)).action == "ANSWER"
    rounds: list[AgentRound] = []
    for _ in range(10):
        action = run(rule_based_roles.agent_step(q, rounds))
        if action.action == "ANSWER":
            break
        rounds.append(
            AgentRound(memory_type=action.memory_type, query=action.query, results_text="")
        )
    assert action.action == "ANSWER"
    assert [r.memory_type for r in rounds] == ["episodic", "semantic", "visual"]


def test_agent_searches_the_episodic_memory_before_answering_from_another(rule_based_roles):
    q = "What does Lucia usually eat for breakfast?"
    facts = AgentRound(memory_type="semantic", query=q, results_text="Lucia often eats fruit.")
    step = run(rule_based_roles.agent_step(q, [facts]))
    assert step == AgentAction(action="SEARCH", memory_type="episodic", query=q)
    seen = AgentRound(memory_type="episodic", query=q, results_text="")  # nothing there
    assert run(rule_based_roles.agent_step(q, [facts, seen])).action == "ANSWER"


def _segment(ref: int, text: str, said: str = "") -> Passage:
    start = datetime(2025, 5, 1, 11, ref, tzinfo=UTC)
    return Passage(
        ref=f"S{ref}",
        kind="segment",
        start=start,
        end=start + timedelta(seconds=30),
        text=text,
        said=said,
        segment_id=ref,
    )


def test_respond_multiple_choice_cites_evidence(rule_based_roles):
    passages = [
        _segment(2, "I walked to the fridge and took out the milk."),
        _segment(5, "Lucia and I bought flour at the supermarket."),
    ]
    choices = ["flour", "a bicycle", "shoes", "a lamp"]
    reply = run(rule_based_roles.respond("What did Lucia and I buy?", passages, choices))
    assert reply.choice_index == 0 and reply.evidence == ["S5"] and not reply.guess
    assert reply.answer.startswith("A. flour — ")
    assert "Lucia and I bought flour at the supermarket" in reply.answer
    assert "11:05:00 on 1 May 2025" in reply.answer
    flipped = run(
        rule_based_roles.respond("What did Lucia and I buy?", passages, ["shoes", "flour"])
    )
    assert flipped.choice_index == 1 and flipped.answer.startswith("B. flour")


def test_respond_free_form_short_answer_first_and_empty_context(rule_based_roles):
    passages = [
        _segment(1, "I bought a newspaper. I was somewhere bright; white dominated what I saw."),
        _segment(3, 'Jake said: "see you at the car".', said="I parked the car on level 3."),
    ]
    reply = run(rule_based_roles.respond("Where did I park the car?", passages, None))
    assert reply.answer.startswith("On level 3 — you heard it at 11:03:00 on 1 May 2025")
    assert '"I parked the car on level 3"' in reply.answer and reply.evidence == ["S3"]
    assert reply.choice_index is None
    empty = run(rule_based_roles.respond("Where?", [], None))
    assert "nothing" in empty.answer and empty.guess and empty.evidence == []


def test_every_role_on_a_real_frame_and_speech(rule_based_roles):
    """Speech (espeak-ng) → local Whisper → offline caption with the drawn frame → all roles."""
    from tests.fixtures.media import make_speech_wav, require_espeak
    from worldmm.asr.local import LocalWhisperTranscriber

    require_espeak()
    # A sentence Whisper (base, tiny.en too) hears exactly with greedy decoding: one it
    # mishears ("Lucia wants to buy strawberries" came out "strawberry net", "survive strong")
    # falls back to sampling at higher temperatures, and the words change from run to run.
    transcript = LocalWhisperTranscriber().transcribe(
        make_speech_wav("Meet me at the market at noon.", words_per_minute=130)
    )
    assert {"market", "noon"} <= set(transcript.text.lower().replace(".", "").split())
    said = f"{transcript.text} Lucia wants to buy strawberries."
    frames = [make_frame_jpeg("MARKET"), make_frame_jpeg("FRUIT", color=(40, 150, 60))]
    caption = run(rule_based_roles.caption(frames, said))
    assert "MARKET" in caption and "FRUIT" in caption and "strawberr" in caption.lower()
    entities = run(rule_based_roles.ner(caption))
    triples = run(rule_based_roles.episodic_triples(caption, entities))
    summary = run(
        rule_based_roles.merge_captions([caption, "I usually shop at the market with Lucia."], 180)
    )
    extraction = run(rule_based_roles.semantic_triples(summary, triples))
    assert entities and triples and summary
    assert len(extraction.episodic_evidence) == len(extraction.semantic_triples) > 0
    decision = run(rule_based_roles.consolidate(extraction.semantic_triples[0], triples))
    assert all(0 <= i < len(triples) for i in decision.triples_to_remove)
    ranked = run(rule_based_roles.rerank("strawberries", [("s1", caption), ("s2", "I slept.")], 1))
    assert ranked == ["s1"]
    action = run(rule_based_roles.agent_step("What fruit did Lucia want?", []))
    assert action.action == "SEARCH" and action.memory_type == "episodic"
    reply = run(
        rule_based_roles.respond(
            "What fruit did Lucia want?", [_segment(0, caption)], ["bananas", "strawberries"]
        )
    )
    assert reply.choice_index == 1 and reply.answer.startswith("B. strawberries")
    assert caption.index("strawberr") < caption.index("MARKET")  # said, then read
