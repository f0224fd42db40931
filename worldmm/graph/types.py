"""Inputs and node naming of the memory graphs.

Every vertex has a unique ``name`` (the graph's look-up key for seeds) built from its kind,
so an entity called "12" can never collide with segment 12:

- ``e:<normalised entity name>`` — a canonical entity (``kind="entity"``)
- ``l:<normalised subject>|<literal>`` — a literal object, a leaf of its subject
  (``kind="literal"``); keyed per subject so two entities sharing "2:30 PM" stay unlinked
- ``s:<segment id>`` — an episodic segment, HippoRAG's "passage" (``kind="segment"``)

``label`` keeps the text as written, ``segment_id`` is set on segment vertices only.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal, NamedTuple

from pydantic import AwareDatetime, BaseModel, ConfigDict

GraphMemoryType = Literal["episodic", "semantic"]


class GraphTriple(BaseModel):
    """One triple row as the graph builder and retrieval need it (read from the store)."""

    model_config = ConfigDict(frozen=True, from_attributes=True)

    triple_id: int
    subject: str
    predicate: str
    object: str
    object_is_literal: bool = False
    segment_id: int | None = None
    scale: int | None = None
    valid_from: AwareDatetime | None = None  # event time the fact became true
    invalidated_at: AwareDatetime | None = None


class GraphRow(NamedTuple):
    """:class:`GraphTriple`'s fields as a plain tuple, for bulk reads: a week's 30 s graph is
    built from about 300k rows, and a model per row cost seconds. Same field names and order,
    so the graph builder takes either."""

    triple_id: int
    subject: str
    predicate: str
    object: str
    object_is_literal: bool = False
    segment_id: int | None = None
    scale: int | None = None
    valid_from: datetime | None = None
    invalidated_at: datetime | None = None


GraphTripleLike = GraphTriple | GraphRow


def is_active(t: GraphTripleLike, as_of: datetime | None = None) -> bool:
    """Not soft-deleted — at ``as_of`` when given (a later removal did not exist yet)."""
    if t.invalidated_at is None:
        return True
    return as_of is not None and t.invalidated_at > as_of


def normalise(text: str) -> str:
    """Case- and whitespace-insensitive form used in vertex names."""
    return " ".join(text.split()).casefold()


def entity_node(name: str) -> str:
    return f"e:{normalise(name)}"


def literal_node(subject: str, literal: str) -> str:
    return f"l:{normalise(subject)}|{normalise(literal)}"


def segment_node(segment_id: int) -> str:
    return f"s:{segment_id}"
