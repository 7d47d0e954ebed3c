"""Events as JSON: for a web page (the studio's event stream) and for another process (executors).

``event_to_json`` turns a GraphEvent into a JSON-safe dict: its fields, with values
that are not JSON (models, enums, sets, sentinels...) written as their JSON form for
display, and the heavy in-process fields (``state``, ``result``, ``exception``,
``request``, ``completion``) left out or summarized. ``event_from_json`` builds the
event back, choosing the class only from the event classes defined here: a stored or
received event never names code to load. Values come back as JSON (a model written
in an update is a dict), which is what a reader in another process can have.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import math
from collections.abc import Mapping
from typing import Any, Final

from pydantic import BaseModel

from selectgraph.core._branch import BranchRef, branch_from_json, branch_to_json
from selectgraph.core._sentinels import END, EndType
from selectgraph.observe import _events

__all__ = [
    "CONTENT_ONLY",
    "EVENT_CLASSES",
    "HEAVY_FIELDS",
    "PLAIN_TYPES",
    "event_from_json",
    "event_to_json",
    "json_value",
    "log_entry",
]

EVENT_CLASSES: Final[dict[str, type[_events.GraphEvent]]] = {
    cls.__name__: cls
    for cls in vars(_events).values()
    if isinstance(cls, type)
    and issubclass(cls, _events.GraphEvent)
    and cls is not _events.GraphEvent
    and dataclasses.is_dataclass(cls)
}
"""Every event class, by name: the only classes ``event_from_json`` builds."""

HEAVY_FIELDS: Final = frozenset({"state", "result", "exception", "request", "completion"})
_MAX_DEPTH: Final = 24
PLAIN_TYPES: Final = frozenset({str, int, bool, type(None)})
_END: Final = {"$end": True}


def json_value(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON data, for display: exact where JSON can say it, a repr otherwise."""
    if type(value) in PLAIN_TYPES or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if depth > _MAX_DEPTH:
        return "…"
    if isinstance(value, EndType):
        return dict(_END)
    if isinstance(value, enum.Enum):
        return json_value(value.value, depth + 1)
    if isinstance(value, BranchRef):
        return _branch(value)
    if isinstance(value, BaseModel):
        try:
            return value.model_dump(mode="json")
        except Exception:  # a model holding something pydantic cannot dump
            return repr(value)
    if isinstance(value, Mapping):
        return {str(k): json_value(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_value(v, depth + 1) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((json_value(v, depth + 1) for v in value), key=repr)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: json_value(getattr(value, f.name), depth + 1) for f in dataclasses.fields(value)
        }
    return repr(value)


def _branch(ref: BranchRef) -> dict[str, Any]:
    return branch_to_json(ref)


def _branch_from(raw: Any) -> BranchRef | None:
    try:
        return branch_from_json(raw)
    except ValueError as exc:
        raise ValueError(f"an event's {exc}") from None


ROUNDED: Final = {"timestamp": 1e6, "duration_ms": 1e3}
"""Fields JSON keeps to the microsecond (units per second, per millisecond): the rest is
clock noise. See :func:`to_unit`."""


def to_unit(value: float, units: float) -> float:
    """``value`` to the nearest ``1 / units`` (ties up): a third of what ``round()`` costs.

    The stored event log rounds every timestamp with it; ``round(x, 6)`` took half a
    microsecond, more than writing the event.
    """
    return math.floor(value * units + 0.5) / units


_FIELD_NAMES: dict[type[Any], tuple[str, ...]] = {}
_ROUNDED_FIELDS: dict[type[Any], tuple[tuple[str, float], ...]] = {}


def _field_names(kind: type[Any]) -> tuple[str, ...]:
    """An event class's fields that its JSON carries (found once per class)."""
    names = _FIELD_NAMES.get(kind)
    if names is None:
        names = tuple(f.name for f in dataclasses.fields(kind) if f.name not in HEAVY_FIELDS)
        # First: a thread that finds the names finds these too.
        _ROUNDED_FIELDS[kind] = tuple((n, ROUNDED[n]) for n in names if n in ROUNDED)
        _FIELD_NAMES[kind] = names
    return names


def _round_times(kind: type[Any], out: dict[str, Any]) -> None:
    """Keep ``out``'s times to the microsecond (see :data:`ROUNDED`)."""
    for name, units in _ROUNDED_FIELDS[kind]:
        value = out[name]
        if type(value) is float and math.isfinite(value):
            out[name] = to_unit(value, units)


def event_to_json(event: _events.GraphEvent, *, state: bool = False) -> dict[str, Any]:
    """A JSON-safe dict of ``event``.

    Args:
        event: The event.
        state: Also write the run's ``data`` as it stood after the event (NodeFinished,
            ParallelFinished, RunStarted), for a viewer that shows the state per step.
    """
    out: dict[str, Any] = {"event": type(event).__name__, "type": event.type.value}
    for name in _field_names(type(event)):
        value = getattr(event, name)
        out[name] = value if type(value) in PLAIN_TYPES else json_value(value)
    _round_times(type(event), out)
    out["node_path"] = list(event.node_path)
    if state:
        live = getattr(event, "state", None)
        if live is not None:
            out["state"] = json_value(dict(live.data))
    result = getattr(event, "result", None)
    if result is not None and not isinstance(result, str):
        # A run's result (RunFinished, RunPaused); a tool call's ``result`` is its text,
        # a heavy field left out like the others.
        out["summary"] = _summary(result)
    error = getattr(event, "exception", None)
    if error is not None:
        out["exception_type"] = type(error).__name__
    return out


def _summary(result: Any) -> dict[str, Any]:
    """What a viewer needs of a GraphResult: how it ended, its answer, usage, interrupts."""
    usage = result.total_usage
    return {
        "stop_reason": result.stop_reason,
        "quality": result.quality,
        "steps": result.steps,
        "content": json_value(result.content),
        "checkpoint_id": result.checkpoint_id,
        "usage": {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "calls": usage.calls,
            "cost_usd": usage.cost_usd,
        },
        "interrupts": [
            {
                "id": i.id,
                "node": i.node,
                "prompt": i.prompt,
                "payload": json_value(i.payload),
                "index": i.index,
                "response_schema": i.response_schema,
            }
            for i in result.interrupts
        ],
    }


def event_from_json(raw: Mapping[str, Any]) -> _events.GraphEvent:
    """The event ``event_to_json`` wrote (values as JSON; heavy fields absent).

    Raises:
        ValueError: ``raw`` does not name an event class, or lacks a field the class needs.
    """
    name = raw.get("event")
    cls = EVENT_CLASSES.get(name) if isinstance(name, str) else None
    if cls is None:
        raise ValueError(f"{name!r} is not a selectgraph event (known: {', '.join(EVENT_CLASSES)})")
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name in HEAVY_FIELDS or f.name not in raw:
            continue
        value = raw[f.name]
        if f.name == "branch":
            value = _branch_from(value)
        elif f.name == "namespace" or (isinstance(value, list) and "tuple" in str(f.type)):
            value = tuple(value)
        elif value == _END:
            value = END
        values[f.name] = value
    try:
        return cls(**values)
    except TypeError as error:
        raise ValueError(f"cannot rebuild {name}: {error}") from None


CONTENT_ONLY: Final = frozenset({"NodeChunk"})
"""Events that are nothing but message content: logged only when content is captured."""


def log_entry(event: _events.GraphEvent, *, content: bool = False) -> dict[str, Any] | None:
    """``event`` as a run's stored event log keeps it, or None when it is not kept.

    Without ``content`` no message text is kept: text chunks are left out, and so
    are tool arguments and results, prompts and replies (as OpenTelemetry spans
    leave them out unless content capture is on). Model, usage, cost and timings
    are always kept.
    """
    if not content and type(event).__name__ in CONTENT_ONLY:
        return None
    entry = event_to_json(event)
    if not content:
        entry.pop("arguments", None)
        return entry
    request = getattr(event, "request", None)
    if request is not None:
        entry["messages"] = [
            {"role": str(message.role), "text": message.text} for message in request.messages
        ]
    completion = getattr(event, "completion", None)
    if completion is not None:
        message = getattr(completion, "message", None)
        entry["text"] = json_value(getattr(message, "text", None))
    result = getattr(event, "result", None)
    if isinstance(result, str):
        entry["tool_result"] = result
    return entry
