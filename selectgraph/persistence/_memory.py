"""InMemoryCheckpointStore: checkpoints in a dict, for tests and development (lost on exit)."""

from __future__ import annotations

import builtins
import dataclasses
import datetime as dt
import threading
from typing import Any

from selectgraph.core._errors import (
    CheckpointConflict,
    CheckpointNotFound,
    ResumeError,
    ThreadTakenOver,
)
from selectgraph.persistence._base import BlockingStore, rebased_child, window
from selectgraph.persistence._checkpoint import Checkpoint
from selectgraph.persistence._codec import (
    decode_event,
    decode_record,
    decode_writes,
    encode_events,
    encode_record,
    encode_writes,
)
from selectgraph.persistence._thread_base import ThreadKeeping
from selectgraph.persistence._threads import (
    Claim,
    StoredEvent,
    Thread,
    ThreadRun,
    decide_claim,
)

__all__ = ["InMemoryCheckpointStore"]


class _Run:
    __slots__ = ("ids", "version")

    def __init__(self) -> None:
        self.version = 0
        self.ids: dict[int, str] = {}  # version -> checkpoint id, in insertion (= version) order


class InMemoryCheckpointStore(ThreadKeeping, BlockingStore):
    """Keeps checkpoints in this process's memory; they are gone when it exits.

    Records are held as encoded JSON, exactly as the durable stores write them,
    so a value that would fail to save or load there fails here too.

    Example:
        >>> from selectgraph.persistence import Checkpoint
        >>> store = InMemoryCheckpointStore()
        >>> cp = Checkpoint(run_id="r", checkpoint_id="c1", version=1, step=0, values={})
        >>> store.save(cp, expected_version=0)
        >>> store.head("r").checkpoint_id
        'c1'
    """

    _in_thread = False  # nothing here blocks

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._records: dict[str, bytes] = {}
        self._owner: dict[str, tuple[str, int]] = {}  # checkpoint id -> (run id, version)
        self._created: dict[str, dt.datetime] = {}  # checkpoint id -> its created_at
        self._runs: dict[str, _Run] = {}
        self._writes: dict[str, dict[str, bytes]] = {}
        self._events: dict[str, list[bytes]] = {}  # run id -> its events, seq = index + 1
        self._threads: dict[str, Thread] = {}
        self._runs_of: dict[str, list[ThreadRun]] = {}
        self._queues: dict[str, dict[str, dt.datetime]] = {}  # ticket -> lease end, in order

    def _save(self, checkpoint: Checkpoint, expected_version: int) -> None:
        record = encode_record(checkpoint)  # encoding errors surface before anything changes
        events = encode_events(checkpoint.events, checkpoint.run_id)
        with self._lock:
            thread_id = checkpoint.metadata.get("thread_id")
            if thread_id is not None:
                # First: a run that lost its thread (rolled back) may have no head left.
                self._check_owner(str(thread_id), checkpoint.run_id, checkpoint.created_at)
            run = self._runs.get(checkpoint.run_id)
            actual = run.version if run is not None else 0
            if actual != expected_version:
                if self._owner.get(checkpoint.checkpoint_id) == (
                    checkpoint.run_id,
                    checkpoint.version,
                ):
                    return  # this very save was committed before: a retry
                raise CheckpointConflict(
                    checkpoint.run_id, expected_version=expected_version, actual_version=actual
                )
            if checkpoint.checkpoint_id in self._records:
                raise ValueError(f"checkpoint id {checkpoint.checkpoint_id!r} is already stored")
            if events:
                self._events.setdefault(checkpoint.run_id, []).extend(events)
            if run is None:
                run = self._runs[checkpoint.run_id] = _Run()
            run.version = checkpoint.version
            run.ids[checkpoint.version] = checkpoint.checkpoint_id
            self._records[checkpoint.checkpoint_id] = record
            self._owner[checkpoint.checkpoint_id] = (checkpoint.run_id, checkpoint.version)
            self._created[checkpoint.checkpoint_id] = checkpoint.created_at

    def _load(self, checkpoint_id: str) -> Checkpoint:
        with self._lock:
            record = self._records.get(checkpoint_id)
            stored = dict(self._writes.get(checkpoint_id, {}))
        if record is None:
            raise CheckpointNotFound(checkpoint_id)
        checkpoint = decode_record(record, checkpoint_id, location="memory")
        if stored:
            writes = {
                task: decode_writes(raw, checkpoint_id, task, location="memory")
                for task, raw in stored.items()
            }
            checkpoint = checkpoint.replace(pending_writes={**checkpoint.pending_writes, **writes})
        return checkpoint

    def _cursor(self, run_id: str, checkpoint_id: str | None) -> int | None:
        if checkpoint_id is None:
            return None
        owner = self._owner.get(checkpoint_id)
        if owner is None or owner[0] != run_id:
            raise CheckpointNotFound(checkpoint_id, where=f"run {run_id!r}")
        return owner[1]

    def _list(
        self, run_id: str, limit: int | None, before: str | None, after: str | None
    ) -> builtins.list[Checkpoint]:
        with self._lock:
            before_v, after_v = self._cursor(run_id, before), self._cursor(run_id, after)
            run = self._runs.get(run_id)
            ids = builtins.list(run.ids.items()) if run is not None else []
        chosen = window([cid for _, cid in ids], [v for v, _ in ids], before_v, after_v, limit)
        return [self._load(cid) for cid in chosen]

    def _delete(self, checkpoint_id: str) -> bool:
        with self._lock:
            owner = self._owner.get(checkpoint_id)
            if owner is None:
                return False
            deleted = self._load(checkpoint_id)
            run = self._runs[owner[0]]
            children = [
                child
                for cid in run.ids.values()
                if (child := self._load(cid)).parent_id == checkpoint_id
            ]
            rewritten = [rebased_child(deleted, child, self.load_state) for child in children]
            for child in rewritten:
                self._records[child.checkpoint_id] = encode_record(child)
            del self._records[checkpoint_id], self._owner[checkpoint_id]
            del self._created[checkpoint_id]
            self._writes.pop(checkpoint_id, None)
            del run.ids[owner[1]]
            return True

    def _delete_run(self, run_id: str) -> int:
        with self._lock:
            self._events.pop(run_id, None)
            run = self._runs.pop(run_id, None)
            if run is None:
                return 0
            for cid in run.ids.values():
                del self._records[cid], self._owner[cid], self._created[cid]
                self._writes.pop(cid, None)
            return len(run.ids)

    def _head(self, run_id: str) -> Checkpoint | None:
        with self._lock:
            run = self._runs.get(run_id)
            if run is None or not run.ids:
                return None
            latest = run.ids[max(run.ids)]
        return self._load(latest)

    def _list_runs(self, limit: int | None) -> builtins.list[str]:
        with self._lock:
            heads = [
                (self._created[run.ids[max(run.ids)]], run_id)
                for run_id, run in self._runs.items()
                if run.ids
            ]
        # Newest head first; runs whose heads were made at the same time in run id order.
        heads.sort(key=lambda head: head[1])
        heads.sort(key=lambda head: head[0], reverse=True)
        return [run_id for _, run_id in heads[:limit]]

    def _put_writes(
        self, run_id: str, checkpoint_id: str, task_id: str, writes: builtins.list[Any]
    ) -> None:
        raw = encode_writes(writes, checkpoint_id, task_id)
        with self._lock:
            owner = self._owner.get(checkpoint_id)
            if owner is None or owner[0] != run_id:
                raise CheckpointNotFound(checkpoint_id, where=f"run {run_id!r}")
            run = self._runs[run_id]
            if owner[1] != run.version:
                raise CheckpointConflict(
                    run_id, expected_version=owner[1], actual_version=run.version
                )
            self._writes.setdefault(checkpoint_id, {})[task_id] = raw

    # -- threads ------------------------------------------------------------------

    def _check_owner(self, thread_id: str, run_id: str, now: dt.datetime) -> None:
        thread = self._threads.get(thread_id)
        if thread is None or not (
            thread.owner == run_id or (thread.owner is None and thread.last_run == run_id)
        ):
            raise ThreadTakenOver(run_id, thread_id, thread.owner if thread else None)
        self._threads[thread_id] = _touched(thread, now)

    def _front_ticket(self, thread_id: str, now: dt.datetime) -> str | None:
        queue = self._queues.get(thread_id)
        if not queue:
            return None
        for ticket in [t for t, until in queue.items() if until <= now]:
            del queue[ticket]  # its waiter is gone
        return next(iter(queue), None)

    def _claim_thread(
        self,
        thread_id: str,
        run_id: str,
        strategy: str,
        ticket: str | None,
        metadata: dict[str, Any],
        ttl: float | None,
        now: dt.datetime,
    ) -> Claim:
        with self._lock:
            thread = self._threads.get(thread_id)
            runs = self._runs_of.setdefault(thread_id, [])

            def start_of(run: str | None) -> str | None:
                return next((r.start_from for r in runs if r.run_id == run), None)

            owner_start = start_of(thread.owner) if thread is not None else None
            decision = decide_claim(
                thread,
                run_id,
                strategy,
                front_ticket=self._front_ticket(thread_id, now),
                ticket=ticket,
                superseded_start=owner_start,
            )
            start_from = decision.start_from
            if decision.start_after_run is not None:
                head = self._head_id(decision.start_after_run)
                # A run with no checkpoint yet leaves the state where it started.
                start_from = head if head is not None else start_of(decision.start_after_run)
            if decision.delete_superseded and decision.superseded is not None:
                self._delete_run(decision.superseded)
                runs[:] = [r for r in runs if r.run_id != decision.superseded]
            if ticket is not None:
                self._queues.get(thread_id, {}).pop(ticket, None)
            record = ThreadRun(
                thread_id=thread_id,
                run_id=run_id,
                seq=(thread.runs if thread else 0) + 1,
                created_at=now,
                strategy=strategy if decision.superseded else "new",
                start_from=start_from,
                superseded=decision.superseded,
            )
            runs.append(record)
            ttl = ttl if ttl is not None else (thread.ttl if thread else None)
            claimed = Thread(
                thread_id=thread_id,
                created_at=thread.created_at if thread else now,
                updated_at=now,
                metadata={**(thread.metadata if thread else {}), **metadata},
                runs=record.seq,
                last_run=run_id,
                owner=run_id,
                ttl=ttl,
                expires_at=None if ttl is None else now + dt.timedelta(seconds=ttl),
            )
            self._threads[thread_id] = claimed
            return Claim(claimed, record, start_from, decision.superseded)

    def _head_id(self, run_id: str) -> str | None:
        run = self._runs.get(run_id)
        if run is None or not run.ids:
            return None
        return run.ids[max(run.ids)]

    def _release_thread(self, thread_id: str, run_id: str, now: dt.datetime) -> bool:
        with self._lock:
            thread = self._threads.get(thread_id)
            if thread is None or thread.owner != run_id:
                return False
            self._threads[thread_id] = dataclasses.replace(_touched(thread, now), owner=None)
            return True

    def _get_thread(self, thread_id: str) -> Thread | None:
        with self._lock:
            return self._threads.get(thread_id)

    def _list_threads(self, metadata: dict[str, Any], limit: int | None) -> builtins.list[Thread]:
        with self._lock:
            found = [t for t in self._threads.values() if _holds(t.metadata, metadata)]
        found.sort(key=lambda t: t.thread_id)
        found.sort(key=lambda t: t.updated_at, reverse=True)
        return found[:limit]

    def _thread_runs(self, thread_id: str) -> builtins.list[ThreadRun]:
        with self._lock:
            return builtins.list(self._runs_of.get(thread_id, ()))

    def _update_thread(
        self,
        thread_id: str,
        metadata: dict[str, Any] | None,
        ttl: float | None,
        now: dt.datetime,
    ) -> Thread:
        with self._lock:
            thread = self._threads.get(thread_id)
            if thread is None:
                raise ResumeError(f"thread {thread_id!r} does not exist in this store")
            changed = dataclasses.replace(
                thread,
                updated_at=now,
                metadata={**thread.metadata, **(metadata or {})},
            )
            if ttl is not None:
                changed = dataclasses.replace(
                    changed, ttl=ttl, expires_at=now + dt.timedelta(seconds=ttl)
                )
            self._threads[thread_id] = changed
            return changed

    def _delete_thread(self, thread_id: str) -> int:
        with self._lock:
            self._threads.pop(thread_id, None)
            self._queues.pop(thread_id, None)
            runs = self._runs_of.pop(thread_id, [])
            return sum(self._delete_run(run.run_id) for run in runs)

    def _expired_threads(
        self, now: dt.datetime, idle_before: dt.datetime | None
    ) -> builtins.list[str]:
        with self._lock:
            return [
                t.thread_id
                for t in self._threads.values()
                if (t.expires_at is not None and t.expires_at <= now)
                or (idle_before is not None and t.owner is None and t.updated_at < idle_before)
            ]

    def _thread_bytes(self, thread_id: str) -> int:
        with self._lock:
            total = 0
            # A run resumed on its thread has a record per claim: count it once.
            for run_id in dict.fromkeys(r.run_id for r in self._runs_of.get(thread_id, ())):
                stored = self._runs.get(run_id)
                for cid in stored.ids.values() if stored is not None else ():
                    total += len(self._records[cid])
                    total += sum(len(raw) for raw in self._writes.get(cid, {}).values())
                total += sum(len(raw) for raw in self._events.get(run_id, ()))
            return total

    def _enqueue(self, thread_id: str, ticket: str, until: dt.datetime, now: dt.datetime) -> int:
        with self._lock:
            queue = self._queues.setdefault(thread_id, {})
            queue[ticket] = until
            self._front_ticket(thread_id, now)  # drops lapsed tickets
            return builtins.list(queue).index(ticket)

    def _dequeue(self, thread_id: str, ticket: str) -> None:
        with self._lock:
            self._queues.get(thread_id, {}).pop(ticket, None)

    def _append_events(self, run_id: str, events: builtins.list[bytes]) -> int:
        with self._lock:
            if run_id not in self._runs:
                return 0
            log = self._events.setdefault(run_id, [])
            log.extend(events)
            return len(log) if events else 0

    def _read_events(
        self, run_id: str, after: int, limit: int | None
    ) -> builtins.list[StoredEvent]:
        with self._lock:
            stored = self._events.get(run_id, [])[after:]
        if limit is not None:
            stored = stored[:limit]
        return [
            StoredEvent(run_id, after + i + 1, decode_event(raw, run_id, after + i + 1))
            for i, raw in enumerate(stored)
        ]


def _touched(thread: Thread, now: dt.datetime) -> Thread:
    """``thread``, updated now (its expiry renewed)."""
    expires = None if thread.ttl is None else now + dt.timedelta(seconds=thread.ttl)
    return dataclasses.replace(thread, updated_at=now, expires_at=expires)


def _holds(metadata: dict[str, Any], wanted: dict[str, Any]) -> bool:
    return all(key in metadata and metadata[key] == value for key, value in wanted.items())
