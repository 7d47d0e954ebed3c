"""PLAN_AND_EXECUTE: a validated plan, steps in order, one replan after a failed step."""

from __future__ import annotations

import pytest

from selectgraph import (
    ProviderRequestError,
    SupervisorAgent,
    SupervisorError,
    SupervisorResult,
    SupervisorStrategy,
)
from selectgraph.observe import SupervisorReplanned
from selectgraph.providers import LocalReply
from selectgraph.testing import ScriptedProvider
from tests.supervisor._script import last_user, member, plan, requests_of

PE = SupervisorStrategy.PLAN_AND_EXECUTE


def team(**replies: list[object]) -> dict[str, object]:
    return {name: member(name, *script) for name, script in replies.items()}


def test_the_plan_runs_in_order_and_each_output_feeds_the_next_step() -> None:
    agents = team(
        researcher=["Tides follow the moon."],
        writer=["A draft about the moon and tides."],
        reviewer=["Final: the moon drives tides."],
    )
    boss = ScriptedProvider(
        [
            plan(
                ("researcher", "find why tides happen"),
                ("writer", "write two sentences"),
                ("reviewer", "polish"),
            )
        ]
    )
    supervisor = SupervisorAgent(agents=agents, provider=boss, strategy=PE)

    result = supervisor.run("Explain tides")

    assert isinstance(result, SupervisorResult)
    assert result.node_order == ["plan", "researcher", "writer", "reviewer", "finish"]
    assert result.content == "Final: the moon drives tides."
    assert result.state["final_answer"] == result.content
    assert [(t.agent, t.instruction) for t in result.turns] == [
        ("researcher", "find why tides happen"),
        ("writer", "write two sentences"),
        ("reviewer", "polish"),
    ]
    assert [t.output for t in result.turns] == [
        "Tides follow the moon.",
        "A draft about the moon and tides.",
        "Final: the moon drives tides.",
    ]
    assert result.completed
    assert result.verdict == "the plan is done"
    assert [s.agent for s in result.plan] == ["researcher", "writer", "reviewer"]
    # Each member is told the task, its instruction, and the previous step's output only.
    [to_writer] = requests_of(agents["writer"])  # type: ignore[arg-type]
    prompt = last_user(to_writer)
    assert "Explain tides" in prompt
    assert "write two sentences" in prompt
    assert "Output of the previous step (researcher):\nTides follow the moon." in prompt
    [to_reviewer] = requests_of(agents["reviewer"])  # type: ignore[arg-type]
    assert "A draft about the moon and tides." in last_user(to_reviewer)
    assert "Tides follow the moon." not in last_user(to_reviewer)
    # The planner saw the team and the limit.
    [to_boss] = boss.requests
    assert "- researcher: The researcher." in last_user(to_boss)
    assert "at most 10 steps" in last_user(to_boss)
    assert to_boss.response_format is not None
    schema = to_boss.response_format.json_schema
    assert "researcher" in str(schema)
    assert "reviewer" in str(schema)
    # Per-agent results and the whole run's usage.
    assert sorted(result.agent_results) == ["researcher", "reviewer", "writer"]
    assert result.agent_results["writer"][0].content == "A draft about the moon and tides."
    assert result.total_usage.calls == 4
    boss.assert_all_used()


def test_a_malformed_plan_is_asked_again_once_with_the_validation_error() -> None:
    agents = team(researcher=["facts"], writer=["text"])
    boss = ScriptedProvider(
        [
            plan(("editor", "edit it")),  # no such member
            plan(("researcher", "look"), ("writer", "write")),
        ]
    )
    result = SupervisorAgent(agents=agents, provider=boss, strategy=PE).run("Do it")

    assert result.content == "text"
    _first, second = boss.requests
    reask = last_user(second)
    assert "does not match the required JSON schema" in reask
    assert "steps.0.agent" in reask
    assert "'researcher'" in reask


def test_a_plan_malformed_twice_falls_back_to_every_member_in_order() -> None:
    agents = team(researcher=["facts"], writer=["text"])
    boss = ScriptedProvider([plan(("editor", "edit")), LocalReply(text="no JSON here")])
    supervisor = SupervisorAgent(agents=agents, provider=boss, strategy=PE)

    result = supervisor.run("Do it")

    assert result.stop_reason == "end"
    assert result.quality == "degraded"
    assert [(t.agent, t.instruction) for t in result.turns] == [
        ("researcher", "Do it"),
        ("writer", "Do it"),
    ]
    assert result.content == "text"
    [entry] = result.fallbacks
    assert entry.startswith("the supervisor's 'plan' call: its answer did not validate")
    assert "re-ask" in entry
    assert entry.endswith("fell back to a plan of every member in order")
    assert result.degraded_reasons == result.fallbacks


def test_an_empty_plan_is_refused_by_its_schema() -> None:
    agents = team(researcher=["facts"])
    boss = ScriptedProvider([LocalReply.json({"steps": []}), plan(("researcher", "look"))])
    result = SupervisorAgent(agents=agents, provider=boss, strategy=PE).run("Do it")
    assert "at least 1 item" in last_user(boss.requests[1])
    assert result.content == "facts"


def test_a_failed_step_is_replanned_once_and_the_run_goes_on() -> None:
    agents = team(
        researcher=["facts"],
        writer=[ProviderRequestError("the writer's model is gone", provider="scripted")],
        reviewer=["reviewed text"],
    )
    boss = ScriptedProvider(
        [
            plan(("researcher", "look"), ("writer", "write"), ("reviewer", "polish")),
            plan(("reviewer", "write and polish it yourself")),
        ]
    )
    events: list[object] = []
    supervisor = SupervisorAgent(
        agents=agents, provider=boss, strategy=PE, observers=[events.append]
    )

    result = supervisor.run("Do it")

    assert result.node_order == ["plan", "researcher", "writer", "replan", "reviewer", "finish"]
    assert result.content == "reviewed text"
    assert result.replans == 1
    assert result.quality == "degraded"  # a failure was absorbed
    failed = result.turns[1]
    assert failed.agent == "writer"
    assert failed.output == ""
    assert failed.error is not None
    assert "the writer's model is gone" in failed.error
    # The replanner was told what failed and what was done.
    replan_prompt = last_user(boss.requests[1])
    assert "step 2 (writer: 'write') raised ProviderRequestError" in replan_prompt
    assert "facts" in replan_prompt
    # The first step after the replan gets the last successful output.
    [to_reviewer] = requests_of(agents["reviewer"])  # type: ignore[arg-type]
    assert "Output of the previous step (researcher):\nfacts" in last_user(to_reviewer)
    [replanned] = [e for e in events if isinstance(e, SupervisorReplanned)]
    assert replanned.reason == "step_failed"
    assert replanned.node == "replan"
    assert replanned.new_plan == "1. reviewer: write and polish it yourself"


def test_a_step_failing_again_after_the_replan_fails_the_run() -> None:
    agents = team(
        researcher=["facts"],
        writer=[
            ProviderRequestError("down", provider="scripted"),
            ProviderRequestError("still down", provider="scripted"),
        ],
    )
    boss = ScriptedProvider(
        [plan(("researcher", "look"), ("writer", "write")), plan(("writer", "try again"))]
    )
    with pytest.raises(SupervisorError) as caught:
        SupervisorAgent(agents=agents, provider=boss, strategy=PE).run("Do it")

    message = str(caught.value)
    assert "step 3 (writer: 'try again') failed after the plan was already remade 1 time" in message
    assert "still down" in message
    result = caught.value.result
    assert result is not None
    assert [t.agent for t in SupervisorResult.wrap(result, PE, ("researcher", "writer")).turns] == [
        "researcher",
        "writer",
    ]


def test_max_rounds_bounds_the_steps_across_a_replan() -> None:
    agents = team(researcher=[ProviderRequestError("x", provider="s")], writer=["w1"])
    boss = ScriptedProvider(
        [
            plan(("researcher", "look"), ("writer", "write")),
            plan(("writer", "write"), ("writer", "write more")),
        ]
    )
    result = SupervisorAgent(agents=agents, provider=boss, strategy=PE, max_rounds=2).run("t")

    # The replanner is told how many steps are left, not max_rounds again.
    assert "a new plan of at most 1 steps" in last_user(boss.requests[1])
    assert [t.agent for t in result.turns] == ["researcher", "writer"]
    assert result.rounds == 2
    assert not result.completed
    assert result.verdict.startswith("stopped after max_rounds=2 steps")
    assert result.content == "w1"


def test_a_plan_longer_than_max_rounds_is_asked_again() -> None:
    agents = team(researcher=["a"], writer=["b"])
    boss = ScriptedProvider(
        [
            plan(("researcher", "1"), ("writer", "2"), ("researcher", "3")),
            plan(("writer", "2")),
        ]
    )
    result = SupervisorAgent(agents=agents, provider=boss, strategy=PE, max_rounds=2).run("t")
    assert "at most 2 items" in last_user(boss.requests[1])
    assert result.content == "b"
