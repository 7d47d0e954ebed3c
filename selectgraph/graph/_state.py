"""State: GraphState, the shared record every node reads and the engine writes."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping, MutableSequence
from typing import TYPE_CHECKING, Any, Final

from selectgraph._messages import Message
from selectgraph._serialization import decode, encode
from selectgraph.graph._history import History

if TYPE_CHECKING:
    from selectgraph.graph._result import NodeResult

_RESULT_KEYS: Final = frozenset({"node", "step", "visit", "outcome"})


def _encode_history_entry(entry: Any, path: str) -> Any:
    to_dict = getattr(entry, "to_dict", None)
    if callable(to_dict):
        return to_dict(path)
    return encode(entry, path)


def _is_result(raw: Any) -> bool:
    return isinstance(raw, dict) and raw.keys() >= _RESULT_KEYS


__all__ = [
    "CONVERSATION_SUMMARY",
    "LAST_OUTPUT",
    "RESERVED_KEYS",
    "STATE_KEY_LAST_OUTPUT",
    "GraphState",
]

LAST_OUTPUT: Final = "__last_output__"
"""The ``data`` key holding the most recent node output (``state.last_output``)."""

STATE_KEY_LAST_OUTPUT: Final = LAST_OUTPUT
"""Alias of :data:`LAST_OUTPUT`."""

CONVERSATION_SUMMARY: Final = "__conversation_summary__"
"""The ``data`` key where agent nodes keep the rolling summary of older turns."""

RESERVED_KEYS: Final = frozenset({LAST_OUTPUT, CONVERSATION_SUMMARY})
"""Engine-owned ``data`` keys, allowed whatever the state schema declares."""

_MISSING: Final = object()


class GraphState:
    """The shared context passed to every node.

    Inside a node, ``state`` is a copy-on-write view: reading is free, and
    anything the node writes (``state.data[k] = v``, ``state.messages.append(m)``,
    ``state.last_output = x``) is collected and reaches the shared state only
    through the engine's merge, like a returned partial update.

    Example:
        >>> state = GraphState.from_prompt("Summarize the news", data={"topic": "AI"})
        >>> state["topic"], state.messages[0].text
        ('AI', 'Summarize the news')
    """

    __slots__ = ("current_node", "data", "errors", "history", "messages", "metadata")

    messages: MutableSequence[Message]
    """The conversation accumulated across nodes; nodes may only append."""
    data: MutableMapping[str, Any]
    """Key-value state shared between nodes; merged through per-field reducers."""
    current_node: str | None
    """The node being executed (set by the engine)."""
    history: MutableSequence[tuple[str, NodeResult]]
    """``(node_name, result)`` for every completed node, in order."""
    metadata: MutableMapping[str, Any]
    """Caller data carried through the run and its checkpoints (request ids, user ids...)."""
    errors: MutableSequence[dict[str, Any]]
    """A record per node failure that the run survived (SKIP policy or an on_failure edge)."""

    def __init__(
        self,
        *,
        messages: list[Message] | None = None,
        data: dict[str, Any] | None = None,
        current_node: str | None = None,
        history: list[tuple[str, NodeResult]] | None = None,
        metadata: dict[str, Any] | None = None,
        errors: list[dict[str, Any]] | None = None,
    ) -> None:
        self.messages = messages if messages is not None else []
        self.data = data if data is not None else {}
        self.current_node = current_node
        self.history = History(history) if history is not None else History()
        self.metadata = metadata if metadata is not None else {}
        self.errors = errors if errors is not None else []

    @classmethod
    def from_prompt(
        cls,
        prompt: str,
        *,
        data: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> GraphState:
        """A state whose conversation starts with ``prompt`` as the user's message."""
        return cls(
            messages=[Message.user(prompt)],
            data=dict(data) if data else {},
            metadata=dict(metadata) if metadata else {},
        )

    @property
    def last_output(self) -> Any:
        """The most recent node output (``data[LAST_OUTPUT]``), or ``None``."""
        return self.data.get(LAST_OUTPUT)

    @last_output.setter
    def last_output(self, value: Any) -> None:
        self.data[LAST_OUTPUT] = value

    # Mapping-style access to ``data``, so LangGraph-style ``state["key"]`` works.
    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.data[key] = value

    def __contains__(self, key: object) -> bool:
        return key in self.data

    def get(self, key: str, default: Any = None) -> Any:
        """``data[key]`` if present, else ``default``."""
        return self.data.get(key, default)

    def __iter__(self) -> Iterator[str]:
        raise TypeError("GraphState is not iterable; iterate over state.data instead")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict; :meth:`from_dict` restores an equal state.

        Raises:
            StateSerializationError: a value has no JSON form; the error names its path.
        """
        return {
            "messages": [message.to_dict() for message in self.messages],
            "data": {key: encode(value, f"data.{key}") for key, value in self.data.items()},
            "current_node": self.current_node,
            "history": [
                [node, _encode_history_entry(result, f"history[{i}]")]
                for i, (node, result) in enumerate(self.history)
            ],
            "metadata": {
                key: encode(value, f"metadata.{key}") for key, value in self.metadata.items()
            },
            "errors": [encode(error, f"errors[{i}]") for i, error in enumerate(self.errors)],
        }

    @classmethod
    def from_dict(cls, payload: Mapping[str, Any]) -> GraphState:
        """Rebuild a state written by :meth:`to_dict`."""
        from selectgraph.graph._result import NodeResult

        return cls(
            messages=[Message.from_dict(m) for m in payload.get("messages", [])],
            data={key: decode(value) for key, value in payload.get("data", {}).items()},
            current_node=payload.get("current_node"),
            history=[
                (node, NodeResult.from_dict(raw) if _is_result(raw) else decode(raw))
                for node, raw in payload.get("history", [])
            ],
            metadata={key: decode(value) for key, value in payload.get("metadata", {}).items()},
            errors=[decode(error) for error in payload.get("errors", [])],
        )

    def snapshot(self) -> GraphState:
        """A detached copy: new containers at the top level, values shared."""
        return GraphState(
            messages=list(self.messages),
            data=dict(self.data),
            current_node=self.current_node,
            history=list(self.history),
            metadata=dict(self.metadata),
            errors=list(self.errors),
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GraphState):
            return NotImplemented
        return (
            list(self.messages) == list(other.messages)
            and dict(self.data) == dict(other.data)
            and self.current_node == other.current_node
            and list(self.history) == list(other.history)
            and dict(self.metadata) == dict(other.metadata)
            and list(self.errors) == list(other.errors)
        )

    __hash__ = None  # type: ignore[assignment]  # mutable, so unhashable

    def __repr__(self) -> str:
        keys = ", ".join(sorted(self.data))
        return (
            f"GraphState(current_node={self.current_node!r}, data keys=[{keys}], "
            f"messages={len(self.messages)}, history={len(self.history)}, "
            f"errors={len(self.errors)})"
        )
