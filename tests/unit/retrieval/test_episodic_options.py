"""EpisodicOptions take every default from Settings: one default per decision."""

from __future__ import annotations

from dataclasses import MISSING, fields

from worldmm.memory.retrieval.episodic import EpisodicOptions
from worldmm.memory.retrieval.fusion import DRILL_KEEP, PRIOR_HALFLIFE_H, RRF_K, PriorParams
from worldmm.settings import Settings


def test_episodic_options_have_no_defaults_of_their_own():
    for cls in (EpisodicOptions, PriorParams):
        own = [f.name for f in fields(cls) if f.default is not MISSING]
        own += [f.name for f in fields(cls) if f.default_factory is not MISSING]
        assert own == [], f"{cls.__name__} keeps defaults beside Settings: {own}"


def test_episodic_options_defaults_equal_the_settings_defaults():
    defaults = Settings.model_construct()  # every field at its declared default, no env
    opts = EpisodicOptions.from_settings(defaults)
    d = {name: f.default for name, f in Settings.model_fields.items()}
    # the cross-validated weights: the entity lane on, the PageRank graph lane off
    assert opts.weights == {"lexical": 1.0, "dense": 1.0, "graph": 0.0, "entity": 0.25}
    assert opts.lanes == ("lexical", "dense", "entity")
    assert opts.rrf_k == RRF_K == 60.0  # pruned by cross-validation: constants, not settings
    assert opts.candidates == d["episodic_lane_candidates"]
    assert opts.drill_parents == d["episodic_drill_parents"] == 3
    assert opts.drill_keep == DRILL_KEEP == 2
    assert opts.keep == d["rerank_keep"]
    assert opts.llm_rerank is d["episodic_llm_rerank"] is False
    assert opts.prior == PriorParams(
        default_weight=d["episodic_recency_weight"],
        default_halflife_h=PRIOR_HALFLIFE_H,
        weight=d["episodic_prior_weight"],
        halflife_h=PRIOR_HALFLIFE_H,
        importance_weight=d["episodic_importance_weight"],
        recall_weight=d["episodic_recall_weight"],
    )


def test_a_lane_runs_only_when_its_weight_is_above_zero():
    opts = EpisodicOptions.from_settings(
        Settings.model_construct(episodic_lane_weights="dense:0.5,graph:1")
    )
    assert opts.lanes == ("dense", "graph")
