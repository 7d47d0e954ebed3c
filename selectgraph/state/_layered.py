"""Layered data: a branch's own ``data`` laid over its parent's, so a branch starts in O(1).

A branch must see the parent's state as it was at the fork plus its own
writes, and never a sibling's. Copying the parent's data for every branch
would make a fan-out over a big state cost what the state weighs; a layer
costs nothing to create and only what the branch writes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any, Final

from selectgraph.core._state import GraphState
from selectgraph.state._reducers import owned

__all__ = ["LayeredData"]

_CONTAINERS: Final = (list, dict, set)
_ABSENT: Final = object()


class LayeredData(MutableMapping[str, Any]):
    """``top`` over ``base``: reads fall through, writes and deletions stay on top.

    A list, dict or set read from ``base`` is copied into ``top`` on first read,
    because the engine's reducers extend their field in place and must never
    touch the parent's containers.
    """

    __slots__ = ("base", "deleted", "top")

    def __init__(self, base: Mapping[str, Any], top: Mapping[str, Any] | None = None) -> None:
        self.base = base
        self.top: dict[str, Any] = dict(top) if top else {}
        """What this layer holds: the branch's patch and writes."""
        self.deleted: set[str] = set()
        """Base keys this layer removed."""

    def __getitem__(self, key: str) -> Any:
        top = self.top
        if key in top:
            return top[key]
        if key in self.deleted:
            raise KeyError(key)
        value = self.base[key]
        if type(value) in _CONTAINERS:
            value = top[key] = owned(value)
        return value

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def peek(self, key: str, default: Any = None) -> Any:
        """The value as it stands, without copying a container out of ``base``."""
        if key in self.top:
            return self.top[key]
        if key in self.deleted:
            return default
        return self.base.get(key, default)

    def __setitem__(self, key: str, value: Any) -> None:
        self.top[key] = value
        self.deleted.discard(key)

    def __delitem__(self, key: str) -> None:
        if key not in self:
            raise KeyError(key)
        self.top.pop(key, None)
        if key in self.base:
            self.deleted.add(key)

    def __contains__(self, key: object) -> bool:
        if key in self.top:
            return True
        return key not in self.deleted and key in self.base

    def __iter__(self) -> Iterator[str]:
        top = self.top
        deleted = self.deleted
        for key in self.base:
            if key not in top and key not in deleted:
                yield key
        yield from top

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return f"LayeredData(top={self.top!r}, deleted={sorted(self.deleted)!r})"


def light_state(parent: GraphState, patch: Mapping[str, Any] | None) -> GraphState:
    """A branch's state before it writes anything: the parent's containers, ``patch`` on top."""
    state = GraphState.__new__(GraphState)
    state.data = LayeredData(parent.data, patch) if patch else parent.data
    state.messages = parent.messages
    state.history = parent.history
    state.metadata = parent.metadata
    state.errors = parent.errors
    state.current_node = None
    return state
