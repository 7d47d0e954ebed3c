"""Every strategy against OpenAI's and Anthropic's wire formats, through the real SDK clients.

A local server plays the model (tests/providers/llm_server.py); the supervisor and its
members talk to it through OpenAIProvider and AnthropicProvider, so the requests are the
SDKs' own: structured-output fields, model names, and the replies parsed back.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from selectgraph import Agent, AgentConfig, ModelSplit, SupervisorAgent, SupervisorStrategy
from selectgraph.providers import AnthropicProvider, OpenAIProvider, Provider
from selectgraph.providers._retry import ProviderRetry
from tests.providers.conftest import ANTHROPIC_KEY, OPENAI_KEY, RecordingSleep
from tests.providers.llm_server import FakeLLMServer, Reply, json_reply
from tests.providers.payloads import anthropic_message, chat_completion, text_block

SPLIT = ModelSplit(planner_model="gpt-4o", executor_model="gpt-4o-mini")


@dataclass
class Wire:
    kind: str
    server: FakeLLMServer
    provider: Provider
    path: str
    reply: Callable[[str], Reply]

    def script(self, *answers: object) -> None:
        self.server.script(
            self.path,
            *(self.reply(a if isinstance(a, str) else json.dumps(a)) for a in answers),
        )

    def bodies(self) -> list[dict[str, Any]]:
        return self.server.bodies(self.path)

    def schema_name(self, body: dict[str, Any]) -> str | None:
        if self.kind == "openai":
            response_format = body.get("response_format")
            return None if response_format is None else response_format["json_schema"]["name"]
        output_config = body.get("output_config")
        if output_config is None:
            return None
        return str(output_config["format"]["schema"]["title"])


@pytest.fixture(params=["openai", "anthropic"])
async def wire(request: pytest.FixtureRequest) -> AsyncIterator[Wire]:
    retry = ProviderRetry(max_attempts=2, initial_delay=0.1, max_delay=0.1)
    async with FakeLLMServer() as server:
        provider: Any
        if request.param == "openai":
            provider = OpenAIProvider(
                OPENAI_KEY,
                base_url=f"{server.base_url}/v1",
                retry=retry,
                sleep=RecordingSleep(),
                timeout=5.0,
            )
            path = "/v1/chat/completions"

            def reply(text: str) -> Reply:
                return json_reply(chat_completion(text, prompt_tokens=40, completion_tokens=9))

        else:
            provider = AnthropicProvider(
                ANTHROPIC_KEY,
                base_url=server.base_url,
                retry=retry,
                sleep=RecordingSleep(),
                timeout=5.0,
            )
            path = "/v1/messages"

            def reply(text: str) -> Reply:
                return json_reply(
                    anthropic_message([text_block(text)], input_tokens=40, output_tokens=9)
                )

        async with provider:
            yield Wire(request.param, server, provider, path, reply)
        assert server.unused_replies(path) == 0


def team(wire: Wire, *names: str) -> dict[str, Agent]:
    return {
        n: Agent(AgentConfig(name=n, instructions=f"The {n}."), provider=wire.provider)
        for n in names
    }


def check_split(wire: Wire) -> None:
    """Structured calls are the supervisor's and ask gpt-4o; text calls are turns on gpt-4o-mini."""
    for body in wire.bodies():
        system = body["system"] if wire.kind == "anthropic" else body["messages"][0]["content"]
        is_supervisor = "You are the supervisor of a team" in str(system)
        assert body["model"] == ("gpt-4o" if is_supervisor else "gpt-4o-mini"), body["model"]


async def test_plan_and_execute_over_the_wire(wire: Wire) -> None:
    wire.script(
        {
            "steps": [
                {"agent": "researcher", "instruction": "find"},
                {"agent": "writer", "instruction": "write"},
            ]
        },
        "three facts",
        "a paragraph from three facts",
    )
    supervisor = SupervisorAgent(
        agents=team(wire, "researcher", "writer"),
        provider=wire.provider,
        strategy=SupervisorStrategy.PLAN_AND_EXECUTE,
        model_split=SPLIT,
    )
    result = await supervisor.arun("Write about X")

    assert result.content == "a paragraph from three facts"
    assert [wire.schema_name(b) for b in wire.bodies()] == ["Plan", None, None]
    check_split(wire)
    assert result.total_usage.calls == 3
    assert result.total_usage.input_tokens == 120
    # The plan's schema lists the team's names as the only choices.
    first = json.dumps(wire.bodies()[0])
    assert '"enum": ["researcher", "writer"]' in first


async def test_round_robin_over_the_wire(wire: Wire) -> None:
    wire.script("a1", "b1", {"complete": True, "reason": "done"})
    supervisor = SupervisorAgent(
        agents=team(wire, "a", "b"),
        provider=wire.provider,
        strategy=SupervisorStrategy.ROUND_ROBIN,
        model_split=SPLIT,
    )
    result = await supervisor.arun("t")
    assert [t.output for t in result.turns] == ["a1", "b1"]
    assert [wire.schema_name(b) for b in wire.bodies()] == [None, None, "RoundVerdict"]
    check_split(wire)


async def test_dynamic_over_the_wire(wire: Wire) -> None:
    wire.script(
        {"done": False, "next_agent": "Coder", "instruction": "compute", "reason": "math"},
        "42",
        {"done": True, "next_agent": "", "instruction": "", "reason": "answered"},
    )
    supervisor = SupervisorAgent(
        agents=team(wire, "coder", "web"),
        provider=wire.provider,
        strategy=SupervisorStrategy.DYNAMIC,
        model_split=SPLIT,
    )
    result = await supervisor.arun("6 * 7?")
    assert result.content == "42"
    assert result.turns[0].agent == "coder"
    assert [wire.schema_name(b) for b in wire.bodies()] == ["RouteDecision", None, "RouteDecision"]
    check_split(wire)


def _progress(speaker: str, satisfied: bool = False) -> dict[str, Any]:
    def answer(value: Any) -> dict[str, Any]:
        return {"reason": "r", "answer": value}

    return {
        "is_request_satisfied": answer(satisfied),
        "is_in_loop": answer(False),
        "is_progress_being_made": answer(True),
        "next_speaker": answer(speaker),
        "instruction_or_question": answer("go"),
    }


async def test_magentic_over_the_wire(wire: Wire) -> None:
    wire.script(
        {"facts": ["f"], "guesses": [], "plan": ["web: look"]},
        _progress("web"),
        "found it",
        _progress("", satisfied=True),
        "The answer is: found it.",
    )
    supervisor = SupervisorAgent(
        agents=team(wire, "web"),
        provider=wire.provider,
        strategy=SupervisorStrategy.MAGENTIC,
        model_split=SPLIT,
    )
    result = await supervisor.arun("find it")
    assert result.content == "The answer is: found it."
    assert [wire.schema_name(b) for b in wire.bodies()] == [
        "TaskLedger",
        "ProgressLedger",
        None,
        "ProgressLedger",
        None,
    ]
    # The final answer is a supervisor call too: it goes to the planner model.
    assert wire.bodies()[-1]["model"] == "gpt-4o"
    assert wire.bodies()[2]["model"] == "gpt-4o-mini"
