"""Views: the copy-on-write GraphState a node receives, so its writes reach state only via merge.

Creating a view costs O(1) whatever the size of the state: reads fall through
to the live state, writes are kept on the view. A top-level list, dict or set
read through the view is handed out as a shallow copy, so in-place edits
(``state.data["items"].append(x)``) change the copy, and the engine sees them
as a write of that key when the node returns. Objects nested deeper are shared
and must be treated as read-only.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, MutableMapping, MutableSequence, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NoReturn, TypeVar, overload

from selectgraph.core._messages import Message
from selectgraph.core._node_result import NodeResult
from selectgraph.core._run_errors import NodeContractError
from selectgraph.core._state import LAST_OUTPUT, GraphState

__all__ = ["AppendOnlyView", "DataView", "StateView", "ViewWrites"]

T = TypeVar("T")

_COPIERS: Final[dict[type, Any]] = {list: list, dict: dict, set: set}


class DataView(MutableMapping[str, Any]):
    """A mapping over live data that keeps its own writes (copy-on-write at the top level)."""

    __slots__ = (
        "_base",
        "_copies",
        "_deleted",
        "_owner",
        "_readonly",
        "_reads",
        "_what",
        "_writes",
    )

    def __init__(
        self,
        base: MutableMapping[str, Any],
        *,
        owner: str,
        what: str = "data",
        reads: frozenset[str] | None = None,
        readonly: bool = False,
    ) -> None:
        self._base = base
        self._owner = owner
        self._what = what
        self._reads = reads
        self._readonly = readonly
        self._writes: dict[str, Any] | None = None
        self._deleted: set[str] | None = None
        self._copies: dict[str, tuple[Any, Any]] | None = None

    def __getitem__(self, key: str) -> Any:
        writes = self._writes
        if writes is not None and key in writes:
            return writes[key]
        copies = self._copies
        if copies is not None and key in copies:
            return copies[key][0]
        if self._reads is not None and key not in self._reads and key != LAST_OUTPUT:
            self._undeclared_read(key)
        if self._deleted is not None and key in self._deleted:
            raise KeyError(key)
        value = self._base[key]
        copier = _COPIERS.get(type(value))
        if copier is None:
            return value
        duplicate = copier(value)
        if copies is None:
            copies = self._copies = {}
        copies[key] = (duplicate, value)
        return duplicate

    def _undeclared_read(self, key: str) -> NoReturn:
        declared = ", ".join(sorted(self._reads or ())) or "nothing"
        raise NodeContractError(
            f"node {self._owner!r} read {self._what}[{key!r}] but declares reads=[{declared}]; "
            f"add {key!r} to its reads",
            node=self._owner,
        )

    def __setitem__(self, key: str, value: Any) -> None:
        if self._readonly:
            self._refuse_write(key)
        if self._writes is None:
            self._writes = {}
        self._writes[key] = value
        if self._copies is not None:
            self._copies.pop(key, None)
        if self._deleted is not None:
            self._deleted.discard(key)

    def __delitem__(self, key: str) -> None:
        if self._readonly:
            self._refuse_write(key)
        present = key in self
        if not present:
            raise KeyError(key)
        if self._writes is not None:
            self._writes.pop(key, None)
        if self._copies is not None:
            self._copies.pop(key, None)
        if key in self._base:
            if self._deleted is None:
                self._deleted = set()
            self._deleted.add(key)

    def _refuse_write(self, key: str) -> NoReturn:
        raise TypeError(
            f"{self._owner} cannot write {self._what}[{key!r}]: conditions only read state; "
            "route with a router (its writes merge like update()) or write in a node"
        )

    def __contains__(self, key: object) -> bool:
        if self._writes is not None and key in self._writes:
            return True
        if self._deleted is not None and key in self._deleted:
            return False
        return key in self._base

    def __iter__(self) -> Iterator[str]:
        writes = self._writes or {}
        deleted = self._deleted or set()
        for key in self._base:
            if key not in writes and key not in deleted:
                yield key
        yield from writes

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def collect(self) -> tuple[dict[str, Any], set[str]]:
        """The view's writes: ``(assignments, deletions)``, in-place edits of copies included."""
        assignments = dict(self._writes) if self._writes else {}
        if self._copies:
            for key, (duplicate, original) in self._copies.items():
                if duplicate != original:
                    assignments[key] = duplicate
        return assignments, set(self._deleted) if self._deleted else set()

    def __repr__(self) -> str:
        return f"DataView({dict(self)!r})"


class AppendOnlyView(MutableSequence[T]):
    """A sequence over a live list that accepts appends and refuses every other change."""

    __slots__ = ("_added", "_base", "_readonly", "_what")

    def __init__(self, base: Sequence[T], *, what: str, readonly: bool = False) -> None:
        self._base = base
        self._added: list[T] = []
        self._what = what
        self._readonly = readonly

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> list[T]: ...
    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, slice):
            return list(self)[index]
        size = len(self)
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError(f"{self._what} index out of range")
        base_size = len(self._base)
        return self._base[index] if index < base_size else self._added[index - base_size]

    def __len__(self) -> int:
        return len(self._base) + len(self._added)

    def __iter__(self) -> Iterator[T]:
        yield from self._base
        yield from self._added

    def append(self, item: T) -> None:
        """Add one entry; it reaches the shared state when the node returns."""
        if self._readonly:
            self._refuse("append")
        self._added.append(item)

    def extend(self, items: Iterable[T]) -> None:
        """Add several entries."""
        if self._readonly:
            self._refuse("extend")
        self._added.extend(items)

    def __iadd__(self, items: Iterable[T]) -> AppendOnlyView[T]:
        self.extend(items)
        return self

    def __eq__(self, other: object) -> bool:
        if isinstance(other, AppendOnlyView | list | tuple):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def _refuse(self, operation: str) -> NoReturn:
        if self._readonly:
            raise TypeError(f"state.{self._what} is read-only here")
        raise TypeError(
            f"state.{self._what} is append-only inside a node: {operation}() would change "
            "entries other nodes already saw; use append() or extend()"
        )

    def __setitem__(self, index: Any, value: Any) -> NoReturn:
        self._refuse("item assignment")

    def __delitem__(self, index: Any) -> NoReturn:
        self._refuse("del")

    def insert(self, index: int, value: T) -> NoReturn:
        """Refused: entries may only be appended."""
        self._refuse("insert")

    def pop(self, index: int = -1) -> NoReturn:
        """Refused: entries may only be appended."""
        self._refuse("pop")

    def remove(self, value: T) -> NoReturn:
        """Refused: entries may only be appended."""
        self._refuse("remove")

    def clear(self) -> NoReturn:
        """Refused: entries may only be appended."""
        self._refuse("clear")

    @property
    def added(self) -> list[T]:
        """Entries appended through this view."""
        return self._added

    def __repr__(self) -> str:
        return f"{list(self)!r}"


@dataclass(slots=True, kw_only=True)
class ViewWrites:
    """Everything a node wrote through its view."""

    assignments: dict[str, Any] = field(default_factory=dict)
    """``data`` keys set to whole new values (reducers do not apply)."""
    deletions: set[str] = field(default_factory=set)
    """``data`` keys removed."""
    messages: list[Message] = field(default_factory=list)
    """Messages appended."""
    history: list[Any] = field(default_factory=list)
    """History entries appended."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """``metadata`` keys set."""
    metadata_deletions: set[str] = field(default_factory=set)
    """``metadata`` keys removed."""

    def is_empty(self) -> bool:
        """True when the node wrote nothing through its view."""
        return not (
            self.assignments
            or self.deletions
            or self.messages
            or self.history
            or self.metadata
            or self.metadata_deletions
        )


class StateView(GraphState):
    """The GraphState a node or router receives: live reads, private writes.

    Sub-views are built on first access, so a node that reads one key pays for
    one small object, not for the whole state.
    """

    __slots__ = (
        "_data",
        "_history",
        "_live",
        "_messages",
        "_meta",
        "_node",
        "_readonly",
        "_reads",
        "touched",
    )

    def __init__(
        self,
        live: GraphState,
        node: str,
        *,
        reads: frozenset[str] | None = None,
        readonly: bool = False,
    ) -> None:
        # GraphState.__init__ is deliberately not called: the view owns no containers.
        self._live = live
        self._node = node
        self._reads = reads
        self._readonly = readonly
        self._data: DataView | None = None
        self._meta: DataView | None = None
        self._messages: AppendOnlyView[Message] | None = None
        self._history: AppendOnlyView[tuple[str, NodeResult]] | None = None
        self.touched = False
        """Whether any sub-view was built, i.e. whether the node may have written something."""

    @property
    def data(self) -> MutableMapping[str, Any]:
        view = self._data
        if view is None:
            self.touched = True
            view = self._data = DataView(
                self._live.data, owner=self._node, reads=self._reads, readonly=self._readonly
            )
        return view

    @data.setter
    def data(self, value: Any) -> None:
        if value is not self._data:
            self._refuse_replace("data")  # ``+=`` assigns the same view back: allowed

    @property
    def metadata(self) -> MutableMapping[str, Any]:
        view = self._meta
        if view is None:
            self.touched = True
            view = self._meta = DataView(
                self._live.metadata, owner=self._node, what="metadata", readonly=self._readonly
            )
        return view

    @metadata.setter
    def metadata(self, value: Any) -> None:
        if value is not self._meta:
            self._refuse_replace("metadata")  # ``+=`` assigns the same view back: allowed

    @property
    def messages(self) -> MutableSequence[Message]:
        view = self._messages
        if view is None:
            self.touched = True
            view = self._messages = AppendOnlyView(
                self._live.messages, what="messages", readonly=self._readonly
            )
        return view

    @messages.setter
    def messages(self, value: Any) -> None:
        if value is not self._messages:
            self._refuse_replace("messages")  # ``+=`` assigns the same view back: allowed

    @property
    def history(self) -> MutableSequence[tuple[str, NodeResult]]:
        view = self._history
        if view is None:
            self.touched = True
            view = self._history = AppendOnlyView(
                self._live.history, what="history", readonly=self._readonly
            )
        return view

    @history.setter
    def history(self, value: Any) -> None:
        if value is not self._history:
            self._refuse_replace("history")  # ``+=`` assigns the same view back: allowed

    @property
    def errors(self) -> MutableSequence[dict[str, Any]]:
        return AppendOnlyView(self._live.errors, what="errors", readonly=True)

    @errors.setter
    def errors(self, value: Any) -> None:
        self._refuse_replace("errors")

    @property
    def current_node(self) -> str | None:
        return self._node

    @current_node.setter
    def current_node(self, value: Any) -> None:
        self._refuse_replace("current_node")

    def _refuse_replace(self, what: str) -> NoReturn:
        raise TypeError(
            f"node {self._node!r} cannot replace state.{what}; change its contents "
            "(or return a partial update) and the engine merges it"
        )

    def __getitem__(self, key: str) -> Any:
        if self._data is None and self._reads is None:
            # ``state["k"]`` before anything was written: read straight through,
            # building the DataView only when a container needs copy-on-read.
            value = self._live.data[key]
            if type(value) not in _COPIERS:
                return value
        return self.data[key]

    def get(self, key: str, default: Any = None) -> Any:
        """``data[key]`` if present, else ``default``."""
        try:
            return self[key]
        except KeyError:
            return default

    def collect(self) -> ViewWrites | None:
        """What the node wrote through this view, or ``None`` when it wrote nothing."""
        if (
            self._data is None
            and self._meta is None
            and self._messages is None
            and (self._history is None)
        ):
            return None
        writes = ViewWrites()
        if self._data is not None:
            writes.assignments, writes.deletions = self._data.collect()
        if self._meta is not None:
            writes.metadata, writes.metadata_deletions = self._meta.collect()
        if self._messages is not None:
            writes.messages = self._messages.added
        if self._history is not None:
            writes.history = self._history.added
        return None if writes.is_empty() else writes

    def __repr__(self) -> str:
        return f"StateView(node={self._node!r}, data keys=[{', '.join(sorted(self.data))}])"
