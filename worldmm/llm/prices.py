"""Model prices: a dated table in a data file the user can change, never constants in code.

The bundled table (``prices.json`` beside this module) holds per-model token prices and the
documented per-image token rate; ``WORLDMM_LLM_PRICES_FILE`` points at another. The usage
API prices recorded usage with it, and ``worldmm bench cost`` prices a wearer-hour and a
question.
"""

from __future__ import annotations

import math
import re
from datetime import date
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

if TYPE_CHECKING:
    from worldmm.settings import Settings

BUNDLED = Path(__file__).with_name("prices.json")
_SNAPSHOT = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{4})$")


class PricesError(ValueError):
    """The price table cannot be read or does not have the documented shape."""


class ImageRate(BaseModel):
    """How a model counts an image's input tokens."""

    model_config = ConfigDict(extra="forbid")

    method: Literal["patches", "tiles"]
    patch_px: int = Field(32, gt=0)
    max_patches: int = Field(1536, gt=0)
    multiplier: float = Field(1.0, gt=0)
    # what users measured being billed, where it differs from the documented multiplier
    measured_multiplier: float | None = Field(None, gt=0)
    base_tokens: int = Field(0, ge=0)
    tile_tokens: int = Field(0, ge=0)

    def tokens(
        self, width: int, height: int, detail: str = "low", *, measured: bool = False
    ) -> int:
        """Input tokens of one ``width`` × ``height`` image sent with ``detail``; with
        ``measured``, at the multiplier users measured (when the table gives one)."""
        if width <= 0 or height <= 0:
            raise ValueError(f"image size must be positive, got {width}x{height}")
        if self.method == "patches":
            k = (measured and self.measured_multiplier) or self.multiplier
            return round(_patches(width, height, self.patch_px, self.max_patches) * k)
        if detail == "low":
            return self.base_tokens
        return self.base_tokens + self.tile_tokens * _tiles(width, height)


def _patches(width: int, height: int, px: int, cap: int) -> int:
    """Patches covering the image, after scaling it down to fit ``cap`` patches."""
    w, h = float(width), float(height)
    if math.ceil(w / px) * math.ceil(h / px) > cap:
        shrink = math.sqrt(px * px * cap / (w * h))
        w, h = w * shrink, h * shrink
        # shrink again so whole patches fit along the tighter side
        fit = min(math.floor(w / px) / (w / px), math.floor(h / px) / (h / px))
        w, h = math.floor(w * fit), math.floor(h * fit)
    return min(cap, math.ceil(w / px) * math.ceil(h / px))


def _tiles(width: int, height: int) -> int:
    """512 px tiles after fitting 2048 × 2048 and scaling the short side to 768 px."""
    w, h = float(width), float(height)
    if max(w, h) > 2048:
        w, h = w * 2048 / max(w, h), h * 2048 / max(w, h)
    if min(w, h) > 768:
        w, h = w * 768 / min(w, h), h * 768 / min(w, h)
    return math.ceil(w / 512) * math.ceil(h / 512)


class ModelPrice(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input_per_mtok: float = Field(ge=0)
    cached_input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)
    tokenizer: str = "o200k_base"
    image: ImageRate | None = None

    def cost(self, prompt: int, cached: int, completion: int, *, discount: float = 0.0) -> float:
        """Price of ``prompt`` input tokens (``cached`` of them from the prompt cache) and
        ``completion`` output tokens, less ``discount`` (a fraction)."""
        fresh = max(0, prompt - cached)
        total = (
            fresh * self.input_per_mtok
            + cached * self.cached_input_per_mtok
            + completion * self.output_per_mtok
        ) / 1e6
        return total * (1.0 - discount)


class PriceTable(BaseModel):
    model_config = ConfigDict(extra="forbid")

    as_of: date
    currency: str
    sources: list[str]
    notes: list[str] = []
    batch_discount: float = Field(ge=0, lt=1)
    flex_discount: float = Field(0.0, ge=0, lt=1)  # the flex tier's ("service_tier": "flex")
    # chat formatting around each message and the reply (for estimates from prompt text)
    message_overhead_tokens: int = Field(ge=0)
    reply_overhead_tokens: int = Field(ge=0)
    models: dict[str, ModelPrice]

    def price_of(self, model: str) -> ModelPrice | None:
        """The model's prices by its name, a dated snapshot (``gpt-5-mini-2025-08-07``)
        priced as the model; None for a model the table does not list."""
        return self.models.get(model) or self.models.get(_SNAPSHOT.sub("", model))

    def cost(
        self, model: str, prompt: int, cached: int, completion: int, dispatch: str = "direct"
    ) -> float | None:
        """The price of one group of calls; None when the model is not in the table."""
        price = self.price_of(model)
        if price is None:
            return None
        discount = {"batch": self.batch_discount, "flex": self.flex_discount}.get(dispatch, 0.0)
        return price.cost(prompt, cached, completion, discount=discount)


@cache
def load_prices(path: Path | None = None) -> PriceTable:
    """The table at ``path`` (default: the bundled one), read once per process;
    PricesError naming the file."""
    path = path or BUNDLED
    try:
        return PriceTable.model_validate_json(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PricesError(f"price table {path}: {exc.strerror or exc}") from None
    except ValidationError as exc:
        raise PricesError(f"price table {path} is not valid: {exc}") from None


def prices_for(settings: Settings) -> PriceTable:
    """The price table the settings name (``llm_prices_file``), else the bundled one."""
    return load_prices(settings.llm_prices_file)
