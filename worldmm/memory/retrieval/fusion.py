"""Pure ranking math of episodic retrieval: time priors, reciprocal rank fusion, drill-down.

Every lane (lexical, dense, graph) returns candidates with its own score, on its own scale
(BM25 sums, cosines, PageRank mass). Nothing here compares raw scores across lanes:

- priors reorder one lane's candidates: the lane's score relative to its best candidate,
  times ``1 + weight * p(t) + w_imp * importance + w_recall * (1 - 0.5 ** recall_count)``,
  where ``p`` decays with the distance from the question time ("the last time": recent) or
  from the earliest candidate ("the first time"); importance (0..1, 0.5 when unknown) and the
  recall count are the segment's own (schema 0015);
- reciprocal rank fusion adds ``weight / (k + rank)`` per lane (Cormack et al. 2009), so a
  segment found by two lanes outranks one found by a single lane at the same rank;
- drill-down replaces a coarse segment by its best 30 s windows (ranked by the same lanes
  among its children) when one of them carries the match, and keeps the summary as context.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from worldmm.memory.retrieval.question_time import TimeConstraint

BASE_SCALE = 30
# Fixed, not settings: cross-validation on EgoLife's question folds left each at its neutral
# value with no held-out loss (docs/benchmarks/egolife.md, "Pruning"), so none is a knob.
RRF_K = 60.0  # reciprocal rank fusion's k
PRIOR_HALFLIFE_H = 12.0  # the recency prior's and the explicit-time priors' half-life
DRILL_KEEP = 2  # 30 s windows kept per drilled-down coarse segment


@dataclass(frozen=True)
class Candidate:
    """One lane's view of a segment."""

    segment_id: int
    scale: int
    start: datetime
    end: datetime
    score: float
    raw: float | None = None  # the lane's own score when ``score`` was reweighted by a prior

    @property
    def lane_score(self) -> float:
        return self.score if self.raw is None else self.raw


@dataclass(frozen=True)
class PriorParams:
    """How strongly time pulls (the default, when no phrase names a time, and the explicit
    priors), and how much a segment's importance and recall count add (values from settings,
    through ``EpisodicOptions.from_settings``)."""

    default_weight: float
    default_halflife_h: float
    weight: float
    halflife_h: float
    importance_weight: float
    recall_weight: float


# A segment's (importance or None, recall count), as worldmm.store.importance_recall reads them.
SegmentPriors = Mapping[int, tuple[float | None, int]]
NEUTRAL_IMPORTANCE = 0.5  # segments built before importance existed


def segment_boost(prior: tuple[float | None, int] | None, params: PriorParams) -> float:
    """What a segment's own weight adds to its lane factor: importance (neutral when
    unknown) and recalls, saturating (1 recall: half the weight, 3: seven eighths)."""
    importance, recalls = prior if prior is not None else (None, 0)
    imp = NEUTRAL_IMPORTANCE if importance is None else importance
    return params.importance_weight * imp + params.recall_weight * (1.0 - 0.5**recalls)


@dataclass
class Fused:
    segment_id: int
    scale: int
    start: datetime
    end: datetime
    score: float
    # lane -> (rank in the lane after its prior, the lane's own score)
    lanes: dict[str, tuple[int, float]] = field(default_factory=dict)


def _decay(hours: float, halflife_h: float) -> float:
    return math.pow(0.5, max(0.0, hours) / halflife_h)


def prior_values(
    cands: Sequence[Candidate],
    constraint: TimeConstraint,
    as_of: datetime | None,
    params: PriorParams,
) -> tuple[list[float], float]:
    """Per candidate, the prior p in [0, 1], and the weight it is applied with."""
    if not cands:
        return [], 0.0
    if constraint.prior == "early":
        first = min(c.start for c in cands)
        hours = [(c.start - first).total_seconds() / 3600 for c in cands]
        return [_decay(h, params.halflife_h) for h in hours], params.weight
    if as_of is None:
        return [0.0] * len(cands), 0.0
    hours = [(as_of - c.end).total_seconds() / 3600 for c in cands]
    if constraint.prior == "recent":
        return [_decay(h, params.halflife_h) for h in hours], params.weight
    return [_decay(h, params.default_halflife_h) for h in hours], params.default_weight


def apply_prior(
    cands: Sequence[Candidate],
    constraint: TimeConstraint,
    as_of: datetime | None,
    params: PriorParams,
    priors: SegmentPriors | None = None,
) -> list[Candidate]:
    """The lane's candidates reordered by ``norm(score) * (1 + weight * p + boost)``, best
    first; ``boost`` (:func:`segment_boost`) is read from ``priors`` by segment id."""
    if not cands:
        return []
    prior, weight = prior_values(cands, constraint, as_of, params)
    hi = max(c.score for c in cands)
    own = priors or {}
    out = []
    for c, p in zip(cands, prior, strict=True):
        # relative to the lane's best (a cosine below 0 counts as no match)
        norm = max(0.0, c.score) / hi if hi > 0 else 1.0
        out.append(norm * (1.0 + weight * p + segment_boost(own.get(c.segment_id), params)))
    order = sorted(range(len(cands)), key=lambda i: (-out[i], cands[i].segment_id))
    return [
        Candidate(
            cands[i].segment_id,
            cands[i].scale,
            cands[i].start,
            cands[i].end,
            out[i],
            cands[i].lane_score,
        )
        for i in order
    ]


def rrf(
    lanes: Mapping[str, Sequence[Candidate]], weights: Mapping[str, float], k: float
) -> list[Fused]:
    """Reciprocal rank fusion of ranked lanes; ties go to the earlier window, then the id.
    A lane without a weight weighs 0, as in settings."""
    fused: dict[int, Fused] = {}
    for lane, cands in lanes.items():
        w = weights.get(lane, 0.0)
        for rank, c in enumerate(cands, start=1):
            f = fused.get(c.segment_id)
            if f is None:
                f = fused[c.segment_id] = Fused(c.segment_id, c.scale, c.start, c.end, 0.0)
            f.score += w / (k + rank)
            f.lanes[lane] = (rank, c.lane_score)
    return sorted(fused.values(), key=lambda f: (-f.score, f.start, f.segment_id))


@dataclass
class Pick:
    """A segment chosen for the answer; ``parent`` is the coarse segment it was drilled from."""

    fused: Fused
    parent: Fused | None = None


def drill_down(
    ranked: Sequence[Fused],
    children: Mapping[int, Sequence[Fused]],
    keep: int,
    per_parent: int,
    fits: Mapping[int, bool] | None = None,
) -> list[Pick]:
    """Walk the fused order: a 30 s segment is kept as is; a coarse one expanded in
    ``children`` (its 30 s descendants, fused among themselves, best first) gives way to its
    best ``per_parent`` children not already picked — unless ``fits[parent]`` is False (no
    child matched better than the summary), when the coarse segment stays."""
    picked: list[Pick] = []
    seen: set[int] = set()
    for f in ranked:
        if len(picked) >= keep:
            break
        kids = children.get(f.segment_id)
        if f.scale > BASE_SCALE and kids and (fits is None or fits.get(f.segment_id, True)):
            added = 0
            for kid in kids:
                if kid.segment_id in seen:
                    continue
                picked.append(Pick(kid, parent=f))
                seen.add(kid.segment_id)
                added += 1
                if added >= per_parent or len(picked) >= keep:
                    break
            if added:
                continue
        if f.segment_id not in seen:
            picked.append(Pick(f))
            seen.add(f.segment_id)
    return picked[:keep]


def top_coarse(ranked: Iterable[Fused], n: int) -> list[Fused]:
    """The first ``n`` segments coarser than 30 s in fused order (the drill-down parents)."""
    out = []
    for f in ranked:
        if len(out) >= n:
            break
        if f.scale > BASE_SCALE:
            out.append(f)
    return out
