"""Bad supervisor settings are refused when the supervisor is made, naming what is wrong."""

from __future__ import annotations

from typing import Any

import pytest

from selectgraph import Agent, AgentConfig, ModelSplit, SupervisorAgent, SupervisorStrategy
from selectgraph.providers import LocalProvider


def agent(name: str = "a") -> Agent:
    return Agent(AgentConfig(name=name), provider=LocalProvider())


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"agents": {}}, ValueError, "needs at least one agent"),
        ({"agents": [agent()]}, TypeError, "takes a mapping of name to agent, got list"),
        ({"agents": {"two words": agent()}}, ValueError, "'two words' must be a plain name"),
        ({"agents": {"plan": agent()}}, ValueError, "'plan' is the name of one of the supervisor"),
        ({"agents": {"a": Agent}}, TypeError, "is the class Agent; pass an instance"),
        ({"agents": {"a": 42}}, TypeError, "agent 'a' is a int"),
        ({"strategy": "hierarchical"}, ValueError, "unknown strategy 'hierarchical'; choose one"),
        ({"max_rounds": 0}, ValueError, "max_rounds must be an integer >= 1, got 0"),
        ({"max_stalls": True}, ValueError, "max_stalls must be an integer >= 1, got True"),
        ({"model_split": ("gpt-4o", "gpt-4o-mini")}, TypeError, "model_split must be a ModelSplit"),
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, Any], error: type, message: str) -> None:
    settings: dict[str, Any] = {"agents": {"a": agent()}, "provider": LocalProvider(), **kwargs}
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        SupervisorAgent(**settings)


def test_reserved_names_depend_on_the_strategy() -> None:
    # "route" is DYNAMIC's node, free under ROUND_ROBIN.
    SupervisorAgent(
        agents={"route": agent()}, provider=LocalProvider(), strategy=SupervisorStrategy.ROUND_ROBIN
    )
    with pytest.raises(ValueError, match="'route' is the name of one of the supervisor's own"):
        SupervisorAgent(
            agents={"route": agent()}, provider=LocalProvider(), strategy=SupervisorStrategy.DYNAMIC
        )


def test_strategy_may_be_given_by_value() -> None:
    supervisor = SupervisorAgent(
        agents={"a": agent()}, provider=LocalProvider(), strategy="dynamic"
    )
    assert supervisor.strategy is SupervisorStrategy.DYNAMIC
    assert repr(supervisor) == "SupervisorAgent(strategy=DYNAMIC, agents=['a'], max_rounds=10)"


def test_pause_before_an_unknown_node_is_a_build_error() -> None:
    with pytest.raises(Exception, match="pause_before") as caught:
        SupervisorAgent(agents={"a": agent()}, provider=LocalProvider(), pause_before=["nobody"])
    assert "nobody" in str(caught.value)


def test_model_split_defaults_to_no_split() -> None:
    supervisor = SupervisorAgent(agents={"a": agent()}, provider=LocalProvider())
    assert supervisor.model_split == ModelSplit()


@pytest.mark.parametrize(
    ("task", "error", "message"),
    [
        (None, ValueError, "needs a task"),
        ("  ", ValueError, "the task is empty"),
        ({"question": "x"}, ValueError, "needs a non-empty 'task'; got keys \\['question'\\]"),
        (42, TypeError, "got int"),
    ],
)
def test_a_run_needs_a_task(task: Any, error: type, message: str) -> None:
    supervisor = SupervisorAgent(agents={"a": agent()}, provider=LocalProvider())
    with pytest.raises(error, match=message):
        supervisor.run(task)


def test_a_task_may_come_in_a_mapping_with_more_data() -> None:
    supervisor = SupervisorAgent(
        agents={"a": agent()}, provider=LocalProvider(), strategy="round_robin", max_rounds=1
    )
    result = supervisor.run({"task": "Explain tides", "audience": "children"})
    assert result.state["audience"] == "children"
    assert result.state["task"] == "Explain tides"
