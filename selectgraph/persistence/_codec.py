"""Checkpoints as stored bytes: bodies, whole records and pending writes, checked both ways.

Everything in a record is JSON data: states are encoded by
:class:`~selectgraph.core._serialization.StateSerializer` (with its allow-list)
before they reach a store, and nothing here ever unpickles or imports.
"""

from __future__ import annotations

import datetime as dt
import os
import zlib
from collections.abc import Mapping, Sequence
from typing import Any, Final

from selectgraph.core._errors import CheckpointDecodeError
from selectgraph.core._json_object import JSONObject
from selectgraph.core._serialization import brief
from selectgraph.persistence._checkpoint import EPOCH, Checkpoint
from selectgraph.persistence._fields import check_fields
from selectgraph.persistence._json_data import compact, json_bytes, load_json

__all__ = [
    "DEFAULT_INFLATE_LIMIT",
    "INFLATE_LIMIT_VARIABLE",
    "RUN_DICT_BYTES",
    "STATE_DICT_BYTES",
    "body_json",
    "build_checkpoint",
    "checkpoint_from_json",
    "decode_body",
    "decode_record",
    "decode_row",
    "header_of",
    "inflate",
    "decode_writes",
    "encode_body",
    "encode_record",
    "encode_writes",
    "decode_event",
    "encode_events",
    "run_dict_of",
    "seal_body",
    "state_dict_of",
    "uses_state_dict",
    "seal_entry",
    "unseal_entry",
    "writes_json",
    "check_run",
    "inflate_limit",
]

_COMPRESS_OVER: Final = 512
"""Bodies longer than this many bytes are stored zlib-compressed (states repeat a lot)."""
_ZLIB: Final = b"z"
_VALUES: Final = b"v"  # a body that is only the values
_PRESET: Final = b"d"  # raw deflate with _PRESET_DICT: a small per-step body
_RUN: Final = b"r"  # raw deflate with _PRESET_DICT and the run's dictionary (see seal_body)
_STATE: Final = b"s"  # raw deflate with the run's state dictionary (see seal_body)
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


# -- integrity -----------------------------------------------------------------

_CHECKED: Final = b"c"
"""A body behind a CRC-32 (4 bytes, big-endian) of the record's identity and the rest.

No single bit flip turns it into another marker (``z``, ``d``, ``v``, ``{``), so a
flipped marker cannot pass for a record written before checksums."""
_SEAL: Final = b'{"crc":"'
"""How a checksummed JSON record (file and memory stores) starts: ``{"crc":"<8 hex>",...``."""
_SEAL_LENGTH: Final = len(_SEAL) + 10  # the 8 hex digits, the quote, then ',' or '}'
_LEGACY_MARKERS: Final = frozenset(b"zdv{")
_HEX: Final = frozenset(b"0123456789abcdef")


def _identity(
    run_id: Any,
    checkpoint_id: Any,
    parent_id: Any,
    version: Any,
    step: Any,
    kind: Any,
    created: Any,
) -> int:
    """The CRC-32 of what a body is bound to: which run, which checkpoint, after which one.

    A body copied to another row, another run or behind another parent then
    fails its check, as a flipped bit does.
    """
    if isinstance(created, dt.datetime):
        created = (created - EPOCH) // dt.timedelta(microseconds=1)
    text = "\x00".join(
        str(part) for part in (run_id, checkpoint_id, parent_id or "", version, step, kind, created)
    )
    return zlib.crc32(text.encode("utf-8", "surrogatepass"))


def header_of(checkpoint: Checkpoint) -> dict[str, Any]:
    """The header fields a row store keeps next to a checkpoint's body (see :func:`decode_row`)."""
    return {
        "run_id": checkpoint.run_id,
        "checkpoint_id": checkpoint.checkpoint_id,
        "parent_id": checkpoint.parent_id,
        "version": checkpoint.version,
        "step": checkpoint.step,
        "kind": checkpoint.kind,
        "created_at": checkpoint.created_at,
    }


def _header_identity(header: Mapping[str, Any]) -> int:
    return _identity(*(header.get(name) for name in _HEADER))


_HEADER: Final = ("run_id", "checkpoint_id", "parent_id", "version", "step", "kind", "created_at")


def _seal(document: bytes, salt: str) -> bytes:
    """A JSON object with a ``"crc"`` of itself (and ``salt``) as its first key."""
    crc = zlib.crc32(document, zlib.crc32(salt.encode("utf-8", "surrogatepass")))
    rest = document[1:]
    return _SEAL + b"%08x" % crc + (b'",' if rest != b"}" else b'"') + rest


def _unseal(raw: bytes, salt: str, fail: Any) -> tuple[bytes, bool]:
    """(The object :func:`_seal` sealed, True), checked; ``(raw, False)`` for an unsealed one."""
    if not raw.startswith(_SEAL):
        return raw, False
    digits, end = raw[len(_SEAL) : len(_SEAL) + 8], raw[len(_SEAL) + 8 : _SEAL_LENGTH]
    document = (
        b"{" + raw[_SEAL_LENGTH:]
        if end == b'",'
        else b"{}"
        if raw[_SEAL_LENGTH - 2 :] == b'"}'
        else None
    )
    # Only what _seal writes: eight lowercase hex digits ("A" would parse as "a").
    stored = int(digits, 16) if len(digits) == 8 and set(digits) <= _HEX else None
    if stored is None or document is None:
        raise fail("<checksum>", "malformed checksum")
    if zlib.crc32(document, zlib.crc32(salt.encode("utf-8", "surrogatepass"))) != stored:
        raise fail("<checksum>", _MISMATCH)
    return document, True


_MISSING: Final = (
    "the record has no checksum, but the store wrote it with one: it was changed "
    "behind the store's back; restore it from a backup or delete the run"
)
_MISMATCH: Final = (
    "the record does not match its checksum: it was corrupted, or moved from another "
    "run or checkpoint; restore it from a backup or delete the run"
)


# -- bounded reading ---------------------------------------------------------------

DEFAULT_INFLATE_LIMIT: Final = 256 * 1024 * 1024
"""Bytes a stored compressed body may inflate to (256 MiB) unless the setting says otherwise."""
INFLATE_LIMIT_VARIABLE: Final = "SELECTGRAPH_MAX_INFLATE"
"""The environment variable that sets the inflate limit, in bytes."""


def inflate_limit() -> int:
    """The inflate limit in bytes: ``$SELECTGRAPH_MAX_INFLATE``, else :data:`DEFAULT_INFLATE_LIMIT`.

    Raises:
        ValueError: the variable is set to something other than a positive int.
    """
    text = os.environ.get(INFLATE_LIMIT_VARIABLE)
    if text is None:
        return DEFAULT_INFLATE_LIMIT
    try:
        limit = int(text)
    except ValueError:
        limit = 0
    if limit < 1:
        raise ValueError(
            f"{INFLATE_LIMIT_VARIABLE} must be a positive number of bytes, got {text!r}"
        )
    return limit


def inflate(data: bytes, wbits: int, zdict: bytes | None, fail: Any, path: str) -> bytes:
    """``data`` inflated, refusing more than :func:`inflate_limit` bytes or a cut stream.

    Raises:
        CheckpointDecodeError: through ``fail``: not deflated data, cut short, or too big.
    """
    limit = inflate_limit()
    unpacker = zlib.decompressobj(wbits) if zdict is None else zlib.decompressobj(wbits, zdict)
    try:
        out = unpacker.decompress(data, limit + 1)
    except zlib.error as exc:
        raise fail(path, f"not valid compressed data: {exc}") from exc
    if len(out) > limit or unpacker.unconsumed_tail:
        raise fail(
            path,
            f"inflates to more than {limit} bytes (the limit; raise it with "
            f"{INFLATE_LIMIT_VARIABLE}=<bytes> if the record is genuine)",
        )
    if not unpacker.eof or unpacker.unused_data:
        raise fail(path, "compressed data cut short or followed by other bytes")
    return out


def _failer(checkpoint_id: str, location: str, run_id: str = "") -> Any:
    def fail(path: str, reason: str) -> CheckpointDecodeError:
        return CheckpointDecodeError(checkpoint_id, path, reason, location=location, run_id=run_id)

    return fail


# -- bodies (row stores) -----------------------------------------------------------


def encode_body(checkpoint: Checkpoint, run_dict: bytes | None = None) -> bytes:
    """The checkpoint's payload (values, next, writes, interrupts, metadata) as stored bytes.

    Most checkpoints carry only values, stored bare behind a one-byte marker;
    large bodies are zlib-compressed (encoded states repeat keys and tags a lot).
    The result starts with a CRC-32 of the checkpoint's identity (run, id,
    parent, version, step, kind, time) and of the bytes after it, which
    :func:`decode_row` checks. With ``run_dict`` (see :func:`seal_body`) a small
    body is deflated against it too.

    Raises:
        StateSerializationError: a value is not JSON data; names where it sits.
    """
    return seal_body(checkpoint, body_json(checkpoint), run_dict)


def body_json(checkpoint: Checkpoint) -> bytes:
    """The uncompressed bytes :func:`seal_body` stores: the values, or the payload as JSON.

    Raises:
        StateSerializationError: a value is not JSON data; names where it sits.
    """
    where = f"checkpoint {checkpoint.checkpoint_id!r}"
    payload: dict[str, Any] = {"values": checkpoint.values}
    for name in ("next", "pending_writes", "interrupts", "metadata"):
        value = getattr(checkpoint, name)
        if value:
            payload[name] = value
    if len(payload) == 1:
        return _VALUES + json_bytes(checkpoint.values, f"{where} values")
    return json_bytes(payload, where)


RUN_DICT_BYTES: Final = 4096
"""Bytes of a run's dictionary kept (its end): a body or batch is deflated against them."""


def seal_body(
    checkpoint: Checkpoint,
    raw: bytes,
    run_dict: bytes | None = None,
    state_dict: bytes | None = None,
) -> bytes:
    """:func:`body_json`'s bytes compressed and behind their checksum (see :func:`encode_body`).

    ``run_dict``: bytes the store keeps once per run (a body of the run's, see
    :func:`run_dict_of`); a small body deflated against them as well as the
    preset dictionary costs a half of one deflated against the preset alone,
    since a run's steps repeat their node names, metadata and shapes.
    ``state_dict``: the start of the run's first snapshot (:func:`state_dict_of`);
    a large body deflated against it does not store again what the state kept
    since (a document, a system prompt). Reading a body back needs the same bytes.
    """
    if len(raw) > _COMPRESS_OVER and state_dict is not None:
        packer = zlib.compressobj(6, zlib.DEFLATED, -15, 8, zlib.Z_DEFAULT_STRATEGY, state_dict)
        inner = _STATE + packer.compress(raw) + packer.flush()
    elif len(raw) > _COMPRESS_OVER:
        inner = _ZLIB + zlib.compress(raw, 6)
    else:
        marker, zdict = (_PRESET, _PRESET_DICT)
        if run_dict is not None:
            marker, zdict = _RUN, _run_zdict(run_dict)
        packer = zlib.compressobj(6, zlib.DEFLATED, -15, 8, zlib.Z_DEFAULT_STRATEGY, zdict)
        packed = packer.compress(raw) + packer.flush()
        inner = marker + packed if len(packed) + 1 < len(raw) else raw
    crc = zlib.crc32(inner, _identity(*(getattr(checkpoint, n) for n in _HEADER)))
    return _CHECKED + crc.to_bytes(4, "big") + inner


def run_dict_of(raw: bytes) -> bytes:
    """The dictionary a store keeps for a run, made of one of its bodies or event batches."""
    return raw[-RUN_DICT_BYTES:]


STATE_DICT_BYTES: Final = 24 * 1024
"""Bytes of a run's first snapshot kept as its state dictionary (deflate reaches 32 KiB back)."""


def state_dict_of(raw: bytes) -> bytes:
    """A run's state dictionary, made of its first snapshot's :func:`body_json`: its start."""
    return raw[:STATE_DICT_BYTES]


def _run_zdict(run_dict: bytes) -> bytes:
    return _PRESET_DICT + run_dict[-RUN_DICT_BYTES:]


def decode_body(
    raw: bytes,
    header: Mapping[str, Any],
    *,
    location: str = "",
    run_id: str = "",
    sealed: bool = False,
    run_dict: bytes | None = None,
    state_dict: bytes | None = None,
) -> dict[str, Any]:
    """The payload fields :func:`encode_body` wrote, checked against its checksum and ``header``.

    Args:
        raw: The stored bytes.
        header: The row's stored identity fields (see :func:`header_of`); the
            checksum binds the body to them.
        location: Where the bytes came from, named in errors.
        run_id: The run they were read for, named in errors.
        sealed: The store wrote this row with a checksum: refuse one without.
        run_dict: The run's dictionary, for a body deflated against it.
        state_dict: The run's state dictionary, likewise.

    A body written before checksums (no ``c`` marker) is read unchecked, unless ``sealed``.

    Raises:
        CheckpointDecodeError: the bytes are not a well-formed body, or not this row's.
    """
    checkpoint_id = str(header.get("checkpoint_id"))
    fail = _failer(checkpoint_id, location, run_id or str(header.get("run_id") or ""))
    if raw[:1] == _CHECKED:
        inner = raw[5:]
        if len(raw) < 5 or zlib.crc32(inner, _header_identity(header)) != int.from_bytes(
            raw[1:5], "big"
        ):
            raise fail("<checksum>", _MISMATCH)
        raw = inner
    elif sealed:
        raise fail("<checksum>", _MISSING)
    elif raw[:1] and raw[0] not in _LEGACY_MARKERS:
        raise fail("<record>", f"unknown body marker {raw[:1]!r}")
    if raw[:1] == _ZLIB:
        raw = inflate(raw[1:], zlib.MAX_WBITS, None, fail, "<record>")
    elif raw[:1] == _PRESET:
        raw = inflate(raw[1:], -15, _PRESET_DICT, fail, "<record>")
    elif raw[:1] == _RUN:
        if run_dict is None:
            raise fail("<record>", "deflated against its run's dictionary, which is missing")
        raw = inflate(raw[1:], -15, _run_zdict(run_dict), fail, "<record>")
    elif raw[:1] == _STATE:
        if state_dict is None:
            raise fail("<record>", "deflated against its run's state dictionary, which is missing")
        raw = inflate(raw[1:], -15, state_dict, fail, "<record>")
    if raw[:1] == _VALUES:
        payload = {"values": load_json(raw[1:], fail, "<record>")}
    else:
        payload = load_json(raw, fail, "<record>")
    return _checked_body(payload, fail)


def uses_state_dict(raw: Any) -> bool:
    """Whether a stored body was deflated against its run's state dictionary."""
    return isinstance(raw, bytes | bytearray | memoryview) and bytes(raw[5:6]) == _STATE


def decode_row(
    header: Mapping[str, Any],
    raw: Any,
    writes: Mapping[str, list[Any]] | None = None,
    *,
    location: str = "",
    run_id: str = "",
    sealed: bool = False,
    run_dict: bytes | None = None,
    state_dict: bytes | None = None,
) -> Checkpoint:
    """A checkpoint from a row store's header fields and stored body (:func:`decode_body`).

    ``writes`` are its pending writes stored apart (merged over the body's).
    A body stored as text (written behind the store's back) is read as its UTF-8.

    Raises:
        CheckpointDecodeError: the row is malformed, fails its checksum, or is not
            of run ``run_id`` (when given).
    """
    if not isinstance(raw, bytes | bytearray | memoryview):
        raw = str(raw).encode("utf-8", "surrogatepass")
    checkpoint_id = str(header.get("checkpoint_id"))
    fields = decode_body(
        bytes(raw),
        header,
        location=location,
        run_id=run_id,
        sealed=sealed,
        run_dict=run_dict,
        state_dict=state_dict,
    )
    if writes:
        fields["pending_writes"] = {**fields["pending_writes"], **writes}
    checkpoint = build_checkpoint(header, fields, checkpoint_id, location=location)
    check_run(checkpoint, run_id, location)
    return checkpoint


def check_run(checkpoint: Checkpoint, run_id: str, location: str = "") -> None:
    """Refuse a checkpoint read for run ``run_id`` that names another run (``""``: any run).

    Raises:
        CheckpointDecodeError: it belongs to another run.
    """
    if run_id and checkpoint.run_id != run_id:
        raise CheckpointDecodeError(
            checkpoint.checkpoint_id,
            "run_id",
            f"it is a checkpoint of run {checkpoint.run_id!r}, stored as one of run "
            f"{run_id!r} (copied or moved from the other run)",
            location=location,
            run_id=run_id,
        )


def _checked_body(payload: Any, fail: Any) -> dict[str, Any]:
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
    check_fields(body, fail)
    return body


def encode_record(checkpoint: Checkpoint) -> bytes:
    """The whole checkpoint as one plain JSON document (the file store's format).

    Its first key, ``crc``, is a CRC-32 of the rest, which :func:`decode_record` checks.
    """
    header = {
        **header_of(checkpoint),
        "created_at": checkpoint.created_at.isoformat(),
        "values": checkpoint.values,
        "next": checkpoint.next,
        "pending_writes": checkpoint.pending_writes,
        "interrupts": checkpoint.interrupts,
        "metadata": checkpoint.metadata,
    }
    return _seal(json_bytes(header, f"checkpoint {checkpoint.checkpoint_id!r}"), "")


_RECORD_KEYS: Final = frozenset(
    (*_HEADER, "values", "next", "pending_writes", "interrupts", "metadata")
)


def decode_record(
    raw: bytes, checkpoint_id: str, *, location: str = "", run_id: str = ""
) -> Checkpoint:
    """The checkpoint :func:`encode_record` wrote, its checksum and fields checked.

    A record written before checksums (no ``crc`` key) is read unchecked.

    Args:
        raw: The stored bytes.
        checkpoint_id: The id the caller asked for (named in errors).
        location: Where the bytes came from (a file path), named in errors.
        run_id: The run it is read for: a record of another run is refused.

    Raises:
        CheckpointDecodeError: the record is malformed, fails its checksum or is
            another run's; names the field.
    """
    fail = _failer(checkpoint_id, location, run_id)
    document, _ = _unseal(raw, "", fail)
    record = load_json(document, fail, "<record>")
    return checkpoint_from_json(record, checkpoint_id, location=location, run_id=run_id)


def checkpoint_from_json(
    record: Any, checkpoint_id: str, *, location: str = "", run_id: str = ""
) -> Checkpoint:
    """A checkpoint from an already parsed record (:func:`encode_record`'s fields), checked.

    A ``crc`` key is ignored: the bytes it was computed over are gone once parsed.

    Raises:
        CheckpointDecodeError: a field is unknown, missing or malformed.
    """
    fail = _failer(checkpoint_id, location, run_id)
    if type(record) is dict and record.keys() - _RECORD_KEYS - {"crc"}:
        unknown = sorted(record.keys() - _RECORD_KEYS - {"crc"})
        raise fail("<record>", f"unknown fields {unknown}")
    body = _checked_body(record, fail)
    checkpoint = build_checkpoint(record, body, checkpoint_id, location=location)
    check_run(checkpoint, run_id, location)
    return checkpoint


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
    """One task's pending writes as stored bytes: a CRC-32 marker, then a JSON list.

    The checksum binds them to the checkpoint and the task.

    Raises:
        StateSerializationError: a write is not JSON data; names where it sits.
    """
    raw = writes_json(writes, checkpoint_id, task_id)
    crc = zlib.crc32(
        raw, zlib.crc32(f"{checkpoint_id}\x00{task_id}".encode("utf-8", "surrogatepass"))
    )
    return _CHECKED + crc.to_bytes(4, "big") + raw


def writes_json(writes: Sequence[Any], checkpoint_id: str, task_id: str) -> bytes:
    """One task's pending writes as a plain JSON list (inside the file store's sealed entry).

    Raises:
        StateSerializationError: a write is not JSON data; names where it sits.
    """
    return json_bytes(list(writes), f"checkpoint {checkpoint_id!r} pending_writes.{task_id}")


def decode_writes(
    raw: Any,
    checkpoint_id: str,
    task_id: str,
    *,
    location: str = "",
    run_id: str = "",
    sealed: bool = False,
) -> list[Any]:
    """The writes :func:`encode_writes` stored, checked against their checksum.

    Writes stored before checksums (a bare JSON list) are read unchecked, unless
    ``sealed`` (the store wrote them with one).

    Raises:
        CheckpointDecodeError: they are not a stored JSON list, or not this task's.
    """
    path = f"pending_writes.{task_id}"
    fail = _failer(checkpoint_id, location, run_id)
    if not isinstance(raw, bytes | bytearray | memoryview):
        raw = str(raw).encode("utf-8", "surrogatepass")  # a text value written behind our back
    raw = bytes(raw)
    if raw[:1] == _CHECKED:
        salt = zlib.crc32(f"{checkpoint_id}\x00{task_id}".encode("utf-8", "surrogatepass"))
        if len(raw) < 5 or zlib.crc32(raw[5:], salt) != int.from_bytes(raw[1:5], "big"):
            raise fail(path, _MISMATCH)
        raw = raw[5:]
    elif sealed:
        raise fail(path, _MISSING)
    writes = load_json(raw, fail, path)
    if type(writes) is not list:
        raise fail(path, f"expected a list, got {brief(writes)}")
    return writes


def seal_entry(entry: bytes, checkpoint_id: str) -> bytes:
    """A JSON object (a file store's writes entry) with a checksum binding it to the checkpoint."""
    return _seal(entry, checkpoint_id)


def unseal_entry(raw: bytes, checkpoint_id: str, *, location: str = "", run_id: str = "") -> Any:
    """The object :func:`seal_entry` sealed, parsed; an unsealed (older) one is read unchecked.

    Raises:
        CheckpointDecodeError: it is not JSON, or fails its checksum.
    """
    fail = _failer(checkpoint_id, location, run_id)
    document, _ = _unseal(raw, checkpoint_id, fail)
    return load_json(document, lambda _p, reason: fail("pending_writes", reason), "pending_writes")


def encode_events(events: Sequence[Mapping[str, Any]], run_id: str) -> list[bytes]:
    """A run's events as stored bytes, one JSON object each.

    Raises:
        StateSerializationError: an event is not JSON data; names which one.
    """
    encoded: list[bytes] = []
    for index, event in enumerate(events):
        if type(event) is JSONObject:
            try:  # built of JSON data only: no need to walk it first
                encoded.append(compact(event))
                continue
            except (TypeError, ValueError):
                pass  # a bug in its maker: the check below says where
        where = f"run {run_id!r} event {index}"
        encoded.append(json_bytes(event if type(event) is dict else dict(event), where))
    return encoded


def decode_event(raw: bytes, run_id: str, seq: int, *, location: str = "") -> dict[str, Any]:
    """An event :func:`encode_events` stored.

    Raises:
        CheckpointDecodeError: it is not a stored JSON object.
    """
    event = load_json(raw, _failer(f"{run_id}#{seq}", location, run_id), "event")
    if type(event) is not dict:
        raise CheckpointDecodeError(
            f"{run_id}#{seq}", "event", f"expected an object, got {brief(event)}", location=location
        )
    return event
