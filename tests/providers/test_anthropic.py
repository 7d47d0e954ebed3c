"""AnthropicProvider against a local server speaking the Messages API wire format."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from anthropic import AsyncAnthropic

from selectgraph.core._errors import ProviderRequestError, ProviderRetryableError
from selectgraph.core._messages import Message, ToolCall
from selectgraph.providers._anthropic import AnthropicProvider
from selectgraph.providers._base import CompletionRequest, ResponseFormat, StreamChunk, ToolSpec
from selectgraph.providers._pricing import cost_usd
from selectgraph.providers._retry import ProviderRetry
from tests.providers.conftest import ANTHROPIC_KEY, RecordingSleep
from tests.providers.llm_server import (
    FakeLLMServer,
    anthropic_error,
    anthropic_stream,
    drop,
    json_reply,
    stall,
)
from tests.providers.payloads import (
    ANTHROPIC_MODEL,
    anthropic_message,
    block_start,
    block_stop,
    json_delta,
    message_delta,
    message_start,
    message_stop,
    ping,
    stream_error,
    text_block,
    text_delta,
    text_events,
    tool_use_block,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

PATH = "/v1/messages"
WEATHER = ToolSpec(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def ask(*messages: Message, **fields: Any) -> CompletionRequest:
    return CompletionRequest(model="claude-haiku-4-5", messages=messages, **fields)


async def drain(stream: AsyncIterator[StreamChunk], *, into: list[str]) -> None:
    async for piece in stream:
        into.append(piece.delta)


async def collect(provider: AnthropicProvider, request: CompletionRequest) -> list[StreamChunk]:
    return [c async for c in provider.stream(request)]


async def test_complete_returns_text_usage_cost_and_finish_reason(
    server: FakeLLMServer, anthropic_provider: AnthropicProvider
) -> None:
    server.script(
        PATH,
        json_reply(
            anthropic_message(
                [text_block("Paris.")],
                input_tokens=30,
                output_tokens=11,
                cache_read_input_tokens=100,
            )
        ),
    )

    completion = await anthropic_provider.complete(ask(Message.user("Capital of France?")))

    assert completion.message == Message.assistant("Paris.")
    assert completion.model == ANTHROPIC_MODEL
    assert completion.finish_reason == "stop"
    # Cached prompt tokens are still prompt tokens.
    assert (completion.usage.input_tokens, completion.usage.output_tokens) == (130, 11)
    assert completion.usage.calls == 1
    assert completion.usage.cost_usd == pytest.approx(cost_usd(ANTHROPIC_MODEL, 130, 11))
    assert completion.usage.cost_usd > 0
    assert completion.latency_ms > 0


async def test_request_is_authenticated_and_carries_the_required_max_tokens(
    server: FakeLLMServer, anthropic_provider: AnthropicProvider
) -> None:
    server.script(PATH, json_reply(anthropic_message([text_block("ok")])))

    await anthropic_provider.complete(ask(Message.user("hi")))

    [request] = server.requests
    assert request.headers["authorization"] == f"Bearer {ANTHROPIC_KEY}"
    assert "anthropic-version" in request.headers
    assert request.headers["x-stainless-retry-count"] == "0"
    assert request.json() == {
        "model": "claude-haiku-4-5",
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": "hi"}],
    }


async def test_system_messages_go_to_the_system_parameter(
    server: FakeLLMServer, anthropic_provider: AnthropicProvider
) -> None:
    server.script(PATH, json_reply(anthropic_message([text_block("ok")])))

    await anthropic_provider.complete(
        ask(
            Message.system("You are terse."),
            Message.system("Answer in French."),
            Message.user("hi"),
        )
    )

    body = server.bodies(PATH)[0]
    assert body["system"] == "You are terse.\n\nAnswer in French."
    assert body["messages"] == [{"role": "user", "content": "hi"}]


async def test_tool_round_trip_is_sent_as_tool_use_and_tool_result_blocks(
    server: FakeLLMServer, anthropic_provider: AnthropicProvider
) -> None:
    server.script(
        PATH, json_reply(anthropic_message([text_block("Sunny in Paris, rain in Oslo.")]))
    )
    calls = (
        ToolCall(id="toolu_1", name="get_weather", arguments={"city": "Paris"}),
        ToolCall(id="toolu_2", name="get_weather", arguments={"city": "Oslo"}),
    )

    await anthropic_provider.complete(
        ask(
            Message.user({"question": "weather?", "cities": ["Paris", "Oslo"]}),
            Message.assistant("Checking both.", tool_calls=calls),
            Message.tool("toolu_1", {"sky": "clear"}),
            Message.tool("toolu_2", "station offline", is_error=True),
            Message.user("And tomorrow?"),
        )
    )

    assert server.bodies(PATH)[0]["messages"] == [
        {"role": "user", "content": '{"question":"weather?","cities":["Paris","Oslo"]}'},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking both."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                },
                {
                    "type": "tool_use",
                    "id": "toolu_2",
                    "name": "get_weather",
                    "input": {"city": "Oslo"},
                },
            ],
        },
        {
            # Both results and the follow-up question share one user turn.
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": '{"sky":"clear"}'},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": "station offline",
                    "is_error": True,
                },
                {"type": "text", "text": "And tomorrow?"},
            ],
        },
    ]


async def test_tools_and_tool_choice_are_sent_and_tool_use_parsed(
    server: FakeLLMServer, anthropic_provider: AnthropicProvider
) -> None:
    server.script(
        PATH,
        json_reply(
            anthropic_message(
                [
                    text_block("Let me check."),
                    tool_use_block("toolu_1", "get_weather", {"city": "Paris"}),
                ],
                stop_reason="tool_use",
            )
        ),
    )

    completion = await anthropic_provider.complete(
        ask(Message.user("Weather in Paris?"), tools=(WEATHER,), tool_choice="required")
    )

    body = server.bodies(PATH)[0]
    assert body["tools"] == [
        {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "input_schema": WEATHER.parameters,
        }
    ]
    assert body["tool_choice"] == {"type": "any"}
    assert completion.finish_reason == "tool_calls"
    assert completion.message.content == "Let me check."
    assert completion.message.tool_calls == (
        ToolCall(id="toolu_1", name="get_weather", arguments={"city": "Paris"}),
    )


@pytest.mark.parametrize(
    ("choice", "sent"), [("auto", {"type": "auto"}), ("none", {"type": "none"})]
)
async def test_tool_choice_modes_map_to_the_api(
    server: FakeLLMServer, anthropic_provider: AnthropicProvider, choice: str, sent: dict[str, str]
) -> None:
    server.script(PATH, json_reply(anthropic_message([text_block("ok")])))

    await anthropic_provider.complete(ask(Message.user("hi"), tools=(WEATHER,), tool_choice=choice))

    assert server.bodies(PATH)[0]["tool_choice"] == sent


async def test_structured_output_uses_the_native_output_format(
    server: FakeLLMServer, anthropic_provider: AnthropicProvider
) -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    }
    server.script(PATH, json_reply(anthropic_message([text_block('{"city":"Paris"}')])))

    completion = await anthropic_provider.complete(
        ask(
            Message.user("Capital of France?"),
            response_format=ResponseFormat(name="Answer", json_schema=schema),
            extra={"output_config": {"effort": "low"}},
        )
    )

    body = server.bodies(PATH)[0]
    assert body["output_config"] == {
        "effort": "low",
        "format": {"type": "json_schema", "schema": schema},
    }
    assert "tools" not in body
    assert completion.message.content == '{"city":"Paris"}'


async def test_sampling_fields_and_extra_are_passed_through(
    server: FakeLLMServer, anthropic_provider: AnthropicProvider
) -> None:
    server.script(PATH, json_reply(anthropic_message([text_block("ok")])))

    await anthropic_provider.complete(
        ask(
            Message.user("hi"),
            temperature=0.3,
            max_tokens=256,
            stop=("END",),
            extra={"top_k": 5, "metadata": {"user_id": "u-1"}},
        )
    )

    body = server.bodies(PATH)[0]
    assert body["temperature"] == 0.3
    assert body["max_tokens"] == 256
    assert body["stop_sequences"] == ["END"]
    assert body["top_k"] == 5
    assert body["metadata"] == {"user_id": "u-1"}


@pytest.mark.parametrize(
    ("stop_reason", "expected"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("tool_use", "tool_calls"),
        ("refusal", "content_filter"),
    ],
)
async def test_stop_reasons_are_normalised(
    server: FakeLLMServer, anthropic_provider: AnthropicProvider, stop_reason: str, expected: str
) -> None:
    server.script(PATH, json_reply(anthropic_message([text_block("x")], stop_reason=stop_reason)))

    completion = await anthropic_provider.complete(ask(Message.user("hi")))

    assert completion.finish_reason == expected


async def test_stream_yields_text_then_a_final_completion_with_usage(
    server: FakeLLMServer, anthropic_provider: AnthropicProvider
) -> None:
    server.script(
        PATH, anthropic_stream(text_events("Hel", "lo", "!", input_tokens=25, output_tokens=6))
    )

    chunks = await collect(anthropic_provider, ask(Message.user("Say hello")))

    assert [c.delta for c in chunks[:-1]] == ["Hel", "lo", "!"]
    final = chunks[-1].completion
    assert final is not None
    assert final.message == Message.assistant("Hello!")
    assert final.finish_reason == "stop"
    assert final.model == ANTHROPIC_MODEL
    assert (final.usage.input_tokens, final.usage.output_tokens, final.usage.calls) == (25, 6, 1)
    assert final.usage.cost_usd == pytest.approx(cost_usd(ANTHROPIC_MODEL, 25, 6))
    assert server.bodies(PATH)[0]["stream"] is True


async def test_stream_assembles_text_and_tool_use_input_deltas(
    server: FakeLLMServer, anthropic_provider: AnthropicProvider
) -> None:
    server.script(
        PATH,
        anthropic_stream(
            [
                message_start(input_tokens=50),
                block_start(0, {"type": "text", "text": ""}),
                text_delta(0, "Checking."),
                block_stop(0),
                block_start(
                    1, {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}
                ),
                json_delta(1, ""),
                json_delta(1, '{"city": '),
                json_delta(1, '"Paris"}'),
                block_stop(1),
                block_start(
                    2, {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {}}
                ),
                json_delta(2, '{"city": "Os'),
                block_stop(2),
                ping(),
                message_delta("tool_use", output_tokens=44),
                message_stop(),
            ]
        ),
    )

    chunks = await collect(anthropic_provider, ask(Message.user("Paris?"), tools=(WEATHER,)))

    assert [c.delta for c in chunks[:-1]] == ["Checking."]
    final = chunks[-1].completion
    assert final is not None
    assert final.finish_reason == "tool_calls"
    assert final.message.content == "Checking."
    assert final.message.tool_calls == (
        ToolCall(id="toolu_1", name="get_weather", arguments={"city": "Paris"}),
        ToolCall(id="toolu_2", name="get_weather", raw_arguments='{"city": "Os'),
    )
    assert (final.usage.input_tokens, final.usage.output_tokens) == (50, 44)


async def test_stream_overloaded_event_before_text_is_retried(
    server: FakeLLMServer, anthropic_provider: AnthropicProvider, sleeps: RecordingSleep
) -> None:
    server.script(
        PATH,
        anthropic_stream([message_start(), stream_error("overloaded_error", "Overloaded")]),
        anthropic_stream(text_events("ok")),
    )

    chunks = await collect(anthropic_provider, ask(Message.user("hi")))

    assert [c.delta for c in chunks[:-1]] == ["ok"]
    assert len(server.requests) == 2
    assert len(sleeps.delays) == 1


async def test_stream_failure_after_text_is_raised_without_retry(
    server: FakeLLMServer, anthropic_provider: AnthropicProvider, sleeps: RecordingSleep
) -> None:
    server.script(
        PATH,
        anthropic_stream(text_events("Hel", "lo"), cut_after=4),
        anthropic_stream(text_events("not used")),
    )
    received: list[str] = []

    with pytest.raises(ProviderRetryableError, match="lost its connection"):
        await drain(anthropic_provider.stream(ask(Message.user("hi"))), into=received)

    assert received == ["Hel"]
    assert len(server.requests) == 1
    assert sleeps.delays == []


async def test_stream_error_event_after_text_is_raised_with_its_status(
    server: FakeLLMServer, anthropic_provider: AnthropicProvider
) -> None:
    events = text_events("Hel")
    server.script(
        PATH, anthropic_stream([*events[:4], stream_error("overloaded_error", "Overloaded")])
    )

    with pytest.raises(ProviderRetryableError) as caught:
        await collect(anthropic_provider, ask(Message.user("hi")))

    assert caught.value.status_code == 529
    assert "Overloaded" in str(caught.value)
    assert len(server.requests) == 1


async def test_overloaded_529_is_retried(
    server: FakeLLMServer, anthropic_provider: AnthropicProvider, sleeps: RecordingSleep
) -> None:
    server.script(
        PATH,
        anthropic_error(529, "overloaded_error", "Overloaded"),
        json_reply(anthropic_message([text_block("ok")])),
    )

    completion = await anthropic_provider.complete(ask(Message.user("hi")))

    assert completion.message.content == "ok"
    assert len(server.requests) == 2
    assert len(sleeps.delays) == 1


async def test_rate_limit_waits_the_retry_after_seconds(
    server: FakeLLMServer, anthropic_provider: AnthropicProvider, sleeps: RecordingSleep
) -> None:
    server.script(
        PATH,
        anthropic_error(
            429,
            "rate_limit_error",
            "Number of requests has exceeded your rate limit",
            retry_after="3",
        ),
        json_reply(anthropic_message([text_block("ok")])),
    )

    completion = await anthropic_provider.complete(ask(Message.user("hi")))

    assert completion.message.content == "ok"
    assert sleeps.delays == [3.0]


async def test_exhausted_retries_raise_a_retryable_error_and_the_sdk_adds_no_attempts(
    server: FakeLLMServer, anthropic_provider: AnthropicProvider, sleeps: RecordingSleep
) -> None:
    server.script(PATH, *[anthropic_error(500, "api_error", "Internal server error")] * 5)

    with pytest.raises(ProviderRetryableError) as caught:
        await anthropic_provider.complete(ask(Message.user("hi")))

    assert caught.value.status_code == 500
    assert caught.value.provider == "anthropic"
    assert "Internal server error" in str(caught.value)
    assert "req_011test" in str(caught.value)
    assert len(server.requests) == 3
    assert [r.headers["x-stainless-retry-count"] for r in server.requests] == ["0", "0", "0"]


@pytest.mark.parametrize(
    ("status", "kind", "message"),
    [
        (400, "invalid_request_error", "messages: text content blocks must be non-empty"),
        (401, "authentication_error", "invalid x-api-key"),
        (
            403,
            "permission_error",
            "Your API key does not have permission to use the specified resource.",
        ),
        (404, "not_found_error", "model: claude-nope"),
    ],
)
async def test_request_errors_fail_at_once(
    server: FakeLLMServer,
    anthropic_provider: AnthropicProvider,
    sleeps: RecordingSleep,
    status: int,
    kind: str,
    message: str,
) -> None:
    server.script(PATH, anthropic_error(status, kind, message))

    with pytest.raises(ProviderRequestError) as caught:
        await anthropic_provider.complete(ask(Message.user("hi")))

    assert caught.value.status_code == status
    assert message in str(caught.value)
    assert "'claude-haiku-4-5'" in str(caught.value)
    assert len(server.requests) == 1
    assert sleeps.delays == []


async def test_dropped_connection_is_retried(
    server: FakeLLMServer, anthropic_provider: AnthropicProvider, sleeps: RecordingSleep
) -> None:
    server.script(PATH, drop(), json_reply(anthropic_message([text_block("ok")])))

    completion = await anthropic_provider.complete(ask(Message.user("hi")))

    assert completion.message.content == "ok"
    assert len(server.requests) == 2


async def test_timeout_is_retried(server: FakeLLMServer, sleeps: RecordingSleep) -> None:
    server.script(PATH, stall(), json_reply(anthropic_message([text_block("ok")])))
    provider = AnthropicProvider(
        ANTHROPIC_KEY,
        base_url=server.base_url,
        timeout=0.2,
        retry=ProviderRetry(max_attempts=2),
        sleep=sleeps,
    )
    async with provider:
        completion = await provider.complete(ask(Message.user("hi")))

    assert completion.message.content == "ok"
    assert len(server.requests) == 2


async def test_key_is_read_from_the_environment(
    server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    server.script(PATH, json_reply(anthropic_message([text_block("ok")])))

    async with AnthropicProvider(base_url=server.base_url) as provider:
        await provider.complete(ask(Message.user("hi")))

    assert provider.name == "anthropic"
    assert server.requests[0].headers["authorization"] == f"Bearer {ANTHROPIC_KEY}"


async def test_count_tokens_is_an_estimate() -> None:
    async with AnthropicProvider(ANTHROPIC_KEY) as provider:
        # 3 (reply) + 3 (message) + 1 ("user") + 3 (12 bytes / 4).
        assert provider.count_tokens([Message.user("twelve bytes")]) == 10


async def test_a_given_client_is_used_without_its_own_retries_and_left_open(
    server: FakeLLMServer, sleeps: RecordingSleep
) -> None:
    server.script(PATH, *[anthropic_error(529, "overloaded_error", "Overloaded")] * 6)
    client = AsyncAnthropic(api_key=ANTHROPIC_KEY, base_url=server.base_url, max_retries=5)
    async with client:
        async with AnthropicProvider(
            client=client, retry=ProviderRetry(max_attempts=1), sleep=sleeps
        ) as provider:
            with pytest.raises(ProviderRetryableError):
                await provider.complete(ask(Message.user("hi")))

        assert len(server.requests) == 1
        assert not client.is_closed()


def test_missing_key_is_a_request_error() -> None:
    with pytest.raises(ProviderRequestError, match="ANTHROPIC_API_KEY"):
        AnthropicProvider()


def test_broken_credentials_profile_is_a_request_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path))

    with pytest.raises(
        ProviderRequestError, match="cannot load credentials: Config file not found"
    ):
        AnthropicProvider()
