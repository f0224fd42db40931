"""Semantic consolidation: fold each new semantic triple into the user's evolving facts.

For every new triple: the user's active semantic triples with cosine >=
``consolidation_threshold`` (top ``consolidation_top_k``) are candidates; the model returns the
updated triple and which candidates it replaces. Applying that decision is pure
(:func:`plan_consolidation`); writing it is one transaction: the new fact, soft deletes of the
replaced ones (``invalidated_at`` = event time, ``replaced_by`` = the new fact), merged
evidence, and an audit row with what was seen and decided.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from worldmm.llm.schemas import ConsolidationDecision
from worldmm.memory.entity_resolution import (
    EntityResolution,
    apply_resolutions,
    resolve_entities,
    surface_key,
)
from worldmm.models import Triple
from worldmm.store import audit as audit_store
from worldmm.store import triples as triple_store
from worldmm.store.models import TripleRow, TripleWrite

if TYPE_CHECKING:
    from worldmm.deps import Deps

log = logging.getLogger("worldmm.memory.consolidation")

Action = Literal["insert", "update", "duplicate"]


@dataclass(frozen=True)
class ConsolidationPlan:
    action: Action  # insert: nothing similar; update: replaces candidates; duplicate: no-op
    triple: Triple
    remove_ids: list[int] = field(default_factory=list)
    evidence_ids: list[int] = field(default_factory=list)
    ignored_indices: list[int] = field(default_factory=list)  # out-of-range model output


def row_as_triple(row: TripleRow) -> Triple:
    return Triple(
        subject=row.subject_name,
        predicate=row.predicate,
        object=row.object_name,
        object_is_literal=row.object_is_literal,
    )


def _same(a: Triple, b: Triple) -> bool:
    return [s.lower() for s in a.as_list()] == [s.lower() for s in b.as_list()]


def plan_consolidation(
    new: Triple,
    evidence_ids: list[int],
    candidates: list[TripleRow],
    decision: ConsolidationDecision | None,
) -> ConsolidationPlan:
    """Turn the model's decision into what to write (pure; indices are into ``candidates``)."""
    if not candidates or decision is None:
        return ConsolidationPlan("insert", new, [], sorted(set(evidence_ids)))
    valid = [i for i in decision.triples_to_remove if 0 <= i < len(candidates)]
    ignored = [i for i in decision.triples_to_remove if not 0 <= i < len(candidates)]
    removed = [candidates[i] for i in dict.fromkeys(valid)]
    updated = decision.updated_triple
    kept_same = [c for c in candidates if c not in removed and _same(row_as_triple(c), updated)]
    evidence = set(evidence_ids)
    for c in removed:
        evidence.update(c.evidence_segment_ids)
    if kept_same and not removed:
        # The fact is already held, unchanged: nothing to write but the audit.
        return ConsolidationPlan("duplicate", updated, [], sorted(evidence), ignored)
    return ConsolidationPlan(
        "update" if removed else "insert",
        updated,
        [c.id for c in removed],
        sorted(evidence),
        ignored,
    )


@dataclass
class ConsolidationStats:
    updated: int = 0
    duplicates: int = 0
    invalidated: int = 0


async def consolidate_semantic(
    deps: Deps,
    user_id: str,
    segment_id: int,
    event_time: datetime,
    triples: list[Triple],
    context: str,
) -> ConsolidationStats:
    """Consolidate new semantic triples one by one (each sees the previous ones' effect).
    A reader's cached semantic graph sees the writes by its fingerprint, not by a message."""
    stats = ConsolidationStats()
    settings = deps.settings
    for new in triples:
        emb = (await asyncio.to_thread(deps.embedder.embed, [_text(new)]))[0]
        found = await asyncio.to_thread(
            _candidates,
            deps,
            user_id,
            emb,
            settings.consolidation_threshold,
            settings.consolidation_top_k,
        )
        rows = [row for row, _ in found]
        decision = None
        if rows:
            decision = await deps.roles.consolidate(new, [row_as_triple(r) for r in rows])
        plan = plan_consolidation(new, [segment_id], rows, decision)
        surfaces = [plan.triple.subject]
        if not plan.triple.object_is_literal:
            surfaces.append(plan.triple.object)
        resolved = await resolve_entities(deps, user_id, surfaces, context)
        emb = (
            emb
            if plan.triple is new
            else (await asyncio.to_thread(deps.embedder.embed, [_text(plan.triple)]))[0]
        )
        await asyncio.to_thread(
            _write_plan,
            deps,
            user_id,
            segment_id,
            event_time,
            new,
            found,
            decision,
            plan,
            resolved,
            emb,
        )
        if plan.action == "duplicate":
            stats.duplicates += 1
        elif plan.action == "update":
            stats.updated += 1
            stats.invalidated += len(plan.remove_ids)
    return stats


def _text(t: Triple) -> str:
    return f"{t.subject} {t.predicate} {t.object}"


def _candidates(
    deps: Deps, user_id: str, emb, threshold: float, k: int
) -> list[tuple[TripleRow, float]]:
    with deps.db.connection() as conn:
        return triple_store.similar_active_semantic_triples(conn, user_id, emb, threshold, k)


def _write_plan(
    deps: Deps,
    user_id: str,
    segment_id: int,
    event_time: datetime,
    new: Triple,
    found: list[tuple[TripleRow, float]],
    decision: ConsolidationDecision | None,
    plan: ConsolidationPlan,
    resolved: dict[str, EntityResolution],
    emb,
) -> None:
    with deps.db.transaction() as conn:
        new_id = None
        if plan.action != "duplicate":
            ids = apply_resolutions(conn, user_id, resolved)
            t = plan.triple
            row = TripleWrite(
                subject_entity_id=ids[surface_key(t.subject)],
                predicate=t.predicate,
                object_entity_id=None if t.object_is_literal else ids[surface_key(t.object)],
                object_literal=t.object if t.object_is_literal else None,
                embedding=emb,
                valid_from=event_time,
                evidence_segment_ids=plan.evidence_ids,
                origin="consolidated" if plan.action == "update" else "extracted",
            )
            (new_id,) = triple_store.insert_triples(conn, user_id, segment_id, "semantic", [row])
            triple_store.invalidate_triples(conn, user_id, plan.remove_ids, event_time, new_id)
        audit_store.insert_consolidation_audit(
            conn,
            user_id,
            inputs={
                "new": new.as_list(),
                "candidates": [
                    {"id": r.id, "triple": r.as_list(), "cosine": round(s, 4)} for r, s in found
                ],
            },
            decision=plan.action,
            outputs={
                "model": decision.model_dump() if decision is not None else None,
                "written_id": new_id,
                "removed_ids": plan.remove_ids,
                "ignored_indices": plan.ignored_indices,
                "evidence_segment_ids": plan.evidence_ids,
            },
            segment_id=segment_id,
        )
    log.info(
        "consolidated user=%s segment=%s action=%s removed=%s",
        user_id,
        segment_id,
        plan.action,
        plan.remove_ids,
    )
