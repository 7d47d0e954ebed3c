"""A2A execution: one A2A message answered by a turn of a served graph, as task events.

The A2A context is the conversation, so its id is the thread's id: a message with
a new context starts a thread, a later one on that context continues it. The task
is the run that answers: text deltas stream into the task's ``reply`` artifact, and
the run's end sets the task's state (``completed``, ``input-required`` for a
question, ``canceled``, ``failed``/``rejected`` for a :class:`ServeError`). The
client's next message on an ``input-required`` task (naming the task, or only its
context) is the answer: the thread has a pending question, so the turn resumes the
run and the same task goes on. Canceling a task drops the question: the next
message on the context starts a new run.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Mapping
from typing import Any, Final

from a2a.helpers import get_data_parts, get_text_parts, new_data_part, new_task
from a2a.server.agent_execution import (
    AgentExecutor,
    RequestContext,
    SimpleRequestContextBuilder,
)
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import TaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    SendMessageRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError

from selectgraph.serve._a2a_tasks import ContextTaskIds
from selectgraph.serve._turns import ServedGraph, ServeError, Turn

__all__ = ["REPLY_ARTIFACT", "CheckedRequests", "GraphExecutor", "GraphRequests", "message_input"]

REPLY_ARTIFACT: Final = "reply"
"""The name of the artifact a task's answer is in (streamed, then final)."""


def message_input(message: Message | None, agent: str) -> str | Mapping[str, Any]:
    """What an A2A message says to the graph: its text, or its one JSON object.

    Text parts are joined by newlines; a message without text may carry a data part
    holding a JSON object, which is a partial state update (or a structured answer).

    Raises:
        InvalidParamsError: the message has neither text nor one JSON object.
    """
    if message is None:
        raise InvalidParamsError(message=f"a message to the agent {agent!r} is missing")
    texts = get_text_parts(message.parts)
    if texts:
        return "\n".join(texts)
    data = get_data_parts(message.parts)
    if len(data) == 1 and isinstance(data[0], dict):
        return data[0]
    raise InvalidParamsError(
        message=(
            f"the message to the agent {agent!r} has no text part (and no single data part "
            "holding a JSON object); send the input as text"
        )
    )


class CheckedRequests(SimpleRequestContextBuilder):
    """The SDK's request contexts, for messages the graph can take only.

    A message that says nothing the graph can take is refused here, before the SDK
    makes a task of it: the client gets an invalid-params error, and no failed task
    (nor an error in the server's log) is left behind. A message on a context whose
    task waits for input, naming no task, goes to that task: the thread's run waits
    on its answer, so the waiting task is the one that goes on.
    """

    def __init__(self, agent: str, tasks: TaskStore) -> None:
        """Check messages to the agent named ``agent``, whose tasks ``tasks`` keeps."""
        # New task ids carry their context's, so a store finds a task from its id.
        super().__init__(task_id_generator=ContextTaskIds())
        self._agent = agent
        self._tasks = tasks

    async def build(
        self,
        context: ServerCallContext,
        params: SendMessageRequest | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
        task: Task | None = None,
    ) -> RequestContext:
        """The request's context, once its message is known to say something.

        Raises:
            InvalidParamsError: the message has neither text nor one JSON object.
        """
        if params is not None:
            message_input(params.message, self._agent)
            if task_id is None and context_id:
                task_id = await self._waiting(context_id, context)
            elif task_id is not None and not context_id:
                named = task or await self._tasks.get(task_id, context)
                context_id = None if named is None else named.context_id
            if not context_id:
                context_id = str(uuid.uuid4())  # a new conversation, named before its task
        return await super().build(context, params, task_id, context_id, task)

    async def _waiting(self, context_id: str, context: ServerCallContext) -> str | None:
        """The context's task waiting for input, if there is one."""
        waiting = TaskState.TASK_STATE_INPUT_REQUIRED
        query = ListTasksRequest(context_id=context_id, status=waiting, page_size=1)
        found = await self._tasks.list(query, context)
        return found.tasks[0].id if found.tasks else None


class GraphRequests(DefaultRequestHandler):
    """The SDK's request handler, where cancelling a task also drops its question.

    A task canceled while it waits for input (a question, a pause) leaves nothing
    waiting on its thread: the next message on the context starts a new run. This
    holds whether the task's run is in this process or not (after a restart, the SDK
    cancels a stored task without the executor).
    """

    def __init__(self, served: ServedGraph, **options: Any) -> None:
        """The SDK's handler for ``served``, given the handler's own ``options``."""
        super().__init__(**options)
        self._served = served

    async def on_cancel_task(
        self, params: CancelTaskRequest, context: ServerCallContext
    ) -> Task | None:
        """Cancel the task (see the SDK), then drop what its thread waits on."""
        task: Task | None = await super().on_cancel_task(params, context)
        if task is not None and task.context_id:
            with contextlib.suppress(ServeError):  # a context that is no thread waits on nothing
                await self._served.drop_question(task.context_id)
        return task


class GraphExecutor(AgentExecutor):
    """The SDK's agent executor for one served graph."""

    def __init__(self, served: ServedGraph) -> None:
        """Answer messages with ``served``."""
        self._served = served
        self._cancelling: set[str] = set()
        """Tasks whose cancel() is under way: it, not execute(), says ``canceled``."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Answer the context's message with a turn on its thread, as task events.

        Raises:
            InvalidParamsError: the message says nothing the graph can take.
        """
        message = message_input(context.message, self._served.name)
        task_id, context_id = _ids(context)
        if context.current_task is None:
            history = [] if context.message is None else [context.message]
            await event_queue.enqueue_event(
                new_task(task_id, context_id, TaskState.TASK_STATE_SUBMITTED, history=history)
            )
        updater = TaskUpdater(event_queue, task_id, context_id)
        await updater.start_work()
        try:
            turn = await self._answer(updater, message, context_id)
            if turn is not None:
                await self._finish(updater, turn)
        finally:
            self._cancelling.discard(task_id)  # a cancel() under way is over with the run

    async def _answer(
        self, updater: TaskUpdater, message: str | Mapping[str, Any], thread_id: str
    ) -> Turn | None:
        """The turn, its deltas streamed into the reply artifact; None when it was refused."""
        streamed = False
        turn: Turn | None = None
        try:
            async for item in self._served.stream(message, thread_id=thread_id):
                if isinstance(item, Turn):
                    turn = item
                    continue
                # Every delta is one more part of the reply artifact, as it is made.
                await updater.add_artifact(
                    [Part(text=item)],
                    artifact_id=_artifact_id(updater),
                    name=REPLY_ARTIFACT,
                    append=streamed,
                )
                streamed = True
        except ServeError as error:
            refusal = updater.new_agent_message([Part(text=error.message)])
            if 400 <= error.status < 500:
                await updater.reject(refusal)  # the input was refused: sending it again won't do
            else:
                await updater.failed(refusal)
            return None
        assert turn is not None  # stream() ends with a Turn or raises
        return turn

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Stop the task's run (if it is running) and say the task is canceled."""
        task_id, context_id = _ids(context)
        self._cancelling.add(task_id)
        try:
            running = await self._served.cancel(context_id)
        except BaseException:
            self._cancelling.discard(task_id)
            raise
        if not running:  # else execute() forgets it, once it saw its run stop
            self._cancelling.discard(task_id)
        await TaskUpdater(event_queue, task_id, context_id).cancel()

    async def _finish(self, updater: TaskUpdater, turn: Turn) -> None:
        """The task's state for how the turn ended."""
        ids = {"thread_id": turn.thread_id, "run_id": turn.run_id}
        if turn.status == "cancelled":
            if updater.task_id not in self._cancelling:  # cancelled by another protocol
                await updater.cancel(updater.new_agent_message([Part(text=turn.reply)]))
            return
        if turn.status == "interrupted" and turn.question is not None:
            parts = [Part(text=turn.reply), new_data_part(turn.question.as_json())]
            await updater.requires_input(updater.new_agent_message(parts, metadata=ids))
            return
        if turn.status == "paused":  # the next message on the task continues the run
            await updater.requires_input(updater.new_agent_message([Part(text=turn.reply)], ids))
            return
        parts = [Part(text=turn.reply)]
        if isinstance(turn.output, dict | list):
            parts.append(new_data_part(turn.output))
        # The final answer replaces what streamed: deltas came from every node, the
        # reply is the graph's final message alone.
        await updater.add_artifact(
            parts,
            artifact_id=_artifact_id(updater),
            name=REPLY_ARTIFACT,
            metadata=ids,
            last_chunk=True,
        )
        await updater.complete()


def _artifact_id(updater: TaskUpdater) -> str:
    """The task's one reply artifact: a task going on after a question starts it afresh."""
    return f"{updater.task_id}-{REPLY_ARTIFACT}"


def _ids(context: RequestContext) -> tuple[str, str]:
    """The task's and the context's ids (the SDK makes both before execute)."""
    task_id, context_id = context.task_id, context.context_id
    if not task_id or not context_id:
        raise InvalidParamsError(message="the request names no task or context")
    return task_id, context_id
