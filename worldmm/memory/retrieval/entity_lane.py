"""The entity lane of episodic retrieval: the 30 s windows where the question's people and
things were, read from the knowledge graph's entities rather than from the words.

- The question's entities (NER) are resolved to the user's canonical entities: the same name
  or an alias first, else the nearest canonical entity by embedding (cosine at least
  ``entity_match_threshold``). "I" and "me" are left out: the wearer is in every window.
- A window *holds* an entity its own triples link (named in the caption, or speaking: a
  transcript line ties its speaker to what it mentions). It is *around* the entities its
  3 min parent links (its siblings' and the summary's): who was there while it happened.
- Score: the sum over the question's entities of IDF x match strength, full for held ones and
  half for those only around; ties go to the newer window. IDF is BM25's over the 30 s
  windows that existed at ``as_of`` (however the question's range narrows the windows), so a
  person in every window (a housemate) counts little and the two named people together
  outrank either alone.
- Reads (:mod:`entity_rank`): each entity's windows newest first up to a cap, once; the
  ranking is exact where a proof shows it, else the best of what was read: the work follows
  what is returned, not how many windows share a housemate.

Text search sees words; this lane sees who and what, across aliases, speakers and the
window's neighbourhood ("who did I move the whiteboard with": the window with the whiteboard
and the people around it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np

from worldmm.memory.retrieval.entity_df import ENTITY_WINDOWS
from worldmm.memory.retrieval.entity_rank import entity_weights, ranked_windows
from worldmm.memory.retrieval.fusion import Candidate
from worldmm.memory.retrieval.lanes import TERM_STATS
from worldmm.store import entities as entity_repo
from worldmm.store import entity_links
from worldmm.store.segment_search import Filters

if TYPE_CHECKING:
    from worldmm.deps import Deps
    from worldmm.memory.retrieval.lanes import TimeRange

FIRST_PERSON = frozenset({"i", "me", "my", "myself", "mine"})


@dataclass(frozen=True)
class QueryEntity:
    """A canonical entity the question names; ``strength`` is 1 for the same name or an
    alias, the cosine for an embedding match."""

    entity_id: int
    name: str
    strength: float


def resolve_entities(
    deps: Deps, user_id: str, names: Sequence[str], vectors: np.ndarray
) -> list[QueryEntity]:
    """The user's canonical entities for the question's ``names`` (``vectors`` are their
    embeddings, in order), the strongest match per entity, first person left out."""
    pairs = [(n, v) for n, v in zip(names, vectors, strict=True) if n.lower() not in FIRST_PERSON]
    if not pairs:
        return []
    threshold = deps.settings.entity_match_threshold
    found: dict[int, QueryEntity] = {}
    with deps.db.connection() as conn:
        exact = entity_links.canonical_ids(conn, user_id, [n for n, _ in pairs])
        for name, vec in pairs:
            if (eid := exact.get(name.strip().lower())) is not None:
                match = QueryEntity(eid, name, 1.0)
            else:
                near = entity_repo.nearest_canonical_entities(conn, user_id, vec, threshold, 1)
                if not near:
                    continue
                match = QueryEntity(near[0][0].id, name, near[0][1])
            best = found.get(match.entity_id)
            if best is None or match.strength > best.strength:
                found[match.entity_id] = match
    return list(found.values())


def entity_lane(
    deps: Deps,
    user_id: str,
    matches: Sequence[QueryEntity],
    k: int,
    as_of: datetime | None,
    time_range: TimeRange,
) -> list[Candidate]:
    """The top ``k`` windows for the question's resolved entities (none: no candidates)."""
    if not matches or k <= 0:
        return []
    strengths = {m.entity_id: m.strength for m in matches}
    filters = Filters(as_of, time_range.start, time_range.end)
    with deps.db.connection() as conn:
        # N of the IDF: the lexical lane's per-user statistics hold the window ends (a count
        # over the store read the user's whole segments table on every question)
        total = TERM_STATS.get(conn, deps.db, user_id).windows_at(as_of)
        df = ENTITY_WINDOWS.counts(conn, deps.db, user_id, sorted(strengths), as_of)
        weights = entity_weights(strengths, total, df)
        return ranked_windows(conn, user_id, weights, k, filters)
