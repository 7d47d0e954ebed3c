"""DBOSExecutor: start, watch and answer runs from any process; serve them from workers.

One object serves both sides. A web process or a script makes one to start
runs (``start``), find them again (``handle``) and answer their questions
(``resume``); it talks to the database through DBOS's client and never runs
a graph. A worker makes the same object and calls ``serve()``: it launches
DBOS in that process, takes runs from the queue and runs them.

Graphs are registered by name on both sides: the worker needs the graph to
run it, the client to encode the input and decode results with the graph's
state types. A record in the queue only ever names a graph.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import os
import socket
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar

from selectgraph.build._builder import AgentGraph
from selectgraph.compile._compiled import CompiledGraph
from selectgraph.compile._options import GraphInput
from selectgraph.core._errors import ResumeError
from selectgraph.core._interrupts import interrupt_run_id
from selectgraph.core._serialization import StateSerializer
from selectgraph.core._state import GraphState
from selectgraph.executors.dbos._answers import Claims, checked_answer
from selectgraph.executors.dbos._database import (
    create_engine,
    is_sqlite,
    probe,
)
from selectgraph.executors.dbos._handle import RunHandle
from selectgraph.executors.dbos._serializer import JsonSerializer, refuse_pickle
from selectgraph.executors.dbos._threads import TURN, ThreadBook
from selectgraph.executors.dbos._worker import serve as serve_in_loop
from selectgraph.executors.dbos._worker import serve_until_signalled
from selectgraph.executors.dbos._workflow import (
    ANSWERS,
    INTERRUPTS,
    STOP,
    WAKE,
    WORKFLOW,
    UnknownGraphError,
    encode_input,
)
from selectgraph.persistence._threads import MultitaskStrategy, Thread, ThreadRun
from selectgraph.runtime._run import new_run_id as _random_run_id
from selectgraph.runtime._threads import check_input

__all__ = ["DBOSExecutor", "UnknownRunError"]

T = TypeVar("T")

APP_VERSION: Final = "selectgraph-1"
"""The DBOS application version of every worker (bumped when the step records change)."""


class UnknownRunError(LookupError):
    """No run has this id in the executor's database."""

    def __init__(self, run_id: str) -> None:
        super().__init__(
            f"no run {run_id!r} in this executor's database (start one with executor.start())"
        )
        self.run_id = run_id
        """The id that was asked for."""


def _in_thread(method: Callable[..., T]) -> Callable[..., Any]:
    """The async twin of a blocking method: the same code on a worker thread."""

    @functools.wraps(method)
    async def twin(self: Any, *args: Any, **kwargs: Any) -> T:
        return await asyncio.to_thread(method, self, *args, **kwargs)

    twin.__doc__ = f":meth:`{method.__name__}`, awaited."
    return twin


class DBOSExecutor:
    """Runs graphs on DBOS workers over PostgreSQL (or SQLite on one machine).

    Args:
        database_url: The system database, ``postgresql://user@host:port/db`` or
            ``sqlite:///path.sqlite``. Every worker and client of one deployment
            uses the same one.
        queue: The DBOS queue runs go through.
        graphs: The graphs, by the name runs are started under (AgentGraph or
            compiled). A worker runs only these; a client uses them to encode
            inputs and decode results.
        worker_concurrency: Runs one worker executes at once. A run waiting
            for an answer holds its slot.
        executor_id: This worker's id, unique among live workers; keep it
            stable across restarts of the same worker slot so a restart
            recovers its own runs at once. Default: ``host-pid``.
        app_name: The DBOS application name (several may share a database).
        app_version: Workers only take runs queued for their version; change it
            when a graph changes in a way in-flight runs must not replay on.
        poll_interval: Seconds between a worker's polls of the queue (and a
            client's reads of a run's events).
        lease_ttl: Seconds without a heartbeat after which a worker counts as
            dead and its runs are taken over (PostgreSQL only). Shorter takes over
            sooner; longer spares the tasks in flight of a worker that only lost
            its connection for a moment (they would run on both).
        pool_size: Database connections a worker's DBOS keeps; a worker holds
            about this many plus four, which ``max_connections`` must allow for
            every worker.
    """

    def __init__(
        self,
        database_url: str,
        *,
        queue: str = "selectgraph",
        graphs: Mapping[str, AgentGraph | CompiledGraph] | None = None,
        worker_concurrency: int = 64,
        executor_id: str | None = None,
        app_name: str = "selectgraph",
        app_version: str = APP_VERSION,
        poll_interval: float = 0.1,
        lease_ttl: float = 10.0,
        pool_size: int = 10,
    ) -> None:
        if not isinstance(database_url, str) or not database_url:
            raise ValueError("database_url must be a database URL string")
        if worker_concurrency < 1:
            raise ValueError(f"worker_concurrency must be at least 1, got {worker_concurrency}")
        if poll_interval <= 0:
            raise ValueError(f"poll_interval must be positive, got {poll_interval}")
        if lease_ttl <= 0:
            raise ValueError(f"lease_ttl must be positive, got {lease_ttl}")
        if pool_size < 1:
            raise ValueError(f"pool_size must be at least 1, got {pool_size}")
        self.database_url = database_url
        self.queue = queue
        self.worker_concurrency = worker_concurrency
        self.executor_id = executor_id or f"{socket.gethostname()}-{os.getpid()}"
        self.app_name = app_name
        self.app_version = app_version
        self.poll_interval = poll_interval
        self.lease_ttl = lease_ttl
        self.pool_size = pool_size
        self.graphs: dict[str, CompiledGraph] = {}
        for name, graph in (graphs or {}).items():
            self.register(name, graph)
        self._client: Any = None
        self._claims: Claims | None = None
        self._threads: ThreadBook | None = None

    def register(self, name: str, graph: AgentGraph | CompiledGraph) -> None:
        """Register ``graph`` under ``name`` (before serving)."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a graph's name must be a non-empty string, got {name!r}")
        if isinstance(graph, AgentGraph):
            graph = graph.compile()
        if not isinstance(graph, CompiledGraph):
            raise TypeError(
                f"graph {name!r} must be an AgentGraph or a compiled graph, "
                f"got {type(graph).__name__}"
            )
        gates = sorted(graph.settings.pause_before | graph.settings.pause_after)
        if gates:
            raise ValueError(
                f"graph {name!r} pauses before or after {', '.join(map(repr, gates))}; "
                "pause gates are not supported on the DBOS executor (a run there continues "
                "only on an answer): ask with a generator node's InterruptRequest instead"
            )
        self.graphs[name] = graph

    def graph(self, name: str) -> CompiledGraph:
        """The graph registered under ``name``.

        Raises:
            UnknownGraphError: none is.
        """
        graph = self.graphs.get(name)
        if graph is None:
            known = ", ".join(sorted(self.graphs)) or "none"
            raise UnknownGraphError(
                f"no graph named {name!r} is registered with this executor (registered: {known})"
            )
        return graph

    def serializer_for(self, name: str) -> StateSerializer:
        """The serializer of graph ``name``, or a plain one when this process lacks the graph."""
        graph = self.graphs.get(name)
        return graph.serializer if graph is not None else StateSerializer()

    # ----------------------------------------------------------------- client
    @property
    def client(self) -> Any:
        """DBOS's client for this database (made on first use; the database must answer)."""
        if self._client is None:
            from dbos import DBOS, DBOSClient

            probe(self.database_url)
            refuse_pickle()
            DBOS.migrate(self.database_url)  # a client may come before any worker
            self._client = DBOSClient(
                system_database_url=self.database_url,
                serializer=JsonSerializer(),
                application_name=self.app_name,
                retry_connection_errors=False,
            )
        return self._client

    @property
    def claims(self) -> Claims:
        """The table of answers given to interrupts (made on first use)."""
        if self._claims is None:
            self._claims = Claims(create_engine(self.database_url))
        return self._claims

    @property
    def threads(self) -> ThreadBook:
        """The thread tables (made on first use)."""
        if self._threads is None:
            self._threads = ThreadBook(create_engine(self.database_url))
        return self._threads

    def workflow_status(self, run_id: str, *, load_output: bool = False) -> Any:
        """DBOS's status record of run ``run_id``.

        Raises:
            UnknownRunError: there is no such run.
        """
        found = self.client.list_workflows(
            workflow_ids=[run_id], load_input=False, load_output=load_output
        )
        if not found:
            raise UnknownRunError(run_id)
        return found[0]

    def start(
        self,
        graph: str,
        input: GraphInput = None,
        *,
        run_id: str | None = None,
        thread_id: str | None = None,
        multitask_strategy: MultitaskStrategy = "reject",
        thread_metadata: Mapping[str, Any] | None = None,
        thread_ttl: float | None = None,
    ) -> RunHandle:
        """Queue a run of graph ``graph`` and return its handle; a worker picks it up.

        Starting a ``run_id`` that exists already starts nothing and returns its
        handle (the first start's input stands).

        With ``thread_id`` the run is the next turn of that conversation: it starts
        from the state the thread's last run left, with ``input`` merged in through
        the reducers (see docs/threads.md). If a run is queued, running or paused on
        the thread, ``multitask_strategy`` says what happens: ``"reject"`` raises
        ThreadBusy, ``"enqueue"`` runs this one after it, ``"interrupt"`` stops it
        at its next node (keeping what it completed) and goes on from there,
        ``"rollback"`` cancels it and starts from the state before it.
        ``thread_metadata`` is merged into the thread's metadata; ``thread_ttl``
        (seconds) is kept with the thread.

        Raises:
            UnknownGraphError: this executor has graphs and ``graph`` is not one.
            ThreadBusy: the thread is busy and the strategy is ``"reject"``.
            ThreadIdError: a thread id the tables cannot hold.
            StateValidationError: the input cannot fit the graph's state.
            DatabaseUnavailableError: the database does not answer.
        """
        if self.graphs and graph not in self.graphs:
            self.graph(graph)  # raises, naming the registered ones
        run_id = run_id or _random_run_id()
        if not isinstance(run_id, str) or "|" in run_id:
            raise ValueError(f"run_id {run_id!r} must be a string without '|'")
        request: dict[str, Any] = {
            "input": encode_input(input, self.serializer_for(graph)),
            "started_at": dt.datetime.now(dt.UTC).isoformat(),
        }
        if thread_id is None:
            self._enqueue(run_id, graph, request)
            return RunHandle(self, run_id, graph)
        if graph in self.graphs:  # refused before the thread changes
            check_input(self.graphs[graph], input)
        request["thread_id"] = thread_id
        admitted = self.threads.admit(
            thread_id,
            run_id,
            graph,
            multitask_strategy,
            metadata=thread_metadata,
            ttl=thread_ttl,
        )
        if admitted.existed:
            return RunHandle(self, run_id, graph)
        try:
            self._enqueue(run_id, graph, request)
        except BaseException:
            self.threads.abandon(run_id)
            raise
        for superseded in admitted.superseded:
            if multitask_strategy == "rollback":
                self.client.cancel_workflow(superseded)
                self.client.send(superseded, WAKE, ANSWERS, idempotency_key=f"wake:{superseded}")
            else:  # a run paused on a question stops now; a running one at its next node
                self.client.send(superseded, STOP, ANSWERS, idempotency_key=f"stop:{superseded}")
        return RunHandle(self, run_id, graph)

    astart = _in_thread(start)

    def _enqueue(self, run_id: str, graph: str, request: dict[str, Any]) -> None:
        self.client.enqueue(
            {
                "workflow_name": WORKFLOW,
                "queue_name": self.queue,
                "workflow_id": run_id,
                "app_version": self.app_version,
            },
            graph,
            request,
        )

    def handle(self, run_id: str) -> RunHandle:
        """The handle of an existing run, from any process.

        Raises:
            UnknownRunError: there is no such run.
        """
        found = self.client.list_workflows(
            workflow_ids=[run_id], load_input=True, load_output=False
        )
        if not found or found[0].name != WORKFLOW:
            raise UnknownRunError(run_id)
        inputs = found[0].input or {}
        args = inputs.get("args") or ("",)
        return RunHandle(self, run_id, str(args[0]))

    ahandle = _in_thread(handle)

    def resume(self, run_id: str, interrupt_id: str, value: Any) -> None:
        """Answer question ``interrupt_id`` of run ``run_id``, from any process.

        The answer is recorded before it is sent, so of two answers to one
        question exactly one is applied; giving the winning answer again is
        a no-op.

        An answer to a question asked with a ``response_schema`` is checked
        against the schema stored with the question before it is recorded, and
        recorded and sent as the JSON data it was checked as.

        Raises:
            UnknownRunError: there is no such run.
            ResumeError: the run has ended, or does not wait on this question.
            AnswerInvalid: the answer does not fit the question's response schema;
                nothing was recorded or sent.
            AnswerConflictError: another answer to this question was applied.
        """
        handle = self.handle(run_id)
        try:
            belongs = interrupt_run_id(interrupt_id) == run_id
        except ValueError as exc:
            raise ResumeError(str(exc), run_id=run_id) from None
        if not belongs:
            raise ResumeError(
                f"interrupt {interrupt_id!r} is not one of run {run_id!r}'s", run_id=run_id
            )
        serializer = self.serializer_for(handle.graph_name)
        encoded = serializer.encode(value, f"answer to {interrupt_id!r}")
        status = handle.status()
        won = self.claims.answered(interrupt_id)
        if status in ("done", "failed", "cancelled"):
            if won is not None and won == encoded:
                return  # a retry of the answer that was applied
            raise ResumeError(
                f"run {run_id!r} has ended ({status}); there is nothing to answer", run_id=run_id
            )
        listed: list[dict[str, Any]] = []
        if won is None:
            pending = self.client.get_event(run_id, INTERRUPTS, timeout_seconds=0)
            listed = list(pending.get("pending", [])) if type(pending) is dict else []
            ids = [raw["id"] for raw in listed]
            if interrupt_id not in ids:
                waiting = ", ".join(map(repr, ids)) or "nothing"
                raise ResumeError(
                    f"run {run_id!r} does not wait on interrupt {interrupt_id!r} "
                    f"(it is {status}; it waits on {waiting})",
                    run_id=run_id,
                )
        # Before the claim: an answer that does not fit is neither recorded nor sent.
        value = checked_answer(run_id, interrupt_id, value, listed, handle.checkpoint_records)
        encoded = serializer.encode(value, f"answer to {interrupt_id!r}")
        self.claims.claim(run_id, interrupt_id, encoded)  # raises when another answer won
        self.client.send(
            run_id,
            {"answers": {interrupt_id: encoded}},
            ANSWERS,
            idempotency_key=f"answer:{interrupt_id}",
        )

    aresume = _in_thread(resume)

    def cancel(self, run_id: str) -> None:
        """Cancel run ``run_id`` (see :meth:`RunHandle.cancel`).

        Raises:
            UnknownRunError: there is no such run.
        """
        self.workflow_status(run_id)
        self.client.cancel_workflow(run_id)
        # A run waiting in recv is not woken by a cancel: wake it, so it stops now.
        self.client.send(run_id, WAKE, ANSWERS, idempotency_key=f"wake:{run_id}")
        # On a thread, the runs waiting behind it go on.
        self._wake(self.threads.cancelled(run_id))

    def _wake(self, run_ids: list[str]) -> None:
        """Tell runs waiting for their thread to look again."""
        for waiting in run_ids:
            self.client.send(waiting, "turn", TURN)

    acancel = _in_thread(cancel)

    def fork(self, run_id: str, checkpoint_id: str, *, new_run_id: str | None = None) -> RunHandle:
        """A new run continuing from checkpoint ``checkpoint_id`` of run ``run_id``.

        The original is untouched; the fork runs on the workers like any run.

        Raises:
            UnknownRunError: there is no such run.
            ResumeError: the run has no such checkpoint.
        """
        source = self.handle(run_id)
        chain: list[dict[str, Any]] = []
        found = False
        for raw in source.checkpoint_records():
            if raw.get("run_id") == run_id and not found:
                chain.append(raw)
                found = raw.get("checkpoint_id") == checkpoint_id
        if not found:
            raise ResumeError(f"run {run_id!r} has no checkpoint {checkpoint_id!r}", run_id=run_id)
        fork_id = new_run_id or _random_run_id()
        if "|" in fork_id:
            raise ValueError(f"run_id {fork_id!r} must be a string without '|'")
        request = {
            "fork": {"checkpoint_id": checkpoint_id, "checkpoints": chain},
            "started_at": dt.datetime.now(dt.UTC).isoformat(),
        }
        self._enqueue(fork_id, source.graph_name, request)
        return RunHandle(self, fork_id, source.graph_name)

    afork = _in_thread(fork)

    # ---------------------------------------------------------------- threads
    def get_thread(self, thread_id: str) -> Thread | None:
        """Thread ``thread_id`` (its metadata, run count, last run, owner), or None."""
        return self.threads.get_thread(thread_id)

    aget_thread = _in_thread(get_thread)

    def list_threads(
        self, *, metadata: Mapping[str, Any] | None = None, limit: int = 100
    ) -> list[Thread]:
        """Threads, most recently active first, whose metadata holds ``metadata``'s items."""
        return self.threads.list_threads(metadata=metadata, limit=limit)

    alist_threads = _in_thread(list_threads)

    def thread_runs(self, thread_id: str) -> list[ThreadRun]:
        """The runs of thread ``thread_id``, oldest first."""
        return self.threads.thread_runs(thread_id)

    athread_runs = _in_thread(thread_runs)

    def thread_state(self, thread_id: str, graph: str | None = None) -> GraphState | None:
        """The conversation's state as its last finished run left it (None: no such run yet).

        ``graph`` names the graph whose serializer decodes it (default: the thread's).
        """
        kept = self.threads.thread_state(thread_id)
        if kept is None:
            return None
        name = graph or self.threads.graph_of(thread_id) or ""
        return GraphState.from_dict(kept["state"], serializer=self.serializer_for(name))

    athread_state = _in_thread(thread_state)

    def close(self) -> None:
        """Release the client's connections."""
        if self._client is not None:
            self._client.destroy()
            self._client = None
        if self._claims is not None:
            self._claims.close()
            self._claims = None
        if self._threads is not None:
            self._threads.close()
            self._threads = None

    # ----------------------------------------------------------------- worker
    def serve(self, *, on_ready: Callable[[], None] | None = None) -> None:
        """Run this process as a worker until it is stopped (Ctrl-C, SIGTERM).

        ``on_ready()`` is called once the worker takes runs from the queue.
        """
        serve_until_signalled(self, on_ready)

    async def aserve(
        self, *, stop: asyncio.Event | None = None, on_ready: Callable[[], None] | None = None
    ) -> None:
        """Work as this process's worker inside a running event loop until ``stop`` is set.

        Runs execute on this loop. One worker per process.
        """
        await serve_in_loop(self, stop or asyncio.Event(), on_ready)

    @property
    def single_node(self) -> bool:
        """Whether the database is SQLite (one machine; no leases)."""
        return is_sqlite(self.database_url)

    def __repr__(self) -> str:
        from selectgraph.executors.dbos._database import redacted

        return (
            f"DBOSExecutor({redacted(self.database_url)!r}, queue={self.queue!r}, "
            f"graphs={sorted(self.graphs)})"
        )
