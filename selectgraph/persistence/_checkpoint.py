"""The checkpoint record, one saved step of a run, and the time-ordered ids that name it.

A checkpoint is either a *snapshot* (``values`` holds the whole encoded state)
or a *delta* (``values`` holds only what changed against its parent; see
:mod:`selectgraph.persistence._delta`). Its id sorts by the time it was made;
an executor that replays a run makes the same ids again
(:func:`replayable_ids`, :func:`checkpoint_ids_from`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import itertools
import os
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Final, Literal

__all__ = [
    "EPOCH",
    "Checkpoint",
    "CheckpointKind",
    "checkpoint_ids_from",
    "id_time",
    "made_at",
    "new_checkpoint_id",
    "replayable_ids",
]

CheckpointKind = Literal["snapshot", "delta"]
"""``"snapshot"``: ``values`` is the whole encoded state; ``"delta"``: only the changes."""

_KINDS: Final = ("snapshot", "delta")

EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
"""Where the time in a checkpoint id, and a stored ``created_at`` in microseconds, count from."""


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
    """A snapshot's whole encoded state, or a delta against the parent (see ``diff_state``)."""
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
    events: tuple[Mapping[str, Any], ...] = dataclasses.field(default=(), repr=False, compare=False)
    """The run's events since its previous checkpoint, as JSON data, for a store that keeps
    an event log (a ``ThreadStore``); stored apart from the record, never loaded with it."""

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
        """The node this checkpoint was saved after (seed 004's name), or ``None``.

        After a node completed, that node; where the run stopped at a node (it
        asked a question, failed, was paused or cancelled there), that node. The
        input checkpoint, saved before any node ran, names none (naming the entry
        node there made two checkpoints in a row claim to be after it), and so does
        a fork's first checkpoint when the fork starts before a node.
        """
        trigger = self.metadata.get("trigger")
        if trigger == "input":
            return None
        for entry in self.next[:1]:
            if isinstance(entry, str) and trigger == "fork":
                return None  # a fork that starts before a node: none of its own has run
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


_PAIRS: Final = tuple(a + b for a in _ALPHABET for b in _ALPHABET)
"""Every two-digit string, by the 10 bits it stands for."""


def _base32(number: int, width: int) -> str:
    """The low ``width`` base-32 digits of ``number``, in Crockford's alphabet."""
    shift = 5 * width
    text = ""
    if width % 2:
        shift -= 5
        text = _ALPHABET[(number >> shift) & 31]
    while shift:  # two digits at a time: a checkpoint id is made at every save
        shift -= 10
        text += _PAIRS[(number >> shift) & 1023]
    return text


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
    first = (start - EPOCH) // dt.timedelta(microseconds=1)
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


def made_at(checkpoint_id: str) -> dt.datetime | None:
    """A new checkpoint's time: its id's, unless the id came from a replayable source."""
    return _utc_now() if _id_source.get() is not None else id_time(checkpoint_id)


@functools.lru_cache(maxsize=256)  # a save reads its new id's time twice
def id_time(checkpoint_id: str) -> dt.datetime | None:
    """When :func:`new_checkpoint_id` made ``checkpoint_id``; None for an id of another form."""
    if len(checkpoint_id) != 18 or not checkpoint_id.isalnum():
        return None
    digits = checkpoint_id[:11].translate(_TO_INT_DIGITS)
    if len(digits) != 11 or not set(digits) <= _INT_DIGITS:
        return None
    try:  # int() reads base 32 in C: this runs for every row a store loads
        return EPOCH + dt.timedelta(microseconds=int(digits, 32))
    except OverflowError:
        return None
