"""Research budgets: when a loop stops researching and writes, so a report is always produced.

Seed 003 routes to the writer before a budget is exceeded. The decision is
taken before each iteration: another iteration starts only if the iterations
left allow it and the tokens and time it is expected to cost, plus what the
writing still needs (the reserve), fit in what is left. An iteration's expected
cost is the most expensive iteration measured so far, or a first guess before
any was measured.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from selectgraph.research._state import Mark

__all__ = ["ResearchBudget", "budget_stop"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ResearchBudget:
    """Limits of a research run; the writer always gets to write."""

    max_iterations: int = 3
    """Research iterations per loop (each: think, find gaps, search)."""
    max_tokens: int | None = None
    """Tokens for the whole run (a deep run shares them among its sections)."""
    max_seconds: float | None = 180.0
    """Wall-clock seconds for the whole run (default 3 minutes; None: no limit). A
    deadline: model calls and searches still running at it are cancelled, and the run
    ends with a report of the evidence gathered, marked degraded."""
    reserve_tokens: int = 3000
    """Tokens kept for writing (per section, and for the synthesis)."""
    reserve_seconds: float = 20.0
    """Seconds kept for writing."""
    iteration_tokens: int = 4000
    """Expected tokens of an iteration until one has been measured."""
    iteration_seconds: float = 10.0
    """Expected seconds of an iteration until one has been measured."""

    def __post_init__(self) -> None:
        if self.max_iterations < 0:
            raise ValueError(
                f"ResearchBudget.max_iterations must be >= 0, got {self.max_iterations}"
            )
        for name in ("max_tokens", "max_seconds"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"ResearchBudget.{name} must be > 0 or None, got {value}")

    def share(self, parts: int, spent: int = 0) -> int | None:
        """Tokens each of ``parts`` parallel loops may spend.

        What is left of ``max_tokens`` after the ``spent`` tokens (the outline) and
        the synthesis reserve, split equally.
        """
        if self.max_tokens is None:
            return None
        return max(0, (self.max_tokens - spent - self.reserve_tokens) // max(1, parts))


def budget_stop(
    budget: ResearchBudget,
    *,
    iteration: int,
    spent_tokens: int,
    token_limit: int | None,
    elapsed: float,
    marks: Sequence[Mark],
    reserve_seconds: float | None = None,
) -> str | None:
    """Why the loop must write now (``max_iterations``, ``token_budget``, ``time_budget``).

    ``None`` when another iteration fits. ``marks`` are the measurements taken at
    each earlier decision, the latest last. ``reserve_seconds`` overrides the budget's
    (a deep run's loops keep time for the synthesis too).
    """
    if iteration >= budget.max_iterations:
        return "max_iterations"
    steps = list(itertools.pairwise(marks))
    if token_limit is not None:
        expected = max((b.tokens - a.tokens for a, b in steps), default=budget.iteration_tokens)
        if spent_tokens + expected + budget.reserve_tokens > token_limit:
            return "token_budget"
    if budget.max_seconds is not None:
        seconds = max((b.seconds - a.seconds for a, b in steps), default=budget.iteration_seconds)
        reserve = budget.reserve_seconds if reserve_seconds is None else reserve_seconds
        if elapsed + seconds + reserve > budget.max_seconds:
            return "time_budget"
    return None
