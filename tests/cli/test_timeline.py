"""The lines ``runs show`` prints for each kind of stored event."""

from __future__ import annotations

from typing import Any

from selectgraph import END, AgentGraph, InMemoryCheckpointStore
from selectgraph.cli._timeline import moments, rows, totals


def event(name: str, at: float, **fields: Any) -> dict[str, Any]:
    return {"event": name, "timestamp": 100.0 + at, "step": fields.pop("step", 1), **fields}


LOG = [
    event("RunStarted", 0, step=0, entry="plan"),
    event("NodeStarted", 0.01, node="plan", node_path=["plan"], visit=2),
    event("LLMCallStarted", 0.02, node="plan", model="gpt-x"),
    event(
        "LLMCallFinished",
        0.5,
        node="plan",
        node_path=["plan"],
        model="gpt-x",
        input_tokens=120,
        output_tokens=30,
        cost_usd=0.0012,
        duration_ms=480.0,
    ),
    event("LLMCallFinished", 0.6, node="plan", model="local", input_tokens=5, duration_ms=1.0),
    event("ToolCallStarted", 0.61, node="plan", tool="search", node_path=["plan"]),
    event("ToolCallFinished", 0.7, node="plan", tool="search", duration_ms=1500.0, error="timeout"),
    event("NodeRetried", 0.71, node="plan", attempt=1, error="flaky", delay_s=0.5),
    event(
        "NodeFinished",
        0.8,
        node="plan",
        node_path=["plan"],
        outcome="failed",
        duration_ms=790.0,
        attempts=2,
        error="ValueError: no plan",
    ),
    event("ParallelStarted", 0.81, source="plan", branches=["a", "b"]),
    event(
        "NodeStarted",
        0.82,
        node="a",
        node_path=["a"],
        visit=1,
        branch={"source": "plan", "index": 0, "label": "a"},
    ),
    event("ParallelFinished", 0.9, source="plan", succeeded=["a"], failed=["b"], duration_ms=80.0),
    event("BudgetExceeded", 0.91, budget="tokens", limit=100, used=155),
    event("LoopDetected", 0.92, node="plan", first_step=1),
    event("StallDetected", 0.93, node="plan", unchanged_steps=3),
    event("CheckpointSaved", 0.94, trigger="node_complete", checkpoint_id="c1"),
    event("EdgeFired", 0.95, source="plan", target={"$end": True}),
    event("CustomEvent", 0.96, node="plan", data={"n": 1}),
    event("RunCancelled", 0.97, reason="token"),
]


def test_each_kind_of_event_has_its_line() -> None:
    lines = {(m.what, m.detail) for m in moments(LOG)}
    assert ("started", "at plan") in lines
    assert ("node started", "plan (visit 2)") in lines
    assert ("model call", "plan  gpt-x  120 in / 30 out  $0.0012  480.0 ms") in lines
    assert ("model call", "plan  local  5 in / 0 out  unpriced  1.0 ms") in lines
    assert ("tool call", "search  plan  1.50 s  error: timeout") in lines
    assert ("retry", "plan  attempt 1 failed: flaky; again in 0.50 s") in lines
    assert ("node finished", "plan  failed  790.0 ms  2 attempts  ValueError: no plan") in lines
    assert ("fan-out", "plan -> a, b") in lines
    assert ("node started", "a [branch a]") in lines
    assert ("joined", "plan: 1 succeeded, 1 failed  80.0 ms") in lines
    assert ("budget", "tokens: used 155 of 100") in lines
    assert ("loop", "plan repeats step 1") in lines
    assert ("stall", "plan: no change for 3 steps") in lines
    assert ("CustomEvent", '{"node": "plan", "data": {"n": 1}}') in lines
    assert ("cancelled", "token") in lines
    quiet = {m.event for m in moments(LOG)}
    assert not quiet & {"CheckpointSaved", "EdgeFired", "LLMCallStarted"}
    everything = {(m.what, m.detail) for m in moments(LOG, everything=True)}
    assert ("edge", "plan -> END") in everything
    assert ("checkpoint", "node_complete c1") in everything
    first, *_, last = rows(moments(LOG))
    assert first == ("+0.000s", "0", "started", "at plan")
    assert last[0] == "+0.970s"


def test_totals_add_up_the_model_and_tool_calls() -> None:
    summed = totals(LOG)
    assert (summed.model_calls, summed.input_tokens, summed.output_tokens) == (2, 125, 30)
    assert summed.unpriced == 1
    assert summed.line() == (
        "2 model call(s): 125 tokens in, 30 out, $0.0012 (+1 unpriced); 1 tool call(s)"
    )


def test_a_stored_log_reads_back_as_a_timeline() -> None:
    graph = AgentGraph("two")
    graph.add_node("a", lambda state: {"x": 1}, next_node="b")
    graph.add_node("b", lambda state: {"y": 2}, next_node=END)
    store = InMemoryCheckpointStore()
    result = graph.run({}, checkpoint_store=store)
    found = moments(stored.event for stored in store.read_events(result.run_id))
    assert [(m.what, m.detail.split()[0]) for m in found] == [
        ("started", "at"),
        ("node started", "a"),
        ("node finished", "a"),
        ("node started", "b"),
        ("node finished", "b"),
        ("finished", "end"),
    ]
