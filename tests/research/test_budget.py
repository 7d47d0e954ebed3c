"""Research budgets decide before each iteration whether it and the writing still fit."""

from __future__ import annotations

import pytest

from selectgraph.research import Mark, ResearchBudget
from selectgraph.research._budget import budget_stop


def stop(budget: ResearchBudget, **kwargs: object) -> str | None:
    values: dict[str, object] = {
        "iteration": 0,
        "spent_tokens": 0,
        "token_limit": budget.max_tokens,
        "elapsed": 0.0,
        "marks": [],
    }
    values.update(kwargs)
    return budget_stop(budget, **values)  # type: ignore[arg-type]


def test_iterations() -> None:
    budget = ResearchBudget(max_iterations=2)
    assert stop(budget, iteration=1) is None
    assert stop(budget, iteration=2) == "max_iterations"
    assert stop(ResearchBudget(max_iterations=0)) == "max_iterations"


def test_tokens_use_a_first_guess_then_the_costliest_iteration_measured() -> None:
    budget = ResearchBudget(max_tokens=10_000, reserve_tokens=2000, iteration_tokens=4000)
    assert stop(budget, spent_tokens=3000) is None  # 3000 + 4000 + 2000 <= 10000
    assert stop(budget, spent_tokens=4001) == "token_budget"
    marks = [Mark(tokens=1000, seconds=0), Mark(tokens=2000, seconds=1)]  # 1000 a turn
    assert stop(budget, spent_tokens=6000, marks=marks) is None
    marks.append(Mark(tokens=5000, seconds=2))  # one cost 3000
    assert stop(budget, spent_tokens=6000, marks=marks) == "token_budget"


def test_a_loops_own_limit_overrides_the_budgets() -> None:
    budget = ResearchBudget(max_tokens=100_000, reserve_tokens=0, iteration_tokens=100)
    assert stop(budget, spent_tokens=950, token_limit=1000) == "token_budget"
    assert stop(budget, spent_tokens=950) is None


def test_time() -> None:
    budget = ResearchBudget(max_seconds=60, reserve_seconds=20, iteration_seconds=10)
    assert stop(budget, elapsed=30.0) is None
    assert stop(budget, elapsed=31.0) == "time_budget"
    marks = [Mark(tokens=0, seconds=0.0), Mark(tokens=0, seconds=25.0)]
    assert stop(budget, elapsed=20.0, marks=marks) == "time_budget"


def test_share_and_validation() -> None:
    assert ResearchBudget(max_tokens=10_000, reserve_tokens=1000).share(3) == 3000
    assert ResearchBudget().share(3) is None
    with pytest.raises(ValueError, match="max_tokens must be > 0"):
        ResearchBudget(max_tokens=0)
    with pytest.raises(ValueError, match="max_iterations must be >= 0"):
        ResearchBudget(max_iterations=-1)
