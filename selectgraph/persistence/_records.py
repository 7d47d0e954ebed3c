"""Checkpoint records: what a store keeps per step, and how deltas become a full state again.

A run's checkpoints form a chain: each names its parent, and each is either a
*snapshot* (``values`` holds the whole encoded state) or a *delta* (``values``
holds only what changed against the parent). Deltas keep storage linear in
the number of steps instead of quadratic; snapshots now and then keep a load
bounded: :class:`CheckpointChain` takes one once the deltas since the last one
have cost as much, :func:`make_checkpoint` every :data:`SNAPSHOT_EVERY` versions.

Everything in a record is JSON data: states are encoded by
:class:`~selectgraph.core._serialization.StateSerializer` (with its allow-list)
before they reach a store, and nothing here ever unpickles or imports.

A delta is ``{"set": [[path, value], ...], "unset": [path, ...], "append":
[[path, items], ...]}`` (empty parts left out), where a path is a JSON Pointer
(RFC 6901, e.g. ``"/data/notes"``) into the encoded state. Sets are applied
first, then unsets, then appends.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import itertools
import json
import math
import os
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Final, Literal

from selectgraph.core._errors import CheckpointDecodeError, StateSerializationError
from selectgraph.core._serialization import TAG, brief

__all__ = [
    "SNAPSHOT_EVERY",
    "Checkpoint",
    "CheckpointChain",
    "CheckpointKind",
    "apply_delta",
    "apply_delta_in_place",
    "build_checkpoint",
    "copy_encoded",
    "decode_body",
    "decode_record",
    "decode_writes",
    "diff_state",
    "encode_body",
    "encode_record",
    "encode_writes",
    "id_time",
    "make_checkpoint",
    "materialize",
    "new_checkpoint_id",
]

SNAPSHOT_EVERY: Final = 50
""":func:`make_checkpoint` snapshots at versions 1, 51, 101...: a load reads at most 50 records."""

CheckpointKind = Literal["snapshot", "delta"]
"""``"snapshot"``: ``values`` is the whole encoded state; ``"delta"``: only the changes."""

_KINDS: Final = ("snapshot", "delta")
_DIFF_DEPTH: Final = 2
"""How deep :func:`diff_state` looks into dicts (the state, then ``data``/``metadata``);
below that a changed value is stored whole, which is cheaper than long paths."""
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


_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Checkpoint:
    """One saved step of a run: the committed state (whole or as a delta) plus what is in flight.

    Example:
        >>> cp = Checkpoint(run_id="r1", checkpoint_id=new_checkpoint_id(), version=1,
        ...                 step=0, values={"data": {"n": 1}})
        >>> cp.kind, cp.parent_id
        ('snapshot', None)
    """

    run_id: str
    """The run (thread) this checkpoint belongs to."""
    checkpoint_id: str
    """Unique id; :func:`new_checkpoint_id` makes time-ordered ones."""
    version: int
    """The run head's version this write was based on, plus one (1 for a run's first)."""
    step: int
    """The run's step count when it was taken."""
    values: dict[str, Any]
    """A snapshot's whole encoded state, or a delta against the parent (see the module doc)."""
    kind: CheckpointKind = "snapshot"
    """Whether ``values`` is the whole state or a delta."""
    parent_id: str | None = None
    """The checkpoint this one follows; a delta's values are relative to it."""
    created_at: dt.datetime = dataclasses.field(default_factory=_utc_now)
    """When it was made (timezone-aware)."""
    next: list[Any] = dataclasses.field(default_factory=list)
    """The tasks or nodes to run next, as JSON data."""
    pending_writes: dict[str, list[Any]] = dataclasses.field(default_factory=dict)
    """Per task id, the JSON-safe writes of tasks that finished within the step."""
    interrupts: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    """Per interrupt id, its JSON-safe record (prompt, payload, and the answer once given)."""
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Caller data carried with the checkpoint (node name, usage, request id...)."""

    def __post_init__(self) -> None:
        for name in ("run_id", "checkpoint_id"):
            value = getattr(self, name)
            if type(value) is not str or not value:
                raise ValueError(f"Checkpoint.{name} must be a non-empty string, got {value!r}")
        if self.parent_id is not None and (type(self.parent_id) is not str or not self.parent_id):
            raise ValueError(
                f"Checkpoint.parent_id must be a non-empty string or None, got {self.parent_id!r}"
            )
        if type(self.version) is not int or self.version < 1:
            raise ValueError(f"Checkpoint.version must be an int >= 1, got {self.version!r}")
        if type(self.step) is not int or self.step < 0:
            raise ValueError(f"Checkpoint.step must be an int >= 0, got {self.step!r}")
        if self.kind not in _KINDS:
            raise ValueError(f"Checkpoint.kind must be 'snapshot' or 'delta', got {self.kind!r}")
        if self.kind == "delta" and self.parent_id is None:
            raise ValueError(f"checkpoint {self.checkpoint_id!r} is a delta without a parent_id")
        if not isinstance(self.created_at, dt.datetime) or self.created_at.tzinfo is None:
            raise ValueError(
                f"Checkpoint.created_at must be a timezone-aware datetime, got {self.created_at!r}"
            )
        for name, kind in (
            ("values", dict),
            ("next", list),
            ("pending_writes", dict),
            ("interrupts", dict),
            ("metadata", dict),
        ):
            if not isinstance(getattr(self, name), kind):
                raise TypeError(
                    f"Checkpoint.{name} must be a {kind.__name__}, got "
                    f"{type(getattr(self, name)).__qualname__}"
                )

    def replace(self, **changes: Any) -> Checkpoint:
        """A copy with ``changes`` applied (and validated)."""
        return dataclasses.replace(self, **changes)

    @property
    def node_name(self) -> str | None:
        """The node just completed, or the one the run stopped before (seed 004's name)."""
        for entry in self.next[:1]:
            if isinstance(entry, str):
                return entry
            if isinstance(entry, dict) and isinstance(entry.get("after"), str):
                return str(entry["after"])
        return None

    @property
    def interrupted(self) -> bool:
        """Whether the run was waiting for an answer here (seed 004's ``meta.interrupted``)."""
        return any(not record.get("answered") for record in self.interrupts.values())


# ---------------------------------------------------------------------- ids

_ALPHABET: Final = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32: sorts like its numbers
_STANDARD: Final = "0123456789abcdefghijklmnopqrstuv"  # the digits int(text, 32) reads
_TO_INT_DIGITS: Final = str.maketrans(_ALPHABET, _STANDARD, "ilou")  # not Crockford digits
_INT_DIGITS: Final = frozenset(_STANDARD)
_id_lock = threading.Lock()
_last_micros = 0


def _base32(number: int, width: int) -> str:
    chars = []
    for _ in range(width):
        number, digit = divmod(number, 32)
        chars.append(_ALPHABET[digit])
    return "".join(reversed(chars))


_id_source: ContextVar[Callable[[], str] | None] = ContextVar(
    "selectgraph_checkpoint_ids", default=None
)


def new_checkpoint_id() -> str:
    """A unique id that sorts by creation time: 11 chars of microseconds, 7 random.

    Within a process the time part strictly increases, so ids made one after
    the other always sort in that order; across processes the random part
    (35 bits) keeps them apart. Inside :func:`checkpoint_ids_from` the ids
    come from the given source instead.
    """
    source = _id_source.get()
    if source is not None:
        return source()
    global _last_micros
    with _id_lock:
        micros = max(time.time_ns() // 1000, _last_micros + 1)
        _last_micros = micros
    return _base32(micros, 11) + _base32(int.from_bytes(os.urandom(5)) >> 5, 7)


def replayable_ids(start: dt.datetime, salt: str) -> Callable[[], str]:
    """Checkpoint ids that are the same each time a run is replayed: the n-th id is fixed.

    The time part counts microseconds up from ``start`` (the run's start, as
    recorded), the random part is derived from ``salt`` (the run id): an
    executor that replays a run from its recorded steps rebuilds the same
    checkpoint chain, and ids still sort in the order they were made.
    """
    first = (start - _EPOCH) // dt.timedelta(microseconds=1)
    tail = _base32(zlib.crc32(salt.encode()) >> 3, 7)
    counter = itertools.count()
    return lambda: _base32(first + next(counter), 11) + tail


@contextmanager
def checkpoint_ids_from(source: Callable[[], str] | None) -> Iterator[None]:
    """Checkpoints made inside the block take their ids from ``source`` (None: the default)."""
    token = _id_source.set(source)
    try:
        yield
    finally:
        _id_source.reset(token)


def _made_at(checkpoint_id: str) -> dt.datetime | None:
    """A new checkpoint's time: its id's, unless the id came from a replayable source."""
    return _utc_now() if _id_source.get() is not None else id_time(checkpoint_id)


def id_time(checkpoint_id: str) -> dt.datetime | None:
    """When :func:`new_checkpoint_id` made ``checkpoint_id``; None for an id of another form."""
    if len(checkpoint_id) != 18 or not checkpoint_id.isalnum():
        return None
    digits = checkpoint_id[:11].translate(_TO_INT_DIGITS)
    if len(digits) != 11 or not set(digits) <= _INT_DIGITS:
        return None
    try:  # int() reads base 32 in C: this runs for every row a store loads
        return _EPOCH + dt.timedelta(microseconds=int(digits, 32))
    except OverflowError:
        return None


# -------------------------------------------------------------------- deltas


def diff_state(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The delta that turns encoded state ``old`` into ``new``.

    Dicts are compared key by key (so one changed ``data`` key costs one
    entry); a list that only grew is stored as its appended tail (messages,
    history, errors); anything else that changed is stored whole.

    Example:
        >>> diff_state({"data": {"a": 1, "b": 2}, "messages": ["hi"]},
        ...            {"data": {"a": 1, "b": 3}, "messages": ["hi", "yo"]})
        {'set': [['/data/b', 3]], 'append': [['/messages', ['yo']]]}
    """
    sets: list[Any] = []
    unsets: list[Any] = []
    appends: list[Any] = []
    _diff(old, new, "", 1, sets, unsets, appends)
    delta: dict[str, Any] = {}
    if sets:
        delta["set"] = sets
    if unsets:
        delta["unset"] = unsets
    if appends:
        delta["append"] = appends
    return delta


def _pointer(prefix: str, key: str) -> str:
    return f"{prefix}/{key.replace('~', '~0').replace('/', '~1')}"


def _diff(
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    prefix: str,
    depth: int,
    sets: list[Any],
    unsets: list[Any],
    appends: list[Any],
) -> None:
    for key, value in new.items():
        if key not in old:
            sets.append([_pointer(prefix, key), value])
            continue
        before = old[key]
        # == is fast (it stops at the first difference or length) but takes True for
        # 1, 1.0 and True alike; those must not be lost, so equal values have their
        # types compared too.
        if before == value and _same_types(before, value):
            continue
        if (
            type(value) is dict
            and type(before) is dict
            and depth < _DIFF_DEPTH
            and TAG not in value
            and TAG not in before
        ):
            _diff(before, value, _pointer(prefix, key), depth + 1, sets, unsets, appends)
        elif (
            type(value) is list
            and type(before) is list
            and len(before) < len(value)
            and value[: len(before)] == before
            # The conversation and history logs are only ever appended to, and checking
            # their types every step would make a long run's diffs quadratic.
            and ((depth == 1 and key in _LOGS) or _same_types(value[: len(before)], before))
        ):
            appends.append([_pointer(prefix, key), value[len(before) :]])
        else:
            sets.append([_pointer(prefix, key), value])
    unsets.extend(_pointer(prefix, key) for key in old if key not in new)


_LOGS: Final = frozenset({"messages", "history"})


def _same_types(a: Any, b: Any) -> bool:
    """Whether two values that compare equal also have the same JSON types throughout."""
    kind = type(a)
    if kind is not type(b):
        return False
    if kind is dict:
        for key, item in a.items():
            other = b[key]
            if type(item) is not type(other) or (
                type(item) in _CONTAINERS and not _same_types(item, other)
            ):
                return False
    elif kind is list:
        for item, other in zip(a, b, strict=True):
            if type(item) is not type(other) or (
                type(item) in _CONTAINERS and not _same_types(item, other)
            ):
                return False
    return True


_CONTAINERS: Final = (dict, list)


def apply_delta(base: Mapping[str, Any], delta: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``delta`` applied; ``base`` itself is not changed.

    Raises:
        CheckpointDecodeError: the delta is malformed (names the part of it).
    """
    state = copy.deepcopy(dict(base))
    _apply(state, delta, "?")
    return state


def apply_delta_in_place(state: dict[str, Any], delta: Any, checkpoint_id: str) -> None:
    """Apply ``delta`` to ``state`` itself (no copy); errors name ``checkpoint_id``.

    Raises:
        CheckpointDecodeError: the delta is malformed (names the part of it).
    """
    _apply(state, delta, checkpoint_id)


def _apply(state: dict[str, Any], delta: Any, checkpoint_id: str) -> None:
    def fail(where: str, reason: str) -> CheckpointDecodeError:
        return CheckpointDecodeError(checkpoint_id, f"values{where}", reason)

    if type(delta) is not dict:
        raise fail("", f"a delta must be an object, got {brief(delta)}")
    unknown = delta.keys() - {"set", "unset", "append"}
    if unknown:
        raise fail("", f"a delta has only set, unset and append, not {sorted(unknown)}")

    def container(pointer: Any, where: str) -> tuple[dict[str, Any], str]:
        if type(pointer) is not str or not pointer.startswith("/"):
            raise fail(
                where, f"a path must be a JSON Pointer like '/data/key', got {brief(pointer)}"
            )
        keys = [k.replace("~1", "/").replace("~0", "~") for k in pointer[1:].split("/")]
        target = state
        for i, key in enumerate(keys[:-1]):
            inner = target.get(key)
            if type(inner) is not dict:
                raise fail(where, f"{'/'.join(['', *keys[: i + 1]])} is not an object")
            target = inner
        return target, keys[-1]

    for part in ("set", "append"):
        entries = delta.get(part, [])
        if type(entries) is not list:
            raise fail(f".{part}", f"expected a list, got {brief(entries)}")
        for i, entry in enumerate(entries):
            where = f".{part}[{i}]"
            if type(entry) is not list or len(entry) != 2:
                raise fail(where, f"expected [path, value], got {brief(entry)}")
            target, key = container(entry[0], where)
            if part == "set":
                target[key] = entry[1]
            elif type(target.get(key)) is not list or type(entry[1]) is not list:
                raise fail(where, f"cannot append to {entry[0]}: not a list")
            else:
                target[key].extend(entry[1])
        if part == "set":  # unset goes between: a key is removed after sets, before appends
            unsets = delta.get("unset", [])
            if type(unsets) is not list:
                raise fail(".unset", f"expected a list, got {brief(unsets)}")
            for i, path in enumerate(unsets):
                target, key = container(path, f".unset[{i}]")
                target.pop(key, None)


def materialize(chain: Sequence[Checkpoint], *, owned: bool = False) -> dict[str, Any]:
    """The full encoded state at the last checkpoint of ``chain``.

    Args:
        chain: A snapshot followed by the deltas that come after it, in order
            (each one's ``parent_id`` the previous one's id).
        owned: The chain was just loaded and nobody else holds it, so its
            values may become part of the result instead of being copied.

    Raises:
        CheckpointDecodeError: the chain does not start with a snapshot, a link
            is broken, or a delta is malformed.
    """
    if not chain:
        raise ValueError("materialize needs at least one checkpoint")
    first = chain[0]
    if first.kind != "snapshot":
        raise CheckpointDecodeError(
            first.checkpoint_id, "parent_id", f"its parent {first.parent_id!r} is missing"
        )

    def take(values: dict[str, Any]) -> dict[str, Any]:
        return values if owned else copy.deepcopy(values)

    state = take(first.values)
    for before, checkpoint in itertools.pairwise(chain):
        if checkpoint.parent_id != before.checkpoint_id:
            raise CheckpointDecodeError(
                checkpoint.checkpoint_id,
                "parent_id",
                f"expected {before.checkpoint_id!r}, found {checkpoint.parent_id!r}",
            )
        if checkpoint.kind == "snapshot":
            state = take(checkpoint.values)
        else:
            _apply(state, take(checkpoint.values), checkpoint.checkpoint_id)
    return state


def make_checkpoint(
    *,
    run_id: str,
    version: int,
    step: int,
    state: dict[str, Any],
    parent: Checkpoint | None = None,
    parent_state: Mapping[str, Any] | None = None,
    snapshot_every: int = SNAPSHOT_EVERY,
    checkpoint_id: str | None = None,
    **fields: Any,
) -> Checkpoint:
    """Build the next checkpoint of a run, as a delta against ``parent`` when that is allowed.

    It is a snapshot when there is no parent (or its state is not given), when
    the parent is in another run (a fork), or every ``snapshot_every``
    versions; otherwise a delta holding :func:`diff_state` of the two states.

    Args:
        run_id: The run.
        version: The run head's version plus one.
        step: The run's step count.
        state: The whole encoded state (``GraphState.to_dict(serializer=...)``).
        parent: The checkpoint this one follows.
        parent_state: The parent's whole encoded state.
        snapshot_every: Versions between snapshots.
        checkpoint_id: The id; a new time-ordered one when omitted.
        **fields: ``next``, ``pending_writes``, ``interrupts``, ``metadata``, ``created_at``.
    """
    if type(snapshot_every) is not int or snapshot_every < 1:
        raise ValueError(f"snapshot_every must be a positive int, got {snapshot_every!r}")
    if checkpoint_id is None:
        checkpoint_id = new_checkpoint_id()
        fields.setdefault("created_at", _made_at(checkpoint_id))
    common: dict[str, Any] = {
        "run_id": run_id,
        "checkpoint_id": checkpoint_id,
        "version": version,
        "step": step,
        "parent_id": parent.checkpoint_id if parent is not None else None,
        **fields,
    }
    delta_ok = (
        parent is not None
        and parent_state is not None
        and parent.run_id == run_id
        and (version - 1) % snapshot_every != 0
    )
    if delta_ok:
        assert parent_state is not None  # for mypy: checked just above
        return Checkpoint(kind="delta", values=diff_state(parent_state, state), **common)
    return Checkpoint(kind="snapshot", values=state, **common)


class CheckpointChain:
    """Makes a run's successive checkpoints, taking a snapshot only when deltas have cost as much.

    :func:`make_checkpoint` snapshots every ``snapshot_every`` versions, however
    small the changes: with a 10 KB state and one small change a step, 20
    snapshots in 1,000 steps are most of the storage. A chain instead takes a
    snapshot once the deltas written since the last one add up to ``ratio``
    times that snapshot's size (and at least every ``max_deltas`` versions).
    Storage then stays within ``1 + 1/ratio`` times what actually changed, and
    a load reads at most ``1 + ratio`` states' worth of records.

    Example:
        >>> chain = CheckpointChain("run-1")
        >>> first = chain.next(step=0, state={"data": {"n": 0, "text": "x" * 100}})
        >>> second = chain.next(step=1, state={"data": {"n": 1, "text": "x" * 100}})
        >>> first.kind, second.kind, second.values, second.version
        ('snapshot', 'delta', {'set': [['/data/n', 1]]}, 2)

    Args:
        run_id: The run.
        parent: The run's head checkpoint to continue from (None for a new run).
        parent_state: Its whole encoded state; without it the next checkpoint is
            a snapshot.
        ratio: Delta bytes, relative to the last snapshot's, that trigger a snapshot.
        max_deltas: Deltas after which a snapshot is taken regardless.
    """

    __slots__ = (
        "_delta_bytes",
        "_deltas",
        "_parent",
        "_snapshot_bytes",
        "_state",
        "max_deltas",
        "ratio",
        "run_id",
    )

    def __init__(
        self,
        run_id: str,
        *,
        parent: Checkpoint | None = None,
        parent_state: dict[str, Any] | None = None,
        ratio: float = 1.0,
        max_deltas: int = 200,
    ) -> None:
        if not ratio > 0:
            raise ValueError(f"ratio must be positive, got {ratio!r}")
        if type(max_deltas) is not int or max_deltas < 0:
            raise ValueError(f"max_deltas must be an int >= 0, got {max_deltas!r}")
        self.run_id = run_id
        self.ratio = ratio
        self.max_deltas = max_deltas
        self._parent = parent
        self._state = parent_state
        # Unknown history after a restart: the next checkpoint is a snapshot.
        self._snapshot_bytes = 0
        self._delta_bytes = 0
        self._deltas = max_deltas

    @property
    def head(self) -> Checkpoint | None:
        """The last checkpoint made (or the parent given)."""
        return self._parent

    def next(
        self,
        *,
        step: int,
        state: dict[str, Any],
        delta: dict[str, Any] | None = None,
        **fields: Any,
    ) -> Checkpoint:
        """The checkpoint after the last one made, holding ``state`` (whole, encoded).

        The caller saves it with ``expected_version=checkpoint.version - 1``; if
        that raises :class:`~selectgraph.CheckpointConflict`, make a new chain
        from the run's reloaded head.

        Args:
            step: The run's step count.
            state: The whole encoded state. With ``delta``, the caller may keep
                changing it afterwards (a snapshot takes a copy).
            delta: What changed since the last checkpoint, when the caller knows
                it (the runner tracks the keys a step wrote); saves diffing
                the whole state.
            **fields: ``next``, ``pending_writes``, ``interrupts``, ``metadata``.
        """
        parent = self._parent
        version = parent.version + 1 if parent is not None else 1
        checkpoint_id = new_checkpoint_id()
        common: dict[str, Any] = {
            "run_id": self.run_id,
            "checkpoint_id": checkpoint_id,
            "version": version,
            "step": step,
            "parent_id": parent.checkpoint_id if parent is not None else None,
            "created_at": _made_at(checkpoint_id),
            **fields,
        }
        checkpoint: Checkpoint | None = None
        if parent is not None and self._state is not None and self._deltas < self.max_deltas:
            if delta is None:
                delta = diff_state(self._state, state)
            # An estimate is enough here (the store checks and encodes the values).
            size = len(json.dumps(delta, separators=(",", ":"), default=repr))
            if self._delta_bytes + size < self.ratio * self._snapshot_bytes:
                checkpoint = Checkpoint(kind="delta", values=delta, **common)
                self._delta_bytes += size
                self._deltas += 1
        if checkpoint is None:
            if delta is not None:
                state = copy_encoded(state)
            checkpoint = Checkpoint(kind="snapshot", values=state, **common)
            self._snapshot_bytes = len(_dumps(state, f"checkpoint {checkpoint_id!r} values"))
            self._delta_bytes = 0
            self._deltas = 0
        self._parent, self._state = checkpoint, state
        return checkpoint


def copy_encoded(state: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of an encoded state that later changes to ``state`` cannot reach.

    Encoded values are replaced, never changed in place, by whoever keeps a
    live encoded state; only its containers (``data``, ``history``...) need
    copying, which is far cheaper than a deep copy.
    """
    return {
        key: dict(value) if type(value) is dict else list(value) if type(value) is list else value
        for key, value in state.items()
    }


# ------------------------------------------------------------------- codec


def _dumps(value: Any, where: str) -> bytes:
    # Checked first: json.dumps would silently turn a tuple into a list and an int
    # key into a string, and the value would load back different.
    fault = _unjsonable(value, where)
    if fault is not None:
        raise StateSerializationError(*fault)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


_JSON_LEAVES: Final = frozenset({str, int, bool, type(None)})


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
        _VALUES + _dumps(checkpoint.values, f"{where} values")
        if len(payload) == 1
        else (_dumps(payload, where))
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
    return _dumps(header, f"checkpoint {checkpoint.checkpoint_id!r}")


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
            created_at = _EPOCH + dt.timedelta(microseconds=created)
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
    return _dumps(list(writes), f"checkpoint {checkpoint_id!r} pending_writes.{task_id}")


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
