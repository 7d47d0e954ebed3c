"""Stored JSON: values checked to be plain JSON data, written compact; stored bytes read back.

Checked first, since an encoder silently turns a tuple into a list and an int key
into a string, and the value would load back different. orjson writes what passed
(about ten times faster than the standard library's C encoder); the standard
library's encoder takes over where orjson gives up. Reading stays with
``json.loads``: orjson reads an int past 64 bits as a float.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any, Final

import orjson

from selectgraph.core._errors import StateSerializationError
from selectgraph.core._serialization import brief

__all__ = ["compact", "json_bytes", "json_size", "load_json"]


def _not_json(value: Any) -> Any:
    raise TypeError(f"a {type(value).__qualname__} is not JSON data")


def _compact_json(default: Callable[[Any], Any], exact: bool) -> Callable[[Any], str]:
    """What writes a value as compact JSON text: made once, not per value.

    ``json.dumps`` with options builds an encoder, and its C part, on every call.
    ``exact``: NaN and infinities are refused, not written as JSON cannot read
    them. Nothing checks for cycles: a cyclic value raises RecursionError (none
    passes the check in :func:`json_bytes`, and makers of :class:`JSONObject`
    build none).
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # no C accelerator (not CPython)
        encoder = json.JSONEncoder(
            separators=(",", ":"), ensure_ascii=False, allow_nan=not exact, default=default
        )
        return encoder.encode
    text = json.encoder.encode_basestring
    chunks = make(None, default, text, None, ":", ",", False, False, not exact)
    return lambda value: "".join(chunks(value, 0))


_compact_text: Final = _compact_json(_not_json, exact=True)
_estimate_text: Final = _compact_json(repr, exact=False)


_ORJSON_STRICT: Final = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
"""orjson options under which it writes only what ``_compact_text`` writes (or raises)."""


def compact(value: Any) -> bytes:
    """JSON data (checked, or a :class:`JSONObject`) as compact JSON bytes.

    orjson writes the same bytes as ``_compact_text`` for such data (floats aside,
    which it may spell differently and which load back equal), about ten times
    faster. It writes NaN as null, so the data must be checked or made finite
    first; an int past 64 bits, nesting past its limit or a lone surrogate make
    it give up, and the standard encoder takes over (and says what is wrong).
    """
    try:
        return orjson.dumps(value, option=_ORJSON_STRICT)
    except orjson.JSONEncodeError:
        return _compact_text(value).encode()


def json_size(value: Any) -> int:
    """About how many bytes ``value`` takes as compact JSON, values JSON lacks by their repr."""
    try:
        return len(orjson.dumps(value, default=repr))
    except orjson.JSONEncodeError:  # past 64 bits, too deep, a surrogate: the slow way
        pass
    try:
        return len(_estimate_text(value))
    except RecursionError:  # a cycle: json.dumps says so
        return len(json.dumps(value, separators=(",", ":"), default=repr))


def json_bytes(value: Any, where: str) -> bytes:
    """``value`` as compact JSON bytes, once it is checked to be plain JSON data.

    Raises:
        StateSerializationError: it is not; names where the first fault sits.
    """
    # Checked first: json.dumps would silently turn a tuple into a list and an int
    # key into a string, and the value would load back different. The check builds
    # no paths (most values pass); the path is looked for only when it fails.
    try:
        if not _is_json(value):
            fault = _unjsonable(value, where)
            if fault is not None:
                raise StateSerializationError(*fault)
        return compact(value)
    except RecursionError:  # thread metadata, say, nested a thousand levels deep
        raise StateSerializationError(
            where, "it nests too deeply to store (containers within containers)"
        ) from None


_JSON_LEAVES: Final = frozenset({str, int, bool, type(None)})


def _is_json(value: Any) -> bool:
    """Whether ``value`` is plain JSON data (the fast walk of :func:`_unjsonable`)."""
    kind = type(value)
    if kind in _JSON_LEAVES:
        return True
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or (type(item) not in _JSON_LEAVES and not _is_json(item)):
                return False
        return True
    if kind is list:
        return all(type(item) in _JSON_LEAVES or _is_json(item) for item in value)
    return kind is float and math.isfinite(value)


def _unjsonable(value: Any, path: str) -> tuple[str, str] | None:
    """Where the first value that is not plain JSON data sits, and why; None if all is."""
    kind = type(value)
    if kind in _JSON_LEAVES:
        return None
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                return f"{path}[{brief(key)}]", "a key must be a string (store encoded data)"
            if type(item) not in _JSON_LEAVES:
                fault = _unjsonable(item, f"{path}.{key}")
                if fault is not None:
                    return fault
        return None
    if kind is list:
        for i, item in enumerate(value):
            if type(item) not in _JSON_LEAVES:
                fault = _unjsonable(item, f"{path}[{i}]")
                if fault is not None:
                    return fault
        return None
    if kind is float:
        return None if math.isfinite(value) else (path, f"{value} has no JSON form")
    return path, (
        f"a {kind.__qualname__} is not JSON data; encode the state with a StateSerializer first"
    )


def load_json(raw: bytes | str, fail: Any, path: str) -> Any:
    """``json.loads(raw)``, any failure (bad UTF-8, bad JSON, nesting too deep) through ``fail``."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError too
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise fail(path, f"not valid stored JSON: {reason}") from None
