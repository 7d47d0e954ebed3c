"""Token, cost and time budgets: a run stops before the model call that would pass one."""

from __future__ import annotations

import time
from typing import Any

import pytest

from selectgraph import END, Agent, AgentConfig, AgentGraph, InMemoryCheckpointStore, Usage
from selectgraph.core._control import Budget
from selectgraph.core._result import GraphResult
from selectgraph.observe import BudgetExceeded, CheckpointSaved, NodeFinished
from selectgraph.providers import LocalProvider, LocalReply, ModelPrice, _pricing, register_price
from selectgraph.providers._base import CompletionRequest

CALL_IN, CALL_OUT = 40, 10
CALL_TOKENS = CALL_IN + CALL_OUT
PRICED_MODEL = "budget-test-model"
PRICE = ModelPrice(input_per_mtok=1000.0, output_per_mtok=2000.0)  # $0.06 per call below


def priced_usage() -> Usage:
    return Usage(
        input_tokens=CALL_IN,
        output_tokens=CALL_OUT,
        cost_usd=PRICE.cost(CALL_IN, CALL_OUT),
        calls=1,
    )


def looping_provider(latency: float = 0.0) -> LocalProvider:
    """Answers every call with the same known usage (and its cost at PRICE)."""

    def reply(request: CompletionRequest) -> LocalReply:
        return LocalReply(text="more", usage=priced_usage(), latency=latency)

    return LocalProvider(script=[reply] * 1000)


def looping_graph(provider: LocalProvider, **options: Any) -> AgentGraph:
    """One agent node whose edge leads back to itself: only a budget stops it."""
    graph = AgentGraph(
        "looping", enable_loop_detection=False, stall_threshold=None, max_steps=1000, **options
    )
    agent = Agent(AgentConfig(name="worker", model=PRICED_MODEL), provider=provider)
    graph.add_node("worker", agent, next_node="worker")
    return graph


@pytest.fixture(autouse=True)
def _price(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_pricing, "_overrides", dict(_pricing._overrides))
    register_price(PRICED_MODEL, PRICE)


def budget_event(result: GraphResult) -> BudgetExceeded:
    found = [e for e in result.trace if isinstance(e, BudgetExceeded)]
    assert len(found) == 1, f"expected one BudgetExceeded, got {found}"
    return found[0]


def assert_stopped(
    result: GraphResult, reason: str, provider: LocalProvider, *, cut: int = 0
) -> None:
    assert result.stop_reason == reason
    assert result.quality == "degraded"
    assert budget_event(result).budget == reason
    # Partial work is kept: the completed visits' output is in the state.
    assert result.state.last_output == "more"
    assert result.node_order
    assert set(result.node_order) == {"worker"}
    # Every request the provider received was counted (nothing sent behind the budget's
    # back), but for a call the time budget cut short in flight (``cut``: at most one).
    assert result.total_usage.calls <= len(provider.requests) <= result.total_usage.calls + cut


def test_token_budget_stops_a_looping_graph_before_the_call_that_would_pass_it() -> None:
    provider = looping_provider()
    limit = 500
    result = looping_graph(provider, max_total_tokens=limit).run("go")

    assert_stopped(result, "token_budget", provider)
    total = result.total_usage.total_tokens
    assert total <= limit + CALL_TOKENS  # at most one call of overshoot
    assert total >= limit - 2 * CALL_TOKENS  # and it did not stop absurdly early
    event = budget_event(result)
    assert event.limit == limit
    assert event.used == total  # what was used when the next call was refused


def test_refused_call_is_never_sent_to_the_provider() -> None:
    provider = looping_provider()
    result = looping_graph(provider, max_total_tokens=300).run("go")

    calls = len(provider.requests)
    # The refusal came before the (calls + 1)-th request: its used count equals
    # exactly what the sent calls reported, and it says how much the next one needed.
    event = budget_event(result)
    assert event.used == calls * CALL_TOKENS
    assert event.used + event.needed > 300 or event.used >= 300
    assert provider.remaining == 1000 - calls


def test_cost_budget_stops_with_a_registered_price() -> None:
    provider = looping_provider()
    per_call = PRICE.cost(CALL_IN, CALL_OUT)
    limit = 5.5 * per_call
    result = looping_graph(provider, max_cost_usd=limit).run("go")

    assert_stopped(result, "cost_budget", provider)
    assert result.total_usage.cost_usd <= limit + per_call
    assert 1 <= len(provider.requests) <= 6
    assert budget_event(result).limit == pytest.approx(limit)


def test_time_budget_stops_a_slow_looping_graph() -> None:
    provider = looping_provider(latency=0.05)
    started = time.perf_counter()
    result = looping_graph(provider, max_duration=0.3).run("go")
    elapsed = time.perf_counter() - started

    assert_stopped(result, "time_budget", provider, cut=1)
    assert elapsed < 2.0
    assert 2 <= len(provider.requests) <= 10


def test_time_budget_checked_at_node_boundaries_of_plain_nodes() -> None:
    graph = AgentGraph(
        "sleepy",
        enable_loop_detection=False,
        stall_threshold=None,
        max_steps=1000,
        max_duration=0.2,
    )
    ticks: list[int] = []

    def nap(state: Any) -> dict[str, Any]:
        time.sleep(0.05)
        ticks.append(1)
        return {"ticks": len(ticks)}

    graph.add_node("nap", nap, next_node="nap")
    result = graph.run({})
    assert result.stop_reason == "time_budget"
    assert result.quality == "degraded"
    assert result.state["ticks"] == len(ticks)
    assert 2 <= len(ticks) <= 8


def test_token_budget_covers_agents_inside_a_subgraph() -> None:
    provider = looping_provider()
    inner = AgentGraph("inner", enable_loop_detection=False, stall_threshold=None, max_steps=1000)
    inner.add_node(
        "worker",
        Agent(AgentConfig(name="worker", model=PRICED_MODEL), provider=provider),
        next_node="worker",
    )
    outer = AgentGraph("outer", max_total_tokens=400)
    outer.add_subgraph("inner", inner, next_node=END)
    result = outer.run("go")

    assert result.stop_reason == "token_budget"
    assert result.quality == "degraded"
    assert budget_event(result).budget == "token_budget"
    assert result.total_usage.total_tokens <= 400 + CALL_TOKENS
    assert len(provider.requests) <= 400 // CALL_TOKENS + 1


def test_token_budget_covers_agents_in_parallel_branches() -> None:
    providers = {name: looping_provider() for name in ("a", "b")}
    graph = AgentGraph(
        "fan",
        enable_loop_detection=False,
        stall_threshold=None,
        max_steps=1000,
        max_total_tokens=450,
    )
    for name, provider in providers.items():
        graph.add_node(name, Agent(AgentConfig(name=name, model=PRICED_MODEL), provider=provider))
    graph.add_parallel_nodes("team", ["a", "b"])
    graph.add_edge("team", "team")
    result = graph.run("go")

    assert result.stop_reason == "token_budget"
    assert result.quality == "degraded"
    sent = sum(len(p.requests) for p in providers.values())
    assert sent * CALL_TOKENS <= 450 + 2 * CALL_TOKENS  # each concurrent branch may overshoot once
    assert any(isinstance(e, BudgetExceeded) for e in result.trace)


def test_budget_stop_saves_a_checkpoint_and_a_larger_budget_continues_it() -> None:
    provider = looping_provider()
    done: list[str] = []

    def prepare(state: Any) -> dict[str, Any]:
        done.append("prepare")
        return {"prepared": True}

    def build(limit: int) -> AgentGraph:
        graph = AgentGraph(
            "resumable",
            enable_loop_detection=False,
            stall_threshold=None,
            max_steps=1000,
            max_total_tokens=limit,
        )
        agent = Agent(AgentConfig(name="worker", model=PRICED_MODEL), provider=provider)
        graph.add_node("prepare", prepare, next_node="worker")
        graph.add_node("worker", agent, next_node="finish")
        graph.add_node("finish", lambda state: {"finished": True}, next_node=END)
        return graph

    store = InMemoryCheckpointStore()
    # The worker's one call (prompt estimate + reply) does not fit in 5 tokens.
    first = build(5).run("go", checkpoint_store=store, run_id="b-1")
    assert first.stop_reason == "token_budget"
    assert provider.requests == []
    assert done == ["prepare"]
    saved = [e for e in first.trace if isinstance(e, CheckpointSaved)]
    assert saved
    assert saved[-1].trigger == "budget"
    assert first.checkpoint_id == saved[-1].checkpoint_id

    second = build(10_000).run(None, checkpoint_store=store, run_id="b-1")
    assert second.stop_reason == "end"
    assert second.state["finished"] is True
    assert second.state["prepared"] is True
    assert done == ["prepare"]  # not redone
    assert len(provider.requests) == 1


def test_stop_inside_a_node_records_it_as_cancelled() -> None:
    provider = looping_provider()
    result = looping_graph(provider, max_total_tokens=5).run("go")
    finished = [e for e in result.trace if isinstance(e, NodeFinished)]
    assert finished[-1].outcome == "cancelled"
    assert finished[-1].error is not None
    assert "token_budget" in finished[-1].error
    assert provider.requests == []


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_total_tokens", -1),
        ("max_total_tokens", 0),
        ("max_total_tokens", True),
        ("max_cost_usd", -0.5),
        ("max_cost_usd", False),
        ("max_duration", -1.0),
        ("max_duration", "10"),
    ],
)
def test_budget_rejects_bad_limits(field: str, value: Any) -> None:
    with pytest.raises(ValueError, match=field):
        Budget(**{field: value})
    with pytest.raises(ValueError, match=field):
        AgentGraph("bad", **{field: value})


def test_budget_accepts_positive_limits_and_none() -> None:
    assert Budget().empty
    budget = Budget(max_total_tokens=10, max_cost_usd=0.5, max_duration=1)
    assert not budget.empty


def _stuck_provider() -> LocalProvider:
    """Answers the first call at once; the second never ends on its own."""

    def reply(latency: float) -> Any:
        def answer(request: CompletionRequest) -> LocalReply:
            return LocalReply(text="more", usage=priced_usage(), latency=latency)

        return answer

    return LocalProvider(script=[reply(0.0), reply(600.0)])


async def test_the_time_budget_cancels_a_call_still_in_flight_at_the_deadline() -> None:
    graph = looping_graph(_stuck_provider(), max_duration=0.5)
    started = time.perf_counter()
    result = await graph.arun("go")
    elapsed = time.perf_counter() - started

    assert result.stop_reason == "time_budget"
    assert result.state.last_output == "more"  # what the first call answered is kept
    assert elapsed < 5.5  # the deadline plus the five seconds
    assert budget_event(result).budget == "time_budget"


async def test_a_streamed_call_in_flight_is_cut_at_the_deadline_too() -> None:
    graph = looping_graph(_stuck_provider(), max_duration=0.5)
    started = time.perf_counter()
    events = [event async for event in graph.astream("go")]
    elapsed = time.perf_counter() - started

    assert elapsed < 5.5
    assert any(getattr(e, "budget", None) == "time_budget" for e in events)
