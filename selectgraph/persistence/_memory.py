"""InMemoryCheckpointStore: checkpoints in a dict, for tests and development (lost on exit)."""

from __future__ import annotations

import builtins
import datetime as dt
import threading
from typing import Any

from selectgraph.core._errors import CheckpointConflict, CheckpointNotFound
from selectgraph.persistence._base import BlockingStore, rebased_child, window
from selectgraph.persistence._checkpoint import Checkpoint
from selectgraph.persistence._codec import (
    decode_record,
    decode_writes,
    encode_record,
    encode_writes,
)

__all__ = ["InMemoryCheckpointStore"]


class _Run:
    __slots__ = ("ids", "version")

    def __init__(self) -> None:
        self.version = 0
        self.ids: dict[int, str] = {}  # version -> checkpoint id, in insertion (= version) order


class InMemoryCheckpointStore(BlockingStore):
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

    def _save(self, checkpoint: Checkpoint, expected_version: int) -> None:
        record = encode_record(checkpoint)  # encoding errors surface before anything changes
        with self._lock:
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
