"""Agents against the real OpenAI and Anthropic SDK clients, through a local wire-format server."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from selectgraph import Agent, AgentConfig, AgentGraph, ToolCall, tool
from selectgraph.observe import NodeChunk
from selectgraph.providers import AnthropicProvider, OpenAIProvider
from selectgraph.providers import cost_usd as priced
from tests.providers.conftest import RecordingSleep
from tests.providers.llm_server import (
    FakeLLMServer,
    anthropic_error,
    anthropic_stream,
    json_reply,
    openai_error,
    openai_stream,
)
from tests.providers.payloads import (
    ANTHROPIC_MODEL,
    OPENAI_MODEL,
    anthropic_message,
    chat_completion,
    openai_tool_call,
    text_block,
    text_chunks,
    text_events,
    tool_use_block,
)

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"


def cost_usd(model: str, input_tokens: int, output_tokens: int) -> float:
    """The price of a call of a model these tests know the price of."""
    cost = priced(model, input_tokens, output_tokens)
    assert cost is not None, f"no price for {model}"
    return cost


class Forecast(BaseModel):
    city: str
    temp_c: int


@tool
def get_weather(city: str) -> dict[str, Any]:
    """Current weather for a city.

    Args:
        city: The city.
    """
    return {"city": city, "temp_c": 21}


# --- the tool loop --------------------------------------------------------------------


async def test_openai_tool_loop_round_trip(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    server.script(
        OPENAI_PATH,
        json_reply(
            chat_completion(
                None,
                tool_calls=[openai_tool_call("call_1", "get_weather", {"city": "Paris"})],
                finish_reason="tool_calls",
                prompt_tokens=50,
                completion_tokens=10,
            )
        ),
        json_reply(chat_completion("Sunny, 21 C.", prompt_tokens=80, completion_tokens=6)),
    )
    agent = Agent(
        AgentConfig(name="weather", model="gpt-4o-mini", instructions="Use the tool."),
        provider=openai_provider,
        tools=[get_weather],
    )

    result = await agent.arun("Weather in Paris?")

    first, second = server.bodies(OPENAI_PATH)
    assert first["tools"][0]["function"]["name"] == "get_weather"
    assert second["messages"] == [
        {"role": "system", "content": "# Your task\nUse the tool."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": "",  # sent empty: llama.cpp's templates fail without it
            "name": "weather",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"city":"Paris","temp_c":21}'},
    ]
    assert result.content == "Sunny, 21 C."
    assert result.tool_calls == (
        ToolCall(id="call_1", name="get_weather", arguments={"city": "Paris"}),
    )
    assert (result.usage.input_tokens, result.usage.output_tokens, result.usage.calls) == (
        130,
        16,
        2,
    )
    assert result.usage.cost_usd == pytest.approx(
        cost_usd(OPENAI_MODEL, 50, 10) + cost_usd(OPENAI_MODEL, 80, 6)
    )
    assert result.model == "gpt-4o-mini"


async def test_anthropic_tool_loop_round_trip(
    server: FakeLLMServer, anthropic_provider: AnthropicProvider
) -> None:
    server.script(
        ANTHROPIC_PATH,
        json_reply(
            anthropic_message(
                [tool_use_block("toolu_1", "get_weather", {"city": "Paris"})],
                stop_reason="tool_use",
            )
        ),
        json_reply(anthropic_message([text_block("Sunny, 21 C.")])),
    )
    agent = Agent(
        AgentConfig(name="weather", model="claude-haiku-4-5", identity="A meteorologist."),
        provider=anthropic_provider,
        tools=[get_weather],
    )

    result = await agent.arun("Weather in Paris?")

    first, second = server.bodies(ANTHROPIC_PATH)
    assert first["tools"][0]["name"] == "get_weather"
    assert second["system"] == "# Identity\nA meteorologist."
    assert second["messages"] == [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": '{"city":"Paris","temp_c":21}',
                }
            ],
        },
    ]
    assert result.content == "Sunny, 21 C."
    assert result.usage.calls == 2
    assert result.usage.cost_usd == pytest.approx(2 * cost_usd(ANTHROPIC_MODEL, 30, 11))


# --- structured output ----------------------------------------------------------------


async def test_openai_structured_output(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    server.script(OPENAI_PATH, json_reply(chat_completion('{"city": "Paris", "temp_c": 21}')))
    agent = Agent(AgentConfig(output_schema=Forecast), provider=openai_provider)

    result = await agent.arun("Forecast for Paris")

    [body] = server.bodies(OPENAI_PATH)
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "Forecast",
            "schema": Forecast.model_json_schema(),
            "strict": True,
        },
    }
    assert result.output == Forecast(city="Paris", temp_c=21)
    assert result.structured_mode == "json_schema"
    assert result.to_dict()["structured_mode"] == "json_schema"


async def test_structured_output_on_a_server_that_refuses_json_schema(
    server: FakeLLMServer, openai_provider: OpenAIProvider, sleeps: RecordingSleep
) -> None:
    # llama.cpp's server: HTTP 500 naming response_format for json_schema.
    server.reject_response_format("json_schema")
    server.script(
        OPENAI_PATH,
        json_reply(chat_completion("Sure! It is sunny.")),
        json_reply(chat_completion('{"city": "Paris", "temp_c": 21}')),
        json_reply(chat_completion('{"city": "Lyon", "temp_c": 19}')),
    )
    agent = Agent(AgentConfig(output_schema=Forecast), provider=openai_provider)

    first = await agent.arun("Forecast for Paris")
    second = await agent.arun("Forecast for Lyon")

    # The refused mode is paid for once; the schema mismatch is re-asked in JSON mode.
    modes = [(b.get("response_format") or {}).get("type") for b in server.bodies(OPENAI_PATH)]
    assert modes == ["json_schema", "json_object", "json_object", "json_object"]
    assert sleeps.delays == []
    assert (first.output, first.structured_mode) == (
        Forecast(city="Paris", temp_c=21),
        "json_object",
    )
    assert (second.output, second.structured_mode) == (
        Forecast(city="Lyon", temp_c=19),
        "json_object",
    )
    # The agent's prompt already carries the schema; the provider does not repeat it.
    system = server.bodies(OPENAI_PATH)[1]["messages"][0]["content"]
    assert system.count(json.dumps(Forecast.model_json_schema())) == 1


async def test_anthropic_structured_output(
    server: FakeLLMServer, anthropic_provider: AnthropicProvider
) -> None:
    server.script(
        ANTHROPIC_PATH,
        json_reply(anthropic_message([text_block('{"city": "Oslo", "temp_c": -3}')])),
    )
    agent = Agent(AgentConfig(output_schema=Forecast), provider=anthropic_provider)

    result = await agent.arun("Forecast for Oslo")

    [body] = server.bodies(ANTHROPIC_PATH)
    assert body["output_config"] == {
        "format": {"type": "json_schema", "schema": Forecast.model_json_schema()}
    }
    assert result.output == Forecast(city="Oslo", temp_c=-3)
    assert result.structured_mode == "json_schema"


async def test_a_schema_mismatch_over_the_wire_is_re_asked(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    server.script(
        OPENAI_PATH,
        json_reply(chat_completion('{"city": "Paris"}')),
        json_reply(chat_completion('{"city": "Paris", "temp_c": 20}')),
    )
    agent = Agent(AgentConfig(output_schema=Forecast), provider=openai_provider)

    result = await agent.arun("Forecast")

    reask = server.bodies(OPENAI_PATH)[1]["messages"][-1]
    assert reask["role"] == "user"
    assert "temp_c: Field required" in reask["content"]
    assert result.output == Forecast(city="Paris", temp_c=20)


# --- streaming ------------------------------------------------------------------------


async def test_openai_agent_streams_text_deltas(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    server.script(
        OPENAI_PATH,
        openai_stream(
            text_chunks("Sun", "ny in ", "Paris.", prompt_tokens=12, completion_tokens=4)
        ),
    )
    agent = Agent(provider=openai_provider)

    chunks = [chunk async for chunk in agent.astream("Weather?")]

    assert [c.delta for c in chunks if c.delta] == ["Sun", "ny in ", "Paris."]
    final = chunks[-1].result
    assert final is not None
    assert final.content == "Sunny in Paris."
    assert (final.usage.input_tokens, final.usage.output_tokens) == (12, 4)
    assert server.bodies(OPENAI_PATH)[0]["stream"] is True


async def test_anthropic_agent_streams_text_deltas(
    server: FakeLLMServer, anthropic_provider: AnthropicProvider
) -> None:
    server.script(
        ANTHROPIC_PATH,
        anthropic_stream(text_events("Cold ", "in ", "Oslo.", input_tokens=20, output_tokens=5)),
    )
    agent = Agent(provider=anthropic_provider)

    chunks = [chunk async for chunk in agent.astream("Weather?")]

    assert [c.delta for c in chunks if c.delta] == ["Cold ", "in ", "Oslo."]
    final = chunks[-1].result
    assert final is not None
    assert final.content == "Cold in Oslo."
    assert (final.usage.input_tokens, final.usage.output_tokens) == (20, 5)


async def test_a_streamed_graph_emits_node_chunks_from_the_wire(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    server.script(OPENAI_PATH, openai_stream(text_chunks("Hel", "lo.")))
    agent = Agent(AgentConfig(name="greeter"), provider=openai_provider)

    events = [event async for event in AgentGraph.chain(agent).astream("Say hello")]

    assert [(e.node, e.delta) for e in events if isinstance(e, NodeChunk)] == [
        ("greeter", "Hel"),
        ("greeter", "lo."),
    ]


# --- rate limits ----------------------------------------------------------------------


async def test_openai_429_with_retry_after_is_waited_then_succeeds(
    server: FakeLLMServer, openai_provider: OpenAIProvider, sleeps: RecordingSleep
) -> None:
    server.script(
        OPENAI_PATH,
        openai_error(429, "Rate limit reached", kind="requests", retry_after="2"),
        json_reply(chat_completion("ok")),
    )
    agent = Agent(provider=openai_provider)

    result = await agent.arun("hi")

    assert result.content == "ok"
    assert sleeps.delays == [2.0]
    assert len(server.requests) == 2
    assert result.iterations == 1
    assert result.usage.calls == 1


async def test_anthropic_429_with_retry_after_is_waited_then_succeeds(
    server: FakeLLMServer, anthropic_provider: AnthropicProvider, sleeps: RecordingSleep
) -> None:
    server.script(
        ANTHROPIC_PATH,
        anthropic_error(429, "rate_limit_error", "Too many requests", retry_after="3"),
        json_reply(anthropic_message([text_block("ok")])),
    )
    agent = Agent(provider=anthropic_provider)

    result = await agent.arun("hi")

    assert result.content == "ok"
    assert sleeps.delays == [3.0]
    assert len(server.requests) == 2


# --- two providers in one graph -------------------------------------------------------


async def test_a_chain_across_providers_sums_both_usages(
    server: FakeLLMServer,
    openai_provider: OpenAIProvider,
    anthropic_provider: AnthropicProvider,
) -> None:
    server.script(
        OPENAI_PATH,
        json_reply(chat_completion("Plan: three lines.", prompt_tokens=40, completion_tokens=8)),
    )
    server.script(
        ANTHROPIC_PATH,
        json_reply(
            anthropic_message(
                [text_block("Leaves fall softly.")], input_tokens=60, output_tokens=12
            )
        ),
    )
    planner = Agent(AgentConfig(name="planner"), provider=openai_provider)
    writer = Agent(AgentConfig(name="writer"), provider=anthropic_provider)

    result = await AgentGraph.chain(planner, writer).arun("A haiku about autumn")

    assert result.content == "Leaves fall softly."
    [anthropic_body] = server.bodies(ANTHROPIC_PATH)
    assert anthropic_body["messages"] == [
        {"role": "user", "content": "[planner] Plan: three lines."}
    ]
    assert result.total_usage.input_tokens == 100
    assert result.total_usage.output_tokens == 20
    assert result.total_usage.calls == 2
    assert result.total_usage.cost_usd == pytest.approx(
        cost_usd(OPENAI_MODEL, 40, 8) + cost_usd(ANTHROPIC_MODEL, 60, 12)
    )
    assert result.total_usage.cost_usd > 0
