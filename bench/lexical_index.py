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

import argparse
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.bulk_load import Loader
from bench.query_synth import SynthConfig, SyntheticMemory, hours_of, make_queries
from bench.report import Echo, stamped_echo, write_report

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
                loader = Loader(conn, memory, user_id)
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
    """p50 / p95 / mean ms of the lexical search of ``texts`` (a first untimed pass warms
    the buffers) and the segment ids found, to check both layouts agree."""
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
    return {
        "p50": round(float(np.percentile(times, 50)), 2),
        "p95": round(float(np.percentile(times, 95)), 2),
        "mean": round(float(np.mean(times)), 2),
        "n": len(times),
        "found": found,
    }


def run(
    wearers: int, days: float, queries: int, k: int, repeats: int, echo: Echo
) -> dict[str, Any]:
    from worldmm import stack
    from worldmm.settings import load_settings
    from worldmm.store.db import Database
    from worldmm.store.migrate import apply_migrations

    if wearers < 1 or queries < 1 or k < 1 or repeats < 1:
        raise ValueError("--wearers, --queries, --k and --repeats must be at least 1")
    hours = hours_of(days)
    # Not pytest's or Python's private tmp: PostgreSQL runs as another OS user.
    state = Path(tempfile.mkdtemp(prefix="worldmm-lexical-index-", dir="/tmp"))
    state.chmod(0o755)
    settings = load_settings(state_dir=state, database_url=None, redis_url=None)
    result: dict[str, Any] = {
        "benchmark": "lexical_index",
        "config": {"wearers": wearers, "days": days, "queries": queries, "k": k},
    }
    try:
        echo(f"starting an embedded stack in {state}")
        url = stack.up(settings).database_url
        apply_migrations(url, settings)
        with Database(url, max_size=1) as db:
            memories = load_wearers(db, wearers, hours, echo)
            first = next(iter(memories))
            texts = [q.text for q in make_queries(memories[first], queries, seed=0)["episodic"]]
            with db.connection() as conn:
                (rows,) = conn.execute("SELECT count(*) FROM segments").fetchone()
            result["segments"] = int(rows)
            timings = {}
            for layout in ("per_user", "lexemes_only"):
                use_layout(db, layout)
                timings[layout] = time_searches(db, first, texts, k, repeats)
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
        stack.down(settings)
        shutil.rmtree(state, ignore_errors=True)
    return result


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(prog="python -m bench.lexical_index", description=__doc__)
    p.add_argument("--out", type=Path, required=True, help="where to write the JSON result")
    p.add_argument("--wearers", type=int, default=16, help="wearers loaded")
    p.add_argument("--days", type=float, default=7.0, help="days of memory per wearer")
    p.add_argument("--queries", type=int, default=20, help="questions of the first wearer")
    p.add_argument("--k", type=int, default=100, help="segments per search")
    p.add_argument("--repeats", type=int, default=2, help="timed passes over the questions")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    result = run(args.wearers, args.days, args.queries, args.k, args.repeats, stamped_echo(t0))
    write_report(result, "bench.lexical_index", argv, t0, args.out)
    return result


if __name__ == "__main__":
    main()
