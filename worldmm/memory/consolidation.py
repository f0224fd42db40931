"""Semantic consolidation: fold each new semantic triple into the user's evolving facts.

For every new triple: the user's active semantic triples with cosine >=
``consolidation_threshold`` (top ``consolidation_top_k``) are candidates; the model returns the
updated triple and which candidates it replaces. Applying that decision is pure
(:func:`plan_consolidation`); writing it is one transaction: the new fact, soft deletes of the
replaced ones (``invalidated_at`` = event time, ``replaced_by`` = the new fact), merged
evidence, and an audit row with what was seen and decided. That transaction holds the user's
advisory lock (:mod:`worldmm.store.locks`) and writes only if the facts are still those the
decision saw, so consolidations of one user never interleave, whichever processes run them.
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from worldmm.llm.schemas import ConsolidationDecision
from worldmm.memory.entity_resolution import (
    EntityResolution,
    apply_resolutions,
    resolve_entities,
    surface_key,
)
from worldmm.memory.forget_fence import check_fence
from worldmm.models import Triple
from worldmm.store import audit as audit_store
from worldmm.store import triples as triple_store
from worldmm.store.errors import ConflictError
from worldmm.store.locks import lock_consolidation
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
    subject, predicate, obj = row.as_list()
    return Triple(
        subject=subject, predicate=predicate, object=obj, object_is_literal=row.object_is_literal
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
    retried: int = 0  # decisions redone because another writer changed the facts meanwhile


# How many times one new fact is decided again when other writers of the same user keep
# changing its candidates before it can be written (each retry means one of them committed).
MAX_DECISIONS = 16


async def consolidate_semantic(
    deps: Deps,
    user_id: str,
    segment_id: int,
    event_time: datetime,
    triples: list[Triple],
    context: str,
) -> ConsolidationStats:
    """Consolidate new semantic triples one by one (each sees the previous ones' effect).

    Consolidations of one user never interleave, in this process or across processes (the
    dataflow's workers, every API process): each fact is decided from the user's facts as
    they stood (read with their version stamp, outside any lock: the model call may take
    seconds), then written under the user's advisory lock only if that stamp is unchanged;
    otherwise it is decided again from the new facts. So the result is always that of some
    serial order, and no connection or lock is held across a model call.
    A reader's cached semantic graph sees the writes by its fingerprint, not by a message."""
    stats = ConsolidationStats()
    for new in triples:
        plan = await _consolidate_one(deps, user_id, segment_id, event_time, new, context, stats)
        if plan.action == "duplicate":
            stats.duplicates += 1
        elif plan.action == "update":
            stats.updated += 1
            stats.invalidated += len(plan.remove_ids)
    return stats


@dataclass(frozen=True)
class _Decided:
    """One decision and everything its write needs, with the facts' stamp it was made on."""

    version: str
    found: list[tuple[TripleRow, float]]
    decision: ConsolidationDecision | None
    plan: ConsolidationPlan
    resolved: dict[str, EntityResolution]
    embedding: Any


async def _consolidate_one(
    deps: Deps,
    user_id: str,
    segment_id: int,
    event_time: datetime,
    new: Triple,
    context: str,
    stats: ConsolidationStats,
) -> ConsolidationPlan:
    emb = (await asyncio.to_thread(deps.embedder.embed, [_text(new)]))[0]
    for attempt in range(1, MAX_DECISIONS + 1):
        decided = await _decide(deps, user_id, segment_id, new, emb, context)
        written = await asyncio.to_thread(
            _write_if_unchanged, deps, user_id, segment_id, event_time, new, decided
        )
        if written:
            return decided.plan
        stats.retried += 1
        log.info(
            "consolidation_retry user=%s segment=%s attempt=%d: the facts changed meanwhile",
            user_id,
            segment_id,
            attempt,
        )
        # spread writers that keep meeting each other (no lock is held while waiting)
        await asyncio.sleep(random.uniform(0, 0.02 * attempt))
    raise ConflictError(
        f"consolidation of user {user_id!r} met concurrent changes {MAX_DECISIONS} times"
    )


async def _decide(
    deps: Deps, user_id: str, segment_id: int, new: Triple, emb: Any, context: str
) -> _Decided:
    settings = deps.settings
    version, found = await asyncio.to_thread(
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
    if plan.triple is not new:
        emb = (await asyncio.to_thread(deps.embedder.embed, [_text(plan.triple)]))[0]
    return _Decided(version, found, decision, plan, resolved, emb)


def _text(t: Triple) -> str:
    return f"{t.subject} {t.predicate} {t.object}"


def _candidates(
    deps: Deps, user_id: str, emb, threshold: float, k: int
) -> tuple[str, list[tuple[TripleRow, float]]]:
    """The user's facts' version stamp, then the candidates (read after it: a change in
    between shows as a changed stamp at write time, never as a stale decision)."""
    with deps.db.transaction() as conn:
        version = triple_store.triples_fingerprint(conn, user_id, "semantic")
        found = triple_store.similar_active_semantic_triples(conn, user_id, emb, threshold, k)
    return version, found


def _write_if_unchanged(
    deps: Deps,
    user_id: str,
    segment_id: int,
    event_time: datetime,
    new: Triple,
    decided: _Decided,
) -> bool:
    """Write the decision under the user's consolidation lock if the user's facts are still
    those it was made on; False (nothing written) when another writer changed them."""
    plan = decided.plan
    with deps.db.transaction() as conn:
        lock_consolidation(conn, user_id)
        check_fence(conn)  # a fact of a summary forgotten meanwhile is not written
        if triple_store.triples_fingerprint(conn, user_id, "semantic") != decided.version:
            return False
        new_id = None
        if plan.action != "duplicate":
            ids = apply_resolutions(conn, user_id, decided.resolved)
            t = plan.triple
            row = TripleWrite(
                subject_entity_id=ids[surface_key(t.subject)],
                predicate=t.predicate,
                object_entity_id=None if t.object_is_literal else ids[surface_key(t.object)],
                object_literal=t.object if t.object_is_literal else None,
                embedding=decided.embedding,
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
                    {"id": r.id, "triple": r.as_list(), "cosine": round(c, 4)}
                    for r, c in decided.found
                ],
            },
            decision=plan.action,
            outputs={
                "model": decided.decision.model_dump() if decided.decision is not None else None,
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
    return True
