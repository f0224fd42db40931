"""The episodic lanes over a small hand-built memory in PostgreSQL, with the real MiniLM.

Each lane alone, their fusion, ``as_of`` in every lane, the question's time, drill-down from
a 10 min segment to its 30 s windows, and the embedding backfill that fills the dense lane.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from typer.testing import CliRunner

from tests.fixtures.store import insert_alias, make_segment
from worldmm.embed.local import MiniLMEmbedder
from worldmm.memory.backfill import backfill_segment_embeddings
from worldmm.memory.retrieval.episodic import EpisodicOptions, finish, run_lanes, search_episodic
from worldmm.store import entities, segment_search, segments, triples, users
from worldmm.store.db import Database
from worldmm.store.models import TripleWrite

# the offline roles over the real MiniLM, no visual encoder
pytestmark = [
    pytest.mark.integration,
    pytest.mark.deps(roles="rule_based_roles", embedder="minilm", encoder=None),
]

DAY = datetime(2025, 3, 4, 9, 0, tzinfo=UTC)
FILLER = " ".join(
    ["We talked about the weather, the garden, the neighbours and the football on Sunday."] * 20
)


class Memory:
    def __init__(self, db: Database, user: str, embedder: MiniLMEmbedder) -> None:
        self.db, self.user, self.emb = db, user, embedder
        self.ids: dict[str, int] = {}

    def seg(self, label, start, scale, caption, transcript=None, facts=(), parent=None) -> int:
        with self.db.transaction() as conn:
            users.ensure_user(conn, self.user)
            sid = make_segment(
                conn,
                self.user,
                start,
                scale,
                caption=caption,
                transcript=transcript,
                processing_status="complete",
            )
            rows = []
            for s, p, o in facts:
                ids = [
                    entities.insert_canonical_entity(conn, self.user, n, self.emb.embed([n])[0]).id
                    for n in (s, o)
                ]
                rows.append(
                    TripleWrite(
                        subject_entity_id=ids[0],
                        predicate=p,
                        object_entity_id=ids[1],
                        embedding=self.emb.embed([f"{s} {p} {o}"])[0],
                    )
                )
            if rows:
                triples.insert_triples(conn, self.user, sid, "episodic", rows)
            if parent is not None:
                segments.link_children(conn, self.user, self.ids[parent], [sid])
        self.ids[label] = sid
        return sid


@pytest.fixture
def memory(db, user_id, minilm) -> Memory:
    m = Memory(db, user_id, minilm)
    t = DAY
    m.seg("chores", t, 600, "Evening chores: I folded the laundry, washed the dishes, "
          "and took out the trash.")  # fmt: skip
    m.seg("chores3", t, 180, "Chores at home.", parent="chores")
    m.seg("laundry", t, 30, "I fold the laundry on the bed.", parent="chores3")
    m.seg("dishes", t + timedelta(seconds=30), 30, "I wash the dishes in the sink.",
          parent="chores3")  # fmt: skip
    m.seg("trash", t + timedelta(seconds=60), 30, "I carry the trash bag outside.",
          parent="chores3")  # fmt: skip
    m.seg("rare", t + timedelta(hours=1), 30, "Chatting in the living room.",
          transcript=FILLER + " Then I saw qv7x written on the fridge.")  # fmt: skip
    m.seg("pasta", t + timedelta(hours=2), 30,
          "Alice and I ate spaghetti bolognese for dinner at the kitchen table.",
          facts=[("Alice", "eats", "spaghetti")])  # fmt: skip
    m.seg("locker", t + timedelta(hours=3), 30,
          "The locker code is written on a yellow sticky note.")  # fmt: skip
    m.seg("router", t + timedelta(hours=4), 30,
          "The serial number on the router label is printed in small letters.")  # fmt: skip
    m.seg("phone", t + timedelta(hours=5), 30, "I charged my phone on the desk by the laptop.")
    # the next day: hidden from questions asked before it
    m.seg("later", t + timedelta(days=1), 30, "I saw qv7x again, and Alice ate spaghetti.",
          facts=[("Alice", "eats", "spaghetti")])  # fmt: skip
    report = backfill_segment_embeddings(db, minilm, user_id=user_id, batch_size=4)
    assert report.total == report.written == len(m.ids)
    return m


def lane(deps, user, query, name, as_of=None, **extra) -> list[int]:
    opts = EpisodicOptions.from_settings(
        deps.settings, weights={name: 1.0}, drill_parents=0, **extra
    )
    run = asyncio.run(run_lanes(deps, user, query, as_of, opts))
    return [c.segment_id for c in run.lanes[name]]


BEFORE_LATER = DAY + timedelta(hours=12)


def test_lexical_finds_a_rare_word_the_dense_lane_misses(deps, memory, user_id):
    q = "where did I see qv7x"
    lexical = lane(deps, user_id, q, "lexical", BEFORE_LATER)
    dense = lane(deps, user_id, q, "dense", BEFORE_LATER)
    assert lexical[0] == memory.ids["rare"]
    # the word sits past the 256 word pieces MiniLM reads: dense cannot see it
    assert dense[0] != memory.ids["rare"]


def test_dense_finds_a_paraphrase_lexical_misses(deps, memory, user_id):
    q = "what pasta did we have for supper"
    assert memory.ids["pasta"] not in lane(deps, user_id, q, "lexical", BEFORE_LATER)
    assert lane(deps, user_id, q, "dense", BEFORE_LATER)[0] == memory.ids["pasta"]


def test_fusion_keeps_both_and_shows_each_lanes_rank(deps, memory, user_id):
    q = "where did I see qv7x, and what pasta did we have for supper"
    opts = EpisodicOptions.from_settings(deps.settings, drill_parents=0)
    result = asyncio.run(search_episodic(deps, user_id, q, BEFORE_LATER, options=opts))
    by_id = {h.segment_id: h for h in result.hits}
    assert memory.ids["rare"] in by_id and memory.ids["pasta"] in by_id
    assert by_id[memory.ids["rare"]].lanes["lexical"].rank == 1
    assert by_id[memory.ids["pasta"]].lanes["dense"].rank <= 2
    assert "lexical" not in by_id[memory.ids["pasta"]].lanes


@pytest.mark.parametrize("name", ["lexical", "dense", "graph"])
def test_as_of_hides_later_segments_in_every_lane(deps, memory, user_id, name):
    q = "qv7x Alice spaghetti"
    now = lane(deps, user_id, q, name)
    past = lane(deps, user_id, q, name, as_of=BEFORE_LATER)
    assert memory.ids["later"] in now
    assert memory.ids["later"] not in past
    assert past  # the earlier segments are still found


def test_time_in_the_question_limits_every_lane(deps, memory, user_id):
    asked = DAY + timedelta(days=1, hours=3)
    # "yesterday" is DAY; the later segment (today) matches the words better but is excluded
    for name in ("lexical", "dense"):
        got = lane(deps, user_id, "Did I see qv7x yesterday?", name, asked)
        assert got and memory.ids["later"] not in got
        assert memory.ids["rare"] in got
    # without the phrase, today's segment is there
    assert memory.ids["later"] in lane(deps, user_id, "Did I see qv7x?", "lexical", asked)


def test_the_last_time_prefers_the_recent_match(deps, memory, user_id):
    asked = DAY + timedelta(days=1, hours=3)
    got = lane(deps, user_id, "When was the last time Alice ate spaghetti?", "dense", asked)
    assert got[0] == memory.ids["later"]
    first = lane(deps, user_id, "When was the first time Alice ate spaghetti?", "dense", asked)
    assert first[0] == memory.ids["pasta"]


def test_drill_down_returns_the_30s_children_of_a_matching_10min_segment(deps, memory, user_id):
    q = "laundry dishes trash chores"
    base = EpisodicOptions.from_settings(deps.settings, weights={"lexical": 1.0, "dense": 1.0})
    run = asyncio.run(run_lanes(deps, user_id, q, BEFORE_LATER, base))
    flat = asyncio.run(finish(deps, run, replace(base, drill_parents=0)))
    assert flat.hits[0].segment_id == memory.ids["chores"] and flat.hits[0].scale == 600
    drilled = asyncio.run(finish(deps, run, base))
    kids = {memory.ids[k] for k in ("laundry", "dishes", "trash")}
    assert all(h.scale == 30 for h in drilled.hits)
    assert {h.segment_id for h in drilled.hits} == kids
    first = drilled.hits[0]
    assert first.context_segment_id == memory.ids["chores"]
    assert first.context is not None and first.context.startswith("Evening chores")


def test_a_coarse_segment_stays_when_no_window_fits(deps, memory, user_id):
    # only the summary holds "evening"; no 30 s child matches any lane better
    base = EpisodicOptions.from_settings(deps.settings, weights={"lexical": 1.0})
    result = asyncio.run(search_episodic(deps, user_id, "evening", BEFORE_LATER, options=base))
    assert result.hits[0].segment_id == memory.ids["chores"]


def test_other_user_sees_nothing(deps, memory):
    for name in ("lexical", "dense", "graph"):
        assert lane(deps, "someone-else", "qv7x Alice spaghetti", name) == []


def test_backfill_is_idempotent_and_re_embeds_another_models_rows(db, memory, user_id, minilm):
    again = backfill_segment_embeddings(db, minilm, user_id=user_id)
    assert (again.total, again.written) == (0, 0)
    with db.transaction() as conn:
        conn.execute(
            "UPDATE segment_embeddings SET model = 'old-model'"
            " WHERE user_id = %s AND segment_id = %s",
            (user_id, memory.ids["phone"]),
        )
        assert segment_search.count_missing_embeddings(conn, minilm.name, user_id) == 1
    redo = backfill_segment_embeddings(db, minilm, user_id=user_id)
    assert (redo.total, redo.written) == (1, 1)


def test_backfill_command_shows_progress_and_fills_the_dense_lane(db, settings, user_id, minilm):
    m = Memory(db, user_id, minilm)
    for i in range(5):
        m.seg(f"s{i}", DAY + timedelta(minutes=i), 30, f"Window {i}: I water plant number {i}.")
    with db.connection() as conn:
        assert segment_search.count_missing_embeddings(conn, minilm.name, user_id) == 5
    from apps.cli import app

    env = {
        "WORLDMM_DATABASE_URL": settings.database_url,
        "WORLDMM_STATE_DIR": str(settings.state_dir),
    }
    out = CliRunner().invoke(app, ["db", "backfill-embeddings", "--user-id", user_id], env=env)
    assert out.exit_code == 0, out.output
    assert "embedded 5 of 5 segments" in out.output
    with db.connection() as conn:
        assert segment_search.count_missing_embeddings(conn, minilm.name, user_id) == 0


@pytest.fixture
def household(db, user_id, minilm) -> Memory:
    """Katrina and Shure each named alone in several windows; once together, where the
    window's text calls them by nicknames (the speakers "Kat" and "Shu") and ingest's alias
    resolution tied those lines to their canonical entities."""
    m = Memory(db, user_id, minilm)
    alone = [
        ("Katrina waters the plants on the balcony.", [("Katrina", "waters", "plants")]),
        ("Katrina reads a book on the sofa.", [("Katrina", "reads", "book")]),
        ("Shure plays the guitar in his room.", [("Shure", "plays", "guitar")]),
        ("Shure cooks noodles in the kitchen.", [("Shure", "cooks", "noodles")]),
    ]
    for i, (caption, facts) in enumerate(alone):
        m.seg(f"alone{i}", DAY + timedelta(minutes=3 * i), 30, caption, facts=facts)
    m.seg(
        "together",
        DAY + timedelta(minutes=20),
        30,
        "I carry the big board across the room to the wall.",
        transcript="Kat: Lift your end higher. Shu: Got it, a bit to the left.",
        facts=[("Katrina", "lifts", "board"), ("Shure", "carries", "board")],
    )
    with db.transaction() as conn:
        for nick, name in (("Kat", "Katrina"), ("Shu", "Shure")):
            canonical = entities.find_entity_by_surface(conn, user_id, name)
            assert canonical is not None
            insert_alias(conn, user_id, nick, canonical.id, minilm.embed([nick])[0])
    backfill_segment_embeddings(db, minilm, user_id=user_id)
    return m


def test_entity_lane_finds_the_named_people_together_where_text_search_misses(
    deps, household, user_id
):
    q = "What did Katrina and Shure do together?"
    asked = DAY + timedelta(hours=1)
    together = household.ids["together"]
    entity = lane(deps, user_id, q, "entity", asked)
    assert entity[0] == together  # both people held: it outranks every window of one
    assert set(entity) == set(household.ids.values())  # each window holds one of them
    # the words: the window never names them, so lexical does not return it at all
    assert together not in lane(deps, user_id, q, "lexical", asked)
    assert lane(deps, user_id, q, "dense", asked)[0] != together


def test_entity_lane_matches_a_nickname_through_its_alias(deps, household, user_id):
    got = lane(deps, user_id, "When did Kat lift the board?", "entity", DAY + timedelta(hours=1))
    # "Kat" is Katrina: the windows that hold her, Shure's alone left out
    assert set(got) == {household.ids[k] for k in ("alone0", "alone1", "together")}


@pytest.mark.parametrize("question", ["laundry dishes trash chores", "the bed and the sink"])
def test_drill_children_scores_as_each_lane_searched_them(db, deps, memory, user_id, question):
    # One statement reads the tree, both text lanes' scores and the priors: the same
    # children, lexical scores and cosines as the tree read and the two searches among them
    from worldmm.memory.retrieval.text_lanes import weighted_terms
    from worldmm.store.importance_recall import segment_priors

    parent = memory.ids["chores"]
    kids = [memory.ids[k] for k in ("laundry", "dishes", "trash")]
    stats, lexemes = deps.reader.query_terms(user_id, question)
    terms = weighted_terms(lexemes, stats)
    vec = deps.embedder.embed([question])[0]
    filters = segment_search.Filters(as_of=BEFORE_LATER)
    rows = deps.reader.drill_children(user_id, [parent], terms, stats, vec, filters)
    assert [r.row.segment_id for r in rows] == kids  # oldest first, only 30 s ones
    assert {r.parent_id for r in rows} == {parent}
    ids = segment_search.Filters(as_of=BEFORE_LATER, ids=kids)
    with db.connection() as conn:
        lexical = segment_search.lexical_search(
            conn, user_id, terms, stats.mean_length, len(kids), ids
        )
        dense = segment_search.dense_search(conn, user_id, vec, len(kids), ids)
        priors = segment_priors(conn, user_id, kids)
    assert lexical  # the question's words are in some child
    got_lexical = {r.row.segment_id: r.lexical for r in rows if r.lexical is not None}
    assert got_lexical == pytest.approx({r.segment_id: r.score for r in lexical})
    got_dense = {r.row.segment_id: r.cosine for r in rows}
    assert got_dense == pytest.approx({r.segment_id: r.score for r in dense}, abs=1e-6)
    assert {r.row.segment_id: (r.importance, r.recall_count) for r in rows} == {
        i: (p.importance, p.recall_count) for i, p in priors.items()
    }
    # a range leaves out the children outside it; another wearer reads none
    later = segment_search.Filters(as_of=BEFORE_LATER, start=DAY + timedelta(seconds=45))
    narrowed = deps.reader.drill_children(user_id, [parent], terms, stats, vec, later)
    assert [r.row.segment_id for r in narrowed] == kids[1:]
    assert deps.reader.drill_children("someone-else", [parent], terms, stats, vec, filters) == []
    # no known word: every child still comes, with no lexical score
    none = deps.reader.drill_children(user_id, [parent], [], stats, vec, filters)
    assert [r.row.segment_id for r in none] == kids and {r.lexical for r in none} == {None}
