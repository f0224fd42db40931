"""The lexical proof study: on a kept synthetic hour (whose proofs all fit the budget) the
shipped search's top lists are the exact ones; with a cap so small that no proof fits, the
study still searches every question both ways and counts what differs."""

from __future__ import annotations

import pytest

from bench.lexical_proof import LexicalProofOptions, run_study
from bench.query import QueryOptions, run_benchmark
from bench.query_synth import SynthConfig
from worldmm.store import segment_search as ss
from worldmm.store.db import Database
from worldmm.store.purge import purge_user

pytestmark = pytest.mark.integration


def test_the_study_compares_the_exact_and_the_shipped_search(settings, user_id, monkeypatch):
    cfg = SynthConfig(hours=1)
    run_benchmark(
        settings, cfg, QueryOptions(queries=2, cold_queries=1, user=user_id, keep=True, settle_s=0)
    )
    try:
        opts = LexicalProofOptions(user=user_id, days=1 / 24, queries=20)
        # ten candidates a lane: an hour's memory is not all of every lane's top
        settings = settings.model_copy(update={"episodic_lane_candidates": 10})
        report = run_study(settings, opts, lambda _: None)
        for name in ("exact", "shipped"):
            v = report["variants"][name]
            assert v["ms"]["n"] == 20
            assert 0 <= v["fact_found"] <= 20 and 0 <= v["mrr"] <= 1
        # an hour's posting lists are short: every proof fits, nothing differs
        assert report["top_lists"]["identical"] == 20
        assert (
            report["variants"]["exact"]["fact_found"] == report["variants"]["shipped"]["fact_found"]
        )
        # no proof fits a cap of one segment: the shipped lane ranks the rarest words' only
        proofs: list[int] = []
        real = ss.proof_postings

        def counted(*args):
            proofs.append(real(*args))
            return proofs[-1]

        monkeypatch.setattr(ss, "proof_postings", counted)
        monkeypatch.setattr(ss, "candidate_cap", lambda k: 1)
        capped = run_study(settings, opts.model_copy(update={"answer_option": True}), print)
        assert proofs and all(p > 1 for p in proofs)
        assert capped["variants"]["shipped"]["ms"]["n"] == 20
        assert capped["top_lists"]["identical"] <= 20
    finally:
        with Database(settings.database_url, max_size=1) as db, db.transaction() as conn:
            purge_user(conn, user_id)
