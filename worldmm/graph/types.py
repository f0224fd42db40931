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

GraphMemoryType = Literal["episodic", "semantic"]


class GraphTriple(NamedTuple):
    """One triple row as the graph builder and retrieval need it (read from the store). A
    plain tuple, not a model: a week's 30 s graph is built from about 300k rows, and a model
    per row cost seconds; the store's bulk read returns the columns in this field order."""

    triple_id: int
    subject: str
    predicate: str
    object: str
    object_is_literal: bool = False
    segment_id: int | None = None
    scale: int | None = None
    valid_from: datetime | None = None  # event time the fact became true
    invalidated_at: datetime | None = None


def is_active(t: GraphTriple, as_of: datetime | None = None) -> bool:
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
