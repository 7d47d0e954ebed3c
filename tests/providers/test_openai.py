"""OpenAIProvider against a local server speaking the Chat Completions wire format."""

from __future__ import annotations

import email.utils
import time
from typing import TYPE_CHECKING, Any

import pytest
from openai import AsyncOpenAI

from selectgraph.core._errors import ProviderRequestError, ProviderRetryableError
from selectgraph.core._messages import Message, ToolCall
from selectgraph.providers._base import CompletionRequest, ResponseFormat, StreamChunk, ToolSpec
from selectgraph.providers._openai import OpenAIProvider
from selectgraph.providers._pricing import cost_usd
from selectgraph.providers._retry import ProviderRetry
from tests.providers.conftest import OPENAI_KEY, RecordingSleep
from tests.providers.llm_server import (
    FakeLLMServer,
    drop,
    json_reply,
    openai_error,
    openai_stream,
    stall,
)
from tests.providers.payloads import (
    OPENAI_MODEL,
    chat_completion,
    chunk,
    openai_tool_call,
    text_chunks,
    usage_chunk,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

PATH = "/v1/chat/completions"
WEATHER = ToolSpec(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def ask(*messages: Message, **fields: Any) -> CompletionRequest:
    return CompletionRequest(model="gpt-4o-mini", messages=messages, **fields)


async def drain(stream: AsyncIterator[StreamChunk], *, into: list[str]) -> None:
    async for piece in stream:
        into.append(piece.delta)


async def collect(provider: OpenAIProvider, request: CompletionRequest) -> list[StreamChunk]:
    return [c async for c in provider.stream(request)]


async def test_complete_returns_text_usage_cost_and_finish_reason(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    server.script(
        PATH, json_reply(chat_completion("Paris.", prompt_tokens=21, completion_tokens=7))
    )

    completion = await openai_provider.complete(ask(Message.user("Capital of France?")))

    assert completion.message == Message.assistant("Paris.")
    assert completion.model == OPENAI_MODEL
    assert completion.finish_reason == "stop"
    assert completion.usage.input_tokens == 21
    assert completion.usage.output_tokens == 7
    assert completion.usage.calls == 1
    assert completion.usage.cost_usd == pytest.approx(cost_usd(OPENAI_MODEL, 21, 7))
    assert completion.usage.cost_usd > 0
    assert completion.latency_ms > 0


async def test_complete_sends_one_authenticated_request_without_sdk_retry_headers(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    server.script(PATH, json_reply(chat_completion("ok")))

    await openai_provider.complete(ask(Message.user("hi")))

    [request] = server.requests
    assert request.method == "POST"
    assert request.headers["authorization"] == f"Bearer {OPENAI_KEY}"
    assert request.headers["x-stainless-retry-count"] == "0"
    assert request.json() == {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "hi"}],
    }


async def test_conversation_with_tool_round_trip_is_sent_in_chat_format(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    server.script(PATH, json_reply(chat_completion("It is sunny in Paris.")))
    call = ToolCall(id="call_1", name="get_weather", arguments={"city": "Paris"})

    await openai_provider.complete(
        ask(
            Message.system("Be brief."),
            Message.user({"question": "weather?", "city": "Paris"}, name="planner"),
            Message.assistant(None, tool_calls=(call,), name="weather agent"),
            Message.tool("call_1", {"sky": "clear", "temp_c": 21}, name="get_weather"),
            Message.tool("call_2", "station offline", is_error=True),
        )
    )

    assert server.bodies(PATH)[0]["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": '{"question":"weather?","city":"Paris"}', "name": "planner"},
        {
            # "weather agent" is not a valid participant name for the API, so it is not sent.
            "role": "assistant",
            "content": "",  # sent empty: llama.cpp's templates fail without it
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"sky":"clear","temp_c":21}'},
        {"role": "tool", "tool_call_id": "call_2", "content": "station offline"},
    ]


async def test_tools_and_tool_choice_are_sent_and_tool_calls_parsed(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    server.script(
        PATH,
        json_reply(
            chat_completion(
                None,
                tool_calls=[
                    openai_tool_call("call_a", "get_weather", {"city": "Paris"}),
                    openai_tool_call("call_b", "get_weather", {"city": "Oslo"}),
                ],
                finish_reason="tool_calls",
            )
        ),
    )

    completion = await openai_provider.complete(
        ask(Message.user("Weather in Paris and Oslo?"), tools=(WEATHER,), tool_choice="required")
    )

    body = server.bodies(PATH)[0]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather for a city.",
                "parameters": WEATHER.parameters,
            },
        }
    ]
    assert body["tool_choice"] == "required"
    assert completion.finish_reason == "tool_calls"
    assert completion.message.content is None
    assert completion.message.tool_calls == (
        ToolCall(id="call_a", name="get_weather", arguments={"city": "Paris"}),
        ToolCall(id="call_b", name="get_weather", arguments={"city": "Oslo"}),
    )


async def test_tool_arguments_that_are_not_json_are_kept_raw(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    server.script(
        PATH,
        json_reply(
            chat_completion(
                None,
                tool_calls=[openai_tool_call("call_a", "get_weather", '{"city": "Par')],
                finish_reason="tool_calls",
            )
        ),
    )

    completion = await openai_provider.complete(ask(Message.user("?"), tools=(WEATHER,)))

    assert completion.message.tool_calls == (
        ToolCall(id="call_a", name="get_weather", arguments={}, raw_arguments='{"city": "Par'),
    )


async def test_tool_choice_is_not_sent_without_tools(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    server.script(PATH, json_reply(chat_completion("ok")))

    await openai_provider.complete(ask(Message.user("hi"), tool_choice="auto"))

    assert "tool_choice" not in server.bodies(PATH)[0]


async def test_structured_output_sends_a_json_schema_response_format(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    }
    server.script(PATH, json_reply(chat_completion('{"city":"Paris"}')))

    completion = await openai_provider.complete(
        ask(
            Message.user("Capital of France?"),
            response_format=ResponseFormat(name="Answer", json_schema=schema),
        )
    )

    assert server.bodies(PATH)[0]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Answer", "schema": schema, "strict": True},
    }
    assert completion.message.content == '{"city":"Paris"}'


async def test_sampling_fields_and_extra_are_passed_through(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    server.script(PATH, json_reply(chat_completion("ok")))

    await openai_provider.complete(
        ask(
            Message.user("hi"),
            temperature=0.2,
            max_tokens=64,
            stop=("END",),
            extra={"seed": 7, "top_p": 0.9},
        )
    )

    body = server.bodies(PATH)[0]
    assert body["temperature"] == 0.2
    # A custom base_url means a compatible server, and those all take max_tokens.
    assert body["max_tokens"] == 64
    assert "max_completion_tokens" not in body
    assert body["stop"] == ["END"]
    assert body["seed"] == 7
    assert body["top_p"] == 0.9


async def test_max_completion_tokens_field_can_be_chosen(
    server: FakeLLMServer, sleeps: RecordingSleep
) -> None:
    server.script(PATH, json_reply(chat_completion("ok")))
    provider = OpenAIProvider(
        OPENAI_KEY,
        base_url=f"{server.base_url}/v1",
        sleep=sleeps,
        max_tokens_field="max_completion_tokens",
    )
    async with provider:
        await provider.complete(ask(Message.user("hi"), max_tokens=64))

    body = server.bodies(PATH)[0]
    assert body["max_completion_tokens"] == 64
    assert "max_tokens" not in body


async def test_missing_usage_is_counted_locally(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    server.script(PATH, json_reply(chat_completion("four five six seven", usage=False)))

    completion = await openai_provider.complete(ask(Message.user("one two three")))

    assert completion.usage.input_tokens > 0
    assert completion.usage.output_tokens > 0
    assert completion.usage.calls == 1


async def test_stream_yields_text_then_a_final_completion_with_usage(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    server.script(
        PATH, openai_stream(text_chunks("Hel", "lo", "!", prompt_tokens=9, completion_tokens=3))
    )

    chunks = await collect(openai_provider, ask(Message.user("Say hello")))

    assert [c.delta for c in chunks[:-1]] == ["Hel", "lo", "!"]
    assert all(c.completion is None for c in chunks[:-1])
    final = chunks[-1].completion
    assert final is not None
    assert final.message == Message.assistant("Hello!")
    assert final.finish_reason == "stop"
    assert (final.usage.input_tokens, final.usage.output_tokens, final.usage.calls) == (9, 3, 1)
    assert final.usage.cost_usd == pytest.approx(cost_usd(OPENAI_MODEL, 9, 3))
    body = server.bodies(PATH)[0]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


async def test_stream_assembles_tool_calls_from_deltas(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    def call_delta(index: int, **fields: object) -> dict[str, object]:
        return {"tool_calls": [{"index": index, **fields}]}

    server.script(
        PATH,
        openai_stream(
            [
                chunk({"role": "assistant", "content": None, "refusal": None}),
                chunk(
                    call_delta(
                        0,
                        id="call_a",
                        type="function",
                        function={"name": "get_weather", "arguments": ""},
                    )
                ),
                chunk(call_delta(0, function={"arguments": '{"ci'})),
                chunk(call_delta(0, function={"arguments": 'ty": "Paris"}'})),
                chunk(
                    call_delta(
                        1,
                        id="call_b",
                        type="function",
                        function={"name": "get_weather", "arguments": ""},
                    )
                ),
                chunk(call_delta(1, function={"arguments": '{"city": '})),
                chunk({}, finish_reason="tool_calls"),
                usage_chunk(40, 18),
            ]
        ),
    )

    chunks = await collect(openai_provider, ask(Message.user("Paris?"), tools=(WEATHER,)))

    assert len(chunks) == 1
    final = chunks[0].completion
    assert final is not None
    assert final.finish_reason == "tool_calls"
    assert final.message.content is None
    assert final.message.tool_calls == (
        ToolCall(id="call_a", name="get_weather", arguments={"city": "Paris"}),
        ToolCall(id="call_b", name="get_weather", raw_arguments='{"city": '),
    )
    assert (final.usage.input_tokens, final.usage.output_tokens) == (40, 18)


async def test_stream_retries_a_failure_before_the_first_chunk(
    server: FakeLLMServer, openai_provider: OpenAIProvider, sleeps: RecordingSleep
) -> None:
    server.script(
        PATH,
        openai_error(503, "The engine is currently overloaded", kind="server_error"),
        openai_stream(text_chunks("ok")),
    )

    chunks = await collect(openai_provider, ask(Message.user("hi")))

    assert [c.delta for c in chunks[:-1]] == ["ok"]
    assert len(server.requests) == 2
    assert len(sleeps.delays) == 1


async def test_stream_cut_before_any_text_is_retried(
    server: FakeLLMServer, openai_provider: OpenAIProvider, sleeps: RecordingSleep
) -> None:
    server.script(
        PATH,
        openai_stream(text_chunks("never sent"), cut_after=1),
        openai_stream(text_chunks("ok")),
    )

    chunks = await collect(openai_provider, ask(Message.user("hi")))

    assert [c.delta for c in chunks[:-1]] == ["ok"]
    assert len(server.requests) == 2


async def test_stream_failure_after_text_is_raised_without_retry(
    server: FakeLLMServer, openai_provider: OpenAIProvider, sleeps: RecordingSleep
) -> None:
    server.script(
        PATH,
        openai_stream(text_chunks("Hel", "lo"), cut_after=2),
        openai_stream(text_chunks("not used")),
    )
    received: list[str] = []

    with pytest.raises(ProviderRetryableError, match="lost its connection"):
        await drain(openai_provider.stream(ask(Message.user("hi"))), into=received)

    assert received == ["Hel"]
    assert len(server.requests) == 1
    assert sleeps.delays == []


async def test_stream_closed_early_by_the_caller_releases_the_connection(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    server.script(
        PATH, openai_stream(text_chunks("a", "b", "c")), json_reply(chat_completion("next"))
    )

    stream = openai_provider.stream(ask(Message.user("hi")))
    first = await anext(stream)
    await stream.aclose()
    completion = await openai_provider.complete(ask(Message.user("again")))

    assert first.delta == "a"
    assert completion.message.content == "next"


async def test_rate_limit_waits_the_retry_after_seconds(
    server: FakeLLMServer, openai_provider: OpenAIProvider, sleeps: RecordingSleep
) -> None:
    server.script(
        PATH,
        openai_error(429, "Rate limit reached for requests", kind="requests", retry_after="2"),
        json_reply(chat_completion("ok")),
    )

    completion = await openai_provider.complete(ask(Message.user("hi")))

    assert completion.message.content == "ok"
    assert sleeps.delays == [2.0]
    assert len(server.requests) == 2


async def test_rate_limit_honours_a_retry_after_http_date(
    server: FakeLLMServer, openai_provider: OpenAIProvider, sleeps: RecordingSleep
) -> None:
    when = email.utils.formatdate(time.time() + 20, usegmt=True)
    server.script(
        PATH,
        openai_error(429, "Rate limit reached", kind="requests", retry_after=when),
        json_reply(chat_completion("ok")),
    )

    await openai_provider.complete(ask(Message.user("hi")))

    [delay] = sleeps.delays
    assert 18.0 <= delay <= 20.0


async def test_server_error_is_retried_then_succeeds(
    server: FakeLLMServer, openai_provider: OpenAIProvider, sleeps: RecordingSleep
) -> None:
    server.script(
        PATH,
        openai_error(500, "The server had an error", kind="server_error"),
        openai_error(502, "Bad gateway", kind="server_error"),
        json_reply(chat_completion("ok")),
    )

    completion = await openai_provider.complete(ask(Message.user("hi")))

    assert completion.message.content == "ok"
    assert len(server.requests) == 3
    assert len(sleeps.delays) == 2
    assert all(0 <= d <= 4.0 for d in sleeps.delays)


async def test_exhausted_retries_raise_a_retryable_error_and_the_sdk_adds_no_attempts(
    server: FakeLLMServer, openai_provider: OpenAIProvider, sleeps: RecordingSleep
) -> None:
    server.script(PATH, *[openai_error(503, "Service unavailable", kind="server_error")] * 5)

    with pytest.raises(ProviderRetryableError) as caught:
        await openai_provider.complete(ask(Message.user("hi")))

    assert caught.value.status_code == 503
    assert caught.value.provider == "openai"
    assert "Service unavailable" in str(caught.value)
    assert len(server.requests) == 3
    assert [r.headers["x-stainless-retry-count"] for r in server.requests] == ["0", "0", "0"]
    assert len(sleeps.delays) == 2


@pytest.mark.parametrize(
    ("status", "message", "expected"),
    [
        (400, "Invalid value for 'temperature'", "HTTP 400 (bad request)"),
        (401, "Incorrect API key provided", "check the API key"),
        (404, "The model 'gpt-9' does not exist", "check the model name"),
        (422, "Unprocessable", "HTTP 422"),
    ],
)
async def test_request_errors_fail_at_once(
    server: FakeLLMServer,
    openai_provider: OpenAIProvider,
    sleeps: RecordingSleep,
    status: int,
    message: str,
    expected: str,
) -> None:
    server.script(PATH, openai_error(status, message), json_reply(chat_completion("unused")))

    with pytest.raises(ProviderRequestError) as caught:
        await openai_provider.complete(ask(Message.user("hi")))

    assert caught.value.status_code == status
    assert message in str(caught.value)
    assert expected in str(caught.value)
    assert "'gpt-4o-mini'" in str(caught.value)
    assert len(server.requests) == 1
    assert sleeps.delays == []


async def test_dropped_connection_is_retried(
    server: FakeLLMServer, openai_provider: OpenAIProvider, sleeps: RecordingSleep
) -> None:
    server.script(PATH, drop(), json_reply(chat_completion("ok")))

    completion = await openai_provider.complete(ask(Message.user("hi")))

    assert completion.message.content == "ok"
    assert len(server.requests) == 2
    assert len(sleeps.delays) == 1


async def test_timeout_is_retried(server: FakeLLMServer, sleeps: RecordingSleep) -> None:
    server.script(PATH, stall(), json_reply(chat_completion("ok")))
    provider = OpenAIProvider(
        OPENAI_KEY,
        base_url=f"{server.base_url}/v1",
        timeout=0.2,
        retry=ProviderRetry(max_attempts=2),
        sleep=sleeps,
    )
    async with provider:
        completion = await provider.complete(ask(Message.user("hi")))

    assert completion.message.content == "ok"
    assert len(server.requests) == 2


async def test_tool_result_without_call_id_is_rejected_before_sending(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    orphan = Message.tool("x", "result").model_copy(update={"tool_call_id": None})

    with pytest.raises(
        ProviderRequestError, match="message 1 is a tool result without tool_call_id"
    ):
        await openai_provider.complete(ask(Message.user("hi"), orphan))

    assert server.requests == []


async def test_key_is_read_from_the_environment(
    server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    server.script(PATH, json_reply(chat_completion("ok")))

    async with OpenAIProvider(base_url=f"{server.base_url}/v1") as provider:
        await provider.complete(ask(Message.user("hi")))

    assert provider.name == "openai"
    assert provider.default_model == "gpt-4o-mini"
    assert server.requests[0].headers["authorization"] == f"Bearer {OPENAI_KEY}"


def test_missing_key_without_base_url_is_a_request_error() -> None:
    with pytest.raises(ProviderRequestError, match="OPENAI_API_KEY"):
        OpenAIProvider()


async def test_compatible_server_needs_no_key(server: FakeLLMServer) -> None:
    server.script(PATH, json_reply(chat_completion("ok")))

    async with OpenAIProvider(base_url=f"{server.base_url}/v1", default_model="llama3") as provider:
        completion = await provider.complete(ask(Message.user("hi")))

    assert completion.message.content == "ok"


async def test_count_tokens_uses_the_default_model() -> None:
    async with OpenAIProvider(OPENAI_KEY, default_model="my-local-model") as provider:
        # Unknown to tiktoken, so estimated: 3 (reply) + 3 (message) + 1 ("user") + 2 (8 bytes).
        assert provider.count_tokens([Message.user("12345678")]) == 9


async def test_openais_own_endpoint_gets_max_completion_tokens() -> None:
    async with OpenAIProvider(OPENAI_KEY) as provider:
        args = provider._create_args(ask(Message.user("hi"), max_tokens=64), "o4-mini", None)

    assert args.get("max_completion_tokens") == 64
    assert "max_tokens" not in args


async def test_a_given_client_is_used_without_its_own_retries_and_left_open(
    server: FakeLLMServer, sleeps: RecordingSleep
) -> None:
    server.script(
        PATH,
        *[openai_error(503, "unavailable", kind="server_error")] * 6,
        json_reply(chat_completion("ok")),
    )
    client = AsyncOpenAI(api_key=OPENAI_KEY, base_url=f"{server.base_url}/v1", max_retries=5)
    async with client:
        async with OpenAIProvider(
            client=client, retry=ProviderRetry(max_attempts=1), sleep=sleeps
        ) as provider:
            with pytest.raises(ProviderRetryableError):
                await provider.complete(ask(Message.user("hi")))

        assert len(server.requests) == 1
        assert not client.is_closed()
