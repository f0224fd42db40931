"""The WorldMM method: caption-level ingest into the real memory, then episodic retrieval.

Ingest goes through :func:`worldmm.memory.caption_ingest.ingest_caption_windows` (the same
NER, triples, entity resolution, merges and consolidation as live ingest; only the captioner is
skipped), one clock hour at a time: coarse windows (3 min / 10 min / 1 h) never straddle an
hour, so this equals one call over the whole week and gives a progress step per hour.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from itertools import groupby
from typing import Any

from bench.egolife.data import Window
from bench.egolife.truth import Ranked
from worldmm.deps import Deps
from worldmm.memory.retrieval import SegmentHit
from worldmm.memory.retrieval.episodic import EpisodicOptions, finish, run_lanes, search_episodic
from worldmm.memory.retrieval.fusion import Fused

# The user's rows by group ("30s:complete", "episodic:active", "alias", ...).
WHERE_USER = "WHERE user_id = %s GROUP BY 1 ORDER BY 1"
COUNTS = {
    "segments": "SELECT scale_seconds || 's:' || processing_status, count(*) FROM segments",
    "triples": "SELECT memory_type || CASE WHEN invalidated_at IS NULL THEN ':active'"
    " ELSE ':invalidated' END, count(*) FROM triples",
    "entities": "SELECT CASE WHEN canonical_entity_id IS NULL THEN 'canonical' ELSE 'alias' END,"
    " count(*) FROM entities",
}
# The memory's variants, all scored from one run of the four lanes per question: the full
# fused retriever (what the API uses), each lane alone, fusion without the graph lane, and
# fusion without drill-down. Overrides of EpisodicOptions.
VARIANTS: dict[str, dict] = {
    "worldmm": {},
    "lane-lexical": {"weights": {"lexical": 1.0}},
    "lane-dense": {"weights": {"dense": 1.0}},
    "lane-graph": {"weights": {"graph": 1.0}},
    "lane-entity": {"weights": {"entity": 1.0}},
    "fused-no-graph": {"weights": {"graph": 0.0}},  # merged into the base weights
    "fused-no-drill": {"drill_parents": 0},
}
ALL_LANES = ("lexical", "dense", "graph", "entity")
# The fused retriever as a live question reaches it: the query route's episodic search with no
# ``as_of``, the question's time given as the injected clock's now. Must equal ``worldmm``.
LIVE = "worldmm-live"


def hour_key(window: Window) -> datetime:
    return window.start.replace(minute=0, second=0, microsecond=0)


def stored_base_starts(deps: Deps, user_id: str) -> set[datetime]:
    """Starts of the user's complete 30 s segments."""
    with deps.db.connection() as conn:
        rows = conn.execute(
            "SELECT window_start FROM segments WHERE user_id = %s AND scale_seconds = 30"
            " AND processing_status = 'complete'",
            (user_id,),
        ).fetchall()
    return {r[0] for r in rows}


def missing_hours(windows: Sequence[Window], stored: set[datetime]) -> list[Window]:
    """The windows of every clock hour that is not fully stored yet. A partly stored hour is
    redone whole (writes are idempotent) so its 3 min / 10 min / 1 h levels see every child."""
    todo = {hour_key(w) for w in windows if w.start not in stored}
    return [w for w in windows if hour_key(w) in todo]


async def build_memory(
    deps: Deps,
    user_id: str,
    windows: Sequence[Window],
    reuse: bool,
    echo: Callable[[str], None],
    progress: Any = None,
    speech_in_caption: bool = True,
) -> dict:
    """The user's memory of ``windows``: with ``reuse`` only the hours not fully stored are
    ingested, else the user's memory is purged and every window ingested, hour by hour (a
    task on the rich ``progress``). Returns the seconds, the windows, their outcomes by scale
    and status, and the first failures. A live captioner is given the window's transcript
    and reports what was said, so by default the caption text carries those lines too."""
    from worldmm.memory.caption_ingest import ingest_caption_windows
    from worldmm.store.purge import purge_user

    stored = stored_base_starts(deps, user_id)
    todo = missing_hours(windows, stored) if reuse else list(windows)
    if reuse:
        echo(
            f"reusing the memory of {user_id}: {len(stored)} 30 s segments "
            f"stored, {len(todo)} of {len(windows)} windows to ingest"
        )
    elif stored:
        with deps.db.transaction() as conn:
            echo(f"purged the previous memory of {user_id}: {purge_user(conn, user_id)}")
    done = {"reused_windows": len(windows) - len(todo)}
    if not todo:
        return done | {"windows": 0}
    task = progress.add_task("ingest (caption-level)", total=len(todo)) if progress else None
    outcomes: Counter[str] = Counter()
    errors: list[str] = []
    started = time.perf_counter()
    for _hour, group in groupby(sorted(todo, key=lambda w: w.start), key=hour_key):
        batch = [
            (w.start, w.end, w.text if speech_in_caption else w.caption, w.transcript)
            for w in group
        ]
        for out in await ingest_caption_windows(deps, user_id, batch):
            outcomes[f"{out.scale_s}:{out.status}"] += 1
            if out.error and len(errors) < 5:
                errors.append(f"{out.key}: {out.error}")
        if progress:
            progress.advance(task, len(batch))
    seconds = time.perf_counter() - started
    return done | {
        "seconds": round(seconds, 2),
        "windows": len(todo),
        "windows_per_s": round(len(todo) / seconds, 3) if seconds else None,
        "outcomes": dict(outcomes),
        "errors": errors,
    }


def memory_counts(deps: Deps, user_id: str) -> dict:
    """Row counts of the user's memory: per table, segments per scale and status, triples
    per memory type (active / invalidated), canonical entities and aliases."""
    from worldmm.store.purge import count_user_rows

    with deps.db.connection() as conn:
        out: dict = {"tables": count_user_rows(conn, user_id)}
        for name, query in COUNTS.items():
            out[name] = dict(conn.execute(f"{query} {WHERE_USER}", (user_id,)).fetchall())
    return out


def retrieval_deps(deps: Deps) -> Deps:
    """Retrieval over the same pool and models as ingest. No Redis: the graphs live in the
    process memo, and one time-masked graph per scale answers every question's ``as_of``."""
    from worldmm.graph.cache import NullCache

    return replace(deps, encoder=None, cache=NullCache())


def ranked(hits: Sequence[SegmentHit | Fused]) -> list[Ranked]:
    return [Ranked(start=h.start, end=h.end, scale=h.scale) for h in hits]


async def search(
    deps: Deps, user_id: str, query: str, question: str, as_of: datetime, live: bool
) -> list[SegmentHit]:
    """The API's episodic search of ``query`` (its time read from ``question``) at ``as_of``;
    ``live``: asked as a live question, no ``as_of`` and the clock's now set to it."""
    asked = deps.with_clock(lambda: as_of) if live else deps
    result = await search_episodic(
        asked, user_id, query, None if live else as_of, time_text=question
    )
    return result.hits


async def search_variants(
    deps: Deps, user_id: str, query: str, question: str, as_of: datetime, names: Sequence[str]
) -> tuple[dict[str, list[SegmentHit]], float]:
    """Every variant in ``names`` from one lane run; also the seconds the full retriever
    (lanes + fusion + drill-down) took, i.e. what one API search costs."""
    base = EpisodicOptions.from_settings(deps.settings)
    started = time.perf_counter()
    run = await run_lanes(deps, user_id, query, as_of, base, time_text=question)
    out = {"worldmm": (await finish(deps, run, base)).hits}
    seconds = time.perf_counter() - started
    # the ablations need every lane, whatever weight the defaults give it
    missing = {lane: base.weights.get(lane) or 1.0 for lane in ALL_LANES if lane not in run.lanes}
    if missing and any(n in VARIANTS and n != "worldmm" for n in names):
        more = replace(base, weights=missing)
        extra = await run_lanes(deps, user_id, query, as_of, more, time_text=question)
        run = replace(run, lanes={**run.lanes, **extra.lanes})
    if LIVE in names:
        out[LIVE] = await search(deps, user_id, query, question, as_of, live=True)
    for name in names:
        if name not in out:  # a lane alone replaces the weights; fused-no-graph merges them
            over = dict(VARIANTS[name])
            if name == "fused-no-graph":
                over["weights"] = {**base.weights, **over["weights"]}
            out[name] = (await finish(deps, run, replace(base, **over))).hits
    return {n: out[n] for n in names}, seconds


async def option_evidence(
    deps: Deps, user_id: str, question: str, choices: Sequence[str], as_of: datetime, live: bool
) -> list[SegmentHit]:
    """What the API's answerer looks up for a multiple-choice question besides its own
    search: one search per option (the question with that option, as
    :func:`worldmm.agent.loop.option_rounds` looks), each segment once."""
    from worldmm.agent.choices import look_per_option, merge_hits

    async def one(text: str) -> list[SegmentHit]:
        return await search(deps, user_id, text, question, as_of, live)

    return merge_hits(await look_per_option(one, question, list(choices)))
