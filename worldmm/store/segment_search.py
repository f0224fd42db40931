"""What the lexical and dense lanes of episodic retrieval read: segment text and embeddings.

Every query is filtered by user and, when given, by ``as_of`` (a segment exists at T when its
window has ended by T), by a window range (segments overlapping ``[start, end)``), by scales
and by an explicit id set (drill-down ranks the children of one segment). Only ``complete``
segments are searched: a pending or failed one has no trustworthy text yet.

Lexical scoring is BM25 with binary term frequency over the stored ``search_tsv`` (schema
0004): each matched query lexeme adds its IDF, and the sum is normalised by the segment's
length against the mean length of its scale (a 1 h summary is long and would otherwise win
on sheer vocabulary). ``ts_rank_cd`` weighs every query term alike; with questions of 20
words plus four choices, the rare word that pins the moment drowned among common ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import NamedTuple

import numpy as np
import psycopg
from psycopg import sql

from worldmm.store import knn
from worldmm.store._sql import as_vector, fetch_count, segments_by_id, vec_cast
from worldmm.store.distribute import spans_wearers

BM25_K1 = 1.2
BM25_B = 0.75


class LaneRow(NamedTuple):
    segment_id: int
    scale: int
    start: datetime
    end: datetime
    score: float


class SegmentText(NamedTuple):
    segment_id: int
    user_id: str
    caption: str | None
    transcript: str | None


def search_text(caption: str | None, transcript: str | None) -> str:
    """What a segment's embedding is made from (the lexical lane indexes the same two)."""
    return "\n".join(t.strip() for t in (caption, transcript) if t and t.strip())


# --- writes ---------------------------------------------------------------------------------


def upsert_segment_embeddings(
    conn: psycopg.Connection,
    user_id: str,
    items: Sequence[tuple[int, np.ndarray]],
    model: str,
) -> int:
    """Store (or replace) the text embeddings of this user's segments; returns rows written.
    Ids that are not this user's are skipped. The segments' windows are read first and the
    rows written from arrays: two statements, each on the wearer's shard group alone."""
    if not items:
        return 0
    windows = segments_by_id(
        conn, user_id, "scale_seconds, window_start, window_end", [i for i, _ in items]
    )
    mine = [(i, as_vector(e)) for i, e in items if i in windows]
    if not mine:
        return 0
    vec = vec_cast(mine[0][1]).removeprefix("::")
    return conn.execute(
        "INSERT INTO segment_embeddings AS e (segment_id, user_id, scale_seconds,"
        " window_start, window_end, model, embedding)"
        " SELECT r.id, %s, r.scale, r.ws, r.we, %s, r.emb FROM unnest(%s::bigint[],"
        f" %s::integer[], %s::timestamptz[], %s::timestamptz[], %s::{vec}[])"
        " AS r(id, scale, ws, we, emb)"
        " ON CONFLICT (segment_id, user_id) DO UPDATE SET embedding = EXCLUDED.embedding,"
        " model = EXCLUDED.model, window_start = EXCLUDED.window_start,"
        " window_end = EXCLUDED.window_end, updated_at = EXCLUDED.updated_at",
        (
            user_id,
            model,
            [i for i, _ in mine],
            *([windows[i][n] for i, _ in mine] for n in range(3)),
            [e for _, e in mine],
        ),
    ).rowcount


_MISSING_WHERE = (
    "s.processing_status = 'complete'"
    " AND (coalesce(s.caption, '') <> '' OR coalesce(s.transcript, '') <> '')"
    " AND (e.segment_id IS NULL OR e.model <> %(model)s)"
)


def count_missing_embeddings(conn: psycopg.Connection, model: str, user_id: str | None) -> int:
    """Complete segments with text but no embedding by ``model`` (all users when None)."""
    user = " AND s.user_id = %(u)s" if user_id is not None else ""
    if user_id is None:
        spans_wearers(conn)
    return fetch_count(
        conn,
        "SELECT count(*) FROM segments s LEFT JOIN segment_embeddings e"
        " ON e.user_id = s.user_id AND e.segment_id = s.id"
        f" WHERE {_MISSING_WHERE}{user}",
        {"model": model, "u": user_id},
    )


def missing_embeddings(
    conn: psycopg.Connection, model: str, user_id: str | None, after_id: int, limit: int
) -> list[SegmentText]:
    """The next ``limit`` segments (by id, above ``after_id``) that need an embedding."""
    user = " AND s.user_id = %(u)s" if user_id is not None else ""
    if user_id is None:
        spans_wearers(conn)
    rows = conn.execute(
        "SELECT s.id, s.user_id, s.caption, s.transcript FROM segments s"
        " LEFT JOIN segment_embeddings e"
        " ON e.user_id = s.user_id AND e.segment_id = s.id"
        f" WHERE {_MISSING_WHERE}{user} AND s.id > %(after)s ORDER BY s.id LIMIT %(limit)s",
        {"model": model, "u": user_id, "after": after_id, "limit": limit},
    ).fetchall()
    return [SegmentText(*r) for r in rows]


# --- reads -----------------------------------------------------------------------------------


class Filters(NamedTuple):
    """What every lane read filters by besides the user: ``as_of``, a window range, scales
    and an explicit id set (each None when not given)."""

    as_of: datetime | None = None
    start: datetime | None = None
    end: datetime | None = None
    scales: Sequence[int] | None = None
    ids: Sequence[int] | None = None

    def where(self, alias: str) -> str:
        """The SQL conditions (each led by AND) on table alias ``alias``."""
        where = []
        if self.as_of is not None:
            where.append(f"{alias}.window_end <= %(as_of)s")
        if self.start is not None:
            where.append(f"{alias}.window_end > %(start)s")
        if self.end is not None:
            where.append(f"{alias}.window_start < %(end)s")
        if self.scales is not None:
            where.append(f"{alias}.scale_seconds = ANY(%(scales)s)")
        if self.ids is not None:
            where.append(f"{alias}.{'segment_id' if alias == 'e' else 'id'} = ANY(%(ids)s)")
        return "".join(f" AND {w}" for w in where)

    def params(self) -> dict[str, object]:
        """The values :meth:`where` refers to."""
        return {
            "as_of": self.as_of,
            "start": self.start,
            "end": self.end,
            "scales": list(self.scales) if self.scales is not None else None,
            "ids": list(self.ids) if self.ids is not None else None,
        }


def query_lexemes(conn: psycopg.Connection, text: str) -> list[str]:
    """The lexemes PostgreSQL's english configuration makes of ``text`` (stop words dropped,
    stemmed), in order of first appearance; single characters (choice letters) dropped."""
    rows = conn.execute(
        "SELECT lexeme FROM unnest(to_tsvector('english'::regconfig, %s)) ORDER BY positions[1]",
        (text,),
    ).fetchall()
    return [r[0] for r in rows if len(r[0]) > 1]


def word_lexemes(conn: psycopg.Connection, words: Sequence[str]) -> dict[str, list[str]]:
    """Each word's lexemes in PostgreSQL's english configuration (a stop word has none)."""
    rows = conn.execute(
        "SELECT w, lexeme FROM unnest(%s::text[]) AS w,"
        " unnest(to_tsvector('english'::regconfig, w))",
        (list(words),),
    ).fetchall()
    out: dict[str, list[str]] = {w: [] for w in words}
    for word, lexeme in rows:
        out[word].append(lexeme)
    return out


def _tsquery_literal(lexeme: str) -> str:
    """A lexeme as tsquery input text: quoted, so it is taken as is (no second stemming)."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


# The lexical lane's candidate cap (segments scored per search): a floor, and per result asked.
# Four weeks hold ~97k segments, and one colour word matched 22k of them.
LEXICAL_CANDIDATES_MIN = 2_000
LEXICAL_CANDIDATES_PER_RESULT = 100


def candidate_cap(k: int) -> int:
    """Segments a lexical search of ``k`` results may select by their lexemes."""
    return max(LEXICAL_CANDIDATES_MIN, LEXICAL_CANDIDATES_PER_RESULT * k)


# BM25's length normalisation is largest for the shortest segments (relative length -> 0): no
# segment scores more than this many times the sum of the IDFs of the lexemes it matches.
MAX_LENGTH_FACTOR = (BM25_K1 + 1) / (1 + BM25_K1 * (1 - BM25_B))


def prunable_terms(terms: Sequence[tuple[str, float]], threshold: float) -> int:
    """How many of the commonest ``terms`` (sorted rarest first) the candidate search may
    leave out, given ``threshold``: a score ``k`` segments are known to reach. A segment
    that matches only left-out lexemes scores at most ``MAX_LENGTH_FACTOR`` times their IDF
    sum, which must stay below the threshold; so it cannot be among the top ``k`` (MaxScore,
    Turtle and Flood 1995). The rarest term is always searched."""
    dropped, total = 0, 0.0
    for _lexeme, weight in reversed(terms[1:]):
        if MAX_LENGTH_FACTOR * (total + weight) >= threshold:
            break
        total += weight
        dropped += 1
    return dropped


def lexical_search(
    conn: psycopg.Connection,
    user_id: str,
    terms: Sequence[tuple[str, float]],
    mean_length: dict[int, float],
    k: int,
    filters: Filters = Filters(),
    *,
    prune: bool = True,
    doc_freq: Mapping[str, int] | None = None,
    max_candidates: int | None = None,
    max_proof: int | None = None,
) -> list[LaneRow]:
    """The user's top ``k`` segments for weighted lexemes ``terms`` (lexeme, idf), best first.

    Scoring every segment that holds any query lexeme costs as many segments as the
    commonest lexeme matches (a third of four weeks' segments for a colour word). With
    ``prune`` only the rarest lexemes select candidates (every lexeme scores them): those
    :func:`prunable_terms` guesses from the rarest lexeme's IDF and, with ``doc_freq``
    (segments per lexeme) and ``max_candidates``, at most those whose segments add up to the
    cap (:func:`capped_terms`): the first query's work is bounded by the cap, not by how
    many segments share a common word. Its ``k``-th score then bounds what a segment holding
    only left-out lexemes would need: the sets of them that could reach it
    (:func:`covering_sets`, e.g. two common words together) select candidates too in a
    second query, which GIN answers by intersecting their posting lists, leaving out the
    segments the first query scored. When the first selects fewer than ``k``, the next
    rarest lexemes select too, one query each, until there are ``k`` to bound by. The
    result is exactly the unpruned one (MaxScore, Turtle and Flood 1995).

    With ``max_proof`` (and ``doc_freq``) the second query runs only when the posting lists
    it reads (:func:`proof_postings`) hold at most that many segments: GIN walks the union of
    every list in an OR of sets, so the proof costs as much as its common words are common
    (a question with four options at twelve weeks: 100k-400k postings, 50-250 ms). Past it
    the ranking is the first query's: every candidate holding one of the rarest lexemes,
    each scored on every lexeme; a segment holding only common ones can be missing."""
    terms = sorted(((t, w) for t, w in terms if w > 0), key=lambda t: -t[1])
    if not terms or k <= 0:
        return []
    query = _LexicalQuery(conn, user_id, terms, mean_length, k, filters)
    everything = len(terms)
    if filters.ids is not None and len(set(filters.ids)) <= k:
        # at most k segments can pass: all of them are the top k, so one statement scores
        # them (a drill-down's children; pruning took a statement per lexeme there)
        return query.run(everything)
    n = everything - prunable_terms(terms, terms[0][1]) if prune else everything
    if prune and doc_freq is not None and max_candidates is not None:
        n = min(n, capped_terms(terms, doc_freq, max_candidates))
    if n == everything:
        return query.run(everything)
    rows = query.run(n)
    done = n  # lexemes all of whose segments were candidates of ``rows``
    while len(rows) < k and done < everything:
        # Too few to bound anything: the next rarest lexemes' segments join (within the cap,
        # at least one lexeme), those not scored yet. (Selecting with every lexeme instead
        # was the twelve-week tail: a rare name plus common words, 180 ms; query.md.)
        step = everything
        if prune and doc_freq is not None and max_candidates is not None:
            step = done + capped_terms(terms[done:], doc_freq, max_candidates)
        rows = _merged(rows, query.run(step, after=done), k)
        done = step
    if done == everything:
        return rows
    weights = [w for _, w in terms]
    # A lower k-th score than the true one only adds sets, so these bounds hold for every
    # wider selection too.
    n = done
    while n < everything:
        sets = covering_sets(weights[n:], rows[-1].score)
        if sets is not None:
            break
        n += 1  # too many sets: this lexeme selects on its own
    else:
        sets = []  # every lexeme left selects on its own
    if n == done and not sets:
        return rows
    if (
        max_proof is not None
        and doc_freq is not None
        and proof_postings(terms, doc_freq, range(done, n), sets, n) > max_proof
    ):
        return rows
    # Only segments not selected before: those are scored in ``rows`` already, and the
    # sets' common words would fetch and score most of them again.
    return _merged(rows, query.run(n, [[n + i for i in s] for s in sets], after=done), k)


def proof_postings(
    terms: Sequence[tuple[str, float]],
    doc_freq: Mapping[str, int],
    alone: Sequence[int],
    sets: Sequence[Sequence[int]],
    offset: int,
) -> int:
    """Segments in the posting lists the second query reads: those of the lexemes ``alone``
    selects and of every lexeme in ``sets`` (indexes from ``offset``), each list once."""
    read = set(alone) | {offset + i for s in sets for i in s}
    return sum(doc_freq.get(terms[i][0], 0) for i in read)


def _merged(rows: Sequence[LaneRow], more: Sequence[LaneRow], k: int) -> list[LaneRow]:
    """The top ``k`` of two rankings of disjoint candidates."""
    return sorted([*rows, *more], key=lambda r: (-r.score, r.segment_id))[:k]


# Sets of left-out lexemes a second lexical query ORs in at most; past it the rarest left-out
# lexeme selects candidates on its own instead.
MAX_COVERING_SETS = 16


def covering_sets(weights: Sequence[float], threshold: float) -> list[list[int]] | None:
    """Index sets of ``weights`` (left-out lexemes' IDFs, largest first) whose sum a segment
    holding only them would need to score ``threshold`` (``MAX_LENGTH_FACTOR`` times the sum
    reaches it): a segment that can reach it holds every lexeme of one set. None when more than
    ``MAX_COVERING_SETS`` are needed."""
    out: list[list[int]] = []
    rest = [sum(weights[i:]) for i in range(len(weights) + 1)]

    def grow(start: int, chosen: list[int], total: float) -> bool:
        for i in range(start, len(weights)):
            if MAX_LENGTH_FACTOR * (total + rest[i]) < threshold:
                return True  # nothing from here on reaches it
            if MAX_LENGTH_FACTOR * (total + weights[i]) >= threshold:
                out.append([*chosen, i])
                if len(out) > MAX_COVERING_SETS:
                    return False
            elif not grow(i + 1, [*chosen, i], total + weights[i]):
                return False
        return True

    return out if grow(0, [], 0.0) else None


def capped_terms(
    terms: Sequence[tuple[str, float]], doc_freq: Mapping[str, int], max_candidates: int
) -> int:
    """How many of ``terms`` (rarest first) select candidates under a cap of
    ``max_candidates`` segments: the longest prefix whose document frequencies add up to at
    most the cap, and never fewer than one (impact order: a rarer lexeme weighs more)."""
    total = 0
    for n, (lexeme, _weight) in enumerate(terms):
        total += doc_freq.get(lexeme, 0)
        if total > max_candidates:
            return max(1, n)
    return len(terms)


class _LexicalQuery:
    """One lexical search's SQL, run with the ``n`` rarest lexemes selecting candidates and
    every lexeme scoring them (an inline sum, not a subquery per segment)."""

    def __init__(
        self,
        conn: psycopg.Connection,
        user_id: str,
        terms: Sequence[tuple[str, float]],
        mean_length: dict[int, float],
        k: int,
        filters: Filters,
    ) -> None:
        self.conn = conn
        self.literals = [_tsquery_literal(t) for t, _ in terms]
        known = sorted(mean_length)
        overall = (sum(mean_length.values()) / len(mean_length)) if mean_length else 1.0
        self.params: dict[str, object] = {
            "u": user_id,
            "scale_keys": known,
            "scale_mean": [max(1.0, mean_length[s]) for s in known],
            "overall": max(1.0, overall),
            "k1": BM25_K1,
            "b": BM25_B,
            "k": k,
            **filters.params(),
        }
        for i, (literal, (_, weight)) in enumerate(zip(self.literals, terms, strict=True)):
            self.params[f"t{i}"] = literal
            self.params[f"w{i}"] = float(weight)
        self.raw = raw = sql.SQL(" + ").join(
            sql.SQL("CASE WHEN s.search_tsv @@ {}::tsquery THEN {}::float8 ELSE 0.0 END").format(
                sql.Placeholder(f"t{i}"), sql.Placeholder(f"w{i}")
            )
            for i in range(len(terms))
        )
        self.sql = sql.SQL(
            "SELECT id, scale_seconds, window_start, window_end,"
            " raw * (%(k1)s + 1) / (1 + %(k1)s * (1 - %(b)s + %(b)s * rel_len)) AS score"
            " FROM (SELECT s.id, s.scale_seconds, s.window_start, s.window_end,"
            " length(s.search_tsv)::float8 / coalesce("
            "(%(scale_mean)s::float8[])[array_position(%(scale_keys)s::int[], s.scale_seconds)],"
            " %(overall)s) AS rel_len, ({raw}) AS raw"
            " FROM segments s WHERE s.user_id = %(u)s AND s.processing_status = 'complete'"
            " AND s.search_tsv @@ %(any)s::tsquery{filters}) AS cand"
            " ORDER BY score DESC, id LIMIT %(k)s"
        ).format(raw=raw, filters=sql.SQL(filters.where("s")))

    def run(self, n: int, sets: Sequence[Sequence[int]] = (), *, after: int = 0) -> list[LaneRow]:
        """Candidates: segments holding one of the lexemes ``after`` to ``n`` (rarest first)
        or all of a set, and none of the ``after`` rarest (scored before: the index leaves
        them out before any row is read)."""
        both = [f"({' & '.join(self.literals[i] for i in group)})" for group in sets]
        selection = " | ".join([*self.literals[after:n], *both])
        if after:
            selection = f"({selection}) & !({' | '.join(self.literals[:after])})"
        params = {**self.params, "any": selection}
        rows = self.conn.execute(self.sql, params).fetchall()
        return [LaneRow(int(r[0]), int(r[1]), r[2], r[3], float(r[4])) for r in rows]


def dense_query(filters: Filters) -> knn.VectorQuery:
    """The dense lane's search of ``segment_embeddings`` under ``filters``; the user's
    btree holds the window end, the primary key the ids."""
    counted = Filters(filters.as_of, filters.start, ids=filters.ids)
    return knn.VectorQuery(
        table="segment_embeddings",
        alias="e",
        columns="e.segment_id, e.scale_seconds, e.window_start, e.window_end",
        tiebreak="segment_id",
        where=filters.where("e"),
        params=filters.params(),
        count_where=counted.where("e"),
    )


def dense_search(
    conn: psycopg.Connection,
    user_id: str,
    embedding: np.ndarray,
    k: int,
    filters: Filters = Filters(),
    *,
    exact_rows: int | None = None,
    at_least: int = 0,
) -> list[LaneRow]:
    """The user's ``k`` segments whose text embedding is nearest ``embedding`` (cosine
    similarity as the score, best first); exact below ``exact_rows`` rows to search
    (:mod:`worldmm.store.knn`); ``at_least``: rows the caller knows pass ``filters`` (above
    the exact limit nothing is counted)."""
    rows = knn.nearest(
        conn,
        dense_query(filters),
        user_id,
        as_vector(embedding),
        k,
        exact_rows=exact_rows,
        at_least=at_least,
    )
    return [
        LaneRow(
            int(r["segment_id"]),
            int(r["scale_seconds"]),
            r["window_start"],
            r["window_end"],
            1.0 - float(r["distance"]),
        )
        for r in rows
    ]


class ChildRow(NamedTuple):
    """A 30 s descendant of a drill-down parent, with what every lane and prior needs of it:
    its BM25 score for the question's lexemes (None when it holds none), its text's cosine
    to the question (None without an embedding), its importance and recall count."""

    parent_id: int
    row: LaneRow  # score unused: the lanes' scores are the two below
    lexical: float | None
    cosine: float | None
    importance: float | None
    recall_count: int


def drill_children(
    conn: psycopg.Connection,
    user_id: str,
    parent_ids: Sequence[int],
    terms: Sequence[tuple[str, float]],
    mean_length: dict[int, float],
    embedding: np.ndarray,
    filters: Filters = Filters(),
    scale: int = 30,
) -> list[ChildRow]:
    """Every complete ``scale`` descendant of ``parent_ids`` (through the parent links, any
    depth) within ``filters``, scored by both text lanes, in one statement: what a
    drill-down read in five (the tree, the priors, the lexical and the dense search among
    the children, and the dense search's count). Oldest first per parent. The lexical score
    is :func:`lexical_search`'s over the same weighted ``terms``, the cosine the dense
    lane's, so the children rank as those searches ranked them."""
    if not parent_ids:
        return []
    terms = [(t, w) for t, w in terms if w > 0]
    query = _LexicalQuery(conn, user_id, terms, mean_length, len(parent_ids), filters)
    q = as_vector(embedding)
    # the lexical lane's own BM25 sum of the terms' weights (nothing to sum without terms)
    raw = query.raw if terms else sql.SQL("0.0::float8")
    matched = sql.SQL("s.search_tsv @@ %(any)s::tsquery") if terms else sql.SQL("false")
    statement = sql.SQL(
        "WITH RECURSIVE tree(root, id, scale_seconds, status) AS ("
        " SELECT p.id, p.id, p.scale_seconds, p.processing_status"
        " FROM segments p WHERE p.user_id = %(u)s AND p.id = ANY(%(parents)s)"
        " UNION ALL"
        " SELECT t.root, c.id, c.scale_seconds, c.processing_status"
        " FROM tree t JOIN segments c ON c.user_id = %(u)s AND c.parent_segment_id = t.id"
        " WHERE t.scale_seconds > %(scale)s)"
        " SELECT t.root, s.id, s.scale_seconds, s.window_start, s.window_end,"
        " CASE WHEN {matched} THEN ({raw}) * (%(k1)s + 1) / (1 + %(k1)s * (1 - %(b)s + %(b)s"
        " * length(s.search_tsv)::float8 / coalesce((%(scale_mean)s::float8[])"
        "[array_position(%(scale_keys)s::int[], s.scale_seconds)], %(overall)s))) END,"
        " 1 - (e.embedding <=> %(q)s{cast}), s.importance, s.recall_count"
        " FROM tree t JOIN segments s ON s.user_id = %(u)s AND s.id = t.id"
        " LEFT JOIN segment_embeddings e ON e.user_id = %(u)s AND e.segment_id = s.id"
        " WHERE t.scale_seconds = %(scale)s AND t.status = 'complete' AND t.root <> t.id"
        "{filters} ORDER BY t.root, s.window_start, s.id"
    ).format(
        matched=matched,
        raw=raw,
        cast=sql.SQL(vec_cast(q)),
        filters=sql.SQL(filters.where("s")),
    )
    params = {
        **query.params,
        "parents": list(parent_ids),
        "scale": scale,
        "q": q,
        "any": " | ".join(query.literals),
    }
    return [
        ChildRow(
            int(r[0]),
            LaneRow(int(r[1]), int(r[2]), r[3], r[4], 0.0),
            None if r[5] is None else float(r[5]),
            None if r[6] is None else float(r[6]),
            None if r[7] is None else float(r[7]),
            int(r[8]),
        )
        for r in conn.execute(statement, params).fetchall()
    ]


def segment_windows(
    conn: psycopg.Connection, user_id: str, ids: Sequence[int]
) -> dict[int, tuple[datetime, datetime]]:
    """(window start, window end) of each of this user's segments among ``ids``."""
    return segments_by_id(conn, user_id, "window_start, window_end", ids)


def first_segment_start(conn: psycopg.Connection, user_id: str) -> datetime | None:
    """The start of the user's earliest segment, or None without any."""
    row = conn.execute(
        "SELECT window_start FROM segments WHERE user_id = %s ORDER BY window_end LIMIT 1",
        (user_id,),
    ).fetchone()
    return row[0] if row else None
