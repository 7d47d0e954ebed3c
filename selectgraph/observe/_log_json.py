"""A run's stored event log, written straight from its recorder's raw entries.

The checkpoint writer stores every event a run records (``event_log``). Building
each event object and then reading it back field by field (``log_entry``) cost
more than the step that recorded it; most events carry only names, numbers and
times, so their log entries are written here from the raw tuples the recorder
keeps, as the same dicts ``log_entry`` gives. Events with fields that need
``log_entry``'s rules (a run's result, a model call's request, tool arguments)
still go through it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any, Final

from selectgraph.core._json_object import JSONObject
from selectgraph.observe._codec import (
    CONTENT_ONLY,
    HEAVY_FIELDS,
    PLAIN_TYPES,
    ROUNDED,
    json_value,
    log_entry,
)
from selectgraph.observe._recorder import (
    SPAN,
    RawEvent,
    build_raw,
    event_class,
    own_fields,
    span_parts,
)

__all__ = ["log_entries"]

_BASE: Final = {
    "run_id": "base[0]",
    "graph": "base[1]",
    "namespace": "base[2]",
    "branch": "base[3]",
    "step": "raw[2]",
    "timestamp": "raw[3]",
}
"""Where the fields every event has sit in a raw entry ``(code, base, step, timestamp, ...)``."""
_NEEDS_LOG_ENTRY: Final = (HEAVY_FIELDS - {"state"}) | {"arguments"}
"""Fields whose rules are ``log_entry``'s (``state`` it leaves out, as done here)."""

Converter = Callable[[RawEvent], JSONObject]
_CONVERTERS: dict[tuple[int, int], Converter | None] = {}
"""By (class code, entry length): its converter, or None for ``log_entry``'s way."""


def log_entries(raw: Sequence[Any], *, content: bool = False) -> list[dict[str, Any]]:
    """The log entries (``log_entry``'s dicts) of part of a recorder's raw log, in order.

    ``raw`` holds what the recorder logged: entries, spans of a node's start and
    end, and events built already. What the log leaves out (text chunks without
    ``content``) is skipped.
    """
    entries: list[dict[str, Any]] = []
    for item in raw:
        if type(item) is not tuple:
            entry = log_entry(item, content=content)
        elif item[0] == SPAN:  # a node's start and end (and its edge): none is left out
            entries.extend(_entry(part, content) for part in span_parts(item))
            continue
        else:
            entry = _entry(item, content)
        if entry is not None:
            entries.append(entry)
    return entries


def _entry(raw: RawEvent, content: bool) -> Any:
    key = (raw[0], len(raw))
    try:
        convert = _CONVERTERS[key]
    except KeyError:
        convert = _CONVERTERS[key] = _converter(raw[0], len(raw) - 4)
    if convert is None:
        return log_entry(build_raw(raw), content=content)
    return convert(raw)


def _converter(code: int, given: int) -> Converter | None:
    """The converter of raw entries of class ``code`` with ``given`` own values, or None."""
    cls = event_class(code)
    fields = [f for f in dataclasses.fields(cls) if f.name not in HEAVY_FIELDS]
    names = {f.name for f in dataclasses.fields(cls)}
    if names & _NEEDS_LOG_ENTRY or cls.__name__ in CONTENT_ONLY:
        return None
    own = own_fields(cls)
    env: dict[str, Any] = {
        "JSONObject": JSONObject,
        "plain": PLAIN_TYPES,
        "j": json_value,
        "finite": math.isfinite,
        "floor": math.floor,  # to_unit's arithmetic, inline
    }
    items = [repr("event") + ": " + repr(cls.__name__), repr("type") + ": " + repr(cls.type.value)]
    source_of: dict[str, str] = {}
    for f in fields:
        if f.name in _BASE:
            source = _BASE[f.name]
        elif own.index(f.name) < given:
            source = f"raw[{4 + own.index(f.name)}]"
        elif f.default is not dataclasses.MISSING:
            env[f"d_{f.name}"] = f.default
            source = f"d_{f.name}"
        else:
            return None  # shorter than any entry the recorder writes: log_entry says why
        source_of[f.name] = source
        items.append(f"{f.name!r}: {_value(f.name, source)}")
    node = _node_field(cls)  # node_path: the namespace, then the node (if any)
    if node is _UNKNOWN:
        return None
    node = "None" if node is None else source_of[node]
    items.append(f"'node_path': [*base[2]] if {node} is None else [*base[2], {node}]")
    lines = [
        "def convert(raw):",
        "    base = raw[1]",
        "    return JSONObject({" + ", ".join(items) + "})",
    ]
    # The source is made of our own event classes' field names only, never of data.
    exec("\n".join(lines), env)
    made: Converter = env["convert"]
    return made


def _value(name: str, source: str) -> str:
    """The expression writing a field as ``event_to_json`` does, from where it sits."""
    if name == "namespace":  # a tuple of names, most often empty
        return f"(j({source}) if {source} else [])"
    finite_float = f"(type({source}) is float and finite({source}))"  # times, durations
    if name in ROUNDED:  # as event_to_json keeps them: to the microsecond
        return (
            f"(floor({source} * {ROUNDED[name]!r} + 0.5) / {ROUNDED[name]!r} if {finite_float} "
            f"else {source} if type({source}) in plain else j({source}))"
        )
    return f"({source} if type({source}) in plain or {finite_float} else j({source}))"


_UNKNOWN: Final = "<unknown>"


def _node_field(cls: type[Any]) -> str | None:
    """The field an event's ``node_name`` reads (None: it has none), found by asking it.

    ``node_path`` ends with ``node_name``, which some classes point at another field
    (an edge's ``source``, a run's ``entry``). Anything else it does: ``_UNKNOWN``.
    """
    probe = object.__new__(cls)
    marks = {}
    for f in dataclasses.fields(cls):
        mark = marks[f.name] = object()
        getattr(cls, f.name).__set__(probe, mark)
    try:
        found = probe.node_name
    except Exception:
        return _UNKNOWN
    if found is None:
        return None
    return next((name for name, mark in marks.items() if mark is found), _UNKNOWN)
