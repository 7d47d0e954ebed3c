"""Named and required tool choices on every SDK provider, and the prompted fallback.

A server that refuses ``required`` or a named choice (an HTTP 500 naming
``tool_choice``, which was retried four times before) or ignores it (answers in
text, as llama.cpp's server does) gets the call asked for as JSON text instead:
repaired, validated against the tool's schema, re-asked once, and reported as
``tool_mode="prompted"``.
"""

from __future__ import annotations

import pytest

from selectgraph.core._errors import ProviderRequestError
from selectgraph.core._messages import Message
from selectgraph.providers._anthropic import AnthropicProvider
from selectgraph.providers._base import CompletionRequest, ToolSpec
from selectgraph.providers._openai import OpenAIProvider
from selectgraph.providers._tool_calls import ToolCallInvalid
from tests.providers.llm_server import FakeLLMServer, json_reply, openai_error
from tests.providers.payloads import (
    ANTHROPIC_MODEL,
    anthropic_message,
    chat_completion,
    openai_tool_call,
    tool_use_block,
)

PATH = "/v1/chat/completions"
MULTIPLY = ToolSpec(
    name="multiply",
    description="Multiply two integers.",
    parameters={
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    },
)
ADD = ToolSpec(
    name="add",
    description="Add two integers.",
    parameters=MULTIPLY.parameters,
)


def ask(choice: object, model: str = "gpt-4o-mini") -> CompletionRequest:
    return CompletionRequest(
        model=model,
        messages=(Message.user("What is 6 times 7?"),),
        tools=(ADD, MULTIPLY),
        tool_choice=choice,  # type: ignore[arg-type]
    )


def native_call() -> dict[str, object]:
    return chat_completion(
        None,
        tool_calls=[openai_tool_call("call_1", "multiply", {"a": 6, "b": 7})],
        finish_reason="tool_calls",
    )


async def test_a_named_choice_is_sent_in_openais_shape(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    server.script(PATH, json_reply(native_call()))

    completion = await openai_provider.complete(ask({"type": "function", "name": "multiply"}))

    [body] = server.bodies(PATH)
    assert body["tool_choice"] == {"type": "function", "function": {"name": "multiply"}}
    assert completion.tool_mode == "native"
    assert completion.message.tool_calls[0].arguments == {"a": 6, "b": 7}


async def test_a_named_choice_is_sent_in_anthropics_shape(
    server: FakeLLMServer, anthropic_provider: AnthropicProvider
) -> None:
    reply = anthropic_message(
        [tool_use_block("toolu_1", "multiply", {"a": 6, "b": 7})], stop_reason="tool_use"
    )
    server.script("/v1/messages", json_reply(reply), json_reply(reply))

    named = await anthropic_provider.complete(
        ask({"type": "function", "name": "multiply"}, ANTHROPIC_MODEL)
    )
    required = await anthropic_provider.complete(ask("required", ANTHROPIC_MODEL))

    first, second = server.bodies("/v1/messages")
    assert first["tool_choice"] == {"type": "tool", "name": "multiply"}
    assert second["tool_choice"] == {"type": "any"}
    assert named.tool_mode == required.tool_mode == "native"


async def test_a_named_choice_for_a_tool_not_offered_names_it_and_lists_the_tools(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    with pytest.raises(ProviderRequestError) as caught:
        await openai_provider.complete(ask({"type": "function", "name": "divide"}))

    message = str(caught.value)
    assert "'divide'" in message
    assert "add, multiply" in message
    assert server.requests == []


async def test_a_server_refusing_required_falls_back_to_a_prompted_call_once(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    server.reject_tool_choice("required")
    server.script(
        PATH,
        json_reply(chat_completion('{"name": "multiply", "arguments": {"a": 6, "b": 7}}')),
        json_reply(chat_completion('{"name": "add", "arguments": {"a": 1, "b": 2}}')),
    )

    first = await openai_provider.complete(ask("required"))
    second = await openai_provider.complete(ask("required"))

    assert first.tool_mode == second.tool_mode == "prompted"
    assert first.finish_reason == "tool_calls"
    [call] = first.message.tool_calls
    assert (call.name, call.arguments) == ("multiply", {"a": 6, "b": 7})
    # The refusal was not retried, and the mode was remembered: 1 refused + 2 prompted.
    refused, *prompted = server.bodies(PATH)
    assert refused["tool_choice"] == "required"
    assert len(prompted) == 2
    assert all("tools" not in body and "tool_choice" not in body for body in prompted)
    assert "multiply" in prompted[0]["messages"][0]["content"]
    assert openai_provider.tool_mode == "prompted"


async def test_a_server_ignoring_required_falls_back_too(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    server.script(
        PATH,
        json_reply(chat_completion("6 times 7 is 48.")),  # no tool call: ignored
        json_reply(chat_completion('{"name": "multiply", "arguments": {"a": 6, "b": 7}}')),
    )

    completion = await openai_provider.complete(ask("required"))

    assert completion.tool_mode == "prompted"
    assert completion.message.tool_calls[0].name == "multiply"


async def test_broken_json_is_repaired_and_an_invalid_call_is_re_asked_with_the_error(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    server.reject_tool_choice("named")
    server.script(
        PATH,
        json_reply(chat_completion('{"name": "multiply", "arguments": {"a": 6, "b": "seven"}}')),
        # Single quotes and a missing brace: repaired.
        json_reply(chat_completion("{'name': 'multiply', 'arguments': {'a': 6, 'b': 7}")),
    )

    completion = await openai_provider.complete(ask({"type": "function", "name": "multiply"}))

    assert completion.message.tool_calls[0].arguments == {"a": 6, "b": 7}
    assert completion.usage.calls == 2
    reask = server.bodies(PATH)[-1]["messages"][-1]["content"]
    assert "That tool call is invalid" in reask
    assert "b: 'seven' is not of type 'integer'" in reask


async def test_a_call_still_invalid_after_the_re_ask_is_a_typed_error(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    server.reject_tool_choice("required")
    server.script(
        PATH,
        json_reply(chat_completion("I would rather not.")),
        json_reply(chat_completion('{"name": "divide", "arguments": {}}')),
    )

    with pytest.raises(ToolCallInvalid, match=r"'name' must be one of 'add', 'multiply'"):
        await openai_provider.complete(ask("required"))


async def test_the_calls_before_the_fallback_are_counted_in_its_usage(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    server.script(
        PATH,
        json_reply(chat_completion("6 times 7 is 48.", prompt_tokens=900, completion_tokens=100)),
        json_reply(
            chat_completion(
                '{"name": "multiply", "arguments": {"a": 6, "b": 7}}',
                prompt_tokens=10,
                completion_tokens=5,
            )
        ),
    )

    completion = await openai_provider.complete(ask("required"))

    assert completion.tool_mode == "prompted"
    assert (completion.usage.input_tokens, completion.usage.output_tokens) == (910, 105)


async def test_a_bad_request_that_is_not_about_tools_does_not_switch_the_mode(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    server.script(
        PATH,
        openai_error(400, "This model's maximum context length is 4096 tokens"),
        json_reply(native_call()),
    )

    with pytest.raises(ProviderRequestError, match="maximum context length"):
        await openai_provider.complete(ask("required"))
    after = await openai_provider.complete(ask("required"))

    assert after.tool_mode == "native"
    assert len(server.bodies(PATH)) == 2  # the bad request was not sent again, prompted
