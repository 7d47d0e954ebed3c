"""Turns: one message from a client, answered by a run on the conversation's thread.

Every protocol the server speaks (OpenAI-compatible, MCP, A2A) reduces to the same
step: a client sends a message on a conversation, the graph answers it. A
conversation is a thread in the store, so it continues run after run and outlives
the process. When the thread's run waits on a question (a generator node's
interrupt), the next message is the answer; otherwise it starts a new run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from selectgraph.build._builder import AgentGraph
from selectgraph.build._input import graph_input
from selectgraph.build._output import final_output
from selectgraph.core._errors import (
    AnswerInvalid,
    ResumeError,
    SelectGraphError,
    ThreadBusy,
    ThreadIdError,
)
from selectgraph.core._interrupts import Interrupt
from selectgraph.core._result import GraphResult
from selectgraph.core._run_errors import GraphRunError, StateValidationError
from selectgraph.observe._codec import json_value
from selectgraph.observe._events import GraphEvent, NodeChunk
from selectgraph.persistence._memory import InMemoryCheckpointStore
from selectgraph.persistence._protocol import CheckpointStore
from selectgraph.persistence._threads import ThreadStore, check_thread_id
from selectgraph.runtime._thread_view import ThreadSnapshot, get_thread

__all__ = ["DROPPED_KEY", "Question", "ServeError", "ServedGraph", "Turn", "TurnStatus"]

TurnStatus = Literal["done", "interrupted", "paused", "cancelled"]
"""How a turn ended.

- ``"done"``: the run reached its end; ``reply`` is the graph's final message.
- ``"interrupted"``: a node asked a question; the next message answers it.
- ``"paused"``: the run stopped before its end (a pause gate, a budget, a step limit);
  the next message continues it.
- ``"cancelled"``: :meth:`ServedGraph.cancel` stopped it; the thread keeps what it
  completed, and the next message starts a new run from there.
"""

DROPPED_KEY: Final = "serve_dropped"
"""The thread metadata key naming the checkpoint whose question was dropped."""
_DONE: Final = object()
"""Marks the end of a stream's deltas."""


class ServeError(SelectGraphError):
    """A message the server cannot answer; ``status`` is the HTTP status that says why.

    400: the request is malformed (a bad thread id); 404: no such thread; 409: the
    thread is busy; 422: the graph refuses the input or the answer; 500: the run failed.
    """

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        """The HTTP status to answer with."""
        self.message = message
        """What was wrong."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Question:
    """A question the thread's run waits on: the client's next message answers it."""

    interrupt_id: str
    """What the answer resumes (``graph.resume(interrupt_id, answer)``)."""
    node: str
    """The node that asked."""
    prompt: str
    """The question."""
    payload: Any
    """What the node attached to it (JSON data)."""
    response_schema: dict[str, Any] | None
    """The JSON schema the answer must fit; None when any text will do."""

    @classmethod
    def of(cls, interrupt: Interrupt) -> Question:
        """The question an interrupt asks."""
        return cls(
            interrupt_id=interrupt.id,
            node=interrupt.node,
            prompt=interrupt.prompt,
            payload=json_value(interrupt.payload),
            response_schema=interrupt.response_schema,
        )

    def text(self) -> str:
        """The question as a chat reply: the prompt, what it is about, and how to answer."""
        lines = [self.prompt or f"The node {self.node!r} asks for an answer."]
        if self.payload is not None:
            lines.append(json.dumps(self.payload, indent=2, ensure_ascii=False))
        if self.response_schema is None:
            lines.append("Reply with your answer as your next message.")
        else:
            schema = json.dumps(self.response_schema, ensure_ascii=False)
            lines.append(f"Reply with your answer as JSON fitting this schema: {schema}")
        return "\n\n".join(lines)

    def as_json(self) -> dict[str, Any]:
        """The question as JSON data, for a protocol's structured fields."""
        return {
            "interrupt_id": self.interrupt_id,
            "node": self.node,
            "prompt": self.prompt,
            "payload": self.payload,
            "response_schema": self.response_schema,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Turn:
    """One answered message."""

    thread_id: str
    """The conversation's thread: send it back to continue the conversation."""
    run_id: str
    """The run that answered."""
    status: TurnStatus
    """How the run ended (a failed run raises :class:`ServeError` instead)."""
    reply: str
    """What to show the client: the final message, the question, or why it stopped."""
    output: Any
    """The run's final content as JSON data (a structured output's fields, or the text)."""
    question: Question | None
    """The pending question when ``status`` is ``"interrupted"``."""
    input_tokens: int
    """Prompt tokens of every model call of the run."""
    output_tokens: int
    """Completion tokens of every model call of the run."""
    cost_usd: float | None
    """What the calls cost; None when a model's price is unknown."""

    def as_json(self) -> dict[str, Any]:
        """The turn as JSON data, for a protocol's structured fields."""
        return {
            "thread_id": self.thread_id,
            "run_id": self.run_id,
            "status": self.status,
            "reply": self.reply,
            "output": self.output,
            "question": None if self.question is None else self.question.as_json(),
        }


class ServedGraph:
    """One graph served to clients, each conversation a thread of its store.

    ``source`` is what the graph came from when it is not an AgentGraph itself (a
    SupervisorAgent, a research app): its ``graph_input`` shapes text input.

    Example:
        >>> import asyncio
        >>> from selectgraph import END, AgentGraph
        >>> graph = AgentGraph("echo")
        >>> _ = graph.add_node("echo", lambda s: {"said": s.messages[-1].text}, next_node=END)
        >>> served = ServedGraph(graph)
        >>> asyncio.run(served.turn("hi")).output
        {'said': 'hi'}
    """

    def __init__(
        self,
        graph: AgentGraph,
        *,
        source: Any = None,
        name: str | None = None,
        description: str | None = None,
        store: CheckpointStore | None = None,
        multitask_strategy: Literal["reject", "enqueue", "interrupt", "rollback"] = "enqueue",
    ) -> None:
        """Serve ``graph``; conversations are threads of ``store`` (in memory by default).

        Raises:
            TypeError: ``graph`` is not an AgentGraph, or the store keeps no threads.
        """
        if not isinstance(graph, AgentGraph):
            raise TypeError(f"ServedGraph serves an AgentGraph, got {type(graph).__name__}")
        self.graph = graph
        """The graph that answers."""
        self.source: Any = graph if source is None else source
        """What the graph came from (an AgentGraph, a SupervisorAgent...)."""
        self.name = name or graph.name
        """What clients call it: the OpenAI model, the MCP tool, the A2A agent."""
        self.description = (
            description or graph.description or f"The selectgraph graph {self.name!r}."
        )
        """What it does, for model listings, tool descriptions and agent cards."""
        self.store: CheckpointStore = InMemoryCheckpointStore() if store is None else store
        """Where its conversations are kept."""
        if not isinstance(self.store, ThreadStore):
            raise TypeError(
                f"{type(self.store).__name__} keeps no threads, so it cannot hold conversations; "
                "use one of the stores selectgraph ships"
            )
        self.multitask_strategy = multitask_strategy
        """What a message for a thread that is still answering does (see threads)."""
        self._compiled = graph.compile()
        self._running: dict[str, set[asyncio.Task[GraphResult]]] = {}

    @property
    def input_schema(self) -> dict[str, Any]:
        """The JSON schema of a call's arguments, for tool listings."""
        return {
            "type": "object",
            "properties": {
                "input": {
                    "type": "string",
                    "description": "The message for the graph, or the answer to its question.",
                },
                "thread_id": {
                    "type": "string",
                    "description": "The conversation to continue; omit it to start one.",
                },
            },
            "required": ["input"],
        }

    def new_thread_id(self) -> str:
        """A fresh conversation's id."""
        return uuid.uuid4().hex

    async def turn(
        self, message: str | Mapping[str, Any] | None, *, thread_id: str | None = None
    ) -> Turn:
        """Answer ``message`` on ``thread_id`` (a new thread when None).

        Raises:
            ServeError: the message cannot be answered (see its ``status``).
        """
        final: Turn | None = None
        async for item in self.stream(message, thread_id=thread_id):
            if isinstance(item, Turn):
                final = item
        assert final is not None  # stream always ends with a Turn or raises
        return final

    async def stream(
        self, message: str | Mapping[str, Any] | None, *, thread_id: str | None = None
    ) -> AsyncGenerator[str | Turn, None]:
        """Text deltas as the graph's nodes stream them, then one final :class:`Turn`.

        Deltas come from every streaming node of the run (each agent's text as it is
        made); the Turn's ``reply`` is the final message alone.

        Raises:
            ServeError: the message cannot be answered (see its ``status``).
        """
        thread_id = self._thread_id(thread_id)
        deltas: asyncio.Queue[object] = asyncio.Queue()

        def listen(event: GraphEvent) -> None:
            if isinstance(event, NodeChunk) and event.delta:
                deltas.put_nowait(event.delta)

        work, run_id = await self._start(message, thread_id, listen)
        task = asyncio.ensure_future(work)
        running = self._running.setdefault(thread_id, set())
        running.add(task)
        task.add_done_callback(lambda _: deltas.put_nowait(_DONE))
        try:
            while (item := await deltas.get()) is not _DONE:
                assert isinstance(item, str)
                yield item
            result = await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                task.cancel()  # the client went away: so does its run
                raise
            yield _cancelled(thread_id, run_id)  # stopped by cancel()
            return
        except Exception as error:  # the run failed: answered as a 500, the thread kept
            raise _refusal(error, thread_id) from error
        finally:
            if not task.done():  # the consumer stopped early (a client that went away)
                task.cancel()
            running.discard(task)
            if not running:
                self._running.pop(thread_id, None)
        yield _turn(result, thread_id)

    async def cancel(self, thread_id: str) -> bool:
        """Stop the thread's runs that this server is running; False when there are none."""
        tasks = {task for task in self._running.get(thread_id, ()) if not task.done()}
        for task in tasks:
            task.cancel()
        if tasks:
            with contextlib.suppress(BaseException):
                await asyncio.wait(tasks)
        return bool(tasks)

    async def drop_question(self, thread_id: str) -> bool:
        """Drop what the thread's run waits on (a question, a pause); False if nothing.

        The next message then starts a new run from the thread's state instead of
        answering the question (or continuing the paused run): the waiting run is
        superseded, as by the ``"interrupt"`` strategy. The mark is kept in the
        thread's metadata, so it holds for any server on the store.
        """
        snapshot = await self._snapshot(self._thread_id(thread_id))
        if snapshot is None or snapshot.state is None:
            return False
        if snapshot.status not in ("interrupted", "paused"):
            return False
        store = self.store
        assert isinstance(store, ThreadStore)  # refused in __init__ otherwise
        await store.aupdate_thread(thread_id, metadata={DROPPED_KEY: snapshot.state.checkpoint_id})
        return True

    # ------------------------------------------------------------ internals
    def _thread_id(self, thread_id: str | None) -> str:
        if thread_id is None:
            return self.new_thread_id()
        try:
            check_thread_id(thread_id)
        except ThreadIdError as error:
            raise ServeError(400, str(error)) from None
        return thread_id

    async def _snapshot(self, thread_id: str) -> ThreadSnapshot | None:
        compiled = self._compiled
        try:
            return await get_thread(compiled, self.store, thread_id, compiled.serializer, False)
        except ResumeError:
            return None  # a new conversation
        except SelectGraphError as error:
            raise ServeError(500, f"thread {thread_id!r} cannot be read: {error}") from None

    async def _start(
        self, message: str | Mapping[str, Any] | None, thread_id: str, listen: Any
    ) -> tuple[Any, str]:
        """The run answering ``message`` and its id: the question's resume, or a new run."""
        graph, store = self.graph, self.store
        snapshot = await self._snapshot(thread_id)
        strategy = self.multitask_strategy
        if _dropped(snapshot):
            snapshot, strategy = None, "interrupt"  # a new run supersedes the waiting one
        try:
            if snapshot is not None and snapshot.status == "interrupted" and snapshot.interrupts:
                question: Interrupt = snapshot.interrupts[0]
                answer = _answer(question, message)
                resumed = graph.aresume(
                    question.id, answer, checkpoint_store=store, observers=[listen]
                )
                return resumed, question.run_id
            if snapshot is not None and snapshot.status == "paused" and snapshot.state is not None:
                # A run stopped before its end (a pause gate, a budget): continue it.
                run_id = snapshot.state.run_id
                work = graph.arun(None, run_id=run_id, checkpoint_store=store, observers=[listen])
                return work, run_id
            run_id = uuid.uuid4().hex
            work = graph.arun(
                self._input(message),
                run_id=run_id,
                thread_id=thread_id,
                multitask_strategy=strategy,
                checkpoint_store=store,
                observers=[listen],
            )
            return work, run_id
        except ServeError:
            raise
        except (SelectGraphError, TypeError, ValueError) as error:
            raise _refusal(error, thread_id) from None

    def _input(self, message: str | Mapping[str, Any] | None) -> Any:
        if message is None:
            return None
        if not isinstance(message, str | Mapping):
            raise ServeError(
                422, f"a message is text or a JSON object, got {type(message).__name__}"
            )
        return graph_input(self.graph, self.source, message)


def _dropped(snapshot: ThreadSnapshot | None) -> bool:
    """Whether the thread's run waits on what :meth:`ServedGraph.drop_question` dropped."""
    if snapshot is None or snapshot.state is None:
        return False
    if snapshot.status not in ("interrupted", "paused"):
        return False
    # The mark names the checkpoint it dropped: a run that went on since has a new one.
    return snapshot.thread.metadata.get(DROPPED_KEY) == snapshot.state.checkpoint_id


def _answer(question: Interrupt, message: str | Mapping[str, Any] | None) -> Any:
    """The answer a message gives: its text, or the JSON it holds when a schema is asked."""
    if question.response_schema is None or not isinstance(message, str):
        return message
    try:
        return json.loads(message)
    except json.JSONDecodeError:
        return message  # the schema check says what was expected


def _turn(result: GraphResult, thread_id: str) -> Turn:
    usage = result.total_usage
    content = final_output(result)
    output = json_value(content)
    question = Question.of(result.interrupts[0]) if result.interrupts else None
    status: TurnStatus
    if question is not None:
        status, reply = "interrupted", question.text()
    elif result.stop_reason == "end":
        status = "done"
        reply = content if isinstance(content, str) else json.dumps(output, ensure_ascii=False)
    else:
        status = "paused"
        reply = (
            f"The run stopped before its end ({result.stop_reason}); "
            "send another message to continue it."
        )
    return Turn(
        thread_id=thread_id,
        run_id=result.run_id,
        status=status,
        reply=reply,
        output=output,
        question=question,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cost_usd=None if usage.unpriced_calls else usage.cost_usd,
    )


def _cancelled(thread_id: str, run_id: str) -> Turn:
    return Turn(
        thread_id=thread_id,
        run_id=run_id,
        status="cancelled",
        reply="The run was cancelled.",
        output=None,
        question=None,
        input_tokens=0,
        output_tokens=0,
        cost_usd=None,
    )


def _refusal(error: BaseException, thread_id: str) -> ServeError:
    """The HTTP-shaped error for a run that could not start or failed."""
    message = str(error)
    if isinstance(error, ServeError):
        return error
    if isinstance(error, ThreadBusy):
        return ServeError(409, message)
    if isinstance(error, ThreadIdError):
        return ServeError(400, message)
    if isinstance(error, AnswerInvalid):
        return ServeError(422, f"the answer does not fit the question: {message}")
    if isinstance(error, ResumeError):
        return ServeError(404, message)
    if isinstance(error, StateValidationError | TypeError | ValueError):
        return ServeError(422, f"the input does not fit the graph: {message}")
    if isinstance(error, GraphRunError):
        return ServeError(500, f"the run on thread {thread_id!r} failed: {message}")
    return ServeError(500, f"the run on thread {thread_id!r} failed: {type(error).__name__}")
