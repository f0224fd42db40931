"""Lexical search of one wearer among many: the per-user full-text index against one on the
lexemes alone.

Migration 0007 keys the segments' GIN index by ``(user_id, search_tsv)``. Indexed on the
lexemes alone (migration 0004), a search for a common word reads every wearer's matching
segments from the table and only then drops the other wearers' rows. This loads ``--wearers``
synthetic memories (segments and their text only: no triples, frames or vectors), times the
lexical search of the first wearer with the bench's questions under the index of 0007, then
rebuilds the table's index the 0004 way and times the same searches again.

It always runs on a fresh embedded stack in a temporary state dir, stopped and removed at the
end: it drops and creates indexes, which it must never do to a configured database.

    python -m bench.lexical_index --wearers 16 --days 7 --out lexical_index.json
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from bench import harness
from bench.bulk_load import Loader, LoadReport
from bench.harness import Echo
from bench.query_synth import SynthConfig, SyntheticMemory, hours_of, make_queries

LAYOUTS = {
    "per_user": "CREATE INDEX segments_user_search_idx ON segments USING gin (user_id, search_tsv)"
    " WHERE processing_status = 'complete'",
    "lexemes_only": "CREATE INDEX segments_search_tsv_idx ON segments USING gin (search_tsv)",
}
INDEX_NAMES = {"per_user": "segments_user_search_idx", "lexemes_only": "segments_search_tsv_idx"}


def load_wearers(db: Any, wearers: int, hours: int, echo: Echo) -> dict[str, SyntheticMemory]:
    """``wearers`` memories over the same hours (seeds 0, 1, ...), segments only."""
    memories: dict[str, SyntheticMemory] = {}
    with db.connection() as conn:
        for i in range(wearers):
            memory = SyntheticMemory(SynthConfig(hours=hours, seed=i))
            user_id = f"wearer-{i}"
            with conn.transaction():
                loader = Loader(conn, memory, user_id, LoadReport())
                loader.users_and_sessions()
                loader.segments()
            memories[user_id] = memory
            echo(f"loaded {user_id} ({len(memories)} of {wearers})")
        conn.autocommit = True
        conn.execute("VACUUM ANALYZE segments")
    return memories


def use_layout(db: Any, layout: str) -> None:
    """Make ``layout`` the segments table's only full-text index."""
    with db.connection() as conn:
        conn.autocommit = True
        for name, index in INDEX_NAMES.items():
            conn.execute(f"DROP INDEX IF EXISTS {index}")
            if name == layout:
                conn.execute(LAYOUTS[name])
        conn.execute("ANALYZE segments")


def time_searches(
    db: Any, user_id: str, texts: Sequence[str], k: int, repeats: int
) -> dict[str, Any]:
    """p50 / p95 / mean / max ms of the lexical search of ``texts`` (a first untimed pass
    warms the buffers) and the segment ids found, to check both layouts agree."""
    from worldmm.memory.retrieval.lanes import weighted_terms
    from worldmm.store import segment_search as ss

    times: list[float] = []
    found: list[list[int]] = []
    with db.connection() as conn:
        stats = ss.term_stats(conn, user_id)
        for rep in range(repeats + 1):
            for text in texts:
                terms = weighted_terms(ss.query_lexemes(conn, text), stats)
                t = time.perf_counter()
                rows = ss.lexical_search(conn, user_id, terms, stats.mean_length, k)
                if rep > 0:
                    times.append(1000 * (time.perf_counter() - t))
                else:
                    found.append([r.segment_id for r in rows])
    return {**harness.summary(times), "found": found}


class LexicalOptions(harness.Options):
    wearers: int = Field(16, description="Wearers loaded.")
    days: float = Field(7.0, description="Days of memory per wearer.")
    queries: int = Field(20, description="Questions of the first wearer.")
    k: int = Field(100, description="Segments per search.")
    repeats: int = Field(2, description="Timed passes over the questions.")


def measure(opts: LexicalOptions, echo: Echo) -> dict[str, Any]:
    from worldmm.settings import load_settings
    from worldmm.store.db import Database

    if min(opts.wearers, opts.queries, opts.k, opts.repeats) < 1:
        raise ValueError("--wearers, --queries, --k and --repeats must be at least 1")
    run = harness.Run()
    # Not pytest's or Python's private tmp: PostgreSQL runs as another OS user.
    state = Path(tempfile.mkdtemp(prefix="worldmm-lexical-index-", dir="/tmp"))
    state.chmod(0o755)
    settings = load_settings(state_dir=state, database_url=None, redis_url=None)
    result: dict[str, Any] = {"benchmark": "lexical_index", "config": opts.model_dump(mode="json")}
    try:
        with (
            harness.stack_or_start(settings, echo, need=("postgres",)) as settings,
            Database(settings.database_url, max_size=1) as db,
        ):
            memories = load_wearers(db, opts.wearers, hours_of(opts.days), echo)
            first = next(iter(memories))
            asked = make_queries(memories[first], opts.queries, seed=0)["episodic"]
            texts = [q.text for q in asked]
            with db.connection() as conn:
                (rows,) = conn.execute("SELECT count(*) FROM segments").fetchone()
            result["segments"] = int(rows)
            timings = {}
            for layout in ("per_user", "lexemes_only"):
                use_layout(db, layout)
                timings[layout] = time_searches(db, first, texts, opts.k, opts.repeats)
                echo(
                    f"  {layout}: { ({k: v for k, v in timings[layout].items() if k != 'found'}) }"
                )
            use_layout(db, "per_user")  # as the migrations leave it
        same = timings["per_user"].pop("found") == timings["lexemes_only"].pop("found")
        result["ms"] = timings
        result["same_results"] = same
        result["lexemes_only_over_per_user_p50"] = round(
            timings["lexemes_only"]["p50"] / timings["per_user"]["p50"], 2
        )
    finally:
        shutil.rmtree(state, ignore_errors=True)
    return run.stamp(result)


@harness.main(LexicalOptions)
def main(opts: LexicalOptions) -> dict[str, Any]:
    """One wearer's lexical search among N wearers: the per-user full-text index against one
    on the lexemes alone, on a fresh embedded stack of its own."""
    result = measure(opts, harness.stamped_echo())
    harness.write_report(result, opts.out)
    return result


if __name__ == "__main__":
    main()
