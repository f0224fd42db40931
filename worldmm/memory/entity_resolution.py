"""Entity resolution: map a window's surface forms onto the user's canonical entities.

Order (DESIGN.md §3): exact name/alias match; else the nearest canonical entities by embedding
(cosine >= ``entity_match_threshold``), each confirmed by the LLM (``entity_confirm``), best
first; else a new canonical entity. Deciding reads the store and asks the model; writing
happens later inside the window's transaction (:func:`apply_resolutions`), and the store's
writes are idempotent on (user, surface form), so a replayed window resolves the same way.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
import psycopg

from worldmm.store import entities as entity_store

if TYPE_CHECKING:
    from worldmm.deps import Deps

log = logging.getLogger("worldmm.memory.entities")

MAX_CANDIDATES = 3  # confirmations asked per unmatched surface, best first


@dataclass(frozen=True)
class EntityResolution:
    surface: str
    action: Literal["existing", "alias", "new"]
    embedding: np.ndarray
    canonical_id: int | None = None  # set for existing / alias
    canonical_name: str | None = None
    similarity: float | None = None


def surface_key(surface: str) -> str:
    return " ".join(surface.split()).lower()


def unique_surfaces(surfaces: Iterable[str]) -> list[str]:
    """First spelling of each surface form, case/space-insensitively, in order."""
    seen: dict[str, str] = {}
    for s in surfaces:
        s = " ".join(s.split())
        if s and surface_key(s) not in seen:
            seen[surface_key(s)] = s
    return list(seen.values())


async def resolve_entities(
    deps: Deps, user_id: str, surfaces: Iterable[str], context: str
) -> dict[str, EntityResolution]:
    """Decide, for each distinct surface, which canonical entity it is (keyed by surface_key)."""
    names = unique_surfaces(surfaces)
    if not names:
        return {}
    vectors = await asyncio.to_thread(deps.embedder.embed, names)
    lookups = await asyncio.to_thread(_lookup, deps, user_id, names, vectors)
    out: dict[str, EntityResolution] = {}
    for name, vec, (exact, candidates) in zip(names, vectors, lookups, strict=True):
        if exact is not None:
            out[surface_key(name)] = EntityResolution(
                name, "existing", vec, exact.id, exact.name, 1.0
            )
            continue
        out[surface_key(name)] = await _confirm_or_new(deps, name, vec, candidates, context)
    return out


def _lookup(
    deps: Deps, user_id: str, names: list[str], vectors: np.ndarray
) -> list[tuple[entity_store.EntityRow | None, list]]:
    threshold = deps.settings.entity_match_threshold
    with deps.db.connection() as conn:
        found = []
        for name, vec in zip(names, vectors, strict=True):
            exact = entity_store.find_entity_by_surface(conn, user_id, name)
            near = (
                []
                if exact is not None
                else entity_store.nearest_canonical_entities(
                    conn, user_id, vec, threshold, MAX_CANDIDATES
                )
            )
            found.append((exact, near))
        return found


async def _confirm_or_new(
    deps: Deps, name: str, vec: np.ndarray, candidates: list, context: str
) -> EntityResolution:
    for row, similarity in candidates:
        if await deps.roles.entity_confirm(name, row.name, context):
            log.debug("entity_alias surface=%r canonical=%r sim=%.3f", name, row.name, similarity)
            return EntityResolution(name, "alias", vec, row.id, row.name, similarity)
    return EntityResolution(name, "new", vec)


def apply_resolutions(
    conn: psycopg.Connection, user_id: str, resolutions: dict[str, EntityResolution]
) -> dict[str, int]:
    """Write new canonical entities and aliases (one batch); return surface_key -> canonical
    entity id."""
    ids: dict[str, int] = {}
    new: list[tuple[str, EntityResolution]] = []
    for key, r in resolutions.items():
        if r.action == "existing":
            assert r.canonical_id is not None
            ids[key] = r.canonical_id
        else:
            assert r.action == "new" or r.canonical_id is not None
            new.append((key, r))
    items = [
        (r.surface, r.embedding, r.canonical_id if r.action == "alias" else None) for _, r in new
    ]
    for (key, _), row in zip(new, entity_store.insert_surfaces(conn, user_id, items), strict=True):
        ids[key] = row.id
    return ids
