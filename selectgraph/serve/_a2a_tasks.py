"""A2A tasks kept in the server's checkpoint store, beside the conversations they ran.

A task belongs to a context, and a context is a thread, so each task is kept in
its thread's metadata (``a2a_task:<id>``), as the SDK's JSON of the ``Task``: any
server on the same store (after a restart, or another process) finds it. A task id
carries its context's id (:class:`ContextTaskIds`), so reading a task is one read of
its thread.

A task is written to the store when its state changes (submitted, working,
input-required, completed...), once its thread exists (a run claimed it); the
updates in between (streamed reply deltas) and tasks whose thread never came to be
(input refused before a run started) are kept in memory, and read from there first.
Listing hands the candidates to the SDK's in-memory store, so filters, order and
page tokens are the SDK's own.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from collections import OrderedDict
from typing import Any, Final

from a2a.server.context import ServerCallContext
from a2a.server.id_generator import IDGenerator, IDGeneratorContext
from a2a.server.owner_resolver import OwnerResolver, resolve_user_scope
from a2a.server.tasks import InMemoryTaskStore, TaskStore
from a2a.types.a2a_pb2 import ListTasksRequest, ListTasksResponse, Task, TaskState
from google.protobuf.json_format import (  # type: ignore[import-untyped]
    MessageToDict,
    ParseDict,
    ParseError,
)

from selectgraph.core._errors import ResumeError, ThreadIdError
from selectgraph.persistence._threads import Thread, ThreadStore

__all__ = ["AGENT_KEY", "SETTLED", "TASK_KEY", "ContextTaskIds", "StoredTasks", "context_of_task"]

TASK_KEY: Final = "a2a_task:"
"""Thread metadata keys holding a task: this prefix, then the task's id."""
AGENT_KEY: Final = "a2a_agent:"
"""Thread metadata keys marking a thread with tasks of an agent: this prefix, then its path."""
_MEMORY: Final = 10_000
"""Tasks kept in memory at most (those the store does not hold yet come first)."""
_UUID_HEX: Final = 32
SETTLED: Final = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
        TaskState.TASK_STATE_INPUT_REQUIRED,
        TaskState.TASK_STATE_AUTH_REQUIRED,
    }
)
"""States a task waits in for nothing this process does: final, or waiting on the client."""


class ContextTaskIds(IDGenerator):
    """New task ids that carry their context's id, so a task is found from its id alone."""

    def generate(self, context: IDGeneratorContext) -> str:
        """A fresh task id: 32 hex digits, then the context id in URL-safe base64."""
        encoded = base64.urlsafe_b64encode((context.context_id or "").encode()).decode()
        return f"{uuid.uuid4().hex}{encoded.rstrip('=')}"


def context_of_task(task_id: str) -> str | None:
    """The context id a :class:`ContextTaskIds` id carries; None for any other id."""
    encoded = task_id[_UUID_HEX:]
    if not encoded:
        return None
    try:
        padded = encoded + "=" * (-len(encoded) % 4)
        return base64.urlsafe_b64decode(padded.encode()).decode()
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return None


class StoredTasks(TaskStore):
    """The SDK's task store for one agent, kept in the thread metadata of ``store``."""

    def __init__(
        self,
        store: ThreadStore,
        agent: str,
        *,
        owner_resolver: OwnerResolver = resolve_user_scope,
    ) -> None:
        """Keep the tasks of the agent at path ``agent`` in ``store``'s threads."""
        self._store = store
        self._agent = agent
        self._owner = owner_resolver
        self._memory: OrderedDict[str, tuple[str, Task]] = OrderedDict()
        """Task id -> (owner, task) for tasks newer than the store's copy."""
        self._stored_state: dict[str, int] = {}
        """Task id -> the state last written to the store."""

    async def save(self, task: Task, context: ServerCallContext) -> None:
        """Keep ``task``: in the store when its state changed, in memory until then."""
        owner = self._owner(context)
        copy = Task()
        copy.CopyFrom(task)
        self._remember(task.id, owner, copy)
        if self._stored_state.get(task.id) == task.status.state:
            return  # a reply delta: the store gets it with the next change of state
        thread = await self._thread(task.context_id)
        if thread is None:
            return  # no run claimed the thread (yet): memory keeps it
        record = {"agent": self._agent, "owner": owner, "task": MessageToDict(copy)}
        metadata = {f"{TASK_KEY}{task.id}": record, f"{AGENT_KEY}{self._agent}": True}
        try:
            await self._store.aupdate_thread(task.context_id, metadata=metadata)
        except ResumeError:
            return  # the thread was deleted meanwhile: memory keeps the task
        self._stored_state[task.id] = task.status.state
        if task.status.state in SETTLED:
            # No more updates come from this process: the store's copy is the one to
            # read, whichever server goes on with the task.
            self._memory.pop(task.id, None)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        """The task, if it is this agent's and the caller's."""
        owner = self._owner(context)
        held = self._memory.get(task_id)
        if held is not None:
            return _copy(held[1]) if held[0] == owner else None
        context_id = context_of_task(task_id)
        if context_id is None:
            return None
        thread = await self._thread(context_id)
        if thread is None:
            return None
        return self._task(thread.metadata.get(f"{TASK_KEY}{task_id}"), owner)

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        """The caller's tasks of this agent, filtered and paged as the SDK's stores do."""
        owner = self._owner(context)
        found: dict[str, Task] = {}
        if params.context_id:
            thread = await self._thread(params.context_id)
            threads = [] if thread is None else [thread]
        else:
            threads = await self._store.alist_threads(metadata={f"{AGENT_KEY}{self._agent}": True})
        for thread in threads:
            for key, value in thread.metadata.items():
                if key.startswith(TASK_KEY) and (task := self._task(value, owner)) is not None:
                    found[task.id] = task
        for held_owner, task in self._memory.values():
            if held_owner == owner:
                found[task.id] = task
        pages = InMemoryTaskStore(owner_resolver=lambda _: owner)
        for task in found.values():
            await pages.save(task, context)
        return await pages.list(params, context)

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        """Forget the task, if it is the caller's."""
        if await self.get(task_id, context) is None:
            return
        self._memory.pop(task_id, None)
        self._stored_state.pop(task_id, None)
        context_id = context_of_task(task_id)
        if context_id is not None and await self._thread(context_id) is not None:
            await self._store.aupdate_thread(context_id, metadata={f"{TASK_KEY}{task_id}": None})

    # ------------------------------------------------------------ internals
    async def _thread(self, context_id: str) -> Thread | None:
        """The context's thread; None when there is none, or the id cannot name one."""
        try:
            return await self._store.aget_thread(context_id)
        except ThreadIdError:
            return None  # refused before a run (the task says why): no thread to keep it in

    def _remember(self, task_id: str, owner: str, task: Task) -> None:
        self._memory[task_id] = (owner, task)
        self._memory.move_to_end(task_id)
        while len(self._memory) > _MEMORY:
            dropped, _ = self._memory.popitem(last=False)
            self._stored_state.pop(dropped, None)

    def _task(self, record: Any, owner: str) -> Task | None:
        """The task a metadata record holds, if it is this agent's and ``owner``'s."""
        if not isinstance(record, dict) or record.get("agent") != self._agent:
            return None
        if record.get("owner") != owner or not isinstance(record.get("task"), dict):
            return None
        try:
            task: Task = ParseDict(record["task"], Task(), ignore_unknown_fields=True)
        except ParseError:
            return None  # written by an incompatible SDK: not a task this server can serve
        return task


def _copy(task: Task) -> Task:
    copy = Task()
    copy.CopyFrom(task)
    return copy
