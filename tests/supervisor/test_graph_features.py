"""A supervisor is an AgentGraph: streaming, observers, budgets, cancellation, checkpoints, HITL."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Generator
from pathlib import Path
from typing import Any

import pytest

from selectgraph import (
    END,
    LAST_OUTPUT,
    AgentGraph,
    AgentObserver,
    CancellationToken,
    InMemoryCheckpointStore,
    InterruptRequest,
    NodeContext,
    SQLiteCheckpointStore,
    SupervisorAgent,
    SupervisorResult,
    SupervisorStrategy,
)
from selectgraph.observe import NodeStarted, RunFinished, RunPaused
from selectgraph.providers import LocalProvider
from selectgraph.testing import ScriptedProvider
from tests.supervisor._script import member, plan, requests_of, route, verdict

PE = SupervisorStrategy.PLAN_AND_EXECUTE


async def test_astream_yields_the_run_and_ends_with_a_supervisor_result() -> None:
    agents = {"a": member("a", "alpha"), "b": member("b", "beta")}
    boss = ScriptedProvider([plan(("a", "one"), ("b", "two"))])
    supervisor = SupervisorAgent(agents=agents, provider=boss, strategy=PE)

    events = [event async for event in supervisor.astream("task")]

    started = [e.node for e in events if isinstance(e, NodeStarted)]
    assert started == ["plan", "a", "b", "finish"]
    last = events[-1]
    assert isinstance(last, RunFinished)
    assert isinstance(last.result, SupervisorResult)
    assert last.result.content == "beta"


async def test_streamed_tokens_come_from_the_members() -> None:
    agents = {"a": local_agent("a")}
    supervisor = SupervisorAgent(
        agents=agents,
        provider=ScriptedProvider([route("a", "go"), route(done=True)]),
        strategy=SupervisorStrategy.DYNAMIC,
    )
    pieces = [item async for item in supervisor.astream("say hi", stream_mode="messages")]
    # Every agent node streams, the supervisor's own calls too (their JSON).
    assert {meta["node"] for _, meta in pieces} == {"route", "a"}
    text = "".join(piece for piece, meta in pieces if meta["node"] == "a")
    assert text == '[local] reply to: "Task: say hi Your instruction (you are a): go"'


def local_agent(name: str) -> Any:
    from selectgraph import Agent, AgentConfig

    return Agent(AgentConfig(name=name), provider=LocalProvider())


def test_observers_see_every_node_of_a_supervised_run() -> None:
    class Nodes(AgentObserver):
        def __init__(self) -> None:
            self.started: list[str] = []

        def on_node_start(self, run_id: str, node_name: str, step: int) -> None:
            self.started.append(node_name)

    observer = Nodes()
    agents = {"a": member("a", "x"), "b": member("b", "y")}
    boss = ScriptedProvider([verdict(True)])
    supervisor = SupervisorAgent(
        agents=agents, provider=boss, strategy=SupervisorStrategy.ROUND_ROBIN, observers=[observer]
    )
    supervisor.run("t")
    assert observer.started == ["start", "a", "b", "review", "finish"]


def test_a_token_budget_stops_the_run_before_the_refused_call() -> None:
    boss = LocalProvider()
    team = LocalProvider()
    from selectgraph import Agent, AgentConfig

    supervisor = SupervisorAgent(
        agents={"a": Agent(AgentConfig(name="a"), provider=team)},
        provider=boss,
        strategy=SupervisorStrategy.ROUND_ROBIN,
        max_rounds=50,
        max_total_tokens=1500,
    )
    result = supervisor.run("Keep going")

    assert isinstance(result, SupervisorResult)
    assert result.stop_reason == "token_budget"
    assert result.quality == "degraded"
    # Checked before each call (prompt + reply estimate): the last call may overshoot by
    # its reply; the refused call was never sent.
    assert result.total_usage.total_tokens <= 1500 + 100
    assert result.total_usage.calls == len(boss.requests) + len(team.requests)
    assert 1 <= result.rounds < 50


async def test_cancelling_stops_the_team_at_once() -> None:
    token = CancellationToken()
    ran: list[str] = []

    def first(state: Any) -> str:
        ran.append("first")
        token.cancel()
        return "first done"

    def second(state: Any) -> str:
        ran.append("second")
        return "second done"

    supervisor = SupervisorAgent(
        agents={"first": first, "second": second},
        provider=ScriptedProvider([plan(("first", "go"), ("second", "go"))]),
        strategy=PE,
        cancellation_token=token,
    )
    result = await supervisor.arun("t")
    assert result.stop_reason == "cancelled"
    assert ran == ["first"]


def test_function_members_sync_async_with_context_and_mappings() -> None:
    def sync_member(state: Any) -> str:
        """Writes in capitals."""
        return str(state["instruction"]).upper()

    async def async_member(state: Any, context: NodeContext) -> str:
        await asyncio.sleep(0)
        return f"{context.node} did {state['instruction']}"

    def mapping_member(state: Any) -> dict[str, Any]:
        return {LAST_OUTPUT: "from a mapping", "extra_note": "kept"}

    supervisor = SupervisorAgent(
        agents={"loud": sync_member, "quiet": async_member, "mapper": mapping_member},
        provider=ScriptedProvider(
            [plan(("loud", "shout"), ("quiet", "whisper"), ("mapper", "map"))]
        ),
        strategy=PE,
    )
    result = supervisor.run("t")
    assert [t.output for t in result.turns] == ["SHOUT", "quiet did whisper", "from a mapping"]
    assert result.state["extra_note"] == "kept"
    assert result.agent_results == {}  # function members have no AgentResult
    assert "Writes in capitals." in str(supervisor.team.roster)


def test_a_member_that_writes_nothing_records_no_output() -> None:
    def silent(state: Any) -> None:
        return None

    supervisor = SupervisorAgent(
        agents={"silent": silent},
        provider=ScriptedProvider([plan(("silent", "nothing"))]),
        strategy=PE,
    )
    result = supervisor.run("t")
    assert result.turns[0].output == ""  # not the plan's JSON


def approver(state: Any) -> Generator[InterruptRequest, Any, str]:
    """A person who approves the draft."""
    answer = yield InterruptRequest("Approve this draft?", payload={"draft": state["instruction"]})
    return f"human said {answer}"


async def async_approver(state: Any) -> AsyncGenerator[InterruptRequest, Any]:
    answer = yield InterruptRequest("Approve?")
    state.last_output = f"async human said {answer}"


@pytest.mark.parametrize("human", [approver, async_approver])
def test_a_human_member_pauses_the_run_and_resumes_at_its_yield(human: Any) -> None:
    writer = member("writer", "the draft")
    supervisor = SupervisorAgent(
        agents={"writer": writer, "human": human},
        provider=ScriptedProvider([plan(("writer", "draft it"), ("human", "check the draft"))]),
        strategy=PE,
    )
    paused = supervisor.run("Write and approve")
    assert paused.interrupted
    assert paused.interrupts[0].prompt.startswith("Approve")
    assert paused.interrupts[0].node == "human"

    assert paused.interrupt_id is not None
    final = supervisor.resume(paused.interrupt_id, "yes")
    assert final.stop_reason == "end"
    assert final.content.endswith("human said yes")
    assert len(requests_of(writer)) == 1  # the writer did not run again


def test_a_checkpointed_run_continues_in_a_new_supervisor_without_redoing_turns(
    tmp_path: Path,
) -> None:
    store = SQLiteCheckpointStore(tmp_path / "runs.db")

    def build(researcher_replies: list[str], writer_replies: list[str]) -> SupervisorAgent:
        return SupervisorAgent(
            agents={
                "researcher": member("researcher", *researcher_replies),
                "writer": member("writer", *writer_replies),
            },
            provider=ScriptedProvider([plan(("researcher", "dig"), ("writer", "write"))]),
            strategy=PE,
            pause_before=["writer"],
        )

    first = build(["notes"], [])
    paused = first.run("Report", checkpoint_store=store, run_id="report-1")
    assert paused.stop_reason == "paused"
    assert [t.agent for t in paused.turns] == ["researcher"]

    # A new supervisor (as a new process would build) whose researcher and planner have
    # nothing left to say: running either again would raise ScriptExhausted.
    second = SupervisorAgent(
        agents={"researcher": member("researcher"), "writer": member("writer", "the report")},
        provider=ScriptedProvider([]),
        strategy=PE,
        pause_before=["writer"],
    )
    done = second.run(None, checkpoint_store=store, run_id="report-1")
    assert done.stop_reason == "end"
    assert done.content == "the report"
    assert [t.agent for t in done.turns] == ["researcher", "writer"]
    snapshot = second.graph.get_state("report-1", checkpoint_store=store)
    assert snapshot.values["final_answer"] == "the report"
    store.close()


async def test_a_paused_run_streams_its_pause() -> None:
    supervisor = SupervisorAgent(
        agents={"a": member("a", "x")},
        provider=ScriptedProvider([plan(("a", "go"))]),
        strategy=PE,
    )
    events = [
        e
        async for e in supervisor.astream(
            "t", checkpoint_store=InMemoryCheckpointStore(), pause_before=["a"]
        )
    ]
    assert isinstance(events[-1], RunPaused)


def test_a_supervisor_is_a_subgraph_of_a_larger_graph() -> None:
    supervisor = SupervisorAgent(
        agents={"a": member("a", "the team's answer")},
        provider=ScriptedProvider([route("a", "answer the question"), route(done=True)]),
        strategy=SupervisorStrategy.DYNAMIC,
    )
    outer = AgentGraph("desk")
    outer.add_node("intake", lambda state: {"question": state["raw"].strip()}, next_node="team")
    outer.add_subgraph(
        "team",
        supervisor.graph,
        input_map={"question": "task"},
        output_map={"final_answer": "answer"},
        next_node=END,
    )
    result = outer.run({"raw": "  What is 2+2?  "})
    assert result.state["answer"] == "the team's answer"
    assert "What is 2+2?" in requests_of(supervisor.team.members["a"].node)[0].messages[-1].text


def test_the_diagram_shows_the_supervisor_and_its_team() -> None:
    supervisor = SupervisorAgent(
        agents={"researcher": member("researcher"), "writer": member("writer")},
        provider=LocalProvider(),
        strategy=PE,
    )
    mermaid = supervisor.to_mermaid()
    for node in ("plan", "replan", "researcher", "writer", "finish"):
        assert node in mermaid
    assert "researcher" in supervisor.visualize()
