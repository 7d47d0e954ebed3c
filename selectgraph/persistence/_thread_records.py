"""What the durable stores share to keep threads: the records a claim, a save or a release makes.

Each store reads and writes its rows or files its own way, inside its own lock
or transaction; the decisions about what the records become are made here,
once, so the file, SQLite and PostgreSQL stores agree with the in-memory one.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from typing import Any

from selectgraph.core._errors import ThreadTakenOver
from selectgraph.persistence._json_data import json_bytes
from selectgraph.persistence._threads import ClaimDecision, Thread, ThreadRun

__all__ = [
    "check_owner",
    "claimed",
    "encode_metadata",
    "expiry",
    "holds",
    "released",
    "thread_from_json",
    "thread_run_from_json",
    "thread_run_to_json",
    "thread_to_json",
    "touched",
    "updated",
]


def expiry(ttl: float | None, now: dt.datetime) -> dt.datetime | None:
    """When a thread with ``ttl`` touched ``now`` expires (None: never)."""
    return None if ttl is None else now + dt.timedelta(seconds=ttl)


def encode_metadata(metadata: dict[str, Any]) -> bytes:
    """A thread's metadata as stored JSON.

    Raises:
        StateSerializationError: it is not JSON data.
    """
    return json_bytes(metadata, "thread metadata")


def holds(metadata: dict[str, Any], wanted: dict[str, Any]) -> bool:
    """Whether ``metadata`` has every item of ``wanted`` (``list_threads``' filter)."""
    return all(key in metadata and metadata[key] == value for key, value in wanted.items())


def touched(thread: Thread, now: dt.datetime) -> Thread:
    """``thread``, updated ``now`` (its expiry renewed)."""
    return dataclasses.replace(thread, updated_at=now, expires_at=expiry(thread.ttl, now))


def released(thread: Thread, now: dt.datetime) -> Thread:
    """``thread`` once its owner ended: idle, updated ``now``."""
    return dataclasses.replace(touched(thread, now), owner=None)


def updated(
    thread: Thread, metadata: dict[str, Any] | None, ttl: float | None, now: dt.datetime
) -> Thread:
    """``thread`` after ``update_thread``: metadata merged, a new ttl (and expiry) if given."""
    changed = dataclasses.replace(
        thread, updated_at=now, metadata={**thread.metadata, **(metadata or {})}
    )
    if ttl is not None:
        changed = dataclasses.replace(changed, ttl=ttl, expires_at=expiry(ttl, now))
    return changed


def check_owner(thread: Thread | None, thread_id: str, run_id: str) -> None:
    """Refuse a save of ``run_id`` on a thread it neither owns nor was the last run of.

    Raises:
        ThreadTakenOver: the run lost the thread (or it does not exist).
    """
    if thread is None or not (
        thread.owner == run_id or (thread.owner is None and thread.last_run == run_id)
    ):
        raise ThreadTakenOver(run_id, thread_id, thread.owner if thread else None)


def claimed(
    thread: Thread | None,
    thread_id: str,
    run_id: str,
    strategy: str,
    decision: ClaimDecision,
    start_from: str | None,
    metadata: dict[str, Any],
    ttl: float | None,
    now: dt.datetime,
) -> tuple[Thread, ThreadRun]:
    """The thread and the run's record once ``run_id`` claimed it as ``decision`` says."""
    record = ThreadRun(
        thread_id=thread_id,
        run_id=run_id,
        seq=(thread.runs if thread else 0) + 1,
        created_at=now,
        strategy=strategy if decision.superseded else "new",
        start_from=start_from,
        superseded=decision.superseded,
    )
    ttl = ttl if ttl is not None else (thread.ttl if thread else None)
    return (
        Thread(
            thread_id=thread_id,
            created_at=thread.created_at if thread else now,
            updated_at=now,
            metadata={**(thread.metadata if thread else {}), **metadata},
            runs=record.seq,
            last_run=run_id,
            owner=run_id,
            ttl=ttl,
            expires_at=expiry(ttl, now),
        ),
        record,
    )


# -- JSON forms, for the file store ------------------------------------------------


def _time(value: dt.datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _parse_time(value: Any) -> dt.datetime | None:
    return None if value is None else dt.datetime.fromisoformat(value)


def thread_to_json(thread: Thread) -> bytes:
    """A thread as the file store writes it."""
    return json.dumps(
        {
            "thread_id": thread.thread_id,
            "created_at": _time(thread.created_at),
            "updated_at": _time(thread.updated_at),
            "metadata": thread.metadata,
            "runs": thread.runs,
            "last_run": thread.last_run,
            "owner": thread.owner,
            "ttl": thread.ttl,
            "expires_at": _time(thread.expires_at),
        },
        ensure_ascii=False,
    ).encode()


def _loads(raw: bytes) -> Any:
    """``json.loads``, with nesting too deep for it a ValueError like any other bad JSON."""
    try:
        return json.loads(raw)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def thread_from_json(raw: bytes) -> Thread:
    """A thread :func:`thread_to_json` wrote.

    Raises:
        ValueError, KeyError, TypeError: it is not such a record.
    """
    record = _loads(raw)
    created, changed = _parse_time(record["created_at"]), _parse_time(record["updated_at"])
    if created is None or changed is None or type(record["metadata"]) is not dict:
        raise ValueError("a thread record needs created_at, updated_at and metadata")
    return Thread(
        thread_id=str(record["thread_id"]),
        created_at=created,
        updated_at=changed,
        metadata=record["metadata"],
        runs=int(record["runs"]),
        last_run=record["last_run"],
        owner=record["owner"],
        ttl=record["ttl"],
        expires_at=_parse_time(record["expires_at"]),
    )


def thread_run_to_json(run: ThreadRun) -> bytes:
    """A thread's run record as the file store writes it."""
    return json.dumps(
        {
            "thread_id": run.thread_id,
            "run_id": run.run_id,
            "seq": run.seq,
            "created_at": _time(run.created_at),
            "strategy": run.strategy,
            "start_from": run.start_from,
            "superseded": run.superseded,
        },
        ensure_ascii=False,
    ).encode()


def thread_run_from_json(raw: bytes) -> ThreadRun:
    """A run record :func:`thread_run_to_json` wrote.

    Raises:
        ValueError, KeyError, TypeError: it is not such a record.
    """
    record = _loads(raw)
    created = _parse_time(record["created_at"])
    if created is None:
        raise ValueError("a thread run record needs created_at")
    return ThreadRun(
        thread_id=str(record["thread_id"]),
        run_id=str(record["run_id"]),
        seq=int(record["seq"]),
        created_at=created,
        strategy=str(record["strategy"]),
        start_from=record["start_from"],
        superseded=record["superseded"],
    )
