"""Prices: US dollars per million tokens for common models, and the cost of a call."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["ModelPrice", "cost_usd", "price_for", "register_price"]


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """Price of one model, in US dollars per million tokens.

    Some models bill a whole request at higher rates once its prompt passes a
    size (OpenAI's GPT-5.6 and GPT-6 families above 272K input tokens, Claude
    Haiku 5.5 above 100K); ``long_prompt_tokens`` and the two ``long_*`` rates
    describe that tier.
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


def _openai_tiered(input_per_mtok: float, output_per_mtok: float) -> ModelPrice:
    """OpenAI's long-context rule: above 272K input tokens, 2x input and 1.5x output."""
    return ModelPrice(
        input_per_mtok,
        output_per_mtok,
        long_prompt_tokens=272_000,
        long_input_per_mtok=input_per_mtok * 2,
        long_output_per_mtok=output_per_mtok * 1.5,
    )


# Standard (non-batch, non-priority) rates, checked on 2026-11-21 against the
# providers' model pages: developers.openai.com/api/docs/models/<model> and
# /api/docs/pricing, platform.claude.com/docs/en/models/<model>/overview.
# Keys are model names as each API spells them. A key also prices its dated
# snapshots and aliases ("gpt-4o-2024-08-06", "claude-sonnet-4-20250514",
# "claude-3-5-haiku-latest"), but never a different model that merely starts
# with the same letters: see price_for().
_PRICES: dict[str, ModelPrice] = {
    # OpenAI, GPT-6 families.
    "gpt-6.2-astra": _openai_tiered(8.00, 40.00),
    "gpt-6.2-sol": _openai_tiered(2.00, 10.00),
    "gpt-6.1-sol": _openai_tiered(2.00, 10.00),
    "gpt-6.1-terra": _openai_tiered(1.00, 5.00),
    "gpt-6-astra": _openai_tiered(10.00, 50.00),
    "gpt-6-sol": _openai_tiered(2.00, 10.00),
    "gpt-6-luna": _openai_tiered(0.10, 0.50),
    # OpenAI, GPT-5.6 (the bare "gpt-5.6" alias routes to Sol). Sol is at its
    # $5/$30 list price: the $4/$20 promotion was only guaranteed to 2026-11-21.
    "gpt-5.6": _openai_tiered(5.00, 30.00),
    "gpt-5.6-sol": _openai_tiered(5.00, 30.00),
    "gpt-5.6-terra": _openai_tiered(2.00, 12.00),
    "gpt-5.6-luna": _openai_tiered(0.20, 1.20),
    # OpenAI, GPT-5 to GPT-5.5. Their long-context rates were not confirmed,
    # so they stay flat.
    "gpt-5.5": ModelPrice(5.00, 30.00),
    "gpt-5.5-pro": ModelPrice(30.00, 180.00),
    "gpt-5.4": ModelPrice(2.50, 15.00),
    "gpt-5.4-mini": ModelPrice(0.75, 4.50),
    "gpt-5.4-nano": ModelPrice(0.20, 1.25),
    "gpt-5.2": ModelPrice(1.75, 14.00),
    "gpt-5.1": ModelPrice(1.25, 10.00),
    "gpt-5": ModelPrice(1.25, 10.00),
    "gpt-5-mini": ModelPrice(0.25, 2.00),
    "gpt-5-nano": ModelPrice(0.05, 0.40),
    # OpenAI, earlier models still served.
    "gpt-4.1": ModelPrice(2.00, 8.00),
    "gpt-4.1-mini": ModelPrice(0.40, 1.60),
    "gpt-4.1-nano": ModelPrice(0.10, 0.40),
    "gpt-4o": ModelPrice(2.50, 10.00),
    "gpt-4o-mini": ModelPrice(0.15, 0.60),
    "o1": ModelPrice(15.00, 60.00),
    "o3": ModelPrice(2.00, 8.00),
    "o3-mini": ModelPrice(1.10, 4.40),
    "o4-mini": ModelPrice(1.10, 4.40),
    # Anthropic, current lineup.
    "claude-fable-5-1": ModelPrice(10.00, 50.00),
    "claude-opus-5-5": ModelPrice(4.00, 20.00),
    "claude-sonnet-5-5": ModelPrice(2.00, 10.00),
    "claude-haiku-5-5": ModelPrice(
        0.10,
        0.50,
        long_prompt_tokens=100_000,
        long_input_per_mtok=0.50,
        long_output_per_mtok=2.50,
    ),
    # Anthropic, legacy models still served.
    "claude-fable-5": ModelPrice(10.00, 50.00),
    "claude-opus-5": ModelPrice(5.00, 25.00),
    "claude-sonnet-5": ModelPrice(2.00, 10.00),
    "claude-opus-4-8": ModelPrice(5.00, 25.00),
    "claude-opus-4-7": ModelPrice(5.00, 25.00),
    "claude-opus-4-6": ModelPrice(5.00, 25.00),
    "claude-opus-4-5": ModelPrice(5.00, 25.00),
    "claude-opus-4-1": ModelPrice(15.00, 75.00),
    "claude-opus-4-0": ModelPrice(15.00, 75.00),
    "claude-opus-4": ModelPrice(15.00, 75.00),
    "claude-sonnet-4-6": ModelPrice(3.00, 15.00),
    "claude-sonnet-4-5": ModelPrice(3.00, 15.00),
    "claude-sonnet-4-0": ModelPrice(3.00, 15.00),
    "claude-sonnet-4": ModelPrice(3.00, 15.00),
    "claude-haiku-4-5": ModelPrice(1.00, 5.00),
    "claude-3-7-sonnet": ModelPrice(3.00, 15.00),
    "claude-3-5-haiku": ModelPrice(0.80, 4.00),
    "claude-3-haiku": ModelPrice(0.25, 1.25),
}

# What may follow a table key and still name the same model: dated snapshots
# ("-2024-08-06", "-20250514", "@20250514", "-0125"), "-latest", a Bedrock-style
# version ("-v1:0") and a context-window tag ("[1m]"). Anything else ("-mini",
# ".1", "-5", "-pro") is a different model, which must not borrow this price.
_SNAPSHOT_SUFFIX = re.compile(
    r"(?:-\d{4}-\d{2}-\d{2}|[-@]\d{8}|-\d{4}|-latest|-v\d+(?::\d+)?|\[1m\])*"
)


def register_price(model_prefix: str, price: ModelPrice) -> None:
    """Add or replace the price of a model and of its dated snapshots.

    Args:
        model_prefix: The model name as its API spells it, e.g. ``"my-finetune"``;
            ``"my-finetune-2026-01-01"`` and ``"my-finetune-latest"`` then price
            the same, while ``"my-finetune-large"`` does not.
        price: Dollars per million tokens.
    """
    _PRICES[model_prefix.lower()] = price


def price_for(model: str) -> ModelPrice | None:
    """The price of ``model``, or ``None`` if the table does not know it.

    The longest table key that ``model`` starts with wins, provided the rest of
    the name is only a snapshot or alias suffix (a date, ``-latest``, ...). So
    ``"gpt-4o-mini-2024-07-18"`` prices as ``"gpt-4o-mini"``, and a model the
    table lacks, such as ``"o3-pro"``, is unknown rather than priced as ``"o3"``.
    """
    name = model.lower()
    best: str | None = None
    for key in _PRICES:
        if (
            name.startswith(key)
            and (best is None or len(key) > len(best))
            and _SNAPSHOT_SUFFIX.fullmatch(name, len(key)) is not None
        ):
            best = key
    return _PRICES[best] if best is not None else None


def cost_usd(model: str, input_tokens: int, output_tokens: int) -> float:
    """Estimated cost of one call; 0.0 for models without a known price."""
    price = price_for(model)
    if price is None:
        return 0.0
    return price.cost(input_tokens, output_tokens)
