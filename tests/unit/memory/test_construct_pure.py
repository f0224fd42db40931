"""Pure parts of memory construction: frame sampling, window audio, consolidation plans."""

from __future__ import annotations

import io
import wave
from datetime import UTC, datetime

from connectors.codec import wav_bytes
from worldmm.llm.schemas import ConsolidationDecision
from worldmm.memory.consolidation import plan_consolidation
from worldmm.memory.window_inputs import AudioPiece, sample_uniform, window_audio
from worldmm.models import Triple
from worldmm.store.models import TripleRow

T0 = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)


def test_sample_uniform_spreads_and_keeps_short_lists() -> None:
    assert sample_uniform(list(range(5)), 16) == list(range(5))
    picked = sample_uniform(list(range(30)), 16)
    assert len(picked) == 16 and picked == sorted(set(picked))
    assert picked[0] <= 1 and picked[-1] >= 28  # covers the whole window
    assert sample_uniform(list(range(32)), 16) == list(range(1, 32, 2))


def _tone(seconds: float, value: int, rate: int = 1000) -> bytes:
    return wav_bytes(int(value).to_bytes(2, "little", signed=True) * int(seconds * rate), rate)


def _samples(wav: bytes) -> list[int]:
    with wave.open(io.BytesIO(wav)) as w:
        raw = w.readframes(w.getnframes())
    return [int.from_bytes(raw[i : i + 2], "little", signed=True) for i in range(0, len(raw), 2)]


def test_window_audio_cuts_chunks_to_the_window() -> None:
    # chunks: [25 s, 30 s) value 1, [30 s, 35 s) value 2; window [30 s, 60 s)
    pieces = [AudioPiece(30_000, _tone(5, 2)), AudioPiece(25_000, _tone(5, 1))]
    wav, rate = window_audio(pieces, 30_000, 60_000)
    assert rate == 1000
    assert set(_samples(wav)) == {2} and len(_samples(wav)) == 5000
    # a chunk straddling the boundary contributes only its part inside
    wav, _ = window_audio([AudioPiece(28_000, _tone(4, 3))], 30_000, 60_000)
    assert len(_samples(wav)) == 2000
    assert window_audio([], 0, 30_000) == (b"", 16000)


def _row(i: int, s: str, p: str, o: str, evidence: list[int]) -> TripleRow:
    return TripleRow(
        id=i,
        user_id="u",
        memory_type="semantic",
        subject_entity_id=1,
        subject_name=s,
        predicate=p,
        object_entity_id=2,
        object_name=o,
        valid_from=T0,
        evidence_segment_ids=evidence,
        created_at=T0,
    )


def test_plan_without_candidates_inserts() -> None:
    new = Triple(subject="Lucia", predicate="likes", object="sweet desserts")
    plan = plan_consolidation(new, [7], [], None)
    assert plan.action == "insert" and plan.triple == new and plan.remove_ids == []


def test_plan_update_removes_conflicts_and_merges_evidence() -> None:
    new = Triple(subject="Lucia", predicate="likes", object="sweet desserts")
    cands = [
        _row(10, "Lucia", "dislikes", "overly sweet food", [3]),
        _row(11, "I", "uses", "WeChat", [4]),
    ]
    decision = ConsolidationDecision(updated_triple=new, triples_to_remove=[0, 5])
    plan = plan_consolidation(new, [7], cands, decision)
    assert plan.action == "update"
    assert plan.remove_ids == [10]
    assert plan.evidence_ids == [3, 7]
    assert plan.ignored_indices == [5]  # out-of-range model output is reported, not applied


def test_plan_duplicate_of_a_kept_fact_writes_nothing() -> None:
    new = Triple(subject="I", predicate="uses", object="wechat")
    cands = [_row(11, "I", "uses", "WeChat", [4])]
    decision = ConsolidationDecision(
        updated_triple=Triple(subject="I", predicate="uses", object="WeChat"), triples_to_remove=[]
    )
    plan = plan_consolidation(new, [7], cands, decision)
    assert plan.action == "duplicate" and plan.remove_ids == []
