"""Directives: what a node or router returns to route explicitly and write state at once."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from selectgraph._sentinels import EndType

__all__ = ["Directive", "goto", "update"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Directive:
    """A routing decision and/or a partial update, returned by a node or a router."""

    target: str | EndType | None = None
    """Where to go next; ``None`` leaves routing to the node's edges."""
    values: Mapping[str, Any] = field(default_factory=dict)
    """A partial update merged through the field reducers before routing."""


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
