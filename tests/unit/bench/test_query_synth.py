"""The query benchmark's synthetic memory: counts, keys, links and vectors as promised."""

from __future__ import annotations

import re
from datetime import timedelta

import numpy as np
import pytest

from bench.harness import summary
from bench.query import StubModels, primer_queries
from bench.query_synth import SynthConfig, SyntheticMemory, expected_counts, make_queries
from worldmm.models import SCALES


@pytest.fixture(scope="module")
def memory() -> SyntheticMemory:
    return SyntheticMemory(SynthConfig(hours=3, seed=7))


def test_a_week_has_the_sizes_of_the_issue() -> None:
    week = expected_counts(SynthConfig())
    assert week["segments_30"] == 20_160
    # 3 min windows tile the first nine minutes of each 10 min window (the ingest hierarchy)
    assert (week["segments_180"], week["segments_600"], week["segments_3600"]) == (3024, 1008, 168)
    assert 340_000 <= week["episodic"] <= 360_000
    assert 2_000 <= week["semantic"] <= 5_000 and 0 < week["semantic_invalidated"] < 1_000
    assert week["visual"] == 20_160
    assert 200 <= week["entities_canonical"] <= 500


def generated_counts(memory: SyntheticMemory) -> dict[str, int]:
    """What was actually generated (the test oracle for :func:`expected_counts`)."""
    base = len(memory.segments.starts[30])
    out = {f"segments_{s}": len(memory.segments.starts[s]) for s in SCALES}
    out["segments"] = sum(out[f"segments_{s}"] for s in SCALES)
    out.update({f"episodic_{s}": int(np.sum(memory.episodic.scale == s)) for s in SCALES})
    out["episodic"] = len(memory.episodic)
    out["semantic"] = len(memory.semantic.triples)
    out["semantic_invalidated"] = int(memory.semantic.invalidated.sum())
    out["entities_canonical"] = len(memory.vocab.names)
    out["entities_alias"] = len(memory.vocab.aliases)
    out["visual"] = base
    out["frames"] = base * memory.cfg.frames_per_segment
    out["sessions"] = len(memory.session_ids())
    return out


def test_generated_counts_match_the_promise(memory: SyntheticMemory) -> None:
    assert generated_counts(memory) == expected_counts(memory.cfg)


def test_triples_are_unique_per_segment_and_well_formed(memory: SyntheticMemory) -> None:
    for specs in (memory.episodic, memory.semantic.triples):
        keys = set(
            zip(
                specs.scale.tolist(),
                specs.segment.tolist(),
                specs.subj.tolist(),
                specs.pred.tolist(),
                specs.obj.tolist(),
                specs.literal.tolist(),
                strict=True,
            )
        )
        assert len(keys) == len(specs)  # the store's natural key would reject duplicates
        assert np.all((specs.obj >= 0) != (specs.literal >= 0))
        assert not np.any(specs.obj == specs.subj)
    for scale in SCALES:
        n = len(memory.segments.starts[scale])
        seg = memory.episodic.segment[memory.episodic.scale == scale]
        assert seg.min() == 0 and seg.max() == n - 1


def test_parent_links_contain_their_children(memory: SyntheticMemory) -> None:
    segs = memory.segments
    for scale in SCALES:
        for i, link in enumerate(segs.parent[scale]):
            if scale == 3600:
                assert link is None
                continue
            assert link is not None
            p_scale, p = link
            assert p_scale > scale
            assert segs.starts[p_scale][p] <= segs.starts[scale][i]
            assert segs.end(scale, i) <= segs.end(p_scale, p)
    # the last minute of every 10 min window feeds it directly
    assert segs.parent[30][18] == (600, 0) and segs.parent[30][17] == (180, 2)


def test_replaced_semantic_facts_point_at_a_later_version(memory: SyntheticMemory) -> None:
    sem = memory.semantic
    t = sem.triples
    replaced = np.flatnonzero(sem.invalidated)
    assert len(replaced) == memory.cfg.invalidated_count
    for old in replaced:
        new = int(sem.replaced_by[old])
        assert not sem.invalidated[new]
        assert (t.subj[new], t.pred[new]) == (t.subj[old], t.pred[old])
        assert t.segment[new] >= t.segment[old]
        assert (t.obj[new], t.literal[new]) != (t.obj[old], t.literal[old])


def test_vectors_are_unit_and_independent_of_slicing(memory: SyntheticMemory) -> None:
    ep = memory.episodic
    whole = memory.triple_vectors(ep, 0, len(ep), 0)
    assert whole.shape == (len(ep), memory.cfg.text_dim) and whole.dtype == np.float32
    assert np.allclose(np.linalg.norm(whole, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(memory.triple_vectors(ep, 4090, 4100, 0), whole[4090:4100])
    vis = memory.visual_vectors(0, 360)
    assert vis.shape == (360, memory.cfg.visual_dim)
    assert np.array_equal(memory.visual_vectors(100, 101)[0], vis[100])
    # cluster structure: clips of one place are closer to each other than to other places
    places = memory.place_of_base_segment[:360]
    same = places[:, None] == places[None, :]
    sims = vis @ vis.T
    np.fill_diagonal(same, False)
    assert sims[same].mean() > sims[~same].mean() + 0.2


def test_generation_is_seeded(memory: SyntheticMemory) -> None:
    again = SyntheticMemory(SynthConfig(hours=3, seed=7))
    assert np.array_equal(again.episodic.subj, memory.episodic.subj)
    other = SyntheticMemory(SynthConfig(hours=3, seed=8))
    assert not np.array_equal(other.episodic.subj, memory.episodic.subj)


def test_queries_sit_near_their_facts_and_stubs_answer_them(memory: SyntheticMemory) -> None:
    qs = make_queries(memory, 5)
    assert {k: len(v) for k, v in qs.items()} == {"episodic": 5, "semantic": 5, "visual": 5}
    names = set(memory.vocab.names)
    stub = StubModels(
        [q for g in qs.values() for q in g], memory.cfg.text_dim, memory.cfg.visual_dim
    )
    for q in qs["episodic"]:
        assert q.entities and set(q.entities) <= names
        vecs = stub.embed([q.text, *q.entities])
        assert vecs.shape == (1 + len(q.entities), memory.cfg.text_dim)
        # an entity's stand-in vector matches its stored one above the match threshold
        for e, v in zip(q.entities, vecs[1:], strict=True):
            assert float(v @ memory.vocab.vectors[memory.vocab.names.index(e)]) > 0.6
    for q in qs["visual"]:
        assert q.visual_vector is not None and q.visual_vector.shape == (memory.cfg.visual_dim,)
    with pytest.raises(KeyError):
        stub.embed(["a text no query asked"])
    with pytest.raises(AttributeError):
        _ = stub.caption


def test_episodic_questions_come_as_served_with_four_options(memory: SyntheticMemory) -> None:
    served = make_queries(memory, 8)["episodic"]
    short = make_queries(memory, 8, choices=False)["episodic"]
    for q, s in zip(served, short, strict=True):
        head, _, listed = q.text.partition("? ")
        parts = re.split(r"\s*\(([A-D])\)\s*", listed)[1:]
        letters, texts = parts[0::2], parts[1::2]
        assert letters == ["A", "B", "C", "D"] and all(texts)
        # the same fact asked: the object the short question names is one of the options
        asked = head.split("] What did ", 1)[1]
        assert s.text.split("] When did ", 1)[1] in {f"{asked} {t}?" for t in texts}
        assert q.entities == s.entities
    # the other memories' questions are drawn as before
    for kind in ("semantic", "visual"):
        with_options = [q.text for q in make_queries(memory, 8)[kind]]
        assert with_options == [q.text for q in make_queries(memory, 8, choices=False)[kind]]


def test_captions_describe_their_segments(memory: SyntheticMemory) -> None:
    caps = memory.captions(30)
    assert len(caps) == len(memory.segments.starts[30])
    subj, pred, obj = memory.triple_text(memory.episodic, 0)
    assert caps[0].startswith(f"{subj} {pred} {obj}")
    assert memory.segments.end(30, 0) - memory.segments.starts[30][0] == timedelta(seconds=30)


def test_summary() -> None:
    s = summary([float(x) for x in range(1, 101)])
    assert s["n"] == 100 and s["p50"] == pytest.approx(50.5) and s["p95"] == pytest.approx(95.05)
    assert summary([]) == {"n": 0}


def test_primers_are_other_questions_of_every_kind(memory: SyntheticMemory) -> None:
    measured = make_queries(memory, 20)
    primers = primer_queries(memory, measured, memory.cfg.seed)
    asked = {q.text for g in measured.values() for q in g}
    for kind in ("episodic", "semantic", "visual"):
        assert primers[kind], kind
        assert not {q.text for q in primers[kind]} & asked
    # another draw, not the measured questions renamed
    facts = {q.text.split("] ", 1)[1] for q in measured["episodic"]}
    assert len({q.text.split("] ", 1)[1] for q in primers["episodic"]} - facts) > 10
