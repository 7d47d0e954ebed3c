"""Every model call an agent makes is bounded: a default ``max_tokens`` unless told otherwise.

Before this, agents sent no ``max_tokens``: on a small local model the README's
chain wrote for more than five minutes. Answers, structured answers, tool calls,
judge verdicts and routing answers now all carry a bound.
"""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel

from selectgraph import END, AgentGraph
from selectgraph.agents import Agent, AgentConfig, LLMJudge
from selectgraph.agents._defaults import DEFAULT_MAX_TOKENS, DEFAULT_SHORT_ANSWER_TOKENS
from selectgraph.agents._judge import JudgeRequest
from selectgraph.agents._result import AgentResult
from selectgraph.providers import LocalReply
from selectgraph.testing import ScriptedProvider


class City(BaseModel):
    name: str


def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


def test_the_default_bound_is_documented_and_moderate() -> None:
    assert AgentConfig().max_tokens == DEFAULT_MAX_TOKENS == 1024
    assert AgentConfig().default_max_tokens
    assert not AgentConfig(max_tokens=64).default_max_tokens


def test_answers_structured_answers_and_tool_calls_carry_the_default_bound() -> None:
    provider = ScriptedProvider(
        [LocalReply.tool_call("add", {"a": 2, "b": 3}), LocalReply.json({"name": "Paris"})]
    )
    agent = Agent(AgentConfig(output_schema=City), provider=provider, tools=[add])

    result = agent.run("Add, then name a city.")

    assert result.output == City(name="Paris")
    assert [r.max_tokens for r in provider.requests] == [DEFAULT_MAX_TOKENS] * 2
    assert all(r.max_tokens_fits_budget for r in provider.requests)


def test_an_explicit_bound_is_sent_as_given_and_none_means_unbounded() -> None:
    chosen = ScriptedProvider(["ok"])
    Agent(AgentConfig(max_tokens=64), provider=chosen).run("hi")
    unbounded = ScriptedProvider(["ok"])
    Agent(AgentConfig(max_tokens=None), provider=unbounded).run("hi")

    assert chosen.last_request.max_tokens == 64
    assert not chosen.last_request.max_tokens_fits_budget
    assert unbounded.last_request.max_tokens is None


@pytest.mark.parametrize("value", [0, -5, True, 2.5])
def test_a_bound_that_is_not_a_positive_integer_is_refused(value: object) -> None:
    with pytest.raises(ValueError, match=r"AgentConfig.max_tokens must be an integer >= 1"):
        AgentConfig(max_tokens=value)  # type: ignore[arg-type]


def test_judge_verdicts_are_bounded() -> None:
    provider = ScriptedProvider([LocalReply.json({"decision": "accept", "feedback": ""})])
    judge = LLMJudge("The answer is a number.", provider=provider)
    answer = AgentResult(content="42")

    asyncio.run(judge.evaluate(JudgeRequest(task="t", answer=answer, attempt=1)))

    assert provider.last_request.max_tokens == DEFAULT_SHORT_ANSWER_TOKENS


def test_a_budget_lowers_the_default_bound_to_what_is_left_instead_of_refusing() -> None:
    # 300 tokens of budget: the default bound (1024) does not fit, the prompt does.
    provider = ScriptedProvider(["short answer"])
    agent = Agent(AgentConfig(name="w"), provider=provider)
    graph = AgentGraph("g", max_total_tokens=300)
    graph.add_node("w", agent, next_node=END)

    result = graph.run("Say something short.")

    assert result.stop_reason != "token_budget"
    sent = provider.last_request.max_tokens
    assert sent is not None
    assert 0 < sent < 300


def test_an_explicit_bound_that_does_not_fit_the_budget_is_still_refused() -> None:
    provider = ScriptedProvider([])
    agent = Agent(AgentConfig(name="w", max_tokens=5_000), provider=provider)
    graph = AgentGraph("g", max_total_tokens=300)
    graph.add_node("w", agent, next_node=END)

    result = graph.run("Say something short.")

    assert result.stop_reason == "token_budget"
    assert provider.requests == []
