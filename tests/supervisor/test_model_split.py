"""ModelSplit routes every supervisor call to the planner model and every turn to the executor."""

from __future__ import annotations

from typing import Any

import pytest

from selectgraph import Agent, AgentConfig, ModelSplit, SupervisorAgent, SupervisorStrategy
from selectgraph.providers import CompletionRequest, LocalProvider

SPLIT = ModelSplit(planner_model="planner-xl", executor_model="worker-mini")


def _is_supervisor_call(request: CompletionRequest) -> bool:
    system = request.messages[0].text if request.messages else ""
    return "You are the supervisor of a team" in system


@pytest.mark.parametrize("strategy", list(SupervisorStrategy))
def test_every_call_goes_to_the_model_its_role_names(strategy: SupervisorStrategy) -> None:
    # One recording provider answers everybody, so the requests show who asked what.
    shared = LocalProvider()
    own = Agent(AgentConfig(name="critic", model="critic-special"), provider=shared)
    plain = Agent(AgentConfig(name="writer"), provider=shared)
    supervisor = SupervisorAgent(
        agents={"writer": plain, "critic": own},
        provider=shared,
        strategy=strategy,
        max_rounds=3,
        model_split=SPLIT,
    )
    supervisor.run("Write a haiku")

    by_role: dict[str, set[str]] = {"supervisor": set(), "member": set()}
    for request in shared.requests:
        by_role["supervisor" if _is_supervisor_call(request) else "member"].add(request.model)
    assert by_role["supervisor"] == {"planner-xl"}
    members = by_role["member"]
    assert "worker-mini" in members
    assert members <= {"worker-mini", "critic-special"}
    # The caller's agents are untouched: the split applies inside the team only.
    assert plain.config.model is None
    assert plain.model == "local"


def test_an_agent_with_its_own_model_keeps_it() -> None:
    shared = LocalProvider()
    own = Agent(AgentConfig(name="critic", model="critic-special"), provider=shared)
    supervisor = SupervisorAgent(
        agents={"critic": own},
        provider=shared,
        strategy=SupervisorStrategy.ROUND_ROBIN,
        max_rounds=1,
        model_split=SPLIT,
    )
    supervisor.run("t")
    models = [r.model for r in shared.requests if not _is_supervisor_call(r)]
    assert models == ["critic-special"]


def test_without_a_split_everyone_uses_their_default_model() -> None:
    boss = LocalProvider(default_model="boss-default")
    team_provider = LocalProvider(default_model="team-default")
    supervisor = SupervisorAgent(
        agents={"a": Agent(AgentConfig(name="a"), provider=team_provider)},
        provider=boss,
        strategy=SupervisorStrategy.DYNAMIC,
        max_rounds=1,
    )
    result = supervisor.run("t")
    assert {r.model for r in boss.requests} == {"boss-default"}
    assert {r.model for r in team_provider.requests} == {"team-default"}
    assert result.total_usage.calls == len(boss.requests) + len(team_provider.requests)


def _split_usage(result: Any) -> tuple[int, int]:
    supervisor = sum(
        r.usage.calls
        for name, results in result.node_results.items()
        if name not in result.members
        for r in results
        if r.usage is not None
    )
    members = sum(
        r.usage.calls
        for name, results in result.node_results.items()
        if name in result.members
        for r in results
        if r.usage is not None
    )
    return supervisor, members


def test_usage_is_counted_for_both_roles() -> None:
    shared = LocalProvider()
    supervisor = SupervisorAgent(
        agents={"a": Agent(AgentConfig(name="a"), provider=shared)},
        provider=shared,
        strategy=SupervisorStrategy.MAGENTIC,
        max_rounds=2,
        model_split=SPLIT,
    )
    result = supervisor.run("t")
    boss_calls, member_calls = _split_usage(result)
    assert boss_calls > 0
    assert member_calls > 0
    assert result.total_usage.calls == boss_calls + member_calls == len(shared.requests)
