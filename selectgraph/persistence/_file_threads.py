"""FileCheckpointStore's threads and event logs: their files, each change under a file lock.

Under the store's directory (see ``_file.py`` for the rest)::

    runs/<run key>/events/<seq>.jsonl     the events one save appended, from seq on, one a line
    threads/<thread key>/THREAD           the thread's record (owner, last run, runs: n...)
    threads/<thread key>/LOCK             locked while a claim, save or change works on it
    threads/<thread key>/runs/<seq>.json  one run of the thread (ThreadRun)
    threads/<thread key>/by_run/<run key> the seqs of a run's records there, to find them
    threads/<thread key>/QUEUE            the tickets of inputs waiting for it, in order

An events file counts once the run's HEAD counts its events; a run record once
THREAD counts it (``runs``): a file a crashed writer left past those is ignored,
then replaced. A writer locks the thread before the run, never the other way.
"""

from __future__ import annotations

import builtins
import datetime as dt
import json
import os
from abc import abstractmethod
from pathlib import Path
from typing import Any

from selectgraph.core._errors import CheckpointDecodeError, ResumeError
from selectgraph.persistence._checkpoint import Checkpoint
from selectgraph.persistence._codec import decode_event, decode_record
from selectgraph.persistence._file_io import (
    WIDTH,
    key,
    locked,
    numbered,
    remove_tree,
    size,
    write_atomic,
)
from selectgraph.persistence._thread_base import ThreadKeeping
from selectgraph.persistence._thread_records import (
    claimed,
    encode_metadata,
    holds,
    released,
    thread_from_json,
    thread_run_from_json,
    thread_run_to_json,
    thread_to_json,
    updated,
)
from selectgraph.persistence._threads import Claim, StoredEvent, Thread, ThreadRun, decide_claim

__all__ = ["FileThreads"]


class FileThreads(ThreadKeeping):
    """The thread and event-log primitives of :class:`~selectgraph.FileCheckpointStore`."""

    directory: Path

    @abstractmethod
    def _run_dir(self, run_id: str) -> Path: ...

    @abstractmethod
    def _record_path(self, run_dir: Path, version: int) -> Path: ...

    @abstractmethod
    def _version(self, run_dir: Path) -> int: ...

    @abstractmethod
    def _versions(self, run_dir: Path) -> builtins.list[int]: ...

    @abstractmethod
    def _head_info(self, run_dir: Path) -> tuple[int, int]: ...

    @abstractmethod
    def _write_head(self, run_dir: Path, run_id: str, version: int, events: int) -> None: ...

    @abstractmethod
    def _head(self, run_id: str) -> Checkpoint | None: ...

    @abstractmethod
    def _delete_run(self, run_id: str) -> int: ...

    # -- events ----------------------------------------------------------------

    @staticmethod
    def _write_events(run_dir: Path, first: int, events: builtins.list[bytes]) -> None:
        """Write a batch of events from seq ``first``: ignored until HEAD counts them."""
        directory = run_dir / "events"
        directory.mkdir(exist_ok=True)
        # JSON text holds no raw newline, so a line is an event.
        write_atomic(directory / f"{first:0{WIDTH}d}.jsonl", b"".join(e + b"\n" for e in events))

    def _append_events(self, run_id: str, events: builtins.list[bytes]) -> int:
        run_dir = self._run_dir(run_id)
        if not run_dir.is_dir():
            return 0
        with locked(run_dir / "LOCK"):
            if not (run_dir / "HEAD").exists() or not events:
                return 0  # a run with no checkpoint here (or a deleted one)
            version, logged = self._head_info(run_dir)
            self._write_events(run_dir, logged + 1, events)
            self._write_head(run_dir, run_id, version, logged + len(events))
            return logged + len(events)

    def _read_events(
        self, run_id: str, after: int, limit: int | None
    ) -> builtins.list[StoredEvent]:
        run_dir = self._run_dir(run_id)
        committed = self._head_info(run_dir)[1]
        found: builtins.list[StoredEvent] = []
        batches = [first for first in numbered(run_dir / "events", ".jsonl") if first <= committed]
        for index, first in enumerate(batches):
            if limit is not None and len(found) >= limit:
                break
            following = batches[index + 1] if index + 1 < len(batches) else committed + 1
            if following - 1 <= after:
                continue  # every event of this batch is at or before ``after``
            path = run_dir / "events" / f"{first:0{WIDTH}d}.jsonl"
            try:
                lines = path.read_bytes().split(b"\n")[:-1]
            except FileNotFoundError:  # the run was deleted meanwhile
                break
            for seq, raw in enumerate(lines, first):
                if seq > committed or (limit is not None and len(found) >= limit):
                    break
                if seq > after:
                    event = decode_event(raw, run_id, seq, location=str(path))
                    found.append(StoredEvent(run_id, seq, event))
        return found

    # -- threads ---------------------------------------------------------------

    def _thread_dir(self, thread_id: str) -> Path:
        return self.directory / "threads" / key(thread_id)

    @staticmethod
    def _read_thread(thread_dir: Path) -> Thread | None:
        path = thread_dir / "THREAD"
        try:
            raw = path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            return thread_from_json(raw)
        except (ValueError, KeyError, TypeError) as exc:
            raise CheckpointDecodeError(
                "<thread>", "thread", f"malformed thread record: {exc}", location=str(path)
            ) from exc

    @staticmethod
    def _read_record(thread_dir: Path, seq: int) -> ThreadRun | None:
        path = thread_dir / "runs" / f"{seq:0{WIDTH}d}.json"
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            return thread_run_from_json(raw)
        except (ValueError, KeyError, TypeError) as exc:
            raise CheckpointDecodeError(
                "<thread run>", "run", f"malformed thread run record: {exc}", location=str(path)
            ) from exc

    def _records(self, thread_dir: Path, thread: Thread | None) -> builtins.list[ThreadRun]:
        """The thread's committed run records, oldest first, rolled-back ones left out."""
        if thread is None:
            return []
        found = [
            record
            for seq in numbered(thread_dir / "runs", ".json")
            if seq <= thread.runs and (record := self._read_record(thread_dir, seq)) is not None
        ]
        # A rollback deletes the records it superseded once it is committed; a crash
        # in between leaves them, so they are skipped here too.
        gone: dict[str, int] = {}
        for record in found:
            if record.strategy == "rollback" and record.superseded is not None:
                gone[record.superseded] = record.seq
        return [r for r in found if gone.get(r.run_id, 0) <= r.seq]

    def _seqs_of(self, thread_dir: Path, thread: Thread | None, run_id: str) -> builtins.list[int]:
        """The committed seqs of ``run_id``'s records in the thread, through its by_run entry."""
        if thread is None:
            return []
        try:
            seqs = json.loads((thread_dir / "by_run" / key(run_id)).read_bytes())
        except FileNotFoundError:
            return []
        except (ValueError, RecursionError) as exc:
            raise CheckpointDecodeError(
                "<thread run>",
                "by_run",
                f"malformed entry: {exc}",
                location=str(thread_dir / "by_run" / key(run_id)),
            ) from exc
        return sorted(s for s in seqs if type(s) is int and 0 < s <= thread.runs)

    def _start_of(self, thread_dir: Path, thread: Thread | None, run_id: str) -> str | None:
        """Where ``run_id`` started on the thread (its first ThreadRun's start_from)."""
        for seq in self._seqs_of(thread_dir, thread, run_id)[:1]:
            first = self._read_record(thread_dir, seq)
            return first.start_from if first is not None else None
        return None

    def _head_id(self, run_id: str) -> str | None:
        """The id of the run's latest checkpoint: HEAD says which file holds it."""
        run_dir = self._run_dir(run_id)
        version = self._version(run_dir)
        if version == 0:
            return None
        try:
            raw = self._record_path(run_dir, version).read_bytes()
        except FileNotFoundError:  # the head itself was deleted: look further back
            head = self._head(run_id)
            return None if head is None else head.checkpoint_id
        return decode_record(raw, f"<version {version} of run {run_id!r}>").checkpoint_id

    @staticmethod
    def _read_queue(thread_dir: Path) -> builtins.list[tuple[str, dt.datetime]]:
        path = thread_dir / "QUEUE"
        try:
            entries = json.loads(path.read_bytes())
            return [(str(ticket), dt.datetime.fromisoformat(until)) for ticket, until in entries]
        except FileNotFoundError:
            return []
        except (ValueError, TypeError, RecursionError) as exc:
            raise CheckpointDecodeError(
                "<queue>", "queue", f"malformed queue: {exc}", location=str(path)
            ) from exc

    @staticmethod
    def _write_queue(thread_dir: Path, queue: builtins.list[tuple[str, dt.datetime]]) -> None:
        entries = [[ticket, until.isoformat()] for ticket, until in queue]
        write_atomic(thread_dir / "QUEUE", json.dumps(entries).encode())

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
        thread_dir = self._thread_dir(thread_id)
        (thread_dir / "runs").mkdir(parents=True, exist_ok=True)
        (thread_dir / "by_run").mkdir(exist_ok=True)
        with locked(thread_dir / "LOCK"):
            thread = self._read_thread(thread_dir)
            owner_start = None
            if thread is not None and thread.owner is not None:
                owner_start = self._start_of(thread_dir, thread, thread.owner)
            queue = self._read_queue(thread_dir)
            live = [(t, until) for t, until in queue if until > now]  # lapsed: waiter gone
            decision = decide_claim(
                thread,
                run_id,
                strategy,
                front_ticket=live[0][0] if live else None,
                ticket=ticket,
                superseded_start=owner_start,
            )
            start_from = decision.start_from
            if decision.start_after_run is not None:
                head = self._head_id(decision.start_after_run)
                # A run with no checkpoint yet leaves the state where it started.
                start_from = (
                    head
                    if head is not None
                    else self._start_of(thread_dir, thread, decision.start_after_run)
                )
            owned, record = claimed(
                thread, thread_id, run_id, strategy, decision, start_from, metadata, ttl, now
            )
            # Ignored until THREAD counts it (a crash before leaves the thread as it was).
            write_atomic(
                thread_dir / "runs" / f"{record.seq:0{WIDTH}d}.json", thread_run_to_json(record)
            )
            seqs = self._seqs_of(thread_dir, thread, run_id)
            write_atomic(
                thread_dir / "by_run" / key(run_id), json.dumps([*seqs, record.seq]).encode()
            )
            doomed = decision.superseded if decision.delete_superseded else None
            if doomed is not None:
                # Its HEAD goes first: from then on it has no checkpoint, committed or not.
                self._delete_run(doomed)
            write_atomic(thread_dir / "THREAD", thread_to_json(owned))  # the commit point
            if doomed is not None:
                for seq in self._seqs_of(thread_dir, owned, doomed):
                    if seq < record.seq:
                        (thread_dir / "runs" / f"{seq:0{WIDTH}d}.json").unlink(missing_ok=True)
                (thread_dir / "by_run" / key(doomed)).unlink(missing_ok=True)
            left = [(t, until) for t, until in live if t != ticket]
            if len(left) != len(queue):
                self._write_queue(thread_dir, left)
            return Claim(owned, record, start_from, decision.superseded)

    def _release_thread(self, thread_id: str, run_id: str, now: dt.datetime) -> bool:
        thread_dir = self._thread_dir(thread_id)
        if not thread_dir.is_dir():
            return False
        with locked(thread_dir / "LOCK"):
            thread = self._read_thread(thread_dir)
            if thread is None or thread.owner != run_id:
                return False
            write_atomic(thread_dir / "THREAD", thread_to_json(released(thread, now)))
            return True

    def _get_thread(self, thread_id: str) -> Thread | None:
        return self._read_thread(self._thread_dir(thread_id))

    def _all_threads(self) -> builtins.list[Thread]:
        root = self.directory / "threads"
        found = (self._read_thread(root / name) for name in sorted(os.listdir(root)))
        return [thread for thread in found if thread is not None]

    def _list_threads(self, metadata: dict[str, Any], limit: int | None) -> builtins.list[Thread]:
        found = [t for t in self._all_threads() if holds(t.metadata, metadata)]
        found.sort(key=lambda t: t.thread_id)
        found.sort(key=lambda t: t.updated_at, reverse=True)
        return found[:limit]

    def _thread_runs(self, thread_id: str) -> builtins.list[ThreadRun]:
        thread_dir = self._thread_dir(thread_id)
        return self._records(thread_dir, self._read_thread(thread_dir))

    def _update_thread(
        self,
        thread_id: str,
        metadata: dict[str, Any] | None,
        ttl: float | None,
        now: dt.datetime,
    ) -> Thread:
        thread_dir = self._thread_dir(thread_id)
        missing = ResumeError(f"thread {thread_id!r} does not exist in this store")
        if not thread_dir.is_dir():
            raise missing
        with locked(thread_dir / "LOCK"):
            thread = self._read_thread(thread_dir)
            if thread is None:
                raise missing
            changed = updated(thread, metadata, ttl, now)
            encode_metadata(changed.metadata)
            write_atomic(thread_dir / "THREAD", thread_to_json(changed))
            return changed

    def _delete_thread(self, thread_id: str) -> int:
        thread_dir = self._thread_dir(thread_id)
        if not thread_dir.is_dir():
            return 0
        with locked(thread_dir / "LOCK"):
            records = self._records(thread_dir, self._read_thread(thread_dir))
            # The runs first: a crash part-way leaves the thread, and deleting it again ends it.
            deleted = sum(
                self._delete_run(run_id) for run_id in dict.fromkeys(r.run_id for r in records)
            )
            (thread_dir / "THREAD").unlink(missing_ok=True)
            remove_tree(thread_dir, keep=("LOCK",))
        return deleted

    def _expired_threads(
        self, now: dt.datetime, idle_before: dt.datetime | None
    ) -> builtins.list[str]:
        found = [
            t
            for t in self._all_threads()
            if (t.expires_at is not None and t.expires_at <= now)
            or (idle_before is not None and t.owner is None and t.updated_at < idle_before)
        ]
        found.sort(key=lambda t: (t.created_at, t.thread_id))
        return [t.thread_id for t in found]

    def _thread_bytes(self, thread_id: str) -> int:
        thread_dir = self._thread_dir(thread_id)
        total = 0
        records = self._records(thread_dir, self._read_thread(thread_dir))
        for run_id in dict.fromkeys(r.run_id for r in records):
            run_dir = self._run_dir(run_id)
            for version in self._versions(run_dir):
                total += size(self._record_path(run_dir, version))
                writes = run_dir / "writes" / f"{version:0{WIDTH}d}"
                if writes.is_dir():
                    total += sum(size(entry) for entry in writes.iterdir())
            committed = self._head_info(run_dir)[1]
            for first in numbered(run_dir / "events", ".jsonl"):
                if first <= committed:
                    total += size(run_dir / "events" / f"{first:0{WIDTH}d}.jsonl")
        return total

    def _enqueue(self, thread_id: str, ticket: str, until: dt.datetime, now: dt.datetime) -> int:
        thread_dir = self._thread_dir(thread_id)
        thread_dir.mkdir(exist_ok=True)
        with locked(thread_dir / "LOCK"):
            queue = self._read_queue(thread_dir)
            tickets = [t for t, _ in queue]
            if ticket in tickets:  # a renewed ticket keeps its place
                queue[tickets.index(ticket)] = (ticket, until)
            else:
                queue.append((ticket, until))
            queue = [(t, end) for t, end in queue if end > now]  # lapsed: waiter gone
            self._write_queue(thread_dir, queue)
            return [t for t, _ in queue].index(ticket)

    def _dequeue(self, thread_id: str, ticket: str) -> None:
        thread_dir = self._thread_dir(thread_id)
        if not thread_dir.is_dir():
            return
        with locked(thread_dir / "LOCK"):
            queue = self._read_queue(thread_dir)
            left = [(t, until) for t, until in queue if t != ticket]
            if len(left) != len(queue):
                self._write_queue(thread_dir, left)
