"""Retrieval's per-process caches live in the dependency bundle: a bundle's copies (one
request's settings, a benchmark's clock) share them, and a new bundle starts with its own."""

from __future__ import annotations

from datetime import UTC, datetime

from worldmm.deps import Deps
from worldmm.settings import Settings


def _bundle() -> Deps:
    return Deps(
        settings=Settings(),
        db=None,  # type: ignore[arg-type]  # nothing here reads the database
        roles=None,  # type: ignore[arg-type]
        embedder=None,  # type: ignore[arg-type]
        encoder=None,
        blobs=None,  # type: ignore[arg-type]
    )


def test_copies_share_the_caches_and_a_new_bundle_has_its_own() -> None:
    deps = _bundle()
    for copy in (deps.with_settings(), deps.with_clock(lambda: datetime(2025, 5, 1, tzinfo=UTC))):
        assert copy is not deps
        assert copy.graphs is deps.graphs
        assert copy.term_stats is deps.term_stats
        assert copy.entity_windows is deps.entity_windows
    other = _bundle()
    assert other.term_stats is not deps.term_stats
    assert other.entity_windows is not deps.entity_windows
