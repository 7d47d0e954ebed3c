"""History: the ordered record of node executions kept in ``state.history``.

Every step adds an entry, so entries are stored as plain tuples and turned
into ``(node_name, NodeResult)`` pairs only when somebody reads them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, MutableSequence
from typing import Any, overload

from selectgraph.core._node_result import NodeResult

__all__ = ["History"]

Entry = tuple[str, Any]


class History(MutableSequence[Entry]):
    """A list of ``(node_name, NodeResult)`` pairs that builds each result on first access."""

    __slots__ = ("raw",)

    def __init__(self, items: Iterable[Entry] = ()) -> None:
        self.raw: list[Any] = list(items)
        """Entries as stored: pairs, or tuples of NodeResult's fields (in declaration
        order) that the engine appends directly and that are built on first read."""

    def _pair(self, index: int) -> Entry:
        item = self.raw[index]
        if type(item) is tuple and len(item) != 2:
            result = NodeResult(*item)
            item = self.raw[index] = (result.node, result)
        return item  # type: ignore[no-any-return]

    @overload
    def __getitem__(self, index: int) -> Entry: ...
    @overload
    def __getitem__(self, index: slice) -> list[Entry]: ...
    def __getitem__(self, index: int | slice) -> Entry | list[Entry]:
        if isinstance(index, slice):
            return [self._pair(i) for i in range(len(self.raw))[index]]
        return self._pair(index)

    @overload
    def __setitem__(self, index: int, value: Entry) -> None: ...
    @overload
    def __setitem__(self, index: slice, value: Iterable[Entry]) -> None: ...
    def __setitem__(self, index: int | slice, value: Any) -> None:
        self.raw[index] = value

    def __delitem__(self, index: int | slice) -> None:
        del self.raw[index]

    def __len__(self) -> int:
        return len(self.raw)

    def __iter__(self) -> Iterator[Entry]:
        for index in range(len(self.raw)):
            yield self._pair(index)

    def insert(self, index: int, value: Entry) -> None:
        """Insert a ``(node_name, result)`` pair."""
        self.raw.insert(index, value)

    def append(self, value: Entry) -> None:
        """Append a ``(node_name, result)`` pair."""
        self.raw.append(value)

    def extend(self, values: Iterable[Entry]) -> None:
        """Append several pairs."""
        self.raw.extend(values)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, History | list | tuple):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"History({list(self)!r})"

    def results_by_node(self) -> dict[str, list[NodeResult]]:
        """Every NodeResult, grouped by node name, in execution order."""
        grouped: dict[str, list[NodeResult]] = {}
        for name, result in self:
            if isinstance(result, NodeResult):
                grouped.setdefault(name, []).append(result)
        return grouped
