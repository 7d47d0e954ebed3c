from __future__ import annotations

import pytest

from selectgraph.providers import _pricing
from selectgraph.providers._pricing import ModelPrice, cost_usd, price_for, register_price


@pytest.fixture
def isolated_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let a test register prices without leaking them into other tests."""
    monkeypatch.setattr(_pricing, "_PRICES", dict(_pricing._PRICES))


def test_exact_model_name_prices_from_table() -> None:
    assert price_for("gpt-4o") == ModelPrice(2.50, 10.00)
    assert price_for("claude-opus-5-5") == ModelPrice(4.00, 20.00)


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("o3-mini-2025-01-31", "o3-mini"),
        ("gpt-5-2025-08-07", "gpt-5"),
        ("claude-sonnet-4-20250514", "claude-sonnet-4"),
        ("claude-opus-4-5-20251101", "claude-opus-4-5"),
        ("claude-opus-4-1-20250805", "claude-opus-4-1"),
        ("claude-3-5-haiku-latest", "claude-3-5-haiku"),
        ("claude-opus-5-5[1m]", "claude-opus-5-5"),
        ("claude-sonnet-4@20250514", "claude-sonnet-4"),
        ("claude-sonnet-4-20250514-v1:0", "claude-sonnet-4"),
    ],
)
def test_dated_snapshots_and_aliases_price_like_their_model(model: str, family: str) -> None:
    assert price_for(model) is _pricing._PRICES[family]


@pytest.mark.parametrize(
    ("model", "expected", "not_priced_as"),
    [
        ("gpt-4o-mini", ModelPrice(0.15, 0.60), "gpt-4o"),
        ("o3-mini", ModelPrice(1.10, 4.40), "o3"),
        ("claude-opus-4-5", ModelPrice(5.00, 25.00), "claude-opus-4"),
        ("claude-opus-4-8", ModelPrice(5.00, 25.00), "claude-opus-4"),
        ("claude-opus-5-5", ModelPrice(4.00, 20.00), "claude-opus-5"),
        ("gpt-5-mini", ModelPrice(0.25, 2.00), "gpt-5"),
    ],
)
def test_longest_matching_key_wins(model: str, expected: ModelPrice, not_priced_as: str) -> None:
    assert price_for(model) == expected
    assert price_for(model) != price_for(not_priced_as)


@pytest.mark.parametrize(
    "model",
    [
        "o3-pro",  # not "o3"
        "gpt-5.7",  # not "gpt-5"
        "gpt-4o-search-preview",  # not "gpt-4o"
        "gpt-6.1-luna",  # not "gpt-6"-anything
        "claude-opus-4-9",  # not "claude-opus-4"
        "claude-opus-5-7",  # not "claude-opus-5"
        "gpt-4o2",
    ],
)
def test_other_model_sharing_a_prefix_is_unknown_not_mispriced(model: str) -> None:
    assert price_for(model) is None


def test_unknown_model_costs_nothing() -> None:
    assert price_for("local") is None
    assert cost_usd("local", 1_000_000, 1_000_000) == 0.0


def test_cost_uses_dollars_per_million_tokens() -> None:
    assert cost_usd("gpt-4o", 1_000_000, 500_000) == pytest.approx(2.50 + 5.00)
    assert cost_usd("claude-sonnet-4-5", 2_000, 1_000) == pytest.approx(0.006 + 0.015)


def test_model_names_match_case_insensitively() -> None:
    assert price_for("GPT-4o-Mini") == ModelPrice(0.15, 0.60)


def test_long_prompt_moves_the_whole_request_to_the_long_rates() -> None:
    # Claude Haiku 5.5: $0.10/$0.50 up to 100K prompt tokens, $0.50/$2.50 above.
    assert cost_usd("claude-haiku-5-5", 100_000, 1_000) == pytest.approx(0.01 + 0.0005)
    assert cost_usd("claude-haiku-5-5", 100_001, 1_000) == pytest.approx(
        100_001 * 0.50 / 1e6 + 1_000 * 2.50 / 1e6
    )


def test_openai_long_context_doubles_input_and_adds_half_to_output() -> None:
    price = price_for("gpt-6.2-sol")
    assert price is not None
    assert price.cost(272_000, 0) == pytest.approx(272_000 * 2.00 / 1e6)
    assert price.cost(272_001, 1_000) == pytest.approx(272_001 * 4.00 / 1e6 + 1_000 * 15.00 / 1e6)


@pytest.mark.usefixtures("isolated_table")
def test_register_price_prices_the_model_and_its_snapshots_only() -> None:
    register_price("acme-llm", ModelPrice(1.00, 2.00))

    assert price_for("acme-llm") == ModelPrice(1.00, 2.00)
    assert price_for("acme-llm-2026-01-01") == ModelPrice(1.00, 2.00)
    assert price_for("acme-llm-large") is None
    assert cost_usd("acme-llm", 1_000_000, 1_000_000) == pytest.approx(3.00)


@pytest.mark.usefixtures("isolated_table")
def test_register_price_replaces_an_existing_price() -> None:
    register_price("gpt-4o", ModelPrice(1.00, 1.00))

    assert price_for("gpt-4o-2024-08-06") == ModelPrice(1.00, 1.00)
    assert price_for("gpt-4o-mini") == ModelPrice(0.15, 0.60)


@pytest.mark.usefixtures("isolated_table")
def test_registered_snapshot_overrides_its_family() -> None:
    register_price("gpt-4o-2024-05-13", ModelPrice(5.00, 15.00))

    assert price_for("gpt-4o-2024-05-13") == ModelPrice(5.00, 15.00)
    assert price_for("gpt-4o-2024-08-06") == ModelPrice(2.50, 10.00)


def test_model_price_needs_the_whole_long_prompt_tier() -> None:
    with pytest.raises(ValueError, match="together"):
        ModelPrice(1.0, 2.0, long_prompt_tokens=1_000)


def test_model_price_rejects_negative_rates() -> None:
    with pytest.raises(ValueError, match=">= 0"):
        ModelPrice(-1.0, 2.0)


def test_every_table_entry_is_reachable_and_positive() -> None:
    for key, price in _pricing._PRICES.items():
        assert price_for(key) is price, key
        assert 0 < price.input_per_mtok <= price.output_per_mtok, key
