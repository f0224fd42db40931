"""Store models and key hashing (no database)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from pydantic import ValidationError

from worldmm.store.models import SegmentWrite, TripleWrite
from worldmm.store.users import hash_api_key, new_api_key

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def test_triple_write_needs_exactly_one_object() -> None:
    emb = [0.1, 0.2, 0.3]
    ok = TripleWrite(subject_entity_id=1, predicate="at", object_literal="home", embedding=emb)
    assert ok.embedding.dtype == np.float32 and ok.embedding.shape == (3,)
    for extra in ({}, {"object_literal": "x", "object_entity_id": 2}):
        with pytest.raises(ValidationError, match="exactly one"):
            TripleWrite(subject_entity_id=1, predicate="at", embedding=emb, **extra)


@pytest.mark.parametrize("bad", [[], [[1.0, 2.0]], [float("nan"), 1.0]])
def test_embedding_must_be_a_finite_vector(bad) -> None:
    with pytest.raises(ValidationError):
        TripleWrite(subject_entity_id=1, predicate="p", object_literal="o", embedding=bad)


def test_segment_write_window_order_and_timezone() -> None:
    with pytest.raises(ValidationError, match="after"):
        SegmentWrite(user_id="u", scale_seconds=30, window_start=T0, window_end=T0)
    with pytest.raises(ValidationError):
        SegmentWrite(
            user_id="u",
            scale_seconds=30,
            window_start=T0.replace(tzinfo=None),
            window_end=T0.replace(tzinfo=None) + timedelta(seconds=30),
        )


def test_api_keys_are_random_and_hashed() -> None:
    a, b = new_api_key(), new_api_key()
    assert a != b and len(a) > 40
    assert hash_api_key(a) == hash_api_key(a) != hash_api_key(b)
    assert hash_api_key(a).startswith("sha256:") and a not in hash_api_key(a)
