"""Run methods: run, resume, stream and draw a graph, written once for AgentGraph and CompiledGraph.

:class:`RunMethods` acts on the graph's compiled form, ``_compiled_graph()``: a
CompiledGraph is its own, an AgentGraph compiles (cached until it changes).
:class:`RunnableGraph` is that compiled form as these methods read it.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import (
    AsyncIterator,
    Callable,
    Coroutine,
    Generator,
    Iterable,
    Mapping,
    Sequence,
)
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from selectgraph.compile._ascii import render_ascii
from selectgraph.compile._dag import export_dag
from selectgraph.compile._execute import (
    RunProgram,
    StreamRequest,
    continue_run,
    drive,
    drive_sleep,
    durable_options,
    execute,
    run_blocking,
    store_for,
    stream_run,
    stream_sync,
)
from selectgraph.compile._graph_tool import GraphTool
from selectgraph.compile._langgraph import invoke_run, state_values
from selectgraph.compile._mermaid import render_mermaid
from selectgraph.compile._options import NO_RESPONSE, GraphInput, PauseSignal
from selectgraph.compile._png import render_png
from selectgraph.core._errors import ResumeError
from selectgraph.core._result import GraphResult
from selectgraph.core._serialization import StateSerializer
from selectgraph.core._state import GraphState
from selectgraph.observe._delivery import DrainSummary, drain_events_for
from selectgraph.observe._delivery import drain as drain_observers
from selectgraph.observe._observer import Observer
from selectgraph.observe._recorder import Listener
from selectgraph.observe._stream import StreamMode
from selectgraph.persistence._protocol import CheckpointStore
from selectgraph.persistence._seed_store import SeedCheckpointStore
from selectgraph.persistence._threads import MultitaskStrategy
from selectgraph.runtime._durable import Durability, EventLog
from selectgraph.runtime._inspect import StateSnapshot, get_history, get_state, update_state
from selectgraph.runtime._subgraph import GraphAdapter
from selectgraph.runtime._thread_view import ThreadSnapshot, copy_thread, get_thread
from selectgraph.runtime._threads import ThreadOptions, thread_store

__all__ = ["RunMethods", "RunnableGraph"]


class RunMethods:
    """Running, resuming, streaming, inspecting and drawing a graph.

    AgentGraph and CompiledGraph share these methods: a CompiledGraph runs
    itself; an AgentGraph compiles first (cached until the graph changes) and
    runs what it compiled, so a graph with errors raises GraphBuildError.
    """

    def _compiled_graph(self) -> RunnableGraph:
        """The compiled graph these methods run."""
        raise NotImplementedError

    # ------------------------------------------------------------------ runs
    def arun(
        self,
        input: GraphInput = None,
        *,
        observers: Sequence[Observer | Listener] = (),
        run_id: str | None = None,
        checkpoint_store: CheckpointStore | SeedCheckpointStore | None = None,
        checkpoint_id: str | None = None,
        durability: Durability = "sync",
        pause: PauseSignal | None = None,
        pause_before: Iterable[str] | None = None,
        pause_after: Iterable[str] | None = None,
        serializer: StateSerializer | None = None,
        thread_id: str | None = None,
        multitask_strategy: MultitaskStrategy = "reject",
        thread_metadata: Mapping[str, Any] | None = None,
        thread_ttl: float | None = None,
        event_log: EventLog | None = None,
        config: Mapping[str, Any] | None = None,
        migrate: Mapping[str, str] | None = None,
    ) -> Coroutine[Any, Any, GraphResult]:
        """Run to a stop and return the result: ``result = await graph.arun(input)``.

        The run is prepared (its input checked against the schema) when ``arun``
        is called, and runs when the returned coroutine is awaited. Handing back
        the run's own coroutine, rather than wrapping it in another, saves every
        step of every run a layer of coroutine to resume.

        Args:
            input: A GraphState, a mapping of data, a prompt string, or None
                (with ``checkpoint_id``, or a ``run_id`` that has checkpoints:
                continue that run).
            observers: Extra observers for this run only.
            run_id: Identifier for the run (a random one by default). With a
                store, a run id that already has checkpoints is continued.
            checkpoint_store: Where the run keeps checkpoints (see
                docs/persistence.md); none by default.
            checkpoint_id: Continue from this checkpoint: the run's latest one
                continues the run; an earlier one forks a new run (the original
                is untouched).
            durability: ``"sync"`` (each checkpoint saved before the next node
                starts), ``"async"`` (saved in the background) or ``"exit"``
                (only when the run stops or pauses).
            pause: A PauseToken (or threading/asyncio Event): when set, the run
                stops at the next node boundary, checkpointed.
            pause_before: Nodes to pause before (adds to the graph's own).
            pause_after: Nodes to pause after (adds to the graph's own).
            serializer: Encodes the state for checkpoints and holds the
                allow-list of classes that may be restored.
            thread_id: Run on this thread (a conversation; see docs/threads.md): the
                run starts from the state the thread's last run left, with ``input``
                merged in through the reducers (a prompt becomes a user message).
                Needs a store.
            multitask_strategy: What to do if the thread is busy (a run is running
                or paused on it): ``"reject"`` (ThreadBusy), ``"enqueue"`` (wait,
                then run), ``"interrupt"`` (stop that run at its next checkpoint and
                go on from there) or ``"rollback"`` (discard that run).
            thread_metadata: Merged into the thread's metadata.
            thread_ttl: Seconds of inactivity after which ``prune_threads`` may
                delete the thread (renewed by every run on it).
            event_log: What the run stores of its events beside its checkpoints:
                ``True`` (events without message content, the default for a new run),
                ``"content"``, or ``False``. A run continued from its checkpoints
                (``run_id=`` of a stopped run) keeps what it was started with unless
                this says otherwise.
            config: Run-time values the nodes read as ``context.config``.
            migrate: Continuing a run saved under an earlier version of the graph:
                ``{"old": "new"}`` maps node names the checkpoint uses to the nodes
                that replace them (``{"node": "node"}`` takes a node as it is now,
                edges included). See docs/persistence.md.

        Raises:
            GraphRunError: the run failed; ``error.state`` and ``error.result`` keep what was done.
            ResumeError: the run cannot be continued as asked.
            GraphChanged: the graph changed since the checkpoint in what the run needs.
            ThreadBusy: the thread is busy and ``multitask_strategy`` is ``"reject"``.
        """
        graph = self._compiled_graph()
        thread = _thread(thread_id, multitask_strategy, thread_metadata, thread_ttl)
        options = durable_options(
            graph,
            checkpoint_store,
            durability,
            pause,
            pause_before,
            pause_after,
            serializer,
            thread,
            event_log,
            migrate,
        )
        return execute(
            graph, input, observers, run_id, asyncio.sleep, options, checkpoint_id, config
        )

    def run(
        self,
        input: GraphInput = None,
        *,
        observers: Sequence[Observer | Listener] = (),
        run_id: str | None = None,
        checkpoint_store: CheckpointStore | SeedCheckpointStore | None = None,
        checkpoint_id: str | None = None,
        durability: Durability = "sync",
        pause: PauseSignal | None = None,
        pause_before: Iterable[str] | None = None,
        pause_after: Iterable[str] | None = None,
        serializer: StateSerializer | None = None,
        thread_id: str | None = None,
        multitask_strategy: MultitaskStrategy = "reject",
        thread_metadata: Mapping[str, Any] | None = None,
        thread_ttl: float | None = None,
        event_log: EventLog | None = None,
        config: Mapping[str, Any] | None = None,
        migrate: Mapping[str, str] | None = None,
    ) -> GraphResult:
        """Run to a stop and return the result (blocking); arguments as for :meth:`arun`.

        A graph whose nodes and edges are all synchronous runs without an event
        loop at all; otherwise this runs :meth:`arun` in one (on a worker thread
        when called from inside a running loop).
        """
        graph = self._compiled_graph()
        thread = _thread(thread_id, multitask_strategy, thread_metadata, thread_ttl)
        options = durable_options(
            graph,
            checkpoint_store,
            durability,
            pause,
            pause_before,
            pause_after,
            serializer,
            thread,
            event_log,
            migrate,
        )
        sleep = drive_sleep(graph)
        return run_blocking(
            graph, execute(graph, input, observers, run_id, sleep, options, checkpoint_id, config)
        )

    # ---------------------------------------------------------------- resume
    def aresume(
        self,
        interrupt_id: str | Mapping[str, Any],
        response: Any = NO_RESPONSE,
        *,
        checkpoint_store: CheckpointStore | SeedCheckpointStore | None = None,
        observers: Sequence[Observer | Listener] = (),
        durability: Durability = "sync",
        pause: PauseSignal | None = None,
        serializer: StateSerializer | None = None,
        config: Mapping[str, Any] | None = None,
        migrate: Mapping[str, str] | None = None,
        event_log: EventLog | None = None,
    ) -> Coroutine[Any, Any, GraphResult]:
        """Answer an interrupt and continue the run: ``await graph.aresume(interrupt_id, "yes")``.

        In the process that paused, the generator node continues at its yield
        (nothing before it runs again). Otherwise the run is loaded from
        ``checkpoint_store``: completed nodes are not run again, and the paused
        generator node starts over with its earlier answers fed back in order
        (``context.once`` steps are not redone).

        Args:
            interrupt_id: The interrupt to answer, or a mapping of interrupt id to
                answer to answer several at once (parallel branches).
            response: The answer (JSON data); omitted with a mapping.
            checkpoint_store: The store the run was saved in (needed unless the
                run is still paused in this process).
            observers: Extra observers for the continued run.
            durability: As for :meth:`arun`.
            pause: As for :meth:`arun`.
            serializer: As for :meth:`arun`.
            config: As for :meth:`arun`.
            migrate: As for :meth:`arun`; give the interrupt ids the run paused with.
            event_log: What the continued run stores of its events, as for :meth:`arun`;
                by default what the run was started with (its checkpoints say so).

        Raises:
            ResumeError: an interrupt id is unknown or already answered.
            GraphChanged: the graph changed since the pause in what the run needs.
            CheckpointConflict: another process answered first; nothing ran.
        """
        graph = self._compiled_graph()
        return continue_run(
            graph,
            interrupt_id,
            response,
            checkpoint_store,
            observers,
            durability,
            pause,
            serializer,
            asyncio.sleep,
            config,
            migrate,
            event_log,
        )

    def resume(
        self,
        interrupt_id: str | Mapping[str, Any],
        response: Any = NO_RESPONSE,
        *,
        checkpoint_store: CheckpointStore | SeedCheckpointStore | None = None,
        observers: Sequence[Observer | Listener] = (),
        durability: Durability = "sync",
        pause: PauseSignal | None = None,
        serializer: StateSerializer | None = None,
        config: Mapping[str, Any] | None = None,
        migrate: Mapping[str, str] | None = None,
        event_log: EventLog | None = None,
    ) -> GraphResult:
        """Answer an interrupt and continue the run (blocking); see :meth:`aresume`."""
        graph = self._compiled_graph()
        return run_blocking(
            graph,
            continue_run(
                graph,
                interrupt_id,
                response,
                checkpoint_store,
                observers,
                durability,
                pause,
                serializer,
                drive_sleep(graph),
                config,
                migrate,
                event_log,
            ),
        )

    # ------------------------------------------------------------ time travel
    def get_state(
        self,
        run_id: str | Mapping[str, Any],
        *,
        checkpoint_store: CheckpointStore | SeedCheckpointStore | None = None,
        serializer: StateSerializer | None = None,
    ) -> StateSnapshot:
        """The run's latest checkpoint: its state, what runs next and any pending interrupts.

        ``run_id`` may also be LangGraph's ``config`` (``{"configurable": {"thread_id":
        ...}}``): the latest checkpoint of the thread's current run.

        Raises:
            ResumeError: no such run or thread, or a thread without a checkpoint yet.
        """
        graph = self._compiled_graph()
        store = store_for(graph, "get_state", checkpoint_store)
        serializer = serializer or graph.serializer
        if isinstance(run_id, Mapping):
            thread_id = _config_thread(run_id)
            snapshot = drive(get_thread(graph, store, thread_id, serializer, True)).state
            if snapshot is None:
                raise ResumeError(f"thread {thread_id!r} has no checkpoint yet")
            return snapshot
        return drive(get_state(graph, store, run_id, serializer, True))

    def get_history(
        self,
        run_id: str | Mapping[str, Any],
        *,
        checkpoint_store: CheckpointStore | SeedCheckpointStore | None = None,
        limit: int | None = None,
        serializer: StateSerializer | None = None,
    ) -> list[StateSnapshot]:
        """Every checkpoint of the run, newest first; fork from one with ``checkpoint_id=``.

        ``run_id`` may also be LangGraph's ``config``: the checkpoints of every run of
        the thread, newest first.
        """
        graph = self._compiled_graph()
        store = store_for(graph, "get_history", checkpoint_store)
        serializer = serializer or graph.serializer
        if not isinstance(run_id, Mapping):
            return drive(get_history(graph, store, run_id, serializer, True, limit))
        found: list[StateSnapshot] = []
        for run in reversed(thread_store(store).thread_runs(_config_thread(run_id))):
            if limit is not None and len(found) >= limit:
                break
            left = None if limit is None else limit - len(found)
            found += drive(get_history(graph, store, run.run_id, serializer, True, left))
        return found

    def update_state(
        self,
        run_id: str,
        values: Mapping[str, Any],
        *,
        checkpoint_store: CheckpointStore | SeedCheckpointStore | None = None,
        as_node: str | None = None,
        serializer: StateSerializer | None = None,
    ) -> str:
        """Correct a saved run's state before continuing it; returns the new checkpoint's id.

        ``values`` are merged like a node's update (through the reducers). With
        ``as_node``, they count as that node's output: the run continues by
        routing from it (pending interrupts are dropped). Without, the run
        continues where it was, interrupts and all.
        """
        graph = self._compiled_graph()
        store = store_for(graph, "update_state", checkpoint_store)
        options = durable_options(graph, store, "sync", None, None, None, serializer)
        assert options is not None
        return drive(update_state(graph, run_id, values, options, as_node=as_node, blocking=True))

    # ---------------------------------------------------------------- threads
    def get_thread(
        self,
        thread_id: str,
        *,
        checkpoint_store: CheckpointStore | SeedCheckpointStore | None = None,
        serializer: StateSerializer | None = None,
    ) -> ThreadSnapshot:
        """The thread: its record, what it is doing, and the latest state of its run.

        The store's other thread methods (``list_threads``, ``thread_runs``,
        ``update_thread``, ``delete_thread``, ``prune_threads``, ``thread_bytes``,
        ``read_events``) need no graph: call them on the store.

        Raises:
            ResumeError: the store has no such thread.
        """
        graph = self._compiled_graph()
        store = store_for(graph, "get_thread", checkpoint_store)
        return drive(get_thread(graph, store, thread_id, serializer or graph.serializer, True))

    def copy_thread(
        self,
        thread_id: str,
        new_thread_id: str | None = None,
        *,
        checkpoint_store: CheckpointStore | SeedCheckpointStore | None = None,
    ) -> str:
        """Fork a conversation: a new thread starting from this one's latest state.

        Returns the new thread's id (``new_thread_id``, or a new one). The copy
        has the thread's metadata; from there the two go on apart.

        Raises:
            ResumeError: the thread does not exist, or ``new_thread_id`` does.
        """
        graph = self._compiled_graph()
        return copy_thread(
            store_for(graph, "copy_thread", checkpoint_store), thread_id, new_thread_id
        )

    # ------------------------------------------------------------ LangGraph's spellings
    def invoke(
        self, input: Any = None, config: Mapping[str, Any] | None = None, **options: Any
    ) -> dict[str, Any]:
        """Run to a stop and return the final state's data, as LangGraph's ``invoke`` does.

        ``config`` is LangGraph's (``configurable.thread_id`` is the run id,
        ``configurable.checkpoint_id`` a checkpoint to continue or fork from,
        ``recursion_limit`` the step limit); ``invoke(Command(resume=answer), config)``
        answers the run's pending question. ``run()`` returns the whole GraphResult.
        """
        kind, graph, start, chosen = invoke_run(self._compiled_graph(), input, config, options)
        if kind == "resume":
            return state_values(graph.resume(start, **chosen))
        return state_values(graph.run(start, **chosen))

    async def ainvoke(
        self, input: Any = None, config: Mapping[str, Any] | None = None, **options: Any
    ) -> dict[str, Any]:
        """Async :meth:`invoke`."""
        kind, graph, start, chosen = invoke_run(self._compiled_graph(), input, config, options)
        if kind == "resume":
            return state_values(await graph.aresume(start, **chosen))
        return state_values(await graph.arun(start, **chosen))

    def stream(
        self,
        input: Any = None,
        config: Mapping[str, Any] | None = None,
        *,
        stream_mode: StreamMode | Sequence[StreamMode] = "updates",
        **options: Any,
    ) -> Generator[Any, None, None]:
        """Run and yield as it goes, from synchronous code (LangGraph's ``stream``).

        The default ``stream_mode`` is ``"updates"`` (``{node: what it wrote}`` per
        step), as in LangGraph; every mode of :meth:`astream` is available.
        """
        kind, graph, start, chosen = invoke_run(self._compiled_graph(), input, config, options)
        if kind == "resume":
            raise TypeError("stream() starts or continues a run; resume with invoke(Command(...))")
        return _streamed(graph, start, stream_mode, chosen)

    # ------------------------------------------------------------- streaming
    def astream(
        self,
        input: GraphInput = None,
        *,
        observers: Sequence[Observer | Listener] = (),
        run_id: str | None = None,
        checkpoint_store: CheckpointStore | SeedCheckpointStore | None = None,
        checkpoint_id: str | None = None,
        durability: Durability = "sync",
        pause: PauseSignal | None = None,
        pause_before: Iterable[str] | None = None,
        pause_after: Iterable[str] | None = None,
        serializer: StateSerializer | None = None,
        stream_mode: StreamMode | Sequence[StreamMode] = "events",
        thread_id: str | None = None,
        multitask_strategy: MultitaskStrategy = "reject",
        thread_metadata: Mapping[str, Any] | None = None,
        thread_ttl: float | None = None,
        event_log: EventLog | None = None,
        config: Mapping[str, Any] | None = None,
        migrate: Mapping[str, str] | None = None,
    ) -> AsyncIterator[Any]:
        """Run and yield what it does as it happens.

        ``stream_mode`` chooses what is yielded (see docs/events.md):

        - ``"events"`` (default): every GraphEvent; the last is RunFinished (with
          ``.result``), RunPaused, RunFailed or RunCancelled.
        - ``"updates"``: ``{node: what it wrote}`` after each node of this graph.
        - ``"values"``: the state's data (a dict) at the start and after each step.
        - ``"messages"``: ``(text, metadata)`` for each piece of text an agent
          streams, from subgraphs and branches too (``metadata["node_path"]``).
        - ``"custom"``: what nodes publish with ``context.emit_custom(data)``.

        Several modes (a list) yield ``(mode, item)`` pairs. The other arguments are
        :meth:`arun`'s.

        Raises:
            GraphRunError: after the run's last event, if the run failed.
        """
        # Only compiling happens now; the stream checks its options when first read.
        return stream_run(
            self._stream_request(
                input,
                observers=observers,
                run_id=run_id,
                checkpoint_store=checkpoint_store,
                checkpoint_id=checkpoint_id,
                durability=durability,
                pause=pause,
                pause_before=pause_before,
                pause_after=pause_after,
                serializer=serializer,
                stream_mode=stream_mode,
                thread_id=thread_id,
                multitask_strategy=multitask_strategy,
                thread_metadata=thread_metadata,
                thread_ttl=thread_ttl,
                event_log=event_log,
                config=config,
                migrate=migrate,
            )
        )

    def _stream_request(
        self,
        input: GraphInput = None,
        *,
        observers: Sequence[Observer | Listener] = (),
        run_id: str | None = None,
        checkpoint_store: CheckpointStore | SeedCheckpointStore | None = None,
        checkpoint_id: str | None = None,
        durability: Durability = "sync",
        pause: PauseSignal | None = None,
        pause_before: Iterable[str] | None = None,
        pause_after: Iterable[str] | None = None,
        serializer: StateSerializer | None = None,
        stream_mode: StreamMode | Sequence[StreamMode] = "events",
        thread_id: str | None = None,
        multitask_strategy: MultitaskStrategy = "reject",
        thread_metadata: Mapping[str, Any] | None = None,
        thread_ttl: float | None = None,
        event_log: EventLog | None = None,
        config: Mapping[str, Any] | None = None,
        migrate: Mapping[str, str] | None = None,
    ) -> StreamRequest:
        """:meth:`astream`'s arguments, for ``astream()`` and ``stream()`` alike."""
        return StreamRequest(
            self._compiled_graph(),
            input,
            observers,
            run_id,
            checkpoint_store,
            checkpoint_id,
            durability,
            pause,
            pause_before,
            pause_after,
            serializer,
            stream_mode,
            _thread(thread_id, multitask_strategy, thread_metadata, thread_ttl),
            event_log,
            config,
            migrate,
        )

    async def drain(self, timeout: float | None = None) -> DrainSummary:
        """Wait until async observers got every event queued so far (see :func:`drain`).

        Async observers (AsyncAgentObserver, ``async def on_event``) run on a
        queue and may still be busy after a run returns; a short-lived script
        should drain before it exits (at exit selectgraph waits up to 5 s).
        """
        self._compiled_graph()  # an AgentGraph with errors raises GraphBuildError here
        return await drain_observers(timeout)

    async def drain_events_for(self, run_id: str, *, timeout: float | None = None) -> DrainSummary:
        """Wait until async observers got the events of run ``run_id`` queued so far."""
        self._compiled_graph()  # an AgentGraph with errors raises GraphBuildError here
        return await drain_events_for(run_id, timeout=timeout)

    # ------------------------------------------------------------- as a node
    def __call__(self, state: GraphState) -> GraphState:
        """Run on ``state`` and return the final state, so a graph is callable like a node."""
        return self.run(state).state

    def __selectgraph_node__(self, name: str) -> GraphAdapter:
        return GraphAdapter(self._compiled_graph())

    def as_tool(
        self,
        name: str | None = None,
        description: str | None = None,
        input_schema: type[BaseModel] | Mapping[str, Any] | None = None,
        *,
        output: Callable[[GraphResult], Any] | None = None,
    ) -> GraphTool:
        """This graph as a tool an agent can call: ``Agent(tools=[graph.as_tool(...)])``.

        Inside a graph run its usage counts in the run's budget, its events are
        nested under the calling node, and its questions pause the run (see
        :class:`~selectgraph.GraphTool`).

        Args:
            name: The name the model calls it by (default: the graph's name).
            description: What it does (default: the graph's description; one is needed).
            input_schema: Its arguments: a Pydantic model or a JSON object schema
                (the state the run starts from); default one string, ``input``.
            output: What goes back from the finished run (default: its answer).

        Raises:
            ValueError: a bad name, no description, or a bad ``input_schema``.
        """
        return GraphTool(
            self, name=name, description=description, input_schema=input_schema, output=output
        )

    # ------------------------------------------------------------- drawing
    def to_mermaid(self, result: GraphResult | None = None) -> str:
        """A Mermaid flowchart; with ``result``, the edges that fired are highlighted."""
        return render_mermaid(self._compiled_graph(), result)

    def to_dag(self, result: GraphResult | None = None) -> dict[str, Any]:
        """The graph as JSON data: ``nodes``, ``edges`` (seed 001's DAG export).

        With ``result``, each edge also says whether (``fired``) and how often
        (``times``) the run took it, each node how often it ran (``runs``), and
        ``run`` says how the run ended (``stop_reason``, ``quality``, ``steps``,
        the ``path`` of nodes, ``last_node``, ``interrupted``). ``json.dumps`` it
        as it is.
        """
        return export_dag(self._compiled_graph(), result)

    def visualize(
        self,
        format: str = "ascii",
        result: GraphResult | None = None,
        *,
        path: str | os.PathLike[str] | None = None,
        show: bool = True,
    ) -> str:
        """Print a picture of the graph (seed 004) and return it.

        ``"ascii"`` and ``"mermaid"`` print the text and return it (``show=False``
        only returns it). ``"png"`` draws the Mermaid diagram with Mermaid in a
        headless Chromium, offline, to ``path`` (default ``<graph name>.png``) and
        returns the file's path; it needs the ``png`` extra and a Chromium. With
        ``result``, the edges the run took are highlighted.

        Raises:
            ValueError: an unknown format.
            PngUnavailable: ``"png"`` without Playwright or a Chromium to draw with.
        """
        graph = self._compiled_graph()
        if format == "png":
            target = Path(path if path is not None else f"{graph.name or 'graph'}.png")
            drawn = str(render_png(render_mermaid(graph, result), target))
            if show:
                print(f"graph {graph.name!r} drawn to {drawn}")
            return drawn
        if format == "mermaid":
            text = render_mermaid(graph, result)
        elif format == "ascii":
            text = render_ascii(graph, result)
        else:
            raise ValueError(f"unknown format {format!r}; use 'ascii', 'mermaid' or 'png'")
        if show:
            print(text)
        return text


class RunnableGraph(RunMethods, RunProgram):
    """A compiled graph as the run methods read it (CompiledGraph is the one there is).

    It is the runtime's GraphProgram, a default checkpoint store, and the run
    methods, which a LangGraph ``config`` may call on a copy of it.
    """

    def _compiled_graph(self) -> RunnableGraph:
        return self


def _thread(
    thread_id: str | None,
    strategy: MultitaskStrategy,
    metadata: Mapping[str, Any] | None,
    ttl: float | None,
) -> ThreadOptions | None:
    """The thread options of a run (None: not on a thread); checks them now."""
    if thread_id is None:
        if strategy != "reject" or metadata is not None or ttl is not None:
            raise ValueError(
                "multitask_strategy, thread_metadata and thread_ttl apply to a run on a "
                "thread: give thread_id too"
            )
        return None
    return ThreadOptions(thread_id, strategy, metadata, ttl)


def _config_thread(config: Mapping[str, Any]) -> str:
    """The thread a LangGraph ``config`` names."""
    configurable = config.get("configurable")
    thread_id = configurable.get("thread_id") if isinstance(configurable, Mapping) else None
    if thread_id is None:
        raise ValueError(
            f"a config names a thread in config['configurable']['thread_id']; got {dict(config)!r}"
        )
    return str(thread_id)


def _streamed(
    graph: RunMethods,
    input: Any,
    stream_mode: StreamMode | Sequence[StreamMode],
    options: dict[str, Any],
) -> Generator[Any, None, None]:
    """What ``stream()`` yields; its options are checked when it is first read, as astream's."""
    yield from stream_sync(graph._stream_request(input, stream_mode=stream_mode, **options))
