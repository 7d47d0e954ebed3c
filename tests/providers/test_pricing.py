from __future__ import annotations

import subprocess
import sys
from decimal import Decimal
from types import SimpleNamespace
from typing import TYPE_CHECKING

import genai_prices
import pytest
from genai_prices import data_snapshot
from genai_prices import types as genai_types

from selectgraph.core._usage import Usage
from selectgraph.providers import _pricing
from selectgraph.providers._pricing import ModelPrice, cost_usd, price_for, register_price

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture(autouse=True)
def isolated(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Registered prices and resolutions never leak between tests."""
    monkeypatch.setattr(_pricing, "_overrides", {})
    monkeypatch.setattr(_pricing, "_cache", {})
    yield
    data_snapshot.set_custom_snapshot(None)


def genai_cost(model: str, input_tokens: int, output_tokens: int) -> float:
    usage = genai_prices.Usage(input_tokens=input_tokens, output_tokens=output_tokens)
    return float(genai_prices.calc_price(usage, model).total_price)


def acme_snapshot(**prices: Decimal | genai_types.TieredPrices) -> data_snapshot.DataSnapshot:
    """genai-prices data with one provider whose one model, ``acme-1``, costs ``prices``."""
    model = genai_types.ModelInfo(
        id="acme-1",
        match=genai_types.ClauseEquals(equals="acme-1"),
        prices=genai_types.ModelPrice(**prices),
    )
    provider = genai_types.Provider(
        id="acme",
        name="Acme",
        api_pattern=r"https://api\.acme\.example",
        model_match=genai_types.ClauseStartsWith(starts_with="acme-"),
        models=[model],
    )
    return data_snapshot.DataSnapshot(providers=[provider], from_auto_update=False)


def tiered(base: str, *tiers: tuple[int, str]) -> genai_types.TieredPrices:
    return genai_types.TieredPrices(
        base=Decimal(base),
        tiers=[genai_types.Tier(start=start, price=Decimal(price)) for start, price in tiers],
    )


# --- prices from genai-prices -------------------------------------------------------


@pytest.mark.parametrize(
    "model",
    [
        "gpt-4o",
        "gpt-4o-mini-2024-07-18",
        "o3-pro",
        "claude-haiku-4-5-20251001",
        "claude-sonnet-4-20250514",
        "claude-3-5-haiku-latest",
        "gpt-5.6-sol",  # a long-prompt tier above 272K
        "claude-haiku-5-5",  # a long-prompt tier above 100K
        "deepseek-chat",  # off-peak rates by time of day
    ],
)
@pytest.mark.parametrize(("input_tokens", "output_tokens"), [(1_000, 200), (300_000, 2_000)])
def test_known_models_cost_what_genai_prices_says(
    model: str, input_tokens: int, output_tokens: int
) -> None:
    cost = cost_usd(model, input_tokens, output_tokens)

    assert cost is not None
    assert cost > 0
    assert cost == pytest.approx(genai_cost(model, input_tokens, output_tokens))


@pytest.mark.parametrize("model", ["gpt-4o", "GPT-4o-Mini", "gpt-5.6-sol", "claude-haiku-5-5"])
def test_price_for_gives_the_per_million_rates_genai_prices_charges(model: str) -> None:
    price = price_for(model)

    assert price is not None
    for input_tokens in (1_000_000, 150_000, 300_000):
        assert price.cost(input_tokens, 1_000_000) == pytest.approx(
            genai_cost(model, input_tokens, 1_000_000)
        )


@pytest.mark.parametrize(
    "model", ["my-finetune", "smollm2-135m-instruct", "gpt-5.7", "scripted", "local"]
)
def test_unknown_model_has_no_price_and_an_unknown_cost(model: str) -> None:
    assert price_for(model) is None
    assert cost_usd(model, 1_000_000, 1_000_000) is None


def test_a_call_of_an_unknown_model_is_counted_as_unpriced_not_free() -> None:
    priced = Usage(input_tokens=10, output_tokens=5, cost_usd=cost_usd("gpt-4o", 10, 5), calls=1)
    unpriced = Usage(input_tokens=7, output_tokens=3, cost_usd=cost_usd("local", 7, 3), calls=1)

    total = priced + unpriced

    assert unpriced.unpriced_calls == 1
    assert unpriced.known_cost_usd is None
    assert priced.known_cost_usd == priced.cost_usd
    assert total.unpriced_calls == 1
    assert total.cost_usd == priced.cost_usd
    assert total.known_cost_usd is None


def test_usage_records_of_unpriced_calls_survive_a_round_trip() -> None:
    usage = Usage(input_tokens=7, output_tokens=3, cost_usd=None, calls=2)

    assert usage.unpriced_calls == 2
    assert usage.cost_usd == 0.0
    assert Usage.from_dict(usage.to_dict()) == usage
    # A record written before unpriced calls were counted.
    old = {"input_tokens": 7, "output_tokens": 3, "cost_usd": 0.5, "calls": 1}
    assert Usage.from_dict(old) == Usage(input_tokens=7, output_tokens=3, cost_usd=0.5, calls=1)
    assert Usage.from_dict(old).known_cost_usd == 0.5


def test_an_unknown_cost_is_unpriced_even_without_a_call_count() -> None:
    assert Usage(cost_usd=None).unpriced_calls == 1
    assert Usage(cost_usd=0.0).unpriced_calls == 0
    assert Usage().known_cost_usd == 0.0


# --- the hot path ---------------------------------------------------------------------


def test_each_model_is_looked_up_once(monkeypatch: pytest.MonkeyPatch) -> None:
    snapshot = data_snapshot.get_snapshot()
    lookups: list[str] = []
    real = snapshot.find_provider_model

    def counted(
        model_ref: str, *args: object
    ) -> tuple[genai_types.Provider, genai_types.ModelInfo]:
        lookups.append(model_ref)
        return real(model_ref, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(snapshot, "find_provider_model", counted)

    for tokens in range(100):
        cost_usd("gpt-4o", tokens, tokens)
        cost_usd("local", tokens, tokens)

    assert sorted(lookups) == ["gpt-4o", "local"]


def test_importing_selectgraph_does_not_load_the_price_data() -> None:
    code = "import sys, selectgraph; print('genai_prices' in sys.modules)"
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert ran.stdout.strip() == "False"


def test_a_new_day_looks_prices_up_again(monkeypatch: pytest.MonkeyPatch) -> None:
    now = 1_800_000_000.0
    monkeypatch.setattr(_pricing, "time", SimpleNamespace(time=lambda: now))
    data_snapshot.set_custom_snapshot(acme_snapshot(input_mtok=Decimal(1), output_mtok=Decimal(2)))
    assert price_for("acme-1") == ModelPrice(1.0, 2.0)

    data_snapshot.set_custom_snapshot(acme_snapshot(input_mtok=Decimal(3), output_mtok=Decimal(4)))
    now += 86_400

    assert price_for("acme-1") == ModelPrice(3.0, 4.0)


def test_new_genai_prices_data_is_used_at_once() -> None:
    assert price_for("acme-1") is None

    data_snapshot.set_custom_snapshot(acme_snapshot(input_mtok=Decimal(1), output_mtok=Decimal(2)))

    assert price_for("acme-1") == ModelPrice(1.0, 2.0)
    assert cost_usd("acme-1", 1_000_000, 500_000) == pytest.approx(2.0)


@pytest.mark.parametrize(
    "prices",
    [
        {
            "input_mtok": tiered("1", (100_000, "2"), (200_000, "4")),
            "output_mtok": tiered("5", (100_000, "10"), (200_000, "20")),
        },
        {
            "input_mtok": tiered("1", (100_000, "2")),
            "output_mtok": tiered("5", (200_000, "10")),
        },
        {"input_mtok": Decimal(1), "output_mtok": Decimal(2), "requests_kcount": Decimal(5)},
    ],
    ids=["two tiers", "tiers that start apart", "a fee per request"],
)
def test_prices_a_model_price_cannot_hold_are_computed_by_genai_prices(
    prices: dict[str, Decimal | genai_types.TieredPrices],
) -> None:
    data_snapshot.set_custom_snapshot(acme_snapshot(**prices))

    assert price_for("acme-1") is None
    for input_tokens in (50_000, 150_000, 250_000):
        assert cost_usd("acme-1", input_tokens, 1_000) == pytest.approx(
            genai_cost("acme-1", input_tokens, 1_000)
        )


def test_a_model_priced_only_for_input_costs_nothing_for_output() -> None:
    data_snapshot.set_custom_snapshot(acme_snapshot(input_mtok=Decimal("0.1")))

    assert price_for("acme-1") == ModelPrice(0.1, 0.0)


@pytest.mark.parametrize(
    "prices", [{}, {"web_searches_kcount": Decimal(10)}], ids=["no price", "searches only"]
)
def test_a_model_listed_without_a_price_for_tokens_has_an_unknown_cost(
    prices: dict[str, Decimal],
) -> None:
    data_snapshot.set_custom_snapshot(acme_snapshot(**prices))

    assert genai_cost("acme-1", 1_000, 1_000) == 0  # what genai-prices itself says
    assert price_for("acme-1") is None
    assert cost_usd("acme-1", 1_000, 1_000) is None


# --- registered prices ----------------------------------------------------------------


def test_register_price_prices_the_model_and_its_snapshots_only() -> None:
    register_price("acme-llm", ModelPrice(1.00, 2.00))

    assert price_for("acme-llm") == ModelPrice(1.00, 2.00)
    assert price_for("ACME-LLM-2026-01-01") == ModelPrice(1.00, 2.00)
    assert price_for("acme-llm@20260101") == ModelPrice(1.00, 2.00)
    assert price_for("acme-llm-latest") == ModelPrice(1.00, 2.00)
    assert price_for("acme-llm-large") is None
    assert cost_usd("acme-llm", 1_000_000, 1_000_000) == pytest.approx(3.00)


def test_a_registered_price_wins_over_genai_prices_for_that_model_only() -> None:
    genai_mini = price_for("gpt-4o-mini")
    assert price_for("gpt-4o") != ModelPrice(1.00, 1.00)

    register_price("gpt-4o", ModelPrice(1.00, 1.00))

    assert price_for("gpt-4o") == ModelPrice(1.00, 1.00)
    assert price_for("gpt-4o-2024-08-06") == ModelPrice(1.00, 1.00)
    assert price_for("gpt-4o-mini") == genai_mini


def test_the_longest_registered_name_wins() -> None:
    register_price("acme", ModelPrice(1.00, 1.00))
    register_price("acme-2026-05-13", ModelPrice(5.00, 15.00))

    assert price_for("acme-2026-05-13") == ModelPrice(5.00, 15.00)
    assert price_for("acme-2026-08-06") == ModelPrice(1.00, 1.00)


def test_register_price_replaces_a_price_already_used() -> None:
    register_price("acme", ModelPrice(1.00, 1.00))
    assert cost_usd("acme", 1_000_000, 0) == pytest.approx(1.00)

    register_price("acme", ModelPrice(2.00, 1.00))

    assert cost_usd("acme", 1_000_000, 0) == pytest.approx(2.00)


def test_long_prompt_moves_the_whole_request_to_the_long_rates() -> None:
    register_price(
        "acme",
        ModelPrice(
            0.10,
            0.50,
            long_prompt_tokens=100_000,
            long_input_per_mtok=0.50,
            long_output_per_mtok=2.5,
        ),
    )

    assert cost_usd("acme", 100_000, 1_000) == pytest.approx(0.01 + 0.0005)
    assert cost_usd("acme", 100_001, 1_000) == pytest.approx(
        100_001 * 0.50 / 1e6 + 1_000 * 2.50 / 1e6
    )


def test_model_price_needs_the_whole_long_prompt_tier() -> None:
    with pytest.raises(ValueError, match="together"):
        ModelPrice(1.0, 2.0, long_prompt_tokens=1_000)


def test_model_price_rejects_negative_rates() -> None:
    with pytest.raises(ValueError, match=">= 0"):
        ModelPrice(-1.0, 2.0)
