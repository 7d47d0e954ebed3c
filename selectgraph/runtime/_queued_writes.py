"""Checkpoints written behind the run (durability "async"), in batches.

The run hands each checkpoint over and goes on; one writer thread stores them in
order. Whatever has queued up while the writer was busy is stored as one batch:
with a store that can (``batch_saver``: SQLite, PostgreSQL), in one transaction, so a run whose
steps are quicker than a commit pays one commit (and one fsync) for several
checkpoints instead of falling behind. A batch is stored whole or not at all, as a
crash may lose the last checkpoints of an "async" run anyway.

Once a write fails, every later one builds on a checkpoint that was never stored
(another writer took the run, say): they fail with the same error, and the run
hears of it at its next checkpoint or when it flushes.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import threading
from typing import Any

from selectgraph.persistence._base import batch_saver
from selectgraph.persistence._checkpoint import Checkpoint
from selectgraph.persistence._protocol import CheckpointStore

__all__ = ["QueuedWrites"]

Future = concurrent.futures.Future


class QueuedWrites:
    """A run's queue of checkpoints to store, and the thread that stores them."""

    def __init__(self, store: CheckpointStore) -> None:
        self.store = store
        self._saves_batches = batch_saver(store)
        self._lock = threading.Lock()
        self._waiting: collections.deque[tuple[Checkpoint, Future[None]]] = collections.deque()
        self._draining = False
        self._writer: concurrent.futures.ThreadPoolExecutor | None = None
        self._queued: list[Future[None]] = []
        self.failed: BaseException | None = None
        """The first write that failed: every later one builds on it and is dropped."""

    def put(self, checkpoint: Checkpoint) -> None:
        """Queue ``checkpoint`` (the next of the run's) to be stored after those before it.

        Raises:
            Exception: a queued write that failed since the last call.
        """
        self.raise_failed()
        future: Future[None] = Future()
        with self._lock:
            self._waiting.append((checkpoint, future))
            start, self._draining = not self._draining, True
        self._queued.append(future)
        if start:
            if self._writer is None:
                self._writer = concurrent.futures.ThreadPoolExecutor(
                    1, thread_name_prefix="selectgraph-checkpoint"
                )
            self._writer.submit(self._drain)

    def raise_failed(self) -> None:
        """Raise the error of a queued write that failed, if one did; forget stored ones."""
        # Writes finish in order: only the front of the queue can be done.
        queued = self._queued
        done = 0
        while done < len(queued) and queued[done].done():
            queued[done].result()  # a failed background write surfaces here
            done += 1
        if done:
            del queued[:done]

    def taken(self) -> list[Future[None]]:
        """The futures of the writes queued and maybe not stored yet, handed to the caller."""
        queued, self._queued = self._queued, []
        return queued

    async def flush(self, blocking: bool) -> None:
        """Wait until every queued write is stored (re-raising the first that failed).

        ``blocking``: the run has no event loop, so wait on the futures themselves.
        """
        queued = self.taken()
        for future in queued:
            if blocking:
                future.result()
            else:
                await asyncio.wrap_future(future)

    def close(self) -> None:
        """Stop the writer thread (after :meth:`flush`)."""
        if self._writer is not None:
            self._writer.shutdown(wait=True)
            self._writer = None

    # -- on the writer thread ----------------------------------------------------

    def _drain(self) -> None:
        batch: list[tuple[Checkpoint, Future[None]]] = []
        try:
            while True:
                with self._lock:
                    batch = list(self._waiting)
                    self._waiting.clear()
                    if not batch:
                        self._draining = False
                        return
                for _, future in batch:
                    # Running, it can no longer be cancelled (a flush given up on cancels
                    # it): the write goes ahead either way, or the next would lack a parent.
                    future.set_running_or_notify_cancel()
                self._store(batch)
        except BaseException as error:  # a bug here: still, nobody may wait forever
            with self._lock:
                left = list(self._waiting)
                self._waiting.clear()
                self._draining = False
            stopped = RuntimeError(f"the checkpoint writer stopped: {error!r}")
            for _, future in batch + left:
                _settle(future, stopped)
            raise

    def _store(self, batch: list[tuple[Checkpoint, Future[None]]]) -> None:
        if self.failed is None and len(batch) > 1 and self._saves_batches is not None:
            try:
                self._saves_batches([checkpoint for checkpoint, _ in batch])
            except BaseException as error:
                self._fail(batch, error)
                return
            for _, future in batch:
                _settle(future)
            return
        for index, (checkpoint, future) in enumerate(batch):
            if self.failed is not None:
                self._fail(batch[index:], self.failed)
                return
            try:
                self.store.save(checkpoint, expected_version=checkpoint.version - 1)
            except BaseException as error:
                self._fail(batch[index:], error)
                return
            _settle(future)

    def _fail(self, batch: list[tuple[Checkpoint, Future[Any]]], error: BaseException) -> None:
        if self.failed is None:
            self.failed = error
        for _, future in batch:
            _settle(future, error)


def _settle(future: Future[None], error: BaseException | None = None) -> None:
    """Give ``future`` its outcome, unless its waiter cancelled it before it ran."""
    if future.done():
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)
