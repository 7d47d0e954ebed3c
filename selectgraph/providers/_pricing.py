"""Prices: what a model call costs, from genai-prices, with user overrides.

Where prices come from
    :func:`register_price` overrides come first. Every other model is looked up in
    `genai-prices <https://github.com/pydantic/genai-prices>`_, the price data the
    Pydantic team maintains for some 2,000 models of 30-odd providers, which also
    matches dated snapshots and aliases (``gpt-4o-2024-08-06``,
    ``claude-3-5-haiku-latest``) to their model. Only the data bundled with the
    installed package is used (upgrade it for newer prices); nothing is fetched,
    unless the application itself starts genai-prices' ``UpdatePrices``.

Unknown models
    A model neither source knows (a local model, a fine-tune), or one genai-prices
    lists without a price for tokens, has no price:
    :func:`price_for` and :func:`cost_usd` return ``None``, and a
    :class:`~selectgraph.Usage` built from such a call counts it in
    ``unpriced_calls`` rather than as costing $0.

Cost per call
    Each model name is resolved once (per day and per genai-prices data
    snapshot, since prices have start dates) to a :class:`ModelPrice`, so pricing
    a call is two multiplications. The few models whose price has more than one
    long-prompt tier, a per-request fee or a time-of-day rate are priced by
    genai-prices on every call.
"""

from __future__ import annotations

import functools
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import ModuleType

    from genai_prices import types as genai_types
    from genai_prices.data_snapshot import DataSnapshot

__all__ = ["ModelPrice", "cost_usd", "price_for", "register_price"]


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """Price of one model, in US dollars per million tokens.

    Some models bill a whole request at higher rates once its prompt passes a
    size (OpenAI's GPT-5.6 family above 272K input tokens, Claude Haiku 5.5 above
    100K); ``long_prompt_tokens`` and the two ``long_*`` rates describe that tier.
    """

    input_per_mtok: float
    """Price of one million prompt tokens."""
    output_per_mtok: float
    """Price of one million generated tokens."""
    long_prompt_tokens: int | None = None
    """Prompts longer than this many tokens use the long-prompt rates; ``None``: one flat rate."""
    long_input_per_mtok: float | None = None
    """Price of one million prompt tokens in a long-prompt request."""
    long_output_per_mtok: float | None = None
    """Price of one million generated tokens in a long-prompt request."""

    def __post_init__(self) -> None:
        tier = (self.long_prompt_tokens, self.long_input_per_mtok, self.long_output_per_mtok)
        if any(v is None for v in tier) and any(v is not None for v in tier):
            raise ValueError(
                "ModelPrice needs long_prompt_tokens, long_input_per_mtok and "
                "long_output_per_mtok together, or none of them"
            )
        rates = [self.input_per_mtok, self.output_per_mtok, *tier]
        if any(v is not None and v < 0 for v in rates):
            raise ValueError(f"ModelPrice values must be >= 0, got {self}")

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        """Dollars for one request with ``input_tokens`` in and ``output_tokens`` out."""
        input_rate, output_rate = self.input_per_mtok, self.output_per_mtok
        if (
            self.long_prompt_tokens is not None
            and self.long_input_per_mtok is not None
            and self.long_output_per_mtok is not None
            and input_tokens > self.long_prompt_tokens
        ):
            # The whole request moves to the long-prompt tier, not just the excess.
            input_rate, output_rate = self.long_input_per_mtok, self.long_output_per_mtok
        return (input_tokens * input_rate + output_tokens * output_rate) / 1e6


# What may follow a registered name and still name the same model: dated snapshots
# ("-2024-08-06", "-20250514", "@20250514", "-0125"), "-latest", a Bedrock-style
# version ("-v1:0") and a context-window tag ("[1m]"). Anything else ("-mini",
# ".1", "-5", "-pro") is a different model, which must not borrow this price.
_SNAPSHOT_SUFFIX = re.compile(
    r"(?:-\d{4}-\d{2}-\d{2}|[-@]\d{8}|-\d{4}|-latest|-v\d+(?::\d+)?|\[1m\])*"
)

# Prices registered by the application, by lower-cased model name.
_overrides: dict[str, ModelPrice] = {}


@dataclass(frozen=True, slots=True)
class _Resolved:
    """What a model name resolved to, and for how long that holds."""

    price: ModelPrice | None
    """The price, when it fits a ModelPrice."""
    model: genai_types.ModelInfo | None
    """A genai-prices model priced on every call (its price does not fit a ModelPrice)."""
    provider: genai_types.Provider | None
    snapshot: DataSnapshot | None
    """The genai-prices data this came from; ``None`` for an override."""
    day: int
    """The UTC day (days since the epoch) it was resolved on."""


# Resolutions by lower-cased model name; cleared when an override changes.
_cache: dict[str, _Resolved] = {}


def register_price(model_prefix: str, price: ModelPrice) -> None:
    """Add or replace the price of a model and of its dated snapshots.

    A registered price wins over genai-prices' data, for that model only.

    Args:
        model_prefix: The model name as its API spells it, e.g. ``"my-finetune"``;
            ``"my-finetune-2026-01-01"`` and ``"my-finetune-latest"`` then price
            the same, while ``"my-finetune-large"`` does not.
        price: Dollars per million tokens.
    """
    _overrides[model_prefix.lower()] = price
    _cache.clear()


def price_for(model: str) -> ModelPrice | None:
    """The price of ``model`` per million tokens, or ``None`` if it is unknown.

    A registered price wins: the longest registered name that ``model`` starts
    with, provided the rest is only a snapshot or alias suffix (a date,
    ``-latest``, ...), so ``"my-model-2026-01-01"`` prices as ``"my-model"`` but
    ``"my-model-pro"`` does not. Otherwise genai-prices' current price, when it
    is per token with at most one long-prompt tier; ``None`` for a model
    genai-prices prices some other way (see :func:`cost_usd`, which handles those).
    """
    return _resolve(model).price


def cost_usd(model: str, input_tokens: int, output_tokens: int) -> float | None:
    """Cost in US dollars of one call of ``model``; ``None`` if its price is unknown."""
    resolved = _resolve(model)
    if resolved.price is not None:
        return resolved.price.cost(input_tokens, output_tokens)
    if resolved.model is None or resolved.provider is None:
        return None
    import genai_prices

    usage = genai_prices.Usage(input_tokens=input_tokens, output_tokens=output_tokens)
    return float(resolved.model.calc_price(usage, resolved.provider).total_price)


def _resolve(model: str) -> _Resolved:
    name = model.lower()
    day = int(time.time() // 86_400)
    snapshot = _data_snapshot().get_snapshot()
    resolved = _cache.get(name)
    if resolved is not None and resolved.day == day and resolved.snapshot in (None, snapshot):
        return resolved
    override = _override_for(name)
    if override is not None:
        resolved = _Resolved(price=override, model=None, provider=None, snapshot=None, day=day)
    else:
        resolved = _from_genai_prices(name, snapshot, day)
    _cache[name] = resolved
    return resolved


@functools.cache
def _data_snapshot() -> ModuleType:
    # Imported on first use, so that importing selectgraph does not pay for it.
    from genai_prices import data_snapshot

    return data_snapshot


def _override_for(name: str) -> ModelPrice | None:
    best: str | None = None
    for key in _overrides:
        if (
            name.startswith(key)
            and (best is None or len(key) > len(best))
            and _SNAPSHOT_SUFFIX.fullmatch(name, len(key)) is not None
        ):
            best = key
    return _overrides[best] if best is not None else None


def _from_genai_prices(name: str, snapshot: DataSnapshot, day: int) -> _Resolved:
    unknown = _Resolved(price=None, model=None, provider=None, snapshot=snapshot, day=day)
    try:
        provider, info = snapshot.find_provider_model(name, None, None, None)
    except LookupError:
        return unknown
    current = info.get_prices(datetime.now(UTC))
    if current.requests_kcount is None and current.input_mtok is current.output_mtok is None:
        # Listed with no price for tokens (none at all, or only for images, web
        # searches...): what its tokens cost is unknown, which is not $0.
        return unknown
    price = None if _varies_by_time_of_day(info) else _as_model_price(current)
    return _Resolved(
        price=price,
        model=None if price is not None else info,
        provider=provider,
        snapshot=snapshot,
        day=day,
    )


def _varies_by_time_of_day(info: genai_types.ModelInfo) -> bool:
    from genai_prices import types as genai_types

    return isinstance(info.prices, list) and any(
        isinstance(p.constraint, genai_types.TimeOfDateConstraint) for p in info.prices
    )


def _as_model_price(price: genai_types.ModelPrice) -> ModelPrice | None:
    """``price`` as a ModelPrice, or ``None`` if that would drop part of it."""
    from genai_prices import types as genai_types

    if price.requests_kcount is not None:
        return None  # a fee per request
    rates = (price.input_mtok, price.output_mtok)
    tiers = [r.tiers for r in rates if isinstance(r, genai_types.TieredPrices)]
    starts = {tier.start for found in tiers for tier in found}
    if any(len(found) > 1 for found in tiers) or len(starts) > 1:
        return None
    base_in, long_in = _rates(price.input_mtok)
    base_out, long_out = _rates(price.output_mtok)
    if not starts:
        return ModelPrice(base_in, base_out)
    return ModelPrice(
        base_in,
        base_out,
        long_prompt_tokens=starts.pop(),
        long_input_per_mtok=long_in,
        long_output_per_mtok=long_out,
    )


def _rates(rate: Decimal | genai_types.TieredPrices | None) -> tuple[float, float]:
    """A rate's base and long-prompt values (the same when it has no tier)."""
    if rate is None:
        return 0.0, 0.0
    if isinstance(rate, Decimal):
        return float(rate), float(rate)
    base = float(rate.base)
    return base, float(rate.tiers[0].price) if rate.tiers else base
