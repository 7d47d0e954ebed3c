"""Usage: tokens and dollars spent by model calls, summable across nodes and runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["NO_USAGE", "Usage"]


@dataclass(frozen=True, slots=True, init=False)
class Usage:
    """Tokens and cost of one or more model calls.

    A call whose model has no known price adds its tokens but no dollars: it is
    counted in :attr:`unpriced_calls`, so a cost is never silently zero. While
    ``unpriced_calls`` is above zero, :attr:`cost_usd` is a lower bound and
    :attr:`known_cost_usd` is ``None``.
    """

    input_tokens: int
    """Prompt tokens sent to the model."""
    output_tokens: int
    """Tokens the model generated."""
    cost_usd: float
    """Cost in US dollars of the calls whose price is known (see :attr:`unpriced_calls`)."""
    calls: int
    """Number of model calls summed into this record."""
    unpriced_calls: int
    """Calls whose model has no known price; their cost is not in :attr:`cost_usd`."""

    def __init__(
        self,
        *,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cost_usd: float | None = 0.0,
        calls: int = 0,
        unpriced_calls: int | None = None,
    ) -> None:
        """Record usage.

        Args:
            input_tokens: Prompt tokens.
            output_tokens: Generated tokens.
            cost_usd: Dollars, or ``None`` when the price of these calls is unknown
                (as :func:`selectgraph.providers.cost_usd` returns for such a model).
            calls: Model calls.
            unpriced_calls: Calls without a known price; by default all of them
                (at least one) when ``cost_usd`` is ``None``, else none.
        """
        if unpriced_calls is None:
            unpriced_calls = max(calls, 1) if cost_usd is None else 0
        # Frozen: the generated __init__ would set fields the same way.
        object.__setattr__(self, "input_tokens", input_tokens)
        object.__setattr__(self, "output_tokens", output_tokens)
        object.__setattr__(self, "cost_usd", 0.0 if cost_usd is None else cost_usd)
        object.__setattr__(self, "calls", calls)
        object.__setattr__(self, "unpriced_calls", unpriced_calls)

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    @property
    def known_cost_usd(self) -> float | None:
        """The cost in US dollars, or ``None`` if any call's price is unknown."""
        return None if self.unpriced_calls else self.cost_usd

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
            calls=self.calls + other.calls,
            unpriced_calls=self.unpriced_calls + other.unpriced_calls,
        )

    def to_dict(self) -> dict[str, float | int]:
        """A JSON-safe dict."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd,
            "calls": self.calls,
            "unpriced_calls": self.unpriced_calls,
        }

    @classmethod
    def from_dict(cls, data: dict[str, float | int]) -> Usage:
        """Rebuild a record written by :meth:`to_dict` (``unpriced_calls`` may be absent)."""
        return cls(
            input_tokens=int(data.get("input_tokens", 0)),
            output_tokens=int(data.get("output_tokens", 0)),
            cost_usd=float(data.get("cost_usd", 0.0)),
            calls=int(data.get("calls", 0)),
            unpriced_calls=int(data.get("unpriced_calls", 0)),
        )


NO_USAGE: Final = Usage()
"""A shared zero usage (Usage is immutable, so one instance serves everywhere)."""
