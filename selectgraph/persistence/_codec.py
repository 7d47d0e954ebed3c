"""Checkpoints as stored bytes: bodies, whole records and pending writes, checked both ways.

Everything in a record is JSON data: states are encoded by
:class:`~selectgraph.core._serialization.StateSerializer` (with its allow-list)
before they reach a store, and nothing here ever unpickles or imports.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import zlib
from collections.abc import Mapping, Sequence
from typing import Any, Final

from selectgraph.core._errors import CheckpointDecodeError, StateSerializationError
from selectgraph.core._serialization import brief
from selectgraph.persistence._checkpoint import EPOCH, Checkpoint

__all__ = [
    "build_checkpoint",
    "decode_body",
    "decode_record",
    "decode_writes",
    "encode_body",
    "encode_record",
    "encode_writes",
    "decode_event",
    "encode_events",
    "json_bytes",
]

_COMPRESS_OVER: Final = 512
"""Bodies longer than this many bytes are stored zlib-compressed (states repeat a lot)."""
_ZLIB: Final = b"z"
_VALUES: Final = b"v"  # a body that is only the values
_PRESET: Final = b"d"  # raw deflate with _PRESET_DICT: a small per-step body
_PRESET_DICT: Final = (
    # What a step's checkpoint body is mostly made of, so that deflate can refer
    # back to it (a 170-byte body becomes about 50). Records written with it
    # need it to load: never change it; add a new marker for a new dictionary.
    b'"error":null,"usage":null,"agent_result":null,"content":null,"attempts":1,'
    b'"interrupts":{"answered":true,"answer":"pending_writes":{"trigger":"answer"}'
    b'"trigger":"interrupt"}"trigger":"end"}"failure","skipped","step":"visit":'
    b'"metadata":{"trigger":"node_complete"}}{"after":"]],"next":[{"after":'
    b'"success",{"]]]]},"unset":["/data/"append":[["/messages",[{"role":"assistant",'
    b'"content":"]],"append":[["/history",[["{"values":{"set":[["/data/'
)


def json_bytes(value: Any, where: str) -> bytes:
    """``value`` as compact JSON bytes, once it is checked to be plain JSON data.

    Raises:
        StateSerializationError: it is not; names where the first fault sits.
    """
    # Checked first: json.dumps would silently turn a tuple into a list and an int
    # key into a string, and the value would load back different. The check builds
    # no paths (most values pass); the path is looked for only when it fails.
    if not _is_json(value):
        fault = _unjsonable(value, where)
        if fault is not None:
            raise StateSerializationError(*fault)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


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


def encode_body(checkpoint: Checkpoint) -> bytes:
    """The checkpoint's payload (values, next, writes, interrupts, metadata) as stored bytes.

    Most checkpoints carry only values, stored bare behind a one-byte marker;
    large bodies are zlib-compressed (encoded states repeat keys and tags a lot).

    Raises:
        StateSerializationError: a value is not JSON data; names where it sits.
    """
    where = f"checkpoint {checkpoint.checkpoint_id!r}"
    payload: dict[str, Any] = {"values": checkpoint.values}
    for name in ("next", "pending_writes", "interrupts", "metadata"):
        value = getattr(checkpoint, name)
        if value:
            payload[name] = value
    raw = (
        _VALUES + json_bytes(checkpoint.values, f"{where} values")
        if len(payload) == 1
        else (json_bytes(payload, where))
    )
    if len(raw) > _COMPRESS_OVER:
        return _ZLIB + zlib.compress(raw, 6)
    packer = zlib.compressobj(6, zlib.DEFLATED, -15, 8, zlib.Z_DEFAULT_STRATEGY, _PRESET_DICT)
    packed = packer.compress(raw) + packer.flush()
    return _PRESET + packed if len(packed) + 1 < len(raw) else raw


def decode_body(raw: bytes, checkpoint_id: str, *, location: str = "") -> dict[str, Any]:
    """The payload fields :func:`encode_body` wrote, checked.

    Raises:
        CheckpointDecodeError: the bytes are not a well-formed body.
    """

    def fail(path: str, reason: str) -> CheckpointDecodeError:
        return CheckpointDecodeError(checkpoint_id, path, reason, location=location)

    try:
        if raw[:1] == _ZLIB:
            raw = zlib.decompress(raw[1:])
        elif raw[:1] == _PRESET:
            unpacker = zlib.decompressobj(-15, _PRESET_DICT)
            raw = unpacker.decompress(raw[1:]) + unpacker.flush()
        payload = {"values": json.loads(raw[1:])} if raw[:1] == _VALUES else json.loads(raw)
    except (zlib.error, ValueError) as exc:  # JSONDecodeError and UnicodeDecodeError included
        raise fail("<record>", f"not valid stored JSON: {exc}") from exc
    return _checked_body(payload, checkpoint_id, location)


def _checked_body(payload: Any, checkpoint_id: str, location: str) -> dict[str, Any]:
    def fail(path: str, reason: str) -> CheckpointDecodeError:
        return CheckpointDecodeError(checkpoint_id, path, reason, location=location)

    if type(payload) is not dict:
        raise fail("<record>", f"expected an object, got {brief(payload)}")
    body = {
        "values": payload.get("values"),
        "next": payload.get("next", []),
        "pending_writes": payload.get("pending_writes", {}),
        "interrupts": payload.get("interrupts", {}),
        "metadata": payload.get("metadata", {}),
    }
    for name, kind in (
        ("values", dict),
        ("next", list),
        ("pending_writes", dict),
        ("interrupts", dict),
        ("metadata", dict),
    ):
        if type(body[name]) is not kind:
            raise fail(
                name,
                f"expected {'a list' if kind is list else 'an object'}, got {brief(body[name])}",
            )
    for task, writes in body["pending_writes"].items():
        if type(writes) is not list:
            raise fail(f"pending_writes.{task}", f"expected a list, got {brief(writes)}")
    for key, record in body["interrupts"].items():
        if type(record) is not dict:
            raise fail(f"interrupts.{key}", f"expected an object, got {brief(record)}")
    return body


def encode_record(checkpoint: Checkpoint) -> bytes:
    """The whole checkpoint as one plain JSON document (the file store's format)."""
    header = {
        "run_id": checkpoint.run_id,
        "checkpoint_id": checkpoint.checkpoint_id,
        "parent_id": checkpoint.parent_id,
        "version": checkpoint.version,
        "step": checkpoint.step,
        "kind": checkpoint.kind,
        "created_at": checkpoint.created_at.isoformat(),
        "values": checkpoint.values,
        "next": checkpoint.next,
        "pending_writes": checkpoint.pending_writes,
        "interrupts": checkpoint.interrupts,
        "metadata": checkpoint.metadata,
    }
    return json_bytes(header, f"checkpoint {checkpoint.checkpoint_id!r}")


def decode_record(raw: bytes, checkpoint_id: str, *, location: str = "") -> Checkpoint:
    """The checkpoint :func:`encode_record` wrote, checked field by field.

    Args:
        raw: The stored bytes.
        checkpoint_id: The id the caller asked for (named in errors).
        location: Where the bytes came from (a file path), named in errors.

    Raises:
        CheckpointDecodeError: the record is malformed; names the field.
    """
    try:
        record = json.loads(raw)
    except ValueError as exc:
        raise CheckpointDecodeError(
            checkpoint_id, "<record>", f"not valid stored JSON: {exc}", location=location
        ) from exc
    body = _checked_body(record, checkpoint_id, location)
    return build_checkpoint(record, body, checkpoint_id, location=location)


def build_checkpoint(
    header: Mapping[str, Any], body: Mapping[str, Any], checkpoint_id: str, *, location: str = ""
) -> Checkpoint:
    """A :class:`Checkpoint` from stored header fields and a decoded body; checks the header.

    ``created_at`` may be an ISO string or microseconds since the epoch.

    Raises:
        CheckpointDecodeError: a header field is missing or has the wrong type.
    """
    created = header.get("created_at")
    try:
        if isinstance(created, dt.datetime) and created.tzinfo is not None:
            created_at = created
        elif type(created) is int:
            created_at = EPOCH + dt.timedelta(microseconds=created)
        elif type(created) is str:
            created_at = dt.datetime.fromisoformat(created)
        else:
            raise TypeError(f"expected an ISO time, got {brief(created)}")
    except (TypeError, ValueError, OverflowError) as exc:
        raise CheckpointDecodeError(
            checkpoint_id, "created_at", str(exc), location=location
        ) from exc
    try:
        return Checkpoint(
            run_id=header.get("run_id"),  # type: ignore[arg-type]  # checked by Checkpoint
            checkpoint_id=header.get("checkpoint_id"),  # type: ignore[arg-type]
            parent_id=header.get("parent_id"),
            version=header.get("version"),  # type: ignore[arg-type]
            step=header.get("step"),  # type: ignore[arg-type]
            kind=header.get("kind"),  # type: ignore[arg-type]
            created_at=created_at,
            **body,
        )
    except (TypeError, ValueError) as exc:
        raise CheckpointDecodeError(checkpoint_id, "<header>", str(exc), location=location) from exc


def encode_writes(writes: Sequence[Any], checkpoint_id: str, task_id: str) -> bytes:
    """One task's pending writes as stored bytes (a JSON list).

    Raises:
        StateSerializationError: a write is not JSON data; names where it sits.
    """
    return json_bytes(list(writes), f"checkpoint {checkpoint_id!r} pending_writes.{task_id}")


def decode_writes(raw: bytes, checkpoint_id: str, task_id: str, *, location: str = "") -> list[Any]:
    """The writes :func:`encode_writes` stored.

    Raises:
        CheckpointDecodeError: they are not a stored JSON list.
    """
    path = f"pending_writes.{task_id}"
    try:
        writes = json.loads(raw)
    except ValueError as exc:
        raise CheckpointDecodeError(
            checkpoint_id, path, f"not valid stored JSON: {exc}", location=location
        ) from exc
    if type(writes) is not list:
        raise CheckpointDecodeError(
            checkpoint_id, path, f"expected a list, got {brief(writes)}", location=location
        )
    return writes


def encode_events(events: Sequence[Mapping[str, Any]], run_id: str) -> list[bytes]:
    """A run's events as stored bytes, one JSON object each.

    Raises:
        StateSerializationError: an event is not JSON data; names which one.
    """
    return [
        json_bytes(event if type(event) is dict else dict(event), f"run {run_id!r} event {index}")
        for index, event in enumerate(events)
    ]


def decode_event(raw: bytes, run_id: str, seq: int, *, location: str = "") -> dict[str, Any]:
    """An event :func:`encode_events` stored.

    Raises:
        CheckpointDecodeError: it is not a stored JSON object.
    """
    try:
        event = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise CheckpointDecodeError(
            f"{run_id}#{seq}", "event", f"not valid stored JSON: {exc}", location=location
        ) from exc
    if type(event) is not dict:
        raise CheckpointDecodeError(
            f"{run_id}#{seq}", "event", f"expected an object, got {brief(event)}", location=location
        )
    return event
