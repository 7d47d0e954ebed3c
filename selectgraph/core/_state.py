"""State: GraphState, the shared record every node reads and the engine writes."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, MutableSequence
from typing import TYPE_CHECKING, Any, Final, get_args

from pydantic import TypeAdapter

from selectgraph.core._errors import StateDecodeError
from selectgraph.core._history import History
from selectgraph.core._messages import Message
from selectgraph.core._node_result import NodeResult
from selectgraph.core._policies import Outcome
from selectgraph.core._serialization import StateSerializer, brief, default_serializer
from selectgraph.core._usage import Usage

_RESULT_KEYS: Final = frozenset({"node", "step", "visit", "outcome"})
_OUTCOMES: Final = get_args(Outcome)


_Encode = Callable[[Any, str], Any]
_Decode = Callable[[Any, str], Any]


def _encode_history_entry(entry: Any, path: str, encode: _Encode) -> Any:
    if type(entry) is NodeResult:
        return _encode_result(entry, path, encode)
    return encode(entry, path)


def _encode_result(result: NodeResult, path: str, encode: _Encode) -> dict[str, Any]:
    # The layout NodeResult.to_dict writes, with this serializer's settings.
    output = result.output
    return {
        "node": result.node,
        "step": result.step,
        "visit": result.visit,
        "outcome": result.outcome,
        "output": None if output is None else encode(dict(output), f"{path}.output"),
        "content": encode(result.content, f"{path}.content"),
        "error": result.error,
        "attempts": result.attempts,
        "duration_ms": result.duration_ms,
        "usage": None if result.usage is None else result.usage.to_dict(),
        "agent_result": encode(result.agent_result, f"{path}.agent_result"),
    }


def _is_result(raw: Any) -> bool:
    return isinstance(raw, dict) and raw.keys() >= _RESULT_KEYS


def _expect_type(raw: Any, kind: type, path: str, what: str) -> Any:
    if not isinstance(raw, kind):
        raise StateDecodeError(path, f"expected {what}, got a {type(raw).__qualname__}")
    return raw


def _expect_list(payload: Mapping[str, Any], key: str) -> list[Any]:
    return _expect_type(payload.get(key, []), list, key, "a list")  # type: ignore[no-any-return]


def _expect_field(raw: Mapping[str, Any], key: str, path: str, kinds: tuple[type, ...]) -> Any:
    value = raw.get(key)
    if type(value) not in kinds:
        names = " or ".join("null" if k is type(None) else k.__name__ for k in kinds)
        raise StateDecodeError(f"{path}.{key}", f"expected {names}, got {brief(value)}")
    return value


_MESSAGE_LIST: Final = TypeAdapter(list[Message])
"""A conversation in one call into pydantic: a long thread's state holds thousands."""


def _encode_messages(messages: Iterable[Message]) -> list[dict[str, Any]]:
    messages = list(messages)
    if all(type(message) is Message for message in messages):
        encoded: list[dict[str, Any]] = _MESSAGE_LIST.dump_python(
            messages, mode="json", exclude_defaults=True
        )
        return encoded
    return [message.to_dict() for message in messages]  # a subclass keeps its own fields


def _decode_messages(raw: list[Any]) -> list[Message]:
    try:
        return _MESSAGE_LIST.validate_python(raw)
    except ValueError:  # pydantic's ValidationError: find and name the message at fault
        return [_decode_message(m, f"messages[{i}]") for i, m in enumerate(raw)]


def _decode_message(raw: Any, path: str) -> Message:
    _expect_type(raw, dict, path, "an object")
    try:
        return Message.from_dict(raw)
    except ValueError as exc:  # pydantic's ValidationError
        raise StateDecodeError(path, f"not a message: {exc}") from exc


def encode_history_compact(node: str, result: Any, path: str, encode: _Encode) -> list[Any]:
    """A history entry as checkpoints store it: a NodeResult as one flat list.

    ``[node, step, visit, outcome, output, duration_ms, content, error,
    attempts, usage, agent_result]`` without its trailing defaults, a third
    the size of the ``[node, {...}]`` pair :meth:`GraphState.to_dict` writes
    (a checkpoint is written every step, so this is most of what a long run
    stores). Anything else stays a pair.
    """
    if type(result) is not NodeResult or result.node != node:
        return [node, _encode_history_entry(result, path, encode)]
    output = result.output
    entry = [
        node,
        result.step,
        result.visit,
        result.outcome,
        None if output is None else encode(dict(output), f"{path}.output"),
        round(result.duration_ms, 3),
        encode(result.content, f"{path}.content"),
        result.error,
        result.attempts,
        None if result.usage is None else result.usage.to_dict(),
        encode(result.agent_result, f"{path}.agent_result"),
    ]
    while len(entry) > 6 and entry[-1] == _COMPACT_DEFAULTS[len(entry) - 1]:
        entry.pop()
    return entry


_COMPACT_DEFAULTS: Final = (None, None, None, None, None, None, None, None, 1, None, None)
_COMPACT_FIELDS: Final = (
    "node",
    "step",
    "visit",
    "outcome",
    "output",
    "duration_ms",
    "content",
    "error",
    "attempts",
    "usage",
    "agent_result",
)


def _decode_history_entry(entry: Any, path: str, decode: _Decode) -> tuple[str, Any]:
    if type(entry) is list and len(entry) >= 6 and type(entry[0]) is str:
        fields = dict(zip(_COMPACT_FIELDS, entry, strict=False))
        return entry[0], _decode_result(fields, path, decode)
    if type(entry) is not list or len(entry) != 2 or type(entry[0]) is not str:
        raise StateDecodeError(path, "expected a [node_name, result] pair")
    node, raw = entry
    if _is_result(raw):
        return node, _decode_result(raw, path, decode)
    return node, decode(raw, f"{path}[1]")


def _decode_result(raw: dict[str, Any], path: str, decode: _Decode) -> NodeResult:
    outcome = raw["outcome"]
    if outcome not in _OUTCOMES:
        raise StateDecodeError(
            f"{path}.outcome", f"expected one of {_OUTCOMES}, got {brief(outcome)}"
        )
    output = raw.get("output")
    if output is not None:
        output = _expect_type(decode(output, f"{path}.output"), dict, f"{path}.output", "an object")
    return NodeResult(
        node=_expect_field(raw, "node", path, (str,)),
        step=_expect_field(raw, "step", path, (int,)),
        visit=_expect_field(raw, "visit", path, (int,)),
        outcome=outcome,
        output=output,
        content=decode(raw.get("content"), f"{path}.content"),
        error=_expect_field(raw, "error", path, (str, type(None))),
        attempts=_expect_field({"attempts": 1, **raw}, "attempts", path, (int,)),
        duration_ms=_expect_field({"duration_ms": 0.0, **raw}, "duration_ms", path, (float, int)),
        usage=_decode_usage(raw.get("usage"), f"{path}.usage"),
        agent_result=decode(raw.get("agent_result"), f"{path}.agent_result"),
    )


def _decode_usage(raw: Any, path: str) -> Usage | None:
    if raw is None:
        return None
    _expect_type(raw, dict, path, "an object")
    for key in ("input_tokens", "output_tokens", "calls", "unpriced_calls"):
        if key in raw:
            _expect_field(raw, key, path, (int,))
    if "cost_usd" in raw:
        _expect_field(raw, "cost_usd", path, (float, int))
    return Usage.from_dict(raw)


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


def _first_read(state: GraphState, name: str) -> Any:
    """The container ``name`` of ``state``, made empty if it is still unset.

    Raises:
        AttributeError: ``name`` is not a container ``state`` makes on first read.
    """
    slot = _LAZY_SLOTS.get(name)
    # A subclass's own attribute of that name (StateView's properties) is not a slot.
    if slot is None or getattr(type(state), name) is not slot[0]:
        # Looked up again for its own error: a property that raised AttributeError
        # inside says what it was missing, not that it is missing itself.
        return object.__getattribute__(state, name)
    descriptor, empty = slot
    with _making:  # two threads reading it first share one container
        try:
            return descriptor.__get__(state, GraphState)
        except AttributeError:
            value = empty()
            descriptor.__set__(state, value)
            return value


_making = threading.Lock()


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
        # messages, metadata and errors left out stay unset until first read (see
        # __getattr__): most runs never touch them, and thousands run at once.
        if messages is not None:
            self.messages = messages
        self.data = data if data is not None else {}
        self.current_node = current_node
        self.history = History(history) if history is not None else History()
        if metadata is not None:
            self.metadata = metadata
        if errors is not None:
            self.errors = errors

    if not TYPE_CHECKING:  # to the type checker every field is always there, as it reads

        def __getattr__(self, name: str) -> Any:
            """An unset container (``messages``, ``metadata``, ``errors``): made empty now.

            Called only when normal lookup fails, so reading a set field costs nothing.
            """
            return _first_read(self, name)

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

    def to_dict(self, *, serializer: StateSerializer | None = None) -> dict[str, Any]:
        """A JSON-safe dict; :meth:`from_dict` restores an equal state.

        Args:
            serializer: Writes the values; the library's default when omitted.

        Raises:
            StateSerializationError: a value has no JSON form, nests too deeply or
                contains itself; the error names its path.
        """
        encode = (serializer or default_serializer()).encode
        return {
            "messages": _encode_messages(self.messages),
            "data": {key: encode(value, f"data.{key}") for key, value in self.data.items()},
            "current_node": self.current_node,
            "history": [
                [node, _encode_history_entry(result, f"history[{i}]", encode)]
                for i, (node, result) in enumerate(self.history)
            ],
            "metadata": {
                key: encode(value, f"metadata.{key}") for key, value in self.metadata.items()
            },
            "errors": [encode(error, f"errors[{i}]") for i, error in enumerate(self.errors)],
        }

    @classmethod
    def from_dict(
        cls,
        payload: Mapping[str, Any],
        *,
        serializer: StateSerializer | None = None,
        allowed_types: Iterable[type] = (),
    ) -> GraphState:
        """Rebuild a state written by :meth:`to_dict`.

        Nothing is imported or called but the classes the serializer allows
        (the library's own, ``allowed_types``, and those registered with
        ``serializer``); see ``docs/security.md``.

        Args:
            payload: What :meth:`to_dict` returned (after a JSON round trip, say).
            serializer: Reads the values and holds the allow-list; the library's
                default when omitted.
            allowed_types: Further Enum subclasses, Pydantic models and
                dataclasses that may be restored.

        Raises:
            StateDecodeError: the payload is malformed or, as
                :class:`TypeNotAllowedError`, names a class that is not allowed;
                the error names the path.
        """
        serializer = serializer or default_serializer()
        if allowed_types:
            serializer = serializer.allowing(*allowed_types)
        decode = serializer.decode
        raw = _expect_type(payload, Mapping, "state", "an object")
        data = _expect_type(raw.get("data", {}), dict, "data", "an object")
        metadata = _expect_type(raw.get("metadata", {}), dict, "metadata", "an object")
        current = raw.get("current_node")
        if current is not None and type(current) is not str:
            raise StateDecodeError(
                "current_node", f"expected a string or null, got {brief(current)}"
            )
        return cls(
            messages=_decode_messages(_expect_list(raw, "messages")),
            data={key: decode(value, f"data.{key}") for key, value in data.items()},
            current_node=current,
            history=[
                _decode_history_entry(entry, f"history[{i}]", decode)
                for i, entry in enumerate(_expect_list(raw, "history"))
            ],
            metadata={key: decode(value, f"metadata.{key}") for key, value in metadata.items()},
            errors=[
                _expect_type(decode(error, f"errors[{i}]"), dict, f"errors[{i}]", "an object")
                for i, error in enumerate(_expect_list(raw, "errors"))
            ],
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


_LAZY_SLOTS: Final[dict[str, tuple[Any, Callable[[], Any]]]] = {
    name: (vars(GraphState)[name], empty)
    for name, empty in (("messages", list), ("metadata", dict), ("errors", list))
}
"""The containers a GraphState makes on first read: their slot, and what makes one."""
