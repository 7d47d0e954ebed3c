"""Graphs and supervisors stand where agents do: as team members, and as tools of an agent."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from selectgraph import (
    END,
    Agent,
    AgentConfig,
    AgentGraph,
    InterruptRequest,
    Role,
    SupervisorAgent,
    SupervisorStrategy,
)
from selectgraph.observe import NodeStarted
from selectgraph.providers import LocalReply
from selectgraph.testing import ScriptedProvider
from tests.supervisor._script import member, plan, requests_of, verdict

PE = SupervisorStrategy.PLAN_AND_EXECUTE
RR = SupervisorStrategy.ROUND_ROBIN


def summary_graph(seen: list[str]) -> AgentGraph:
    """Summarises: answers with the length of what it was told, and keeps what it saw."""

    def summarise(state: Any) -> dict[str, Any]:
        told = state.messages[0].text
        seen.append(told)
        return {"__last_output__": f"summary of {len(told)} characters"}

    graph = AgentGraph(name="summariser", description="Summarise the work so far")
    graph.add_node("summarise", summarise)
    graph.add_edge("summarise", END)
    return graph


def test_a_graph_is_a_team_member_told_its_turn_as_text() -> None:
    seen: list[str] = []
    supervisor = SupervisorAgent(
        agents={"writer": member("writer", "the draft"), "summary": summary_graph(seen)},
        provider=ScriptedProvider([plan(("writer", "write it"), ("summary", "sum it up"))]),
        strategy=PE,
    )

    result = supervisor.run("Explain tides")

    assert [turn.agent for turn in result.turns] == ["writer", "summary"]
    [told] = seen
    assert "Task:\nExplain tides" in told
    assert "the draft" in told
    assert "sum it up" in told
    assert result.content == f"summary of {len(told)} characters"
    assert supervisor.team.roster["summary"] == "Summarise the work so far"


def test_a_compiled_graph_member_spends_from_the_teams_usage_and_nests_its_events() -> None:
    talker = AgentGraph(name="talker", description="Talks")
    talker.add_node("talk", Agent(AgentConfig(name="talk"), provider=ScriptedProvider(["hi"])))
    talker.add_edge("talk", END)
    events: list[Any] = []
    supervisor = SupervisorAgent(
        agents={"talker": talker.compile()},
        provider=ScriptedProvider([plan(("talker", "say hi"))]),
        strategy=PE,
    )

    result = supervisor.run("greet", observers=[events.append])

    assert result.content == "hi"
    assert result.total_usage.calls == 2  # the plan and the member's own call
    nested = [e.node for e in events if isinstance(e, NodeStarted) and e.namespace == ("talker",)]
    assert nested == ["talk"]


def test_a_supervisor_is_a_member_of_another_supervisor() -> None:
    inner = SupervisorAgent(
        agents={"a": member("a", "inner alpha"), "b": member("b", "inner beta")},
        provider=ScriptedProvider([plan(("a", "one"), ("b", "two"))]),
        strategy=PE,
        name="research_team",
    )
    outer = SupervisorAgent(
        agents={"team": inner, "editor": member("editor", "edited")},
        provider=ScriptedProvider([plan(("team", "research"), ("editor", "edit"))]),
        strategy=PE,
    )

    result = outer.run("A report")

    assert [turn.agent for turn in result.turns] == ["team", "editor"]
    assert result.turns[0].output == "inner beta"
    assert result.content == "edited"
    assert result.total_usage.calls == 2 + 3  # each supervisor's plan; a, b and the editor


def test_a_question_inside_a_graph_member_pauses_the_team_and_the_answer_continues_it() -> None:
    def ask(state: Any) -> Generator[Any, Any, dict[str, Any]]:
        answer = yield InterruptRequest(prompt="which audience?")
        return {"__last_output__": f"written for {answer}"}

    asking = AgentGraph(name="asker", description="Asks who it is for")
    asking.add_node("ask", ask)
    asking.add_edge("ask", END)
    supervisor = SupervisorAgent(
        agents={"asker": asking},
        provider=ScriptedProvider([plan(("asker", "find out"))]),
        strategy=PE,
    )

    paused = supervisor.run("Write")

    assert paused.stop_reason == "interrupted"
    [question] = paused.interrupts
    assert question.prompt == "which audience?"

    done = supervisor.resume(question.id, "children")

    assert done.content == "written for children"


def test_a_member_that_is_not_an_agent_graph_or_function_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match="agent 'x' is a int; a team member is an Agent, a graph"):
        SupervisorAgent(agents={"x": 3}, provider=ScriptedProvider([]), strategy=RR)


def test_a_supervisor_is_a_tool_of_an_agent_and_its_final_answer_comes_back() -> None:
    team = SupervisorAgent(
        agents={"a": member("a", "alpha"), "b": member("b", "beta")},
        provider=ScriptedProvider([verdict(True)]),
        strategy=RR,
        name="team",
    )
    tool = team.as_tool(description="Give the team a task")
    provider = ScriptedProvider(
        [LocalReply.tool_call("team", {"input": "Explain tides"}, call_id="t1"), "done"]
    )
    graph = AgentGraph(name="lead")
    graph.add_node("lead", Agent(AgentConfig(name="lead"), provider=provider, tools=[tool]))
    graph.add_edge("lead", END)

    result = graph.run("go")

    assert tool.spec.description == "Give the team a task"
    [answer] = [m.text for m in provider.requests[1].messages if m.role is Role.TOOL]
    assert answer == "beta"
    assert result.total_usage.calls == 2 + 3  # the lead twice; a, b and the review


def test_a_supervisor_is_a_node_of_another_graph_working_on_its_first_user_message() -> None:
    team = SupervisorAgent(
        agents={"a": member("a", "alpha"), "b": member("b", "beta")},
        provider=ScriptedProvider([plan(("a", "one"), ("b", "two"))]),
        strategy=PE,
    )
    graph = AgentGraph(name="report")
    graph.add_node("team", team)
    graph.add_node("publish", lambda state: {"__last_output__": f"published {state.last_output}"})
    graph.add_edge("team", "publish")
    graph.add_edge("publish", END)

    result = graph.run("Explain tides")

    assert result.content == "published beta"
    assert [m.text for m in result.state.messages] == ["Explain tides", "beta"]
    assert "Task:\nExplain tides" in requests_of(team.team.members["a"].node)[0].messages[-1].text
    assert result.total_usage.calls == 3
