"""What every store shares: argument checks, cursors, delta chains, rebasing, sync twins."""

from __future__ import annotations

import asyncio
import builtins
import threading
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Final, Self, TypeVar

from selectgraph.core._errors import CheckpointDecodeError, CheckpointNotFound
from selectgraph.persistence._checkpoint import Checkpoint
from selectgraph.persistence._delta import diff_state, materialize

__all__ = [
    "BlockingStore",
    "Portal",
    "batch_saver",
    "check_list_args",
    "check_save",
    "rebased_child",
    "window",
]

T = TypeVar("T")

MAX_CHAIN: Final = 10_000
"""A parent chain longer than this is corrupt records, not a real run (chains are kept short)."""


def check_save(checkpoint: Checkpoint, expected_version: int) -> None:
    """Refuse a save whose arguments cannot be right, before touching storage."""
    if not isinstance(checkpoint, Checkpoint):
        raise TypeError(f"expected a Checkpoint, got {type(checkpoint).__qualname__}")
    if type(expected_version) is not int or expected_version < 0:
        raise ValueError(f"expected_version must be an int >= 0, got {expected_version!r}")
    if checkpoint.version != expected_version + 1:
        raise ValueError(
            f"checkpoint {checkpoint.checkpoint_id!r} has version {checkpoint.version}, but a "
            f"write based on version {expected_version} must have version {expected_version + 1}"
        )


def check_list_args(limit: int | None) -> None:
    """Refuse a negative or non-int limit."""
    if limit is not None and (type(limit) is not int or limit < 0):
        raise ValueError(f"limit must be an int >= 0 or None, got {limit!r}")


def window(
    ordered: Sequence[T],
    versions: Sequence[int],
    before: int | None,
    after: int | None,
    limit: int | None,
) -> builtins.list[T]:
    """The items (sorted by version) strictly between the cursors, ``limit`` nearest the cursor."""
    chosen = [
        item
        for item, version in zip(ordered, versions, strict=True)
        if (before is None or version < before) and (after is None or version > after)
    ]
    if limit is None:
        return chosen
    if before is not None and after is None:
        return chosen[len(chosen) - limit :] if limit else []
    return chosen[:limit]


def rebased_child(
    deleted: Checkpoint, child: Checkpoint, state_at: Callable[[str], dict[str, Any]]
) -> Checkpoint:
    """``child`` rewritten so it no longer needs ``deleted``, its parent, to load.

    A delta becomes a delta against the deleted checkpoint's parent, or a
    snapshot when the deleted one was a snapshot (so loads stay bounded).
    """
    if child.kind == "snapshot":
        return child.replace(parent_id=deleted.parent_id)
    full = state_at(child.checkpoint_id)
    if deleted.kind == "snapshot" or deleted.parent_id is None:
        return child.replace(kind="snapshot", values=full, parent_id=deleted.parent_id)
    return child.replace(
        values=diff_state(state_at(deleted.parent_id), full), parent_id=deleted.parent_id
    )


def walk_chain(checkpoint_id: str, load: Callable[[str], Checkpoint]) -> builtins.list[Checkpoint]:
    """The checkpoints from the nearest snapshot up to ``checkpoint_id``, loaded one by one."""
    chain = [load(checkpoint_id)]
    seen = {checkpoint_id}
    while chain[-1].kind == "delta":
        parent = chain[-1].parent_id
        assert parent is not None  # a delta always has one (Checkpoint checks)
        child = chain[-1]
        if parent in seen or len(chain) > MAX_CHAIN:
            raise CheckpointDecodeError(
                child.checkpoint_id,
                "parent_id",
                f"its parent {parent!r} leads back to itself",
                run_id=child.run_id,
            )
        seen.add(parent)
        try:
            loaded = load(parent)
        except CheckpointNotFound as exc:
            raise CheckpointDecodeError(
                child.checkpoint_id,
                "parent_id",
                f"its parent {parent!r} is missing",
                run_id=child.run_id,
            ) from exc
        if loaded.run_id != child.run_id:  # deltas never cross runs: see materialize
            raise CheckpointDecodeError(
                child.checkpoint_id,
                "parent_id",
                f"a delta's parent {parent!r} belongs to run {loaded.run_id!r}",
                run_id=child.run_id,
            )
        chain.append(loaded)
    chain.reverse()
    return chain


def batch_saver(store: object) -> Callable[[Sequence[Checkpoint]], None] | None:
    """The store's ``save_batch`` when it stores a batch in one transaction, else None.

    SQLite's and PostgreSQL's do (a store of another kind says so with a true
    ``_batches_in_one_transaction``).

    None too when the store's saves go through code a batch would skip: a subclass's
    or an instance's own ``save``, or a ``_save`` newer than the class's batch saving.
    Such a store, and one without batches, is best given checkpoints one at a time.
    """
    if not isinstance(store, BlockingStore):
        return _own_batch_saver(store)
    cls, own = type(store), vars(store)
    batches = _owner(cls, "_save_batch")
    if batches is BlockingStore or "save" in own or "_save" in own or "save_batch" in own:
        return None
    if cls.save is not BlockingStore.save or not issubclass(batches, _owner(cls, "_save")):
        return None
    return store.save_batch


def _own_batch_saver(store: object) -> Callable[[Sequence[Checkpoint]], None] | None:
    """A store of its own kind's transactional ``save_batch`` (PostgreSQL's), as above."""
    cls = type(store)
    if not getattr(cls, "_batches_in_one_transaction", False) or not hasattr(cls, "save_batch"):
        return None
    own = vars(store) if hasattr(store, "__dict__") else {}
    if "save" in own or "save_batch" in own or _owner(cls, "save") is not _owner(cls, "save_batch"):
        return None  # saves pass through code a batch would skip
    saver: Callable[[Sequence[Checkpoint]], None] = getattr(store, "save_batch")  # noqa: B009
    return saver


def _owner(cls: type, name: str) -> type:
    return next(klass for klass in cls.__mro__ if name in vars(klass))


class BlockingStore(ABC):
    """A store whose work is blocking calls: sync methods do it, async ones run it off the loop.

    Subclasses implement the ``_``-prefixed primitives; argument checks and the
    async forms live here, once.
    """

    _in_thread: bool = True
    """Whether async methods run the work in a worker thread (False: it never blocks)."""

    # -- primitives -----------------------------------------------------------

    @abstractmethod
    def _save(self, checkpoint: Checkpoint, expected_version: int) -> None: ...

    @abstractmethod
    def _load(self, checkpoint_id: str) -> Checkpoint: ...

    @abstractmethod
    def _list(
        self, run_id: str, limit: int | None, before: str | None, after: str | None
    ) -> builtins.list[Checkpoint]: ...

    @abstractmethod
    def _delete(self, checkpoint_id: str) -> bool: ...

    @abstractmethod
    def _delete_run(self, run_id: str) -> int: ...

    @abstractmethod
    def _head(self, run_id: str) -> Checkpoint | None: ...

    @abstractmethod
    def _list_runs(self, limit: int | None) -> builtins.list[str]: ...

    @abstractmethod
    def _put_writes(
        self, run_id: str, checkpoint_id: str, task_id: str, writes: builtins.list[Any]
    ) -> None: ...

    def _chain(self, checkpoint_id: str) -> builtins.list[Checkpoint]:
        return walk_chain(checkpoint_id, self._load)

    def _close(self) -> None:
        return None

    # -- sync API ---------------------------------------------------------------

    def save(self, checkpoint: Checkpoint, *, expected_version: int) -> None:
        """See :meth:`CheckpointStore.asave`."""
        check_save(checkpoint, expected_version)
        self._save(checkpoint, expected_version)

    def save_batch(self, checkpoints: Sequence[Checkpoint]) -> None:
        """Save consecutive checkpoints of one run, each on the one before it.

        As :meth:`save` each with ``expected_version=checkpoint.version - 1``, in
        order. A store that can stores them in one transaction, all or none (SQLite,
        see :func:`batch_saver`); the others save them one by one.
        """
        for checkpoint in checkpoints:
            check_save(checkpoint, checkpoint.version - 1)
        self._save_batch(checkpoints)

    def _save_batch(self, checkpoints: Sequence[Checkpoint]) -> None:
        for checkpoint in checkpoints:
            self._save(checkpoint, checkpoint.version - 1)

    def load(self, checkpoint_id: str) -> Checkpoint:
        """See :meth:`CheckpointStore.aload`."""
        return self._load(checkpoint_id)

    def load_state(self, checkpoint_id: str) -> dict[str, Any]:
        """See :meth:`CheckpointStore.aload_state`."""
        return materialize(self._chain(checkpoint_id), owned=True)

    def list(
        self,
        run_id: str,
        *,
        limit: int | None = None,
        before: str | None = None,
        after: str | None = None,
    ) -> builtins.list[Checkpoint]:
        """See :meth:`CheckpointStore.alist`."""
        check_list_args(limit)
        return self._list(run_id, limit, before, after)

    def delete(self, checkpoint_id: str) -> bool:
        """See :meth:`CheckpointStore.adelete`."""
        return self._delete(checkpoint_id)

    def delete_run(self, run_id: str) -> int:
        """See :meth:`CheckpointStore.adelete_run`."""
        return self._delete_run(run_id)

    def head(self, run_id: str) -> Checkpoint | None:
        """See :meth:`CheckpointStore.ahead`."""
        return self._head(run_id)

    def runs(self, *, limit: int | None = None) -> builtins.list[str]:
        """See :meth:`CheckpointStore.aruns`."""
        check_list_args(limit)
        return self._list_runs(limit)

    def put_writes(
        self, run_id: str, checkpoint_id: str, task_id: str, writes: Sequence[Any]
    ) -> None:
        """See :meth:`CheckpointStore.aput_writes`."""
        if type(task_id) is not str or not task_id:
            raise ValueError(f"task_id must be a non-empty string, got {task_id!r}")
        self._put_writes(run_id, checkpoint_id, task_id, builtins.list(writes))

    def close(self) -> None:
        """See :meth:`CheckpointStore.aclose`."""
        self._close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- async API --------------------------------------------------------------

    async def _run(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if not self._in_thread:
            return function(*args, **kwargs)
        return await asyncio.to_thread(function, *args, **kwargs)

    async def asave(self, checkpoint: Checkpoint, *, expected_version: int) -> None:
        """See :meth:`CheckpointStore.asave`."""
        await self._run(self.save, checkpoint, expected_version=expected_version)

    async def aload(self, checkpoint_id: str) -> Checkpoint:
        """See :meth:`CheckpointStore.aload`."""
        return await self._run(self.load, checkpoint_id)

    async def aload_state(self, checkpoint_id: str) -> dict[str, Any]:
        """See :meth:`CheckpointStore.aload_state`."""
        return await self._run(self.load_state, checkpoint_id)

    async def alist(
        self,
        run_id: str,
        *,
        limit: int | None = None,
        before: str | None = None,
        after: str | None = None,
    ) -> builtins.list[Checkpoint]:
        """See :meth:`CheckpointStore.alist`."""
        return await self._run(self.list, run_id, limit=limit, before=before, after=after)

    async def adelete(self, checkpoint_id: str) -> bool:
        """See :meth:`CheckpointStore.adelete`."""
        return await self._run(self.delete, checkpoint_id)

    async def adelete_run(self, run_id: str) -> int:
        """See :meth:`CheckpointStore.adelete_run`."""
        return await self._run(self.delete_run, run_id)

    async def ahead(self, run_id: str) -> Checkpoint | None:
        """See :meth:`CheckpointStore.ahead`."""
        return await self._run(self.head, run_id)

    async def aruns(self, *, limit: int | None = None) -> builtins.list[str]:
        """See :meth:`CheckpointStore.aruns`."""
        return await self._run(self.runs, limit=limit)

    async def aput_writes(
        self, run_id: str, checkpoint_id: str, task_id: str, writes: Sequence[Any]
    ) -> None:
        """See :meth:`CheckpointStore.aput_writes`."""
        await self._run(self.put_writes, run_id, checkpoint_id, task_id, writes)

    async def aclose(self) -> None:
        """See :meth:`CheckpointStore.aclose`."""
        await self._run(self.close)


class Portal:
    """An event loop on a thread of its own, for stores whose client is bound to one loop.

    Async callers from any loop, and sync callers from plain code or from inside
    a running loop, all reach the client through this one loop.
    """

    def __init__(self, name: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()
        self.closed = False

    def call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the portal's loop and wait for it (blocking)."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def acall(self, coroutine: Coroutine[Any, Any, T]) -> Awaitable[T]:
        """Run ``coroutine`` on the portal's loop; await the result from any loop."""
        return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coroutine, self._loop))

    def close(self) -> None:
        """Stop the loop and its thread."""
        if self.closed:
            return
        self.closed = True
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()
