"""Pydantic models in and out of the store (timezone-aware datetimes only)."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator, model_validator

from worldmm.models import SegmentFields, SegmentRecord, TripleType
from worldmm.store._sql import as_vector

TripleOrigin = Literal["extracted", "consolidated", "remembered"]
ImportanceSource = Literal["model", "estimate", "note"]


class _EmbeddingModel(BaseModel):
    """Accepts a list, numpy array or pgvector value for ``embedding``; keeps float32 numpy."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    @field_validator("embedding", mode="before", check_fields=False)
    @classmethod
    def _to_array(cls, value: Any) -> np.ndarray:
        if hasattr(value, "to_numpy"):
            value = value.to_numpy()
        return as_vector(value)


# --- segments ------------------------------------------------------------------------------


class _Provenance(BaseModel):
    """Where a segment's input was read (topic, partition, offsets) and which model and prompt
    versions made it."""

    source_topic: str | None = None
    source_partition: int | None = None
    source_offset_first: int | None = None
    source_offset_last: int | None = None
    model_versions: dict[str, Any] = Field(default_factory=dict)
    prompt_versions: dict[str, Any] = Field(default_factory=dict)
    importance: float | None = Field(default=None, ge=0.0, le=1.0)
    importance_source: ImportanceSource | None = None


class SegmentWrite(_Provenance, SegmentFields):
    """One window's segment. Keyed by (user_id, scale_seconds, window_start): writing the same
    window again overwrites its text and status and keeps its id."""

    scale_seconds: int = Field(gt=0)

    @model_validator(mode="after")
    def _window_order(self) -> SegmentWrite:
        if self.window_end <= self.window_start:
            raise ValueError("window_end must be after window_start")
        return self


class SegmentRow(_Provenance, SegmentRecord):
    """A segment as stored, with bookkeeping and provenance."""

    attempts: int = 0
    recall_count: int = 0
    last_recalled_at: AwareDatetime | None = None
    created_at: AwareDatetime
    updated_at: AwareDatetime


# --- entities ------------------------------------------------------------------------------


class EntityRow(BaseModel):
    id: int
    user_id: str
    canonical_entity_id: int | None = None
    surface_form: str
    canonical_name: str | None = None
    created_at: AwareDatetime

    @property
    def is_canonical(self) -> bool:
        return self.canonical_entity_id is None

    @property
    def name(self) -> str:
        return self.canonical_name or self.surface_form


# --- triples -------------------------------------------------------------------------------


class TripleWrite(_EmbeddingModel):
    """One triple to insert. Exactly one of object_entity_id / object_literal is set.

    valid_from defaults to the segment's window end (event time); evidence_segment_ids
    defaults to [segment_id]."""

    subject_entity_id: int
    predicate: str = Field(min_length=1)
    object_entity_id: int | None = None
    object_literal: str | None = None
    embedding: np.ndarray
    valid_from: AwareDatetime | None = None
    evidence_segment_ids: list[int] = Field(default_factory=list)
    origin: TripleOrigin = "extracted"

    @model_validator(mode="after")
    def _one_object(self) -> TripleWrite:
        if (self.object_entity_id is None) == (self.object_literal is None):
            raise ValueError("exactly one of object_entity_id and object_literal must be set")
        return self


class TripleRow(BaseModel):
    """A triple as read back, with entity names resolved (object_name is the literal for
    literal objects)."""

    id: int
    user_id: str
    memory_type: TripleType
    segment_id: int | None = None
    scale_seconds: int | None = None
    subject_entity_id: int
    subject_name: str
    predicate: str
    object_entity_id: int | None = None
    object_literal: str | None = None
    object_name: str
    valid_from: AwareDatetime
    invalidated_at: AwareDatetime | None = None
    replaced_by: int | None = None
    evidence_segment_ids: list[int] = Field(default_factory=list)
    origin: TripleOrigin = "extracted"
    created_at: AwareDatetime

    @property
    def object_is_literal(self) -> bool:
        return self.object_entity_id is None

    def as_list(self) -> list[str]:
        return [self.subject_name, self.predicate, self.object_name]


# --- frames and audio ----------------------------------------------------------------------


class _Stored(BaseModel):
    """What a capture's row adds to it once written."""

    id: int
    # the window container holding the capture, and where (None: stored alone under blob_key)
    media_key: str | None = None
    media_offset: int | None = None
    media_length: int | None = None


class FrameRow(BaseModel):
    """A stored frame (its bytes are in the blob store under blob_key)."""

    user_id: str
    session_id: str | None = None
    captured_at: AwareDatetime
    seq: int | None = None
    blob_key: str = Field(min_length=1)
    content_type: str = "image/jpeg"
    late: bool = False


class FrameRecord(_Stored, FrameRow):
    """A frame's row as read back."""


class AudioChunkRow(BaseModel):
    user_id: str
    session_id: str | None = None
    started_at: AwareDatetime
    duration_ms: int = Field(ge=0)
    sample_rate: int | None = None
    codec: str = "wav"
    blob_key: str = Field(min_length=1)
    late: bool = False


class AudioChunkRecord(_Stored, AudioChunkRow):
    """An audio chunk's row as read back."""


# --- forgetting ----------------------------------------------------------------------------


class ForgetResult(BaseModel):
    """Rows deleted per table, and blob keys the caller must delete from the blob store:
    captures stored alone, and window containers no remaining row points into."""

    counts: dict[str, int]
    frame_blob_keys: list[str] = Field(default_factory=list)
    audio_blob_keys: list[str] = Field(default_factory=list)
    media_keys: list[str] = Field(default_factory=list)
    # every container a deleted row pointed into (rewritten without the forgotten captures)
    touched_media: list[str] = Field(default_factory=list)
    # summaries kept to be rebuilt from their remaining windows: (scale seconds, start)
    rebuild: list[tuple[int, AwareDatetime]] = Field(default_factory=list)
