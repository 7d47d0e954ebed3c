"""Usage: tokens and dollars spent by model calls, summable across nodes and runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["NO_USAGE", "Usage"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Tokens and cost of one or more model calls."""

    input_tokens: int = 0
    """Prompt tokens sent to the model."""
    output_tokens: int = 0
    """Tokens the model generated."""
    cost_usd: float = 0.0
    """Estimated cost in US dollars, from the provider price table."""
    calls: int = 0
    """Number of model calls summed into this record."""

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
            calls=self.calls + other.calls,
        )

    def to_dict(self) -> dict[str, float | int]:
        """A JSON-safe dict."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd,
            "calls": self.calls,
        }

    @classmethod
    def from_dict(cls, data: dict[str, float | int]) -> Usage:
        """Rebuild a usage record written by :meth:`to_dict`."""
        return cls(
            input_tokens=int(data.get("input_tokens", 0)),
            output_tokens=int(data.get("output_tokens", 0)),
            cost_usd=float(data.get("cost_usd", 0.0)),
            calls=int(data.get("calls", 0)),
        )


NO_USAGE: Final = Usage()
"""A shared zero usage (Usage is immutable, so one instance serves everywhere)."""
