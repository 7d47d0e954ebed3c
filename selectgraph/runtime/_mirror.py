"""The encoded mirror of a run's state, kept up to date one step's writes at a time.

Encoding the whole state at every checkpoint would make a step's cost grow
with the state and, because ``history`` grows every step, make a long run
quadratic. The mirror instead re-encodes only the ``data`` keys a step wrote
and the log entries it appended, and returns that as the checkpoint's delta.

What it cannot see: a value changed in place without being written back
(``state.data["items"].append(x)`` with nothing returned). Write the value
back, or return it, and it is saved; the same rule as for parallel branches.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from selectgraph.core._serialization import StateSerializer
from selectgraph.core._state import GraphState, encode_history_compact

__all__ = ["StateMirror"]

_MISSING: Final[Any] = object()


def _pointer(*keys: str) -> str:
    return "".join("/" + key.replace("~", "~0").replace("/", "~1") for key in keys)


def _same(a: Any, b: Any) -> bool:
    """Equal encoded values of the same JSON types (so 1, 1.0 and True stay apart)."""
    if type(a) is not type(b):
        return False
    if a is b:
        return True
    try:
        if a != b:
            return False
    except Exception:
        return False
    kind = type(a)
    if kind is dict:
        return all(_same(a[k], b[k]) for k in a)
    if kind is list:
        return all(_same(x, y) for x, y in zip(a, b, strict=True))
    return True


class StateMirror:
    """The run's state as the encoded dict a checkpoint stores, updated incrementally."""

    __slots__ = ("_encode", "_last_message", "_lengths", "encoded")

    def __init__(self, serializer: StateSerializer, state: GraphState, encoded: dict[str, Any]):
        self._encode = serializer.encode
        self.encoded = encoded
        """The whole encoded state (``GraphState.to_dict`` form), kept current."""
        self._lengths = (len(state.messages), len(state.history), len(state.errors))
        self._last_message = state.messages[-1] if state.messages else None

    @classmethod
    def of(cls, serializer: StateSerializer, state: GraphState) -> StateMirror:
        """A mirror of ``state``, encoding it whole once."""
        return cls(serializer, state, state.to_dict(serializer=serializer))

    def update(self, state: GraphState, written: Iterable[str]) -> dict[str, Any]:
        """Bring the mirror up to ``state`` after a step that wrote ``written``; returns the delta.

        Raises:
            StateSerializationError: a written value has no JSON form (names its path).
        """
        encode = self._encode
        enc = self.encoded
        sets: list[Any] = []
        unsets: list[Any] = []
        appends: list[Any] = []
        data = state.data
        edata = enc["data"]
        for key in written:
            if key in data:
                value = encode(data[key], f"data.{key}")
                old = edata.get(key, _MISSING)
                if old is _MISSING or not _same(old, value):
                    if (
                        type(old) is list
                        and type(value) is list
                        and len(old) < len(value)
                        and _same(value[: len(old)], old)
                    ):
                        appends.append([_pointer("data", key), value[len(old) :]])
                    else:
                        sets.append([_pointer("data", key), value])
                    edata[key] = value
            elif key in edata:
                del edata[key]
                unsets.append(_pointer("data", key))
        messages, history, errors = state.messages, state.history, state.errors
        n_messages, n_history, n_errors = self._lengths
        if len(messages) != n_messages or (
            n_messages and messages[n_messages - 1] is not self._last_message
        ):
            if len(messages) > n_messages and (
                n_messages == 0 or messages[n_messages - 1] is self._last_message
            ):
                added = [m.to_dict() for m in messages[n_messages:]]
                enc["messages"].extend(added)
                appends.append(["/messages", added])
            else:  # replaced (compaction): store the conversation whole
                enc["messages"] = [m.to_dict() for m in messages]
                sets.append(["/messages", list(enc["messages"])])
            self._last_message = messages[-1] if messages else None
        if len(history) > n_history:
            entries = [
                encode_history_compact(node, result, f"history[{n_history + i}]", encode)
                for i, (node, result) in enumerate(history[n_history:])
            ]
            enc["history"].extend(entries)
            appends.append(["/history", entries])
        elif len(history) < n_history:
            enc["history"] = [
                encode_history_compact(node, result, f"history[{i}]", encode)
                for i, (node, result) in enumerate(history)
            ]
            sets.append(["/history", list(enc["history"])])
        if len(errors) > n_errors:
            failures = [
                encode(e, f"errors[{n_errors + i}]") for i, e in enumerate(errors[n_errors:])
            ]
            enc["errors"].extend(failures)
            appends.append(["/errors", failures])
        self._lengths = (len(messages), len(history), len(errors))
        metadata = state.metadata
        emeta = enc["metadata"]
        if metadata or emeta:
            for key, item in metadata.items():
                value = encode(item, f"metadata.{key}")
                if not _same(emeta.get(key, _MISSING), value):
                    emeta[key] = value
                    sets.append([_pointer("metadata", key), value])
            for key in [k for k in emeta if k not in metadata]:
                del emeta[key]
                unsets.append(_pointer("metadata", key))
        if enc["current_node"] != state.current_node:
            enc["current_node"] = state.current_node
            sets.append(["/current_node", state.current_node])
        delta: dict[str, Any] = {}
        if sets:
            delta["set"] = sets
        if unsets:
            delta["unset"] = unsets
        if appends:
            delta["append"] = appends
        return delta
