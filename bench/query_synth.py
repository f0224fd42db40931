"""Synthetic memory of one user for the query benchmark: pure, seeded, numpy only.

What it makes for ``hours`` of continuous wear (a week = 168 h):

- segments at every scale, laid out by the ingest's own window hierarchy
  (:mod:`worldmm.memory.windows`): 120 × 30 s, 18 × 3 min (they tile the first nine minutes of
  each 10 min window), 6 × 10 min and 1 × 1 h per hour, with parent links;
- a few hundred canonical entities (the wearer "I", people, places, objects) plus aliases;
- episodic triples: a fixed number per segment of each scale (15 / 10 / 12 / 15, about 350k for
  a week), drawn from a per-10-minute context (one place, a few people, some objects) so that
  nearby segments share entities as real ones do; about 10 % have literal objects;
- semantic triples (a few thousand per week) on 10 min segments, some soft-deleted and
  pointing at the later fact that replaced them;
- one 1536-d clip embedding per 30 s segment and a few frame rows per 30 s segment.

Text embeddings are NOT produced by a text model: running MiniLM over 350k strings would take
longer than the benchmark itself. They are random unit vectors with a cluster structure
instead — entities scatter around one centre per category, a triple's vector is
``e(subject) + e(object) + ½ p(predicate)`` plus noise — which is all that retrieval
latency depends on (vector dimension, neighbourhood structure, row counts). Clip vectors
cluster around one centre per place. Queries (:func:`make_queries`) come from the same
generator: a query's vector lies near an existing fact or clip, and its named entities are
real entity names, so every search finds seeds as it would in use.

Every random draw comes from ``numpy.random.default_rng([seed, stream, index])``, so a
block's output does not depend on which other blocks were generated.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property

import numpy as np

from worldmm.memory.windows import dt_to_ms, ms_to_dt, parent_of
from worldmm.models import SCALES

START = datetime(2025, 5, 5, tzinfo=UTC)  # a Monday
EMBED_CHUNK = 4096  # rows per embedding block (fixed: blocks are seeded by their index)

# Random streams (second element of every seed).
_S_VOCAB, _S_CONTEXT, _S_EPISODIC, _S_EMBED, _S_SEMANTIC, _S_VISUAL, _S_QUERY = range(7)


def _words(text: str) -> tuple[str, ...]:
    return tuple(w.strip() for w in text.split(","))


PEOPLE = _words(
    "Alice, Ben, Chloe, Daniel, Emma, Farid, Grace, Hiro, Isabel, Jonas, Kemal, Lena, Marco, "
    "Nadia, Oscar, Priya, Quentin, Rosa, Samir, Tessa, Umar, Vera, Wen, Xavier, Yara, Zoe, Mum, "
    "Dad, Grandma Ines, Dr. Okafor, Coach Bell, Mrs. Lindqvist, the barista, the bus driver, the "
    "cashier, Leo, Mia, Noah, Olivia, Pablo, Ravi, Sofia, Tom, Uma, Victor, Will"
)
PLACES = _words(
    "kitchen, living room, bedroom, bathroom, hallway, balcony, garage, home office, office "
    "lobby, open-plan office, meeting room B, meeting room C, office kitchenette, coffee shop on "
    "Elm Street, bakery, supermarket, pharmacy, bus stop, number 12 bus, train platform, city "
    "park, playground, gym, swimming pool, library, bookshop, hardware store, post office, bank, "
    "doctor's waiting room, pizzeria, sushi bar, cinema, parking lot, laundromat, riverside path, "
    "farmers market, school gate, garden, friend's flat"
)
_COLOURS = _words(
    "red, blue, green, black, white, grey, yellow, orange, brown, silver, pink, purple"
)
_NOUNS = _words(
    "mug, laptop, notebook, phone, umbrella, backpack, water bottle, jacket, scarf, keys, wallet, "
    "headphones, charger, book, pen, stapler, lamp, chair, kettle, toaster, frying pan, cutting "
    "board, plate, bowl, spoon, towel, toothbrush, shampoo bottle, bicycle, helmet, shopping bag, "
    "receipt, newspaper, tablet, remote control, plant pot, watering can, sunglasses, watch, "
    "calendar, folder, whiteboard marker, coffee cup, sandwich, apple, banana, cereal box, milk "
    "carton, jar of honey, medicine box, yoga mat, tennis racket, football, guitar, camera, "
    "envelope, parcel, ticket, laundry basket, vacuum cleaner"
)
OBJECT_COUNT = 250
EPISODIC_PREDICATES = _words(
    "picked up, put down, talked with, walked into, looked at, used, opened, closed, held, drank "
    "from, ate, typed on, read, wrote in, handed, received, sat at, left, arrived at, called, "
    "laughed with, cleaned, washed, bought, paid for, carried, charged, searched for, found, "
    "placed on, pointed at, showed, borrowed, returned, dropped, fixed, waited at, met, "
    "photographed, listened to"
)
SEMANTIC_PREDICATES = _words(
    "likes, dislikes, usually drinks, usually eats, works at, lives near, owns, is friend of, is "
    "colleague of, keeps keys in, prefers, visits on weekends, goes to, is allergic to, plays, "
    "commutes by, shops at, borrows from, trusts, meets weekly with"
)
_EPISODIC_LITERALS = tuple(
    [f"at {h:02d}:{m:02d}" for h in range(24) for m in range(0, 60, 5)]
    + [f"{n} items" for n in range(1, 21)]
    + [f"${p}.{c:02d}" for p in range(1, 40) for c in (0, 50, 99)]
)
_DAYS = "Monday, Tuesday, Wednesday, Thursday, Friday, Saturday, Sunday, morning, evening, weekend"
_SEMANTIC_LITERALS = tuple(
    [f"every {d}" for d in _words(_DAYS)]
    + [f"around {h}:00" for h in range(6, 23)]
    + ["oat milk", "green tea", "espresso", "peanuts", "cycling", "running", "jazz"]
)


def _rng(seed: int, stream: int, index: int = 0) -> np.random.Generator:
    return np.random.default_rng([seed, stream, index])


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """L2-normalise rows, as float32."""
    m = np.asarray(matrix, dtype=np.float32)
    return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)


@dataclass(frozen=True)
class SynthConfig:
    """Size and shape of the synthetic memory (the defaults are one week)."""

    hours: int = 168
    seed: int = 0
    start: datetime = START
    triples_per_segment: tuple[tuple[int, int], ...] = ((30, 15), (180, 10), (600, 12), (3600, 15))
    semantic_per_week: int = 3000
    invalidated_fraction: float = 0.15
    frames_per_segment: int = 4
    alias_fraction: float = 0.2
    literal_fraction: float = 0.1
    text_dim: int = 384
    visual_dim: int = 1536

    def __post_init__(self) -> None:
        if self.hours < 1:
            raise ValueError(f"hours must be >= 1, got {self.hours}")
        if self.start.tzinfo is None or dt_to_ms(self.start) % (3600 * 1000):
            raise ValueError("start must be timezone-aware and on the hour")
        if {s for s, _ in self.triples_per_segment} != set(SCALES):
            raise ValueError(f"triples_per_segment must name every scale {SCALES}")

    @property
    def per_segment(self) -> dict[int, int]:
        return dict(self.triples_per_segment)

    @property
    def semantic_count(self) -> int:
        return max(20, round(self.semantic_per_week * self.hours / 168))

    @property
    def invalidated_count(self) -> int:
        f = self.invalidated_fraction
        return round(self.semantic_count * f / (1 + f))


# Segments per hour at each scale (3 min windows tile only the first 9 minutes of each 10).
SEGMENTS_PER_HOUR = {30: 120, 180: 18, 600: 6, 3600: 1}


def expected_counts(cfg: SynthConfig) -> dict[str, int]:
    """What the generator promises, by arithmetic only (the tests hold it to this)."""
    seg = {s: SEGMENTS_PER_HOUR[s] * cfg.hours for s in SCALES}
    vocab = Vocabulary.build(cfg)
    out = {f"segments_{s}": seg[s] for s in SCALES}
    out["segments"] = sum(seg.values())
    out.update({f"episodic_{s}": seg[s] * cfg.per_segment[s] for s in SCALES})
    out["episodic"] = sum(out[f"episodic_{s}"] for s in SCALES)
    out["semantic"] = cfg.semantic_count
    out["semantic_invalidated"] = cfg.invalidated_count
    out["entities_canonical"] = len(vocab.names)
    out["entities_alias"] = len(vocab.aliases)
    out["visual"] = seg[30]
    out["frames"] = seg[30] * cfg.frames_per_segment
    out["sessions"] = -(-cfg.hours // 24)
    return out


# --- vocabulary ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Vocabulary:
    """Canonical entities (index 0 is the wearer, "I"), aliases, predicates and literals,
    with their text vectors."""

    names: list[str]
    kinds: list[str]  # "self" | "person" | "place" | "object"
    vectors: np.ndarray  # (entities, text_dim), unit rows
    aliases: list[tuple[str, int]]  # (surface form, canonical index)
    alias_vectors: np.ndarray
    predicates: list[str]  # episodic then semantic
    predicate_vectors: np.ndarray
    literals: list[str]  # episodic then semantic
    literal_vectors: np.ndarray

    @classmethod
    def build(cls, cfg: SynthConfig) -> Vocabulary:
        rng = _rng(cfg.seed, _S_VOCAB)
        pairs = [(c, n) for c in _COLOURS for n in _NOUNS]
        picked = rng.choice(len(pairs), size=OBJECT_COUNT, replace=False)
        objects = [f"{pairs[i][0]} {pairs[i][1]}" for i in sorted(picked)]
        names = ["I", *PEOPLE, *PLACES, *objects]
        kinds = ["self"] + ["person"] * len(PEOPLE) + ["place"] * len(PLACES)
        kinds += ["object"] * len(objects)
        # clusters: one per kind, and per noun for objects (a "mug" is near other mugs)
        cluster_of = [
            k if k != "object" else f"object:{n.split(' ', 1)[1]}"
            for k, n in zip(kinds, names, strict=True)
        ]
        labels = sorted(set(cluster_of))
        centres = unit_rows(rng.standard_normal((len(labels), cfg.text_dim)))
        idx = np.array([labels.index(c) for c in cluster_of])
        vectors = unit_rows(
            centres[idx] + 0.9 * unit_rows(rng.standard_normal((len(names), cfg.text_dim)))
        )
        n_alias = round(cfg.alias_fraction * (len(names) - 1))
        alias_of = sorted(rng.choice(np.arange(1, len(names)), size=n_alias, replace=False))
        aliases = [(_alias(names[i], kinds[i]), int(i)) for i in alias_of]
        alias_vectors = unit_rows(
            vectors[alias_of] + 0.2 * unit_rows(rng.standard_normal((n_alias, cfg.text_dim)))
        )
        predicates = [*EPISODIC_PREDICATES, *SEMANTIC_PREDICATES]
        literals = [*_EPISODIC_LITERALS, *_SEMANTIC_LITERALS]
        return cls(
            names=names,
            kinds=kinds,
            vectors=vectors,
            aliases=aliases,
            alias_vectors=alias_vectors,
            predicates=predicates,
            predicate_vectors=unit_rows(rng.standard_normal((len(predicates), cfg.text_dim))),
            literals=literals,
            literal_vectors=unit_rows(rng.standard_normal((len(literals), cfg.text_dim))),
        )

    def of_kind(self, kind: str) -> np.ndarray:
        return np.array([i for i, k in enumerate(self.kinds) if k == kind])

    @property
    def first_semantic_predicate(self) -> int:
        return len(EPISODIC_PREDICATES)

    @property
    def first_semantic_literal(self) -> int:
        return len(_EPISODIC_LITERALS)


def _alias(name: str, kind: str) -> str:
    """A second surface form: 'the X' for things and places, 'X (friend)' for people."""
    return f"{name} (friend)" if kind == "person" else f"the {name}"


# --- segments ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Segments:
    """Window starts per scale (index order = time order) and each window's parent."""

    starts: dict[int, list[datetime]]
    parent: dict[int, list[tuple[int, int] | None]]  # (parent scale, parent index) or None

    @classmethod
    def build(cls, cfg: SynthConfig) -> Segments:
        t0 = dt_to_ms(cfg.start)
        starts: dict[int, list[datetime]] = {}
        index: dict[tuple[int, int], int] = {}
        for scale in SCALES:
            offsets = _window_offsets(scale)
            ms = [t0 + h * 3600_000 + o for h in range(cfg.hours) for o in offsets]
            starts[scale] = [ms_to_dt(m) for m in ms]
            index.update({(scale, m): i for i, m in enumerate(ms)})
        parent: dict[int, list[tuple[int, int] | None]] = {}
        for scale in SCALES:
            links: list[tuple[int, int] | None] = []
            for start in starts[scale]:
                p = parent_of((scale, dt_to_ms(start)))
                links.append(None if p is None else (p[0], index[p]))
            parent[scale] = links
        return cls(starts, parent)

    def end(self, scale: int, i: int) -> datetime:
        return self.starts[scale][i] + timedelta(seconds=scale)


def _window_offsets(scale: int) -> list[int]:
    """Window start offsets (ms) within one hour for a scale."""
    if scale == 180:
        return [ten * 600_000 + k * 180_000 for ten in range(6) for k in range(3)]
    return list(range(0, 3600_000, scale * 1000))


# --- episodic triples ----------------------------------------------------------------------


@dataclass(frozen=True)
class TripleSpecs:
    """Triples as index arrays: ``obj`` is an entity index or -1; ``literal`` a literal index
    or -1 (exactly one of them is set); ``segment`` indexes the segments of ``scale``."""

    scale: np.ndarray
    segment: np.ndarray
    subj: np.ndarray
    pred: np.ndarray
    obj: np.ndarray
    literal: np.ndarray

    def __len__(self) -> int:
        return int(self.scale.shape[0])

    @staticmethod
    def concat(parts: list[TripleSpecs]) -> TripleSpecs:
        cols = ("scale", "segment", "subj", "pred", "obj", "literal")
        return TripleSpecs(**{c: np.concatenate([getattr(p, c) for p in parts]) for c in cols})


def _contexts(cfg: SynthConfig, vocab: Vocabulary, hour: int) -> list[dict[str, np.ndarray]]:
    """The six 10-minute contexts of one hour: a place, up to three people, eight objects."""
    rng = _rng(cfg.seed, _S_CONTEXT, hour)
    places, people, objects = (vocab.of_kind(k) for k in ("place", "person", "object"))
    home = rng.choice(places)
    out = []
    for _ in range(6):
        place = home if rng.random() < 0.7 else rng.choice(places)
        out.append(
            {
                "place": np.array([place]),
                "people": rng.choice(people, size=int(rng.integers(0, 4)), replace=False),
                "objects": rng.choice(objects, size=8, replace=False),
            }
        )
    return out


def _segment_triples(
    rng: np.random.Generator,
    ctx: dict[str, np.ndarray],
    n: int,
    vocab: Vocabulary,
    literal_fraction: float,
) -> list[tuple[int, int, int, int]]:
    """``n`` distinct (subject, predicate, object, literal) of one segment from its context."""
    actors = np.concatenate([[0], ctx["people"]]).astype(int)
    things = np.concatenate([ctx["place"], ctx["people"], ctx["objects"]]).astype(int)
    n_pred, n_lit = len(EPISODIC_PREDICATES), vocab.first_semantic_literal
    seen: set[tuple[int, int, int, int]] = set()
    out = []
    while len(out) < n:
        r = rng.random()
        subj = int(actors[0]) if r < 0.5 else int(rng.choice(actors if r < 0.8 else things))
        pred = int(rng.integers(n_pred))
        if rng.random() < literal_fraction:
            key = (subj, pred, -1, int(rng.integers(n_lit)))
        else:
            pool = things if rng.random() < 0.9 else np.arange(1, len(vocab.names))
            obj = int(rng.choice(pool))
            if obj == subj:
                continue
            key = (subj, pred, obj, -1)
        if key not in seen:
            seen.add(key)
            out.append(key)
    return out


def _hour_triples(cfg: SynthConfig, vocab: Vocabulary, segs: Segments, hour: int) -> TripleSpecs:
    rng = _rng(cfg.seed, _S_EPISODIC, hour)
    contexts = _contexts(cfg, vocab, hour)
    rows: list[tuple[int, int, int, int, int, int]] = []
    for scale in SCALES:
        per_hour = SEGMENTS_PER_HOUR[scale]
        for i in range(hour * per_hour, (hour + 1) * per_hour):
            offset = (segs.starts[scale][i] - cfg.start).total_seconds() % 3600
            ctx = contexts[int(offset // 600)]
            if scale == 3600:  # an hour's summary mentions all of its contexts
                ctx = {k: np.concatenate([c[k] for c in contexts]) for k in ctx}
            for t in _segment_triples(
                rng, ctx, cfg.per_segment[scale], vocab, cfg.literal_fraction
            ):
                rows.append((scale, i, *t))
    a = np.array(rows, dtype=np.int64).reshape(-1, 6)
    return TripleSpecs(*(a[:, j] for j in range(6)))


# --- semantic triples ----------------------------------------------------------------------


@dataclass(frozen=True)
class SemanticSpecs:
    """Semantic triples on 10 min segments; ``replaced_by`` is the index (in these specs) of
    the fact that replaced a soft-deleted one, or -1 while it is active."""

    triples: TripleSpecs
    replaced_by: np.ndarray

    @property
    def invalidated(self) -> np.ndarray:
        return self.replaced_by >= 0


def _semantic(cfg: SynthConfig, vocab: Vocabulary) -> SemanticSpecs:
    rng = _rng(cfg.seed, _S_SEMANTIC)
    total, n_replaced = cfg.semantic_count, cfg.invalidated_count
    n_base = total - n_replaced
    n_seg = SEGMENTS_PER_HOUR[600] * cfg.hours
    subjects = np.concatenate([[0, 0, 0, 0], vocab.of_kind("person")]).astype(int)
    things = np.arange(1, len(vocab.names))
    p0, l0 = vocab.first_semantic_predicate, vocab.first_semantic_literal
    seen: set[tuple[int, ...]] = set()
    rows: list[tuple[int, int, int, int, int]] = []  # segment, subj, pred, obj, literal

    def add(segment: int, subj: int, pred: int) -> None:
        while True:
            if rng.random() < 0.2:
                obj, lit = -1, int(rng.integers(l0, len(vocab.literals)))
            else:
                obj, lit = int(rng.choice(things)), -1
            key = (segment, subj, pred, obj, lit)
            if obj != subj and key not in seen:
                seen.add(key)
                rows.append(key)
                return

    for _ in range(n_base):
        add(
            int(rng.integers(n_seg)),
            int(rng.choice(subjects)),
            int(rng.integers(p0, len(vocab.predicates))),
        )
    replaced_by = np.full(total, -1, dtype=np.int64)
    for j, old in enumerate(rng.choice(n_base, size=n_replaced, replace=False)):
        seg, subj, pred = rows[old][:3]
        add(int(rng.integers(seg, n_seg)), subj, pred)  # a later (or the same) window
        replaced_by[old] = n_base + j
    a = np.array(rows, dtype=np.int64).reshape(-1, 5)
    specs = TripleSpecs(np.full(len(a), 600), a[:, 0], a[:, 1], a[:, 2], a[:, 3], a[:, 4])
    return SemanticSpecs(specs, replaced_by)


# --- the memory ----------------------------------------------------------------------------


@dataclass
class SyntheticMemory:
    """Everything the loader writes, with embeddings produced lazily in fixed-size blocks."""

    cfg: SynthConfig
    vocab: Vocabulary = field(init=False)
    segments: Segments = field(init=False)

    def __post_init__(self) -> None:
        self.vocab = Vocabulary.build(self.cfg)
        self.segments = Segments.build(self.cfg)

    @cached_property
    def episodic(self) -> TripleSpecs:
        parts = [
            _hour_triples(self.cfg, self.vocab, self.segments, h) for h in range(self.cfg.hours)
        ]
        return TripleSpecs.concat(parts)

    @cached_property
    def semantic(self) -> SemanticSpecs:
        return _semantic(self.cfg, self.vocab)

    @cached_property
    def place_of_base_segment(self) -> np.ndarray:
        """The place of each 30 s segment's 10-minute context (drives the clip vectors)."""
        out = np.empty(len(self.segments.starts[30]), dtype=np.int64)
        for h in range(self.cfg.hours):
            ctx = _contexts(self.cfg, self.vocab, h)
            for k in range(120):
                out[h * 120 + k] = ctx[k // 20]["place"][0]
        return out

    def triple_text(self, specs: TripleSpecs, i: int) -> tuple[str, str, str]:
        v = self.vocab
        obj = v.names[specs.obj[i]] if specs.obj[i] >= 0 else v.literals[specs.literal[i]]
        return v.names[specs.subj[i]], v.predicates[specs.pred[i]], obj

    def triple_vectors(
        self, specs: TripleSpecs, start: int, stop: int, stream: int, noise: float = 0.35
    ) -> np.ndarray:
        """Text vectors of triples [start, stop) (block-seeded: any slice gives the same rows)."""
        v = self.vocab
        out = []
        for block in range(start // EMBED_CHUNK, -(-stop // EMBED_CHUNK)):
            lo, hi = block * EMBED_CHUNK, min(len(specs), (block + 1) * EMBED_CHUNK)
            sl = slice(lo, hi)
            obj = np.where(
                specs.obj[sl][:, None] >= 0,
                v.vectors[np.maximum(specs.obj[sl], 0)],
                v.literal_vectors[np.maximum(specs.literal[sl], 0)],
            )
            base = v.vectors[specs.subj[sl]] + obj + 0.5 * v.predicate_vectors[specs.pred[sl]]
            rng = _rng(self.cfg.seed, _S_EMBED, stream * 1_000_000 + block)
            jitter = noise * unit_rows(rng.standard_normal((hi - lo, self.cfg.text_dim)))
            vecs = unit_rows(unit_rows(base) + jitter)
            out.append(vecs[max(start, lo) - lo : min(stop, hi) - lo])
        return np.concatenate(out) if out else np.zeros((0, self.cfg.text_dim), np.float32)

    @cached_property
    def _visual_centres(self) -> np.ndarray:
        rng = _rng(self.cfg.seed, _S_VISUAL)
        return unit_rows(rng.standard_normal((len(self.vocab.names), self.cfg.visual_dim)))

    def visual_vectors(self, start: int, stop: int) -> np.ndarray:
        """Clip vectors of 30 s segments [start, stop): near their place's centre."""
        out = []
        for block in range(start // EMBED_CHUNK, -(-stop // EMBED_CHUNK)):
            lo = block * EMBED_CHUNK
            hi = min(len(self.segments.starts[30]), lo + EMBED_CHUNK)
            rng = _rng(self.cfg.seed, _S_VISUAL, 1 + block)
            noise = unit_rows(rng.standard_normal((hi - lo, self.cfg.visual_dim)))
            vecs = unit_rows(self._visual_centres[self.place_of_base_segment[lo:hi]] + noise)
            out.append(vecs[max(start, lo) - lo : min(stop, hi) - lo])
        return np.concatenate(out) if out else np.zeros((0, self.cfg.visual_dim), np.float32)

    def captions(self, scale: int) -> list[str]:
        """One caption per segment of ``scale``, written from its first triples."""
        specs = self.episodic
        first: dict[int, list[int]] = {}
        for i in np.flatnonzero(specs.scale == scale):
            lines = first.setdefault(int(specs.segment[i]), [])
            if len(lines) < 4:
                lines.append(int(i))
        lead = "" if scale == 30 else f"Over these {scale // 60} minutes: "
        return [
            lead + "; ".join(" ".join(self.triple_text(specs, i)) for i in first.get(k, [])) + "."
            for k in range(len(self.segments.starts[scale]))
        ]

    def session_of(self, start: datetime) -> str:
        return f"bench-day-{(start - self.cfg.start).days + 1}"

    def session_ids(self) -> list[str]:
        return sorted(
            {self.session_of(s) for s in self.segments.starts[3600]},
            key=lambda s: int(s.rsplit("-", 1)[1]),
        )


# --- queries -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Query:
    """One benchmark query with what the stand-in models answer for it."""

    memory_type: str  # episodic | semantic | visual
    text: str
    entities: list[str]  # what the stand-in NER returns
    vectors: dict[str, np.ndarray]  # text (query and each entity) -> text vector
    visual_vector: np.ndarray | None = None  # what the stand-in visual encoder returns


def make_queries(memory: SyntheticMemory, n: int, seed: int = 0) -> dict[str, list[Query]]:
    """``n`` queries per memory type, each near an existing fact (or clip)."""
    rng = _rng(memory.cfg.seed, _S_QUERY, seed)
    v = memory.vocab
    noisy = _noisy(rng)
    out: dict[str, list[Query]] = {"episodic": [], "semantic": [], "visual": []}
    ep = memory.episodic
    for k, i in enumerate(rng.choice(len(ep), size=n, replace=False)):
        subj, pred, obj = memory.triple_text(ep, int(i))
        text = f"[{k}] When did {subj} last {pred} {obj}?"
        ents = [v.names[j] for j in (ep.subj[i], ep.obj[i]) if j > 0]
        vecs = {text: noisy(memory.triple_vectors(ep, int(i), int(i) + 1, 0)[0], 0.5)}
        vecs.update({e: noisy(v.vectors[v.names.index(e)], 0.15) for e in ents})
        out["episodic"].append(Query("episodic", text, ents, vecs))
    sem = memory.semantic
    active = np.flatnonzero(~sem.invalidated)
    for k, i in enumerate(rng.choice(active, size=n, replace=len(active) < n)):
        subj, pred, obj = memory.triple_text(sem.triples, int(i))
        text = f"[{k}] What does {subj} {pred}?"
        vec = noisy(memory.triple_vectors(sem.triples, int(i), int(i) + 1, 1)[0], 0.5)
        out["semantic"].append(Query("semantic", text, [subj], {text: vec}))
    n_clips = len(memory.segments.starts[30])
    for k, i in enumerate(rng.choice(n_clips, size=n, replace=n_clips < n)):
        place = v.names[memory.place_of_base_segment[i]]
        text = f"[{k}] the {place} with things on the table"
        vec = noisy(memory.visual_vectors(int(i), int(i) + 1)[0], 0.5)
        out["visual"].append(Query("visual", text, [place], {}, vec))
    return out


def _noisy(rng: np.random.Generator):
    def add(vec: np.ndarray, scale: float) -> np.ndarray:
        noise = unit_rows(rng.standard_normal((1, vec.shape[0])))[0]
        return unit_rows((vec + scale * noise)[None, :])[0]

    return add


def hours_of(days: float) -> int:
    """Whole hours in ``days`` (at least one)."""
    return max(1, round(days * 24))


def iter_slices(total: int, size: int) -> Iterator[tuple[int, int]]:
    for lo in range(0, total, size):
        yield lo, min(total, lo + size)
