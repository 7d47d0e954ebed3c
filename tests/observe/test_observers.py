"""AgentObserver's thirteen methods, AsyncAgentObserver's queue, and drain()."""

from __future__ import annotations

import asyncio
import math
import threading
import time
import warnings
from typing import Any

import pytest

from selectgraph import (
    END,
    AgentGraph,
    AgentObserver,
    AsyncAgentObserver,
    GraphState,
    InMemoryCheckpointStore,
    InterruptRequest,
)
from selectgraph.core._policies import LoopAction
from selectgraph.nodes._spec import NodeContext
from selectgraph.observe import (
    GraphEvent,
    Observer,
    ObserverWarning,
    SupervisorReplanned,
    drain,
    drain_events_for,
    drain_sync,
)

METHODS = (
    "on_graph_start",
    "on_graph_end",
    "on_graph_error",
    "on_node_start",
    "on_node_end",
    "on_graph_routing",
    "on_graph_interrupt",
    "on_graph_resume",
    "on_parallel_start",
    "on_parallel_end",
    "on_stall_detected",
    "on_loop_detected",
    "on_supervisor_replan",
)


@pytest.fixture(autouse=True)
def _drained() -> Any:
    """No test leaves deliveries behind for the next one."""
    yield
    drain_sync(5.0)


# --- the seed's examples ----------------------------------------------------------------


def test_seed_graph_monitor_example_runs_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    # From seed 004, "Observer Events" / "Example".
    class GraphMonitor(AgentObserver):
        def on_graph_start(self, run_id, graph_name, entry_node, state):  # type: ignore[no-untyped-def]
            print(f"[{graph_name}] Starting at {entry_node}")

        def on_node_end(self, run_id, node_name, step, duration_ms):  # type: ignore[no-untyped-def]
            print(f"  Node {node_name} completed in {duration_ms:.0f}ms")

        def on_graph_end(self, run_id, graph_name, steps, total_duration_ms):  # type: ignore[no-untyped-def]
            print(f"[{graph_name}] Done in {steps} steps ({total_duration_ms:.0f}ms)")

    graph = AgentGraph(observers=[GraphMonitor()])
    graph.add_node("plan", lambda state: {"plan": "p"}, next_node="write")
    graph.add_node("write", lambda state: {"text": "t"}, next_node=END)
    graph.run({})

    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "[graph] Starting at plan"
    assert lines[1].startswith("  Node plan completed in ")
    assert lines[1].endswith("ms")
    assert lines[2].startswith("  Node write completed in ")
    assert lines[3].startswith("[graph] Done in 2 steps (")
    assert len(lines) == 4


def test_seed_graph_watcher_example_prints_stalls(capsys: pytest.CaptureFixture[str]) -> None:
    class GraphWatcher(AgentObserver):
        def on_loop_detected(self, run_id: str, node_name: str, loop_count: int) -> None:
            print(f"Hard loop detected at node {node_name}!")

        def on_stall_detected(self, run_id: str, node_name: str, stall_count: int) -> None:
            print(f"Stall #{stall_count} at node {node_name}")

    graph = AgentGraph(
        enable_loop_detection=False, stall_threshold=2, max_steps=3, observers=[GraphWatcher()]
    )
    graph.add_node("idle", lambda state: {}, next_node="idle")
    graph.run({})
    out = capsys.readouterr().out
    assert "Stall #2 at node idle" in out


# --- every method, with its arguments ----------------------------------------------------


class Recorder(AgentObserver):
    """Overrides all thirteen methods and keeps (method, args)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def on_graph_start(self, run_id: str, graph_name: str, entry_node: str, state: Any) -> None:
        self.calls.append(("on_graph_start", (run_id, graph_name, entry_node, state)))

    def on_graph_end(
        self, run_id: str, graph_name: str, steps: int, total_duration_ms: float
    ) -> None:
        self.calls.append(("on_graph_end", (run_id, graph_name, steps, total_duration_ms)))

    def on_graph_error(
        self, run_id: str, graph_name: str, node_name: str | None, error: Any
    ) -> None:
        self.calls.append(("on_graph_error", (run_id, graph_name, node_name, error)))

    def on_node_start(self, run_id: str, node_name: str, step: int) -> None:
        self.calls.append(("on_node_start", (run_id, node_name, step)))

    def on_node_end(self, run_id: str, node_name: str, step: int, duration_ms: float) -> None:
        self.calls.append(("on_node_end", (run_id, node_name, step, duration_ms)))

    def on_graph_routing(self, run_id: str, from_node: str, to_node: str) -> None:
        self.calls.append(("on_graph_routing", (run_id, from_node, to_node)))

    def on_graph_interrupt(self, run_id: str, node_name: str, interrupt_id: str) -> None:
        self.calls.append(("on_graph_interrupt", (run_id, node_name, interrupt_id)))

    def on_graph_resume(self, run_id: str, node_name: str | None, interrupt_id: str | None) -> None:
        self.calls.append(("on_graph_resume", (run_id, node_name, interrupt_id)))

    def on_parallel_start(self, run_id: str, group_name: str, child_nodes: list[str]) -> None:
        self.calls.append(("on_parallel_start", (run_id, group_name, child_nodes)))

    def on_parallel_end(self, run_id: str, group_name: str, child_count: int) -> None:
        self.calls.append(("on_parallel_end", (run_id, group_name, child_count)))

    def on_stall_detected(self, run_id: str, node_name: str, stall_count: int) -> None:
        self.calls.append(("on_stall_detected", (run_id, node_name, stall_count)))

    def on_loop_detected(self, run_id: str, node_name: str, loop_count: int) -> None:
        self.calls.append(("on_loop_detected", (run_id, node_name, loop_count)))

    def on_supervisor_replan(self, run_id: str, stall_count: int, new_plan: str) -> None:
        self.calls.append(("on_supervisor_replan", (run_id, stall_count, new_plan)))

    def of(self, method: str) -> list[tuple[Any, ...]]:
        return [args for name, args in self.calls if name == method]


def replan(state: Any, context: NodeContext) -> dict[str, Any]:
    """A node that reports a supervisor replan through the run's event stream."""
    assert context.emit is not None
    context.emit(
        SupervisorReplanned(
            run_id=context.run_id,
            graph=context.graph,
            step=context.step,
            timestamp=time.time(),
            stall_count=2,
            new_plan="1. ask again 2. write",
        )
    )
    return {"replanned": True}


def ask(state: Any) -> Any:
    answer = yield InterruptRequest("Go on?")
    return {"answer": answer}


def full_graph(observer: AgentObserver) -> AgentGraph:
    graph = AgentGraph("full", observers=[observer])
    graph.add_node("start", lambda state: {"started": True}, next_node="team")
    graph.add_node("a", lambda state: {"a": 1})
    graph.add_node("b", lambda state: {"b": 2})
    graph.add_parallel_nodes("team", ["a", "b"])
    graph.add_edge("team", "ask")
    graph.add_node("ask", ask, next_node="replan")
    graph.add_node("replan", replan, next_node=END)
    return graph


def test_each_method_is_called_with_the_seed_arguments() -> None:
    observer = Recorder()
    graph = full_graph(observer)
    store = InMemoryCheckpointStore()
    paused = graph.run({}, checkpoint_store=store, run_id="obs-1")
    interrupt_id = paused.interrupt_id
    assert interrupt_id is not None
    final = graph.resume(interrupt_id, "yes", checkpoint_store=store)
    assert final.stop_reason == "end"

    ((run_id, name, entry, state),) = observer.of("on_graph_start")
    assert (run_id, name, entry) == ("obs-1", "full", "start")
    assert isinstance(state, GraphState)

    node_starts = observer.of("on_node_start")
    assert [(r, n) for r, n, _ in node_starts] == [
        ("obs-1", "start"),
        ("obs-1", "team"),
        ("obs-1", "a"),
        ("obs-1", "b"),
        ("obs-1", "ask"),
        ("obs-1", "ask"),
        ("obs-1", "replan"),
    ]
    assert node_starts[0][2] == 1
    assert node_starts[-1][2] > node_starts[0][2]
    node_ends = observer.of("on_node_end")
    assert {n for _, n, _, _ in node_ends} == {"start", "team", "a", "b", "ask", "replan"}
    assert all(isinstance(ms, float) and ms >= 0 for _, _, _, ms in node_ends)

    assert ("obs-1", "start", "team") in observer.of("on_graph_routing")
    assert ("obs-1", "team", "ask") in observer.of("on_graph_routing")
    assert ("obs-1", "replan", "END") in observer.of("on_graph_routing")

    assert observer.of("on_parallel_start") == [("obs-1", "team", ["a", "b"])]
    assert observer.of("on_parallel_end") == [("obs-1", "team", 2)]
    assert observer.of("on_graph_interrupt") == [("obs-1", "ask", interrupt_id)]
    assert observer.of("on_graph_resume") == [("obs-1", "ask", interrupt_id)]
    assert observer.of("on_supervisor_replan") == [("obs-1", 2, "1. ask again 2. write")]

    ((end_run, end_name, steps, duration),) = observer.of("on_graph_end")
    assert (end_run, end_name, steps) == ("obs-1", "full", final.steps)
    assert duration >= 0
    assert observer.of("on_graph_error") == []


def test_stall_and_loop_methods() -> None:
    stalls = Recorder()
    graph = AgentGraph(
        "idle", enable_loop_detection=False, stall_threshold=2, max_steps=4, observers=[stalls]
    )
    graph.add_node("idle", lambda state: {}, next_node="idle")
    graph.run({}, run_id="stall-1")
    assert stalls.of("on_stall_detected")
    assert stalls.of("on_stall_detected")[0] == ("stall-1", "idle", 2)

    loops = Recorder()
    looping = AgentGraph("loop", on_loop=LoopAction.STOP, stall_threshold=None, observers=[loops])
    looping.add_node("again", lambda state: {"same": 1}, next_node="again")
    result = looping.run({}, run_id="loop-1")
    assert result.stop_reason == "loop"
    assert loops.of("on_loop_detected") == [("loop-1", "again", 1)]


def test_graph_error_gets_the_exception() -> None:
    observer = Recorder()
    failure = RuntimeError("disk on fire")

    def broken(state: Any) -> dict[str, Any]:
        raise failure

    graph = AgentGraph("failing", observers=[observer])
    graph.add_node("broken", broken, next_node=END)
    with pytest.raises(Exception, match="disk on fire"):
        graph.run({}, run_id="err-1")
    ((run_id, name, node, error),) = observer.of("on_graph_error")
    assert (run_id, name, node) == ("err-1", "failing", "broken")
    assert isinstance(error, BaseException)
    assert "disk on fire" in str(error)
    assert observer.of("on_graph_end") == []


def test_only_overridden_methods_are_called(monkeypatch: pytest.MonkeyPatch) -> None:
    class StartsOnly(AgentObserver):
        def __init__(self) -> None:
            self.started: list[str] = []

        def on_node_start(self, run_id: str, node_name: str, step: int) -> None:
            self.started.append(node_name)

    called: list[str] = []
    for method in METHODS:
        if method != "on_node_start":

            def spy(self: Any, *args: Any, _name: str = method) -> None:
                called.append(_name)

            monkeypatch.setattr(AgentObserver, method, spy)

    observer = StartsOnly()
    graph = full_graph(observer)
    store = InMemoryCheckpointStore()
    paused = graph.run({}, checkpoint_store=store)
    assert paused.interrupt_id is not None
    graph.resume(paused.interrupt_id, "yes", checkpoint_store=store)

    assert observer.started == ["start", "team", "a", "b", "ask", "ask", "replan"]
    assert called == []


# --- failing observers -------------------------------------------------------------------


def test_a_raising_observer_never_breaks_the_run() -> None:
    class Broken(AgentObserver):
        def on_node_start(self, run_id: str, node_name: str, step: int) -> None:
            raise ValueError("observer bug")

        def on_graph_routing(self, run_id: str, from_node: str, to_node: str) -> None:
            raise KeyError("also broken")

    def build(*observers: Any) -> AgentGraph:
        graph = AgentGraph("robust", observers=list(observers))
        graph.add_node("one", lambda state: {"x": 1}, next_node="two")
        graph.add_node("two", lambda state: {"y": 2}, next_node=END)
        return graph

    alone: list[GraphEvent] = []
    build(alone.append).run({})
    before: list[GraphEvent] = []
    after = Recorder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = build(before.append, Broken(), after).run({})

    assert result.stop_reason == "end"
    assert result.state["y"] == 2
    assert [type(e) for e in before] == [type(e) for e in alone]
    assert [n for _, n, _ in after.of("on_node_start")] == ["one", "two"]
    assert len(after.of("on_graph_routing")) == 2
    assert len(after.of("on_graph_end")) == 1


# --- async observers ---------------------------------------------------------------------


class SlowAsync(AsyncAgentObserver):
    """Each call takes ``delay``; records (method, node, start, end)."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.calls: list[tuple[str, str, float, float]] = []
        self.active = 0
        self.max_active = 0

    async def _take(self, method: str, what: str) -> None:
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        started = time.monotonic()
        await asyncio.sleep(self.delay)
        self.active -= 1
        self.calls.append((method, what, started, time.monotonic()))

    async def a_on_node_start(self, run_id: str, node_name: str, step: int) -> None:
        await self._take("node_start", node_name)

    async def a_on_node_end(
        self, run_id: str, node_name: str, step: int, duration_ms: float
    ) -> None:
        await self._take("node_end", node_name)

    async def a_on_graph_end(
        self, run_id: str, graph_name: str, steps: int, total_duration_ms: float
    ) -> None:
        await self._take("graph_end", graph_name)


SEVEN_CALLS = [
    ("node_start", "n1"),
    ("node_end", "n1"),
    ("node_start", "n2"),
    ("node_end", "n2"),
    ("node_start", "n3"),
    ("node_end", "n3"),
    ("graph_end", "async"),
]


def three_nodes(*observers: Any, name: str = "async") -> AgentGraph:
    graph = AgentGraph(name, observers=list(observers))
    graph.add_node("n1", lambda state: {"a": 1}, next_node="n2")
    graph.add_node("n2", lambda state: {"b": 1}, next_node="n3")
    graph.add_node("n3", lambda state: {"c": 1}, next_node=END)
    return graph


def test_async_observer_is_awaited_in_order_one_at_a_time_after_the_run() -> None:
    slow = SlowAsync(0.05)
    started = time.monotonic()
    result = three_nodes(slow).run({})
    run_time = time.monotonic() - started
    assert result.stop_reason == "end"
    assert run_time < 0.2  # seven calls of 50 ms would take 350 ms: the run did not wait
    assert len(slow.calls) < 7

    summary = asyncio.run(drain(timeout=5))
    assert not summary.timed_out
    assert summary.undelivered == 0
    assert [(m, w) for m, w, _, _ in slow.calls] == SEVEN_CALLS
    assert slow.max_active == 1
    for (_, _, _, end), (_, _, start, _) in zip(slow.calls, slow.calls[1:], strict=False):
        assert start >= end


def test_a_raising_async_observer_warns_and_the_others_continue() -> None:
    class Raises(AsyncAgentObserver):
        async def a_on_node_start(self, run_id: str, node_name: str, step: int) -> None:
            raise RuntimeError(f"cannot handle {node_name}")

    good = SlowAsync(0.0)
    with pytest.warns(ObserverWarning, match="cannot handle n") as caught:  # noqa: PT031
        three_nodes(Raises(), good).run({})
        summary = drain_sync(5)
    assert summary.observer_errors == 3
    texts = [str(w.message) for w in caught if w.category is ObserverWarning]
    assert [t.split("cannot handle ")[1].split(" ")[0] for t in texts] == ["n1", "n2", "n3"]
    # Order across the terminal event is covered by the test below.
    assert sorted((m, w) for m, w, _, _ in good.calls) == sorted(SEVEN_CALLS)


def test_terminal_event_keeps_its_place_after_an_observer_that_ignores_it() -> None:
    class StartsOnly(AsyncAgentObserver):
        async def a_on_node_start(self, run_id: str, node_name: str, step: int) -> None:
            await asyncio.sleep(0.01)

    later = SlowAsync(0.01)
    three_nodes(StartsOnly(), later).run({})
    drain_sync(5)
    assert [(m, w) for m, w, _, _ in later.calls] == SEVEN_CALLS


def test_async_on_event_of_a_plain_observer_is_awaited() -> None:
    class AsyncPlain(Observer):
        def __init__(self) -> None:
            self.seen: list[str] = []

        async def on_event(self, event: GraphEvent) -> None:  # type: ignore[override]
            await asyncio.sleep(0)
            self.seen.append(type(event).__name__)

    observer = AsyncPlain()
    result = three_nodes(observer).run({})
    asyncio.run(drain(timeout=5))
    assert observer.seen == [type(e).__name__ for e in result.trace]
    assert observer.seen[0] == "RunStarted"
    assert observer.seen[-1] == "RunFinished"


# --- drain -------------------------------------------------------------------------------


def test_drain_timeout_on_a_stuck_observer_reports_and_later_runs_still_deliver() -> None:
    class Stuck(AsyncAgentObserver):
        async def a_on_node_start(self, run_id: str, node_name: str, step: int) -> None:
            await asyncio.sleep(30)

    three_nodes(Stuck()).run({})
    started = time.monotonic()
    summary = asyncio.run(drain(timeout=0.2))
    assert time.monotonic() - started < 2
    assert summary.timed_out
    assert summary.timeout_reached
    assert summary.undelivered > 0

    after = SlowAsync(0.0)
    three_nodes(after).run({})
    later = asyncio.run(drain(timeout=5))
    assert not later.timed_out
    assert len(after.calls) == 7


def test_drain_events_for_waits_for_one_run_only() -> None:
    gate = threading.Event()

    class Gated(AsyncAgentObserver):
        def __init__(self) -> None:
            self.nodes: list[str] = []

        async def a_on_node_start(self, run_id: str, node_name: str, step: int) -> None:
            while run_id == "blocked" and not gate.is_set():
                await asyncio.sleep(0.01)
            self.nodes.append(f"{run_id}:{node_name}")

    observer = Gated()
    graph = three_nodes(observer)
    graph.run({}, run_id="blocked")
    graph.run({}, run_id="free")

    summary = asyncio.run(drain_events_for("free", timeout=5))
    assert not summary.timed_out
    assert [n for n in observer.nodes if n.startswith("free:")] == ["free:n1", "free:n2", "free:n3"]
    assert not [n for n in observer.nodes if n.startswith("blocked:")]

    waiting = asyncio.run(drain_events_for("blocked", timeout=0.1))
    assert waiting.timed_out
    assert waiting.undelivered > 0
    gate.set()  # drain_events_for cancelled nothing: the blocked run's queue goes on
    assert not asyncio.run(drain_events_for("blocked", timeout=5)).timed_out
    assert [n for n in observer.nodes if n.startswith("blocked:")] == [
        "blocked:n1",
        "blocked:n2",
        "blocked:n3",
    ]


@pytest.mark.parametrize("timeout", [-1, -0.001, math.nan])
def test_drain_rejects_negative_or_nan_timeouts(timeout: float) -> None:
    with pytest.raises(ValueError, match="timeout"):
        asyncio.run(drain(timeout))
    with pytest.raises(ValueError, match="timeout"):
        asyncio.run(drain_events_for("any", timeout=timeout))
    with pytest.raises(ValueError, match="timeout"):
        drain_sync(timeout)
