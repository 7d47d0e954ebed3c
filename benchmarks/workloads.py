"""Workloads: the same trivial graphs built with selectgraph and with LangGraph.

Each builder returns a zero-argument callable that performs one measured unit
of work (one run), so the harness can time both libraries identically. An
async workload's callable returns an awaitable; the harness awaits it on an
event loop it owns. Builders of workloads that check their result run it once
before returning, so a wrong engine is not timed as a fast one.

The fan-out workloads use selectgraph's parallel API (issue 8). Until the
engine has it, their builders raise :class:`NotAvailable` and the harness
prints why instead of timing them.
"""

from __future__ import annotations

import asyncio
import operator
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Annotated, Any, Protocol, TypedDict

import selectgraph
from selectgraph import END, AgentGraph, ErrorPolicy, GraphState, append

LOOP_STEPS = 1000
BIG_ITEMS = 10_000
BIG_STEPS = 100
FAN = 100
"""Branches of the fanout workloads."""
IO_BRANCHES = 10
IO_SECONDS = 0.05
"""Branches of parallel_io, and how long each one waits."""
CHAIN_SECONDS = 0.05
"""How long each node of the concurrent chain awaits."""

Workload = Callable[[], Any]
AsyncWorkload = Callable[[], Awaitable[Any]]
Concurrent = Callable[[int], Coroutine[Any, Any, None]]
"""``(runs) -> coroutine`` that performs ``runs`` runs at once and waits for all."""


class Node(Protocol):
    """A node function as both libraries call it (LangGraph matches the parameter's name)."""

    def __call__(self, state: Any) -> Any: ...


class NotAvailable(Exception):
    """A workload needs an API that this version of selectgraph lacks."""


def _require(*names: str) -> None:
    """Raise NotAvailable unless selectgraph has every named public attribute.

    ``"AgentGraph.add_parallel_nodes"`` checks a method; a bare name checks the package.
    """
    for name in names:
        owner, _, attribute = name.rpartition(".")
        holder = AgentGraph if owner == "AgentGraph" else selectgraph
        if not hasattr(holder, attribute):
            raise NotAvailable(f"selectgraph has no {name} yet (parallel branches, issue 8)")


def _check(value: Any, expected: Any, what: str) -> None:
    if value != expected:
        raise RuntimeError(f"{what}: the workload computed {value!r}, expected {expected!r}")


class Counter(TypedDict):
    x: int


class Big(TypedDict):
    items: Annotated[list[int], append]
    i: int


def _inc(state: GraphState) -> dict[str, int]:
    return {"x": state["x"] + 1}


def _add_item(state: GraphState) -> dict[str, Any]:
    return {"items": [state["i"]], "i": state["i"] + 1}


# ---------------------------------------------------------------- selectgraph
def selectgraph_linear3(**options: Any) -> Workload:
    """A three-node chain; one run."""
    graph = AgentGraph.chain(_inc, _inc, _inc, **options).compile()
    return lambda: graph.run({"x": 0})


def selectgraph_loop(**options: Any) -> Workload:
    """One node looping on a conditional back-edge LOOP_STEPS times; one run."""
    graph = AgentGraph("loop", max_steps=None, **options)
    graph.add_node("n", _inc)
    graph.add_edge("n", "n", condition=f"x < {LOOP_STEPS}")
    graph.add_edge("n", END)
    graph.set_entry("n")
    compiled = graph.compile()
    return lambda: compiled.run({"x": 0})


def selectgraph_bigstate(**options: Any) -> Workload:
    """BIG_STEPS steps each appending one item to a BIG_ITEMS-item list; one run."""
    graph = AgentGraph("big", state_schema=Big, max_steps=None, **options)
    graph.add_node("n", _add_item)
    graph.add_edge("n", "n", condition=f"i < {BIG_STEPS}")
    graph.add_edge("n", END)
    graph.set_entry("n")
    compiled = graph.compile()
    items = list(range(BIG_ITEMS))
    return lambda: compiled.run({"items": items, "i": 0})


def selectgraph_keys(keys: int, steps: int = 100) -> Workload:
    """A loop over a state holding ``keys`` keys; each step writes one of them."""
    graph = AgentGraph("keys", max_steps=None)
    graph.add_node("n", lambda s: {"k0": s["k0"] + 1})
    graph.add_edge("n", "n", condition=f"k0 < {steps}")
    graph.add_edge("n", END)
    graph.set_entry("n")
    compiled = graph.compile()
    data = {f"k{i}": 0 for i in range(keys)}
    return lambda: compiled.run(data)


async def _seed_step(state: GraphState) -> GraphState:
    # Seed 004's style: mutate state.data in place and hand the state back.
    state.data["i"] = state.data["i"] + 1
    return state


def _seed_route(state: GraphState) -> object:
    return "n" if state.data["i"] < LOOP_STEPS else END


def selectgraph_loop_seed() -> AsyncWorkload:
    """loop1000 as seed 004 writes it: async node, router function, RETRY; one arun()."""
    graph = AgentGraph("seed_loop", max_steps=None, error_policy=ErrorPolicy.RETRY)
    graph.add_node("n", _seed_step)
    graph.add_conditional_edge("n", _seed_route)
    graph.set_entry("n")
    compiled = graph.compile()
    result = asyncio.run(compiled.arun({"i": 0}))
    _check(result.state["i"], LOOP_STEPS, "loop1000_seed")
    return lambda: compiled.arun({"i": 0})


class Fan(TypedDict):
    items: list[int]
    i: int
    results: Annotated[list[int], append]
    total: int


def _noop(state: GraphState) -> None:
    return None


async def _fan_work(state: GraphState) -> dict[str, Any]:
    return {"results": [state["i"]]}


def _fan_join(state: GraphState) -> dict[str, Any]:
    return {"total": len(state["results"])}


def selectgraph_fanout(items: int = 0) -> AsyncWorkload:
    """A router scattering FAN async branches over one node, then a join; one arun().

    Args:
        items: Length of a list the state holds, which branches must not copy.
    """
    _require("Scatter")
    from selectgraph import Scatter  # type: ignore[attr-defined, unused-ignore]

    graph = AgentGraph("fanout", state_schema=Fan, max_steps=None)
    graph.add_node("start", _noop)
    graph.add_node("work", _fan_work)
    graph.add_node("join", _fan_join)
    graph.add_conditional_edge("start", lambda s: [Scatter("work", {"i": i}) for i in range(FAN)])
    graph.add_edge("work", "join")
    graph.add_edge("join", END)
    graph.set_entry("start")
    compiled = graph.compile()
    start: dict[str, Any] = {"items": list(range(items)), "i": -1, "results": [], "total": 0}
    result = asyncio.run(compiled.arun(start))
    _check(result.state["total"], FAN, f"fanout{FAN} (selectgraph)")
    return lambda: compiled.arun(start)


def selectgraph_fanout_big() -> AsyncWorkload:
    """fanout over a state holding a BIG_ITEMS-item list; one arun()."""
    return selectgraph_fanout(BIG_ITEMS)


class Done(TypedDict):
    done: Annotated[list[int], append]


def _io_branch(index: int, blocking: bool) -> Node:
    """A branch of parallel_io (for either library) that waits, then writes its index."""
    if blocking:

        def wait(state: Any) -> dict[str, Any]:
            time.sleep(IO_SECONDS)
            return {"done": [index]}

        return wait

    async def await_(state: Any) -> dict[str, Any]:
        await asyncio.sleep(IO_SECONDS)
        return {"done": [index]}

    return await_


def _io_graph(blocking: bool) -> AgentGraph:
    """IO_BRANCHES waiting branches between a start and a join.

    The async form fans out with a list of targets, the blocking form through a
    parallel group (whose sync nodes run in worker threads): both forms get timed.
    """
    # A list of targets in add_edge lands with the rest of the parallel API.
    _require("AgentGraph.add_parallel_nodes" if blocking else "Scatter")
    names = [f"b{i}" for i in range(IO_BRANCHES)]
    graph = AgentGraph("parallel_io", state_schema=Done, max_steps=None)
    graph.add_node("start", _noop)
    for index, name in enumerate(names):
        graph.add_node(name, _io_branch(index, blocking))
    graph.add_node("join", _noop)
    if blocking:
        graph.add_parallel_nodes("group", names)  # type: ignore[attr-defined, unused-ignore]
        graph.add_edge("start", "group")
        graph.add_edge("group", "join")
    else:
        graph.add_edge("start", names)  # type: ignore[arg-type, unused-ignore]
        for name in names:
            graph.add_edge(name, "join")
    graph.add_edge("join", END)
    graph.set_entry("start")
    return graph


def selectgraph_parallel_io() -> AsyncWorkload:
    """IO_BRANCHES async branches each awaiting IO_SECONDS, then a join; one arun()."""
    compiled = _io_graph(blocking=False).compile()
    result = asyncio.run(compiled.arun({"done": []}))
    _check(sorted(result.state["done"]), list(range(IO_BRANCHES)), "parallel_io (selectgraph)")
    return lambda: compiled.arun({"done": []})


def selectgraph_parallel_io_sync() -> Workload:
    """IO_BRANCHES sync branches each sleeping IO_SECONDS, then a join; one run()."""
    compiled = _io_graph(blocking=True).compile()
    result = compiled.run({"done": []})
    _check(sorted(result.state["done"]), list(range(IO_BRANCHES)), "parallel_io_sync")
    return lambda: compiled.run({"done": []})


async def _chain_step(state: GraphState) -> dict[str, int]:
    await asyncio.sleep(CHAIN_SECONDS)
    return {"x": state["x"] + 1}


def selectgraph_concurrent() -> Concurrent:
    """``runs`` concurrent runs of a 3-node chain whose nodes each await CHAIN_SECONDS."""
    compiled = AgentGraph.chain(_chain_step, _chain_step, _chain_step).compile()

    async def go(runs: int) -> None:
        results = await asyncio.gather(*(compiled.arun({"x": 0}) for _ in range(runs)))
        _check(results[-1].state["x"], 3, "concurrent (selectgraph)")

    return go


async def _plain_chain() -> None:
    for _ in range(3):
        await asyncio.sleep(CHAIN_SECONDS)


def asyncio_concurrent() -> Concurrent:
    """The baseline: ``runs`` tasks each awaiting CHAIN_SECONDS three times in a row."""

    async def go(runs: int) -> None:
        await asyncio.gather(*(_plain_chain() for _ in range(runs)))

    return go


# ------------------------------------------------------------------ LangGraph
class LGBig(TypedDict):
    items: Annotated[list[int], operator.add]
    i: int


def _lg_inc(state: Counter) -> dict[str, int]:
    return {"x": state["x"] + 1}


def _lg_add_item(state: LGBig) -> dict[str, Any]:
    return {"items": [state["i"]], "i": state["i"] + 1}


def langgraph_linear3() -> Workload:
    """LangGraph: a three-node chain; one invoke."""
    from langgraph.graph import END as LG_END
    from langgraph.graph import START, StateGraph

    builder = StateGraph(Counter)
    for name in ("a", "b", "c"):
        builder.add_node(name, _lg_inc)
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", "c")
    builder.add_edge("c", LG_END)
    graph = builder.compile()
    return lambda: graph.invoke({"x": 0})


def langgraph_loop() -> Workload:
    """LangGraph: one node looping on a conditional edge LOOP_STEPS times; one invoke."""
    from langchain_core.runnables import RunnableConfig
    from langgraph.graph import END as LG_END
    from langgraph.graph import START, StateGraph

    builder = StateGraph(Counter)
    builder.add_node("n", _lg_inc)
    builder.add_edge(START, "n")
    builder.add_conditional_edges("n", lambda s: "n" if s["x"] < LOOP_STEPS else LG_END)
    graph = builder.compile()
    config: RunnableConfig = {"recursion_limit": LOOP_STEPS + 10}
    return lambda: graph.invoke({"x": 0}, config)


def langgraph_bigstate() -> Workload:
    """LangGraph: BIG_STEPS steps appending to a BIG_ITEMS-item list; one invoke."""
    from langchain_core.runnables import RunnableConfig
    from langgraph.graph import END as LG_END
    from langgraph.graph import START, StateGraph

    builder = StateGraph(LGBig)
    builder.add_node("n", _lg_add_item)
    builder.add_edge(START, "n")
    builder.add_conditional_edges("n", lambda s: "n" if s["i"] < BIG_STEPS else LG_END)
    graph = builder.compile()
    items = list(range(BIG_ITEMS))
    config: RunnableConfig = {"recursion_limit": BIG_STEPS + 10}
    return lambda: graph.invoke({"items": items, "i": 0}, config)


class LGSeed(TypedDict):
    i: int


async def _lg_seed_step(state: LGSeed) -> dict[str, int]:
    return {"i": state["i"] + 1}


def langgraph_loop_seed() -> AsyncWorkload:
    """LangGraph: loop1000 with an async node, a router and a retry policy; one ainvoke."""
    from langchain_core.runnables import RunnableConfig
    from langgraph.graph import END as LG_END
    from langgraph.graph import START, StateGraph
    from langgraph.types import RetryPolicy

    builder = StateGraph(LGSeed)
    builder.add_node("n", _lg_seed_step, retry_policy=RetryPolicy())
    builder.add_edge(START, "n")
    builder.add_conditional_edges("n", lambda s: "n" if s["i"] < LOOP_STEPS else LG_END)
    graph = builder.compile()
    config: RunnableConfig = {"recursion_limit": LOOP_STEPS + 10}
    result = asyncio.run(graph.ainvoke({"i": 0}, config))
    _check(result["i"], LOOP_STEPS, "loop1000_seed (LangGraph)")
    return lambda: graph.ainvoke({"i": 0}, config)


class LGFan(TypedDict):
    items: list[int]
    i: int
    results: Annotated[list[int], operator.add]
    total: int


def _lg_noop(state: Any) -> dict[str, Any]:
    return {}


async def _lg_fan_work(state: LGFan) -> dict[str, Any]:
    return {"results": [state["i"]]}


def _lg_fan_join(state: LGFan) -> dict[str, Any]:
    return {"total": len(state["results"])}


def langgraph_fanout(items: int = 0) -> AsyncWorkload:
    """LangGraph: FAN ``Send``s to one async node, then a join; one ainvoke.

    Each Send carries the parent state plus its own ``i`` (a shallow copy), so a
    branch sees what a selectgraph Scatter branch sees.
    """
    from langgraph.graph import END as LG_END
    from langgraph.graph import START, StateGraph
    from langgraph.types import Send

    builder = StateGraph(LGFan)
    builder.add_node("start", _lg_noop)
    builder.add_node("work", _lg_fan_work)
    builder.add_node("join", _lg_fan_join)
    builder.add_edge(START, "start")
    builder.add_conditional_edges(
        "start", lambda s: [Send("work", {**s, "i": i}) for i in range(FAN)]
    )
    builder.add_edge("work", "join")
    builder.add_edge("join", LG_END)
    graph = builder.compile()
    start: LGFan = {"items": list(range(items)), "i": -1, "results": [], "total": 0}
    result = asyncio.run(graph.ainvoke(start))
    _check(result["total"], FAN, f"fanout{FAN} (LangGraph)")
    return lambda: graph.ainvoke(start)


def langgraph_fanout_big() -> AsyncWorkload:
    """LangGraph: fanout over a state holding a BIG_ITEMS-item list; one ainvoke."""
    return langgraph_fanout(BIG_ITEMS)


class LGDone(TypedDict):
    done: Annotated[list[int], operator.add]


def _lg_io_graph(blocking: bool) -> Any:
    """LangGraph: IO_BRANCHES waiting branches, fanned out by a list of edges, then a join."""
    from langgraph.graph import END as LG_END
    from langgraph.graph import START, StateGraph

    names = [f"b{i}" for i in range(IO_BRANCHES)]
    builder = StateGraph(LGDone)
    builder.add_node("start", _lg_noop)
    for index, name in enumerate(names):
        builder.add_node(name, _io_branch(index, blocking))
        builder.add_edge("start", name)
        builder.add_edge(name, "join")
    builder.add_node("join", _lg_noop)
    builder.add_edge(START, "start")
    builder.add_edge("join", LG_END)
    return builder.compile()


def langgraph_parallel_io() -> AsyncWorkload:
    """LangGraph: IO_BRANCHES async branches each awaiting IO_SECONDS; one ainvoke."""
    graph = _lg_io_graph(blocking=False)
    result = asyncio.run(graph.ainvoke({"done": []}))
    _check(sorted(result["done"]), list(range(IO_BRANCHES)), "parallel_io (LangGraph)")
    return lambda: graph.ainvoke({"done": []})


def langgraph_parallel_io_sync() -> Workload:
    """LangGraph: IO_BRANCHES sync branches each sleeping IO_SECONDS; one invoke."""
    graph = _lg_io_graph(blocking=True)
    result = graph.invoke({"done": []})
    _check(sorted(result["done"]), list(range(IO_BRANCHES)), "parallel_io_sync (LangGraph)")
    return lambda: graph.invoke({"done": []})


def langgraph_concurrent() -> Concurrent:
    """LangGraph: ``runs`` concurrent ainvokes of a 3-node chain awaiting CHAIN_SECONDS each."""
    from langgraph.graph import END as LG_END
    from langgraph.graph import START, StateGraph

    builder = StateGraph(Counter)
    for name in ("a", "b", "c"):
        builder.add_node(name, _lg_chain_step)
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", "c")
    builder.add_edge("c", LG_END)
    graph = builder.compile()

    async def go(runs: int) -> None:
        results = await asyncio.gather(*(graph.ainvoke({"x": 0}) for _ in range(runs)))
        _check(results[-1]["x"], 3, "concurrent (LangGraph)")

    return go


async def _lg_chain_step(state: Counter) -> dict[str, int]:
    await asyncio.sleep(CHAIN_SECONDS)
    return {"x": state["x"] + 1}
