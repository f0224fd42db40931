"""One user's synthetic memory for the query benchmark, and its queries: pure, seeded, numpy
only (docs/benchmarks/query.md, "What is loaded"). Every draw uses ``default_rng([seed,
stream, index])``, so a block does not depend on the others."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property

import numpy as np

from bench.harness import words
from worldmm.memory.windows import dt_to_ms, ms_to_dt, parent_of
from worldmm.models import SCALES, choice_letter

START = datetime(2025, 5, 5, tzinfo=UTC)  # a Monday
EMBED_CHUNK = 4096  # rows per embedding block (fixed: blocks are seeded by their index)
# Segments per hour at each scale (3 min windows tile only the first 9 minutes of each 10).
SEGMENTS_PER_HOUR = {30: 120, 180: 18, 600: 6, 3600: 1}

_S_VOCAB, _S_CONTEXT, _S_EPISODIC, _S_EMBED, _S_SEMANTIC, _S_VISUAL, _S_QUERY = range(7)


PEOPLE = words(
    "Alice, Ben, Chloe, Daniel, Emma, Farid, Grace, Hiro, Isabel, Jonas, Kemal, Lena, Marco, "
    "Nadia, Oscar, Priya, Quentin, Rosa, Samir, Tessa, Umar, Vera, Wen, Xavier, Yara, Zoe, Mum, "
    "Dad, Grandma Ines, Dr. Okafor, Coach Bell, Mrs. Lindqvist, the barista, the bus driver, the "
    "cashier, Leo, Mia, Noah, Olivia, Pablo, Ravi, Sofia, Tom, Uma, Victor, Will"
)
PLACES = words(
    "kitchen, living room, bedroom, bathroom, hallway, balcony, garage, home office, office "
    "lobby, open-plan office, meeting room B, meeting room C, office kitchenette, coffee shop on "
    "Elm Street, bakery, supermarket, pharmacy, bus stop, number 12 bus, train platform, city "
    "park, playground, gym, swimming pool, library, bookshop, hardware store, post office, bank, "
    "doctor's waiting room, pizzeria, sushi bar, cinema, parking lot, laundromat, riverside path, "
    "farmers market, school gate, garden, friend's flat"
)
_COLOURS = words(
    "red, blue, green, black, white, grey, yellow, orange, brown, silver, pink, purple"
)
_NOUNS = words(
    "mug, laptop, notebook, phone, umbrella, backpack, water bottle, jacket, scarf, keys, wallet, "
    "headphones, charger, book, pen, stapler, lamp, chair, kettle, toaster, frying pan, cutting "
    "board, plate, bowl, spoon, towel, toothbrush, shampoo bottle, bicycle, helmet, shopping bag, "
    "receipt, newspaper, tablet, remote control, plant pot, watering can, sunglasses, watch, "
    "calendar, folder, whiteboard marker, coffee cup, sandwich, apple, banana, cereal box, milk "
    "carton, jar of honey, medicine box, yoga mat, tennis racket, football, guitar, camera, "
    "envelope, parcel, ticket, laundry basket, vacuum cleaner"
)
OBJECT_COUNT = 250
EPISODIC_PREDICATES = words(
    "picked up, put down, talked with, walked into, looked at, used, opened, closed, held, drank "
    "from, ate, typed on, read, wrote in, handed, received, sat at, left, arrived at, called, "
    "laughed with, cleaned, washed, bought, paid for, carried, charged, searched for, found, "
    "placed on, pointed at, showed, borrowed, returned, dropped, fixed, waited at, met, "
    "photographed, listened to"
)
SEMANTIC_PREDICATES = words(
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
    [f"every {d}" for d in words(_DAYS)]
    + [f"around {h}:00" for h in range(6, 23)]
    + ["oat milk", "green tea", "espresso", "peanuts", "cycling", "running", "jazz"]
)
PREDICATES = (*EPISODIC_PREDICATES, *SEMANTIC_PREDICATES)
LITERALS = (*_EPISODIC_LITERALS, *_SEMANTIC_LITERALS)  # episodic ones first


def _rng(seed: int, stream: int, index: int = 0) -> np.random.Generator:  # stream: _S_*
    return np.random.default_rng([seed, stream, index])


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """L2-normalise rows, as float32."""
    m = np.asarray(matrix, dtype=np.float32)
    return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)


def _noise(rng: np.random.Generator, rows: int, dim: int) -> np.ndarray:
    return unit_rows(rng.standard_normal((rows, dim)))


def _blockwise(
    start: int, stop: int, total: int, dim: int, make: Callable[[int, int, int], np.ndarray]
) -> np.ndarray:
    """Rows [start, stop) of a matrix made by ``make(block, lo, hi)`` in EMBED_CHUNK blocks."""
    out = []
    for block in range(start // EMBED_CHUNK, -(-stop // EMBED_CHUNK)):
        lo, hi = block * EMBED_CHUNK, min(total, (block + 1) * EMBED_CHUNK)
        out.append(make(block, lo, hi)[max(start, lo) - lo : min(stop, hi) - lo])
    return np.concatenate(out) if out else np.zeros((0, dim), np.float32)


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


def expected_counts(cfg: SynthConfig) -> dict[str, int]:
    """What the generator promises, by arithmetic only (the tests hold it to this)."""
    seg = {s: SEGMENTS_PER_HOUR[s] * cfg.hours for s in SCALES}
    episodic = {s: n * cfg.per_segment[s] for s, n in seg.items()}
    vocab = Vocabulary.build(cfg)
    return {
        **{f"segments_{s}": n for s, n in seg.items()},
        **{f"episodic_{s}": n for s, n in episodic.items()},
        "segments": sum(seg.values()),
        "episodic": sum(episodic.values()),
        "semantic": cfg.semantic_count,
        "semantic_invalidated": cfg.invalidated_count,
        "entities_canonical": len(vocab.names),
        "entities_alias": len(vocab.aliases),
        "visual": seg[30],
        "frames": seg[30] * cfg.frames_per_segment,
        "sessions": -(-cfg.hours // 24),
    }


@dataclass(frozen=True)
class Vocabulary:
    """Canonical entities (index 0 is the wearer, "I") and aliases, with the text vectors of
    those, of PREDICATES and of LITERALS."""

    names: list[str]
    kinds: list[str]  # "self" | "person" | "place" | "object"
    vectors: np.ndarray  # (entities, text_dim), unit rows
    aliases: list[tuple[str, int]]  # (surface form, canonical index)
    alias_vectors: np.ndarray
    predicate_vectors: np.ndarray
    literal_vectors: np.ndarray

    @classmethod
    def build(cls, cfg: SynthConfig) -> Vocabulary:
        rng, dim = _rng(cfg.seed, _S_VOCAB), cfg.text_dim
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
        centres = _noise(rng, len(labels), dim)
        idx = np.array([labels.index(c) for c in cluster_of])
        vectors = unit_rows(centres[idx] + 0.9 * _noise(rng, len(names), dim))
        n_alias = round(cfg.alias_fraction * (len(names) - 1))
        alias_of = sorted(rng.choice(np.arange(1, len(names)), size=n_alias, replace=False))
        # a second surface form: 'X (friend)' for people, 'the X' for things and places
        aliases = [
            (f"{names[i]} (friend)" if kinds[i] == "person" else f"the {names[i]}", int(i))
            for i in alias_of
        ]
        alias_vectors = unit_rows(vectors[alias_of] + 0.2 * _noise(rng, n_alias, dim))
        predicate_vectors = _noise(rng, len(PREDICATES), dim)
        literal_vectors = _noise(rng, len(LITERALS), dim)
        return cls(
            names, kinds, vectors, aliases, alias_vectors, predicate_vectors, literal_vectors
        )

    def of_kind(self, kind: str) -> np.ndarray:
        return np.array([i for i, k in enumerate(self.kinds) if k == kind])


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
            if scale == 180:  # 3 min windows tile the first nine minutes of each 10 min one
                offsets = [ten * 600_000 + k * 180_000 for ten in range(6) for k in range(3)]
            else:
                offsets = list(range(0, 3600_000, scale * 1000))
            ms = [t0 + h * 3600_000 + o for h in range(cfg.hours) for o in offsets]
            starts[scale] = [ms_to_dt(m) for m in ms]
            index.update({(scale, m): i for i, m in enumerate(ms)})
        parent: dict[int, list[tuple[int, int] | None]] = {}
        for scale in SCALES:
            links = [parent_of((scale, dt_to_ms(start))) for start in starts[scale]]
            parent[scale] = [None if p is None else (p[0], index[p]) for p in links]
        return cls(starts, parent)

    def end(self, scale: int, i: int) -> datetime:
        return self.starts[scale][i] + timedelta(seconds=scale)


@dataclass(frozen=True)
class TripleSpecs:
    """Triples as index arrays: exactly one of ``obj`` (entity) and ``literal`` is not -1;
    ``segment`` indexes the segments of ``scale``."""

    scale: np.ndarray
    segment: np.ndarray
    subj: np.ndarray
    pred: np.ndarray
    obj: np.ndarray
    literal: np.ndarray

    @classmethod
    def of_rows(cls, rows: list[tuple[int, ...]]) -> TripleSpecs:
        a = np.array(rows, dtype=np.int64).reshape(-1, 6)
        return cls(*(a[:, j] for j in range(6)))

    def __len__(self) -> int:
        return int(self.scale.shape[0])


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
    rng: np.random.Generator, ctx: dict[str, np.ndarray], n: int, vocab: Vocabulary, lit: float
) -> list[tuple[int, int, int, int]]:
    """``n`` distinct (subject, predicate, object, literal) of one segment from its context,
    a share ``lit`` with a literal object."""
    actors = np.concatenate([[0], ctx["people"]]).astype(int)
    things = np.concatenate([ctx["place"], ctx["people"], ctx["objects"]]).astype(int)
    seen: set[tuple[int, int, int, int]] = set()
    out = []
    while len(out) < n:
        r = rng.random()
        subj = int(actors[0]) if r < 0.5 else int(rng.choice(actors if r < 0.8 else things))
        pred = int(rng.integers(len(EPISODIC_PREDICATES)))
        if rng.random() < lit:
            key = (subj, pred, -1, int(rng.integers(len(_EPISODIC_LITERALS))))
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


def _hour_triples(cfg: SynthConfig, vocab: Vocabulary, segs: Segments, hour: int) -> list:
    rng = _rng(cfg.seed, _S_EPISODIC, hour)
    contexts = _contexts(cfg, vocab, hour)
    rows = []
    for scale in SCALES:
        per_hour = SEGMENTS_PER_HOUR[scale]
        for i in range(hour * per_hour, (hour + 1) * per_hour):
            offset = (segs.starts[scale][i] - cfg.start).total_seconds() % 3600
            ctx = contexts[int(offset // 600)]
            if scale == 3600:  # an hour's summary mentions all of its contexts
                ctx = {k: np.concatenate([c[k] for c in contexts]) for k in ctx}
            triples = _segment_triples(
                rng, ctx, cfg.per_segment[scale], vocab, cfg.literal_fraction
            )
            rows += [(scale, i, *t) for t in triples]
    return rows


@dataclass(frozen=True)
class SemanticSpecs:
    """Semantic triples on 10 min segments; ``replaced_by``: the index of the fact that
    replaced a soft-deleted one, -1 while it is active."""

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
    p0, l0 = len(EPISODIC_PREDICATES), len(_EPISODIC_LITERALS)  # the semantic ones follow
    seen: set[tuple[int, ...]] = set()
    rows: list[tuple[int, ...]] = []  # scale, segment, subj, pred, obj, literal

    def add(segment: int, subj: int, pred: int) -> None:
        while True:
            if rng.random() < 0.2:
                obj, lit = -1, int(rng.integers(l0, len(LITERALS)))
            else:
                obj, lit = int(rng.choice(things)), -1
            key = (600, segment, subj, pred, obj, lit)
            if obj != subj and key not in seen:
                seen.add(key)
                rows.append(key)
                return

    for _ in range(n_base):
        segment, subj = int(rng.integers(n_seg)), int(rng.choice(subjects))
        add(segment, subj, int(rng.integers(p0, len(PREDICATES))))
    replaced_by = np.full(total, -1, dtype=np.int64)
    for j, old in enumerate(rng.choice(n_base, size=n_replaced, replace=False)):
        _, seg, subj, pred = rows[old][:4]
        add(int(rng.integers(seg, n_seg)), subj, pred)  # a later (or the same) window
        replaced_by[old] = n_base + j
    return SemanticSpecs(TripleSpecs.of_rows(rows), replaced_by)


@dataclass
class SyntheticMemory:
    """Everything the loader writes; embeddings are made lazily, in fixed-size blocks."""

    cfg: SynthConfig
    vocab: Vocabulary = field(init=False)
    segments: Segments = field(init=False)

    def __post_init__(self) -> None:
        self.vocab = Vocabulary.build(self.cfg)
        self.segments = Segments.build(self.cfg)

    @cached_property
    def episodic(self) -> TripleSpecs:
        rows = []
        for hour in range(self.cfg.hours):
            rows += _hour_triples(self.cfg, self.vocab, self.segments, hour)
        return TripleSpecs.of_rows(rows)

    @cached_property
    def semantic(self) -> SemanticSpecs:
        return _semantic(self.cfg, self.vocab)

    @cached_property
    def place_of_base_segment(self) -> np.ndarray:
        """The place of each 30 s segment's 10-minute context (drives the clip vectors)."""
        places = [
            ctx["place"][0]
            for hour in range(self.cfg.hours)
            for ctx in _contexts(self.cfg, self.vocab, hour)
        ]
        return np.repeat(np.asarray(places, dtype=np.int64), 20)

    def triple_text(self, specs: TripleSpecs, i: int) -> tuple[str, str, str]:
        v = self.vocab
        obj = v.names[specs.obj[i]] if specs.obj[i] >= 0 else LITERALS[specs.literal[i]]
        return v.names[specs.subj[i]], PREDICATES[specs.pred[i]], obj

    def triple_vectors(
        self, specs: TripleSpecs, start: int, stop: int, stream: int, noise: float = 0.35
    ) -> np.ndarray:
        """Text vectors of triples [start, stop): ``e(subj) + e(obj) + ½ p(pred)`` plus noise."""
        v, dim = self.vocab, self.cfg.text_dim

        def make(block: int, lo: int, hi: int) -> np.ndarray:
            sl = slice(lo, hi)
            obj = np.where(
                specs.obj[sl][:, None] >= 0,
                v.vectors[np.maximum(specs.obj[sl], 0)],
                v.literal_vectors[np.maximum(specs.literal[sl], 0)],
            )
            base = v.vectors[specs.subj[sl]] + obj + 0.5 * v.predicate_vectors[specs.pred[sl]]
            rng = _rng(self.cfg.seed, _S_EMBED, stream * 1_000_000 + block)
            return unit_rows(unit_rows(base) + noise * _noise(rng, hi - lo, dim))

        return _blockwise(start, stop, len(specs), dim, make)

    @cached_property
    def _visual_centres(self) -> np.ndarray:
        rng = _rng(self.cfg.seed, _S_VISUAL)
        return _noise(rng, len(self.vocab.names), self.cfg.visual_dim)

    def visual_vectors(self, start: int, stop: int) -> np.ndarray:
        """Clip vectors of 30 s segments [start, stop): near their place's centre."""
        dim = self.cfg.visual_dim

        def make(block: int, lo: int, hi: int) -> np.ndarray:
            noise = _noise(_rng(self.cfg.seed, _S_VISUAL, 1 + block), hi - lo, dim)
            return unit_rows(self._visual_centres[self.place_of_base_segment[lo:hi]] + noise)

        return _blockwise(start, stop, len(self.segments.starts[30]), dim, make)

    def captions(self, scale: int) -> list[str]:
        """One caption per segment of ``scale``, written from its first four triples."""
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
        days = -(-self.cfg.hours // 24)
        return [f"bench-day-{d}" for d in range(1, days + 1)]


@dataclass(frozen=True)
class Query:
    """One benchmark query with what the stand-in models answer for it."""

    memory_type: str  # episodic | semantic | visual
    text: str
    entities: list[str]  # what the stand-in NER returns
    vectors: dict[str, np.ndarray]  # text (query and each entity) -> text vector
    visual_vector: np.ndarray | None = None  # what the stand-in visual encoder returns


CHOICES = 4  # options of an episodic question asked as served


def make_queries(
    memory: SyntheticMemory, n: int, seed: int = 0, *, choices: bool = True
) -> dict[str, list[Query]]:
    """``n`` queries per memory type, each near an existing fact (or clip). With
    ``choices`` an episodic question is what the served agent searches with for a
    multiple-choice question: the question, then lettered options (the fact's object and
    three other facts' objects), as :func:`worldmm.agent.choices.with_choices` writes it;
    without, the question alone (the form of the figures before 29 Nov 2026)."""
    rng = _rng(memory.cfg.seed, _S_QUERY, seed)
    # a stream of its own: the questions drawn are the same with and without options
    option_rng = _rng(memory.cfg.seed, _S_QUERY, 1_000_000 + seed)
    v = memory.vocab

    def noisy(vec: np.ndarray, scale: float) -> np.ndarray:
        return unit_rows((vec + scale * _noise(rng, 1, vec.shape[0])[0])[None, :])[0]

    out: dict[str, list[Query]] = {"episodic": [], "semantic": [], "visual": []}
    ep = memory.episodic
    for k, i in enumerate(rng.choice(len(ep), size=n, replace=False)):
        subj, pred, obj = memory.triple_text(ep, int(i))
        text = f"[{k}] When did {subj} last {pred} {obj}?"
        if choices:
            others = option_rng.choice(len(ep), size=CHOICES - 1, replace=False)
            options = [obj, *(memory.triple_text(ep, int(j))[2] for j in others)]
            order = option_rng.permutation(CHOICES)
            text = f"[{k}] What did {subj} last {pred}? " + " ".join(
                f"({choice_letter(n_)}) {options[o]}" for n_, o in enumerate(order)
            )
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


def hours_of(days: float) -> int:
    """Whole hours in ``days`` (at least one)."""
    return max(1, round(days * 24))
