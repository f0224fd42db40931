"""The price table: a dated data file, documented image rates, prefix matches, costs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from worldmm.llm.prices import BUNDLED, ImageRate, PricesError, load_prices, prices_for
from worldmm.settings import load_settings


def test_patch_priced_images_follow_the_documented_examples() -> None:
    patches = ImageRate(method="patches")
    assert patches.tokens(1024, 1024) == 1024  # OpenAI's examples: 32 x 32 patches
    assert patches.tokens(1800, 2400) == 1452  # scaled down to fit 1536 patches
    mini = load_prices().price_of("gpt-5-mini")
    assert mini.image.tokens(1280, 720) == round(40 * 23 * 1.62)
    assert mini.image.tokens(1280, 720, "high") == mini.image.tokens(1280, 720, "low")


def test_tile_priced_images_follow_the_documented_examples() -> None:
    gpt4o = load_prices().price_of("gpt-4o")
    assert gpt4o.image.tokens(4096, 8192, "low") == 85
    assert gpt4o.image.tokens(1024, 1024, "high") == 765
    assert gpt4o.image.tokens(2048, 4096, "high") == 1105
    with pytest.raises(ValueError, match="positive"):
        gpt4o.image.tokens(0, 10)


def test_models_match_by_name_or_dated_snapshot_and_batch_is_discounted() -> None:
    table = load_prices()
    assert table.price_of("gpt-5-mini-2025-08-07") is table.models["gpt-5-mini"]
    assert table.price_of("gpt-5-2025-08-07") is table.models["gpt-5"]
    assert table.price_of("gpt-5-minibus") is None and table.cost("llama", 10, 0, 10) is None
    direct = table.cost("gpt-5-mini", 1_000_000, 0, 1_000_000)
    assert direct == pytest.approx(0.25 + 2.0)
    assert table.cost("gpt-5-mini", 1_000_000, 0, 1_000_000, "batch") == pytest.approx(direct / 2)
    cached = table.cost("gpt-5-mini", 1_000_000, 1_000_000, 0)
    assert cached == pytest.approx(0.025)


def test_the_user_points_at_another_table_and_a_bad_one_is_named(tmp_path: Path) -> None:
    data = json.loads(BUNDLED.read_text())
    data["as_of"] = "2030-01-01"
    data["models"]["gpt-5-mini"]["output_per_mtok"] = 1.0
    mine = tmp_path / "prices.json"
    mine.write_text(json.dumps(data))
    table = prices_for(load_settings(llm_prices_file=mine))
    assert str(table.as_of) == "2030-01-01" and table.cost("gpt-5-mini", 0, 0, 10**6) == 1.0
    del data["models"]["gpt-5"]["input_per_mtok"]
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(data))
    with pytest.raises(PricesError, match="broken.json"):
        load_prices(broken)
    with pytest.raises(PricesError, match="missing.json"):
        load_prices(tmp_path / "missing.json")
