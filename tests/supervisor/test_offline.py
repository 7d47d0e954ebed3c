"""Every strategy runs offline on the default provider (the LocalProvider without a key)."""

from __future__ import annotations

import pytest

from selectgraph import Agent, AgentConfig, SupervisorAgent, SupervisorStrategy
from selectgraph.providers import LocalProvider


@pytest.mark.parametrize("strategy", list(SupervisorStrategy))
def test_each_strategy_finishes_offline(
    strategy: SupervisorStrategy, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("SELECTGRAPH_PROVIDER", "local")  # the echo test double
    agents = {
        "researcher": Agent(AgentConfig(name="researcher", instructions="Find facts.")),
        "writer": Agent(AgentConfig(name="writer", instructions="Write.")),
    }
    supervisor = SupervisorAgent(agents=agents, strategy=strategy, max_rounds=3)
    assert isinstance(supervisor.provider, LocalProvider)

    result = supervisor.run("Explain tides")

    assert result.stop_reason == "end"
    if strategy in (SupervisorStrategy.DYNAMIC, SupervisorStrategy.MAGENTIC):
        # The local provider's placeholder answers name no member: every turn falls
        # back to the next member in order, and the run says so.
        assert result.quality == "degraded"
        assert result.fallbacks
        assert all("not a team member" in entry for entry in result.fallbacks)
    else:
        assert result.quality == "clean"
    assert result.content
    assert result.turns
    assert all(turn.agent in agents for turn in result.turns)
    assert result.total_usage.calls >= len(result.turns) + 1
    if strategy is SupervisorStrategy.MAGENTIC:
        # The local model never reports progress, so the stall path runs.
        assert result.replans >= 1
