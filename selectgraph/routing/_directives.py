"""Directives: what a node or router returns to route explicitly and write state at once."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from selectgraph.core._sentinels import EndType

__all__ = ["NO_RESUME", "Command", "Directive", "goto", "update"]

NO_RESUME: Any = object()
"""``Command(resume=...)`` was not given (None is a valid answer)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Directive:
    """A routing decision and/or a partial update, returned by a node or a router."""

    target: str | EndType | None = None
    """Where to go next; ``None`` leaves routing to the node's edges."""
    values: Mapping[str, Any] = field(default_factory=dict)
    """A partial update merged through the field reducers before routing."""
    assignments: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """Keys a router set through its state view (``state.data[k] = v``): whole values,
    merged before ``values`` and, like a node's view writes, not through the reducers."""


def goto(target: str | EndType, update: Mapping[str, Any] | None = None) -> Directive:
    """Route to ``target`` next (overriding the node's edges), optionally writing ``update``.

    Example:
        >>> goto("writer", {"revision": 2})
        Directive(target='writer', values={'revision': 2})
    """
    if not isinstance(target, str | EndType):
        raise TypeError(f"goto() needs a node name or END, got {target!r}")
    return Directive(target=target, values=dict(update or {}))


def update(values: Mapping[str, Any] | None = None, /, **fields: Any) -> Directive:
    """A partial update, merged through the field reducers; routing follows the node's edges.

    Example:
        >>> update(revision=2)
        Directive(target=None, values={'revision': 2})
    """
    merged = dict(values or {})
    merged.update(fields)
    return Directive(values=merged)


@dataclass(frozen=True, slots=True, init=False)
class Command(Directive):
    """LangGraph's spelling of a directive: ``Command(goto=..., update=...)``.

    Returned by a node or a router it is ``goto(goto, update)`` (or ``update(update)``
    without ``goto``). Passed to ``invoke()`` as ``Command(resume=answer)`` it answers
    the run's pending interrupt (see docs/coming-from-langgraph.md).

    Example:
        >>> Command(goto="review", update={"draft": 2})
        Command(target='review', values={'draft': 2})
    """

    resume: Any
    """The answer to a pending interrupt (``invoke(Command(resume=...), config)``)."""

    def __init__(
        self,
        *,
        goto: str | EndType | None = None,
        update: Mapping[str, Any] | None = None,
        resume: Any = NO_RESUME,
    ) -> None:
        if goto is not None and not isinstance(goto, str | EndType):
            raise TypeError(
                f"Command(goto=...) takes one node name or END, got {goto!r}; to run several "
                "nodes at once return a list of names or Scatter(...) from a router"
            )
        object.__setattr__(self, "target", goto)
        object.__setattr__(self, "values", dict(update or {}))
        object.__setattr__(self, "resume", resume)

    def __repr__(self) -> str:
        parts = [f"target={self.target!r}", f"values={dict(self.values)!r}"]
        if self.resume is not NO_RESUME:
            parts.append(f"resume={self.resume!r}")
        return f"Command({', '.join(parts)})"
