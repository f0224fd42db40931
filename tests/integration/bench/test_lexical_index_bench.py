"""The lexical-index benchmark end to end on a small memory: its own embedded stack, both
index layouts timed, the same results from both, everything stopped and removed after."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.lexical_index import main

pytestmark = pytest.mark.integration


def test_both_layouts_are_timed_and_agree(tmp_path) -> None:
    out = tmp_path / "lexical.json"
    before = set(Path("/tmp").glob("worldmm-lexical-index-*"))
    main(["--out", str(out), "--wearers", "2", "--days", "0.08", "--queries", "3", "--k", "20"])
    report = json.loads(out.read_text())
    assert report["segments"] > 0
    for layout in ("per_user", "lexemes_only"):
        ms = report["ms"][layout]
        assert ms["n"] == 3 * 2 and 0 < ms["p50"] <= ms["p95"]
    assert report["same_results"] is True
    assert report["lexemes_only_over_per_user_p50"] > 0
    assert set(Path("/tmp").glob("worldmm-lexical-index-*")) == before  # its stack removed
    assert report["command"].startswith("python -m bench.lexical_index")


def test_rejects_nonsense_sizes(tmp_path) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        main(["--out", str(tmp_path / "x.json"), "--wearers", "0"])
