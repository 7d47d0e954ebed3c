"""Structured output on servers that refuse json_schema: fall back once, remember, say which.

llama.cpp's server answers ``response_format: json_schema`` with HTTP 500, older
vLLM with 400, some FastAPI-based servers with 422. The provider then asks again
with ``json_object`` (schema sent along), then with instructions alone, and keeps
using the mode that worked.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from selectgraph.core._errors import ProviderRequestError, ProviderRetryableError
from selectgraph.core._messages import Message
from selectgraph.providers._base import CompletionRequest, ResponseFormat
from selectgraph.providers._errors_map import StructuredOutputRejected
from tests.providers.llm_server import (
    anthropic_error,
    anthropic_stream,
    json_reply,
    openai_error,
    openai_stream,
)
from tests.providers.payloads import (
    anthropic_message,
    chat_completion,
    text_block,
    text_chunks,
    text_events,
)

if TYPE_CHECKING:
    from selectgraph.providers._anthropic import AnthropicProvider
    from selectgraph.providers._openai import OpenAIProvider
    from tests.providers.conftest import RecordingSleep
    from tests.providers.llm_server import FakeLLMServer

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}
ANSWER = '{"city": "Paris"}'


def structured(*messages: Message) -> CompletionRequest:
    return CompletionRequest(
        model="local-model",
        messages=messages or (Message.system("Be brief."), Message.user("Where?")),
        response_format=ResponseFormat(name="Place", json_schema=SCHEMA),
    )


def response_format_types(server: FakeLLMServer, path: str) -> list[str | None]:
    return [(body.get("response_format") or {}).get("type") for body in server.bodies(path)]


async def test_llama_cpp_refusing_json_schema_falls_back_to_json_object(
    server: FakeLLMServer, openai_provider: OpenAIProvider, sleeps: RecordingSleep
) -> None:
    server.reject_response_format("json_schema")
    server.script(OPENAI_PATH, *[json_reply(chat_completion(ANSWER))] * 2)

    first = await openai_provider.complete(structured())
    second = await openai_provider.complete(structured())

    # The 500 names response_format: a refusal of the request, never retried.
    assert sleeps.delays == []
    assert response_format_types(server, OPENAI_PATH) == [
        "json_schema",
        "json_object",
        "json_object",
    ]
    assert (first.structured_mode, second.structured_mode) == ("json_object", "json_object")
    assert first.message.text == ANSWER
    assert openai_provider.structured_mode == "json_object"
    fallback = server.bodies(OPENAI_PATH)[1]
    assert fallback["response_format"] == {"type": "json_object", "schema": SCHEMA}
    # JSON mode without the schema in the prompt would leave the model guessing.
    [system] = [m for m in fallback["messages"] if m["role"] == "system"]
    assert system["content"].startswith("Be brief.\n\n")
    assert json.dumps(SCHEMA) in system["content"]


@pytest.mark.parametrize("status", [400, 422])
async def test_a_server_refusing_both_json_modes_gets_instructions(
    status: int, server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    refusal = openai_error(status, "unknown field: response_format")
    server.reject_response_format("json_schema", "json_object", reply=refusal)
    server.script(OPENAI_PATH, *[json_reply(chat_completion(ANSWER))] * 2)

    first = await openai_provider.complete(structured(Message.user("Where?")))
    second = await openai_provider.complete(structured(Message.user("Where?")))

    assert response_format_types(server, OPENAI_PATH) == ["json_schema", "json_object", None, None]
    assert (first.structured_mode, second.structured_mode) == ("instructions", "instructions")
    instructed = server.bodies(OPENAI_PATH)[2]["messages"]
    assert instructed[0]["role"] == "system"
    assert json.dumps(SCHEMA) in instructed[0]["content"]
    assert instructed[1] == {"role": "user", "content": "Where?"}


async def test_a_schema_already_in_the_prompt_is_not_repeated(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    server.reject_response_format("json_schema")
    server.script(OPENAI_PATH, json_reply(chat_completion(ANSWER)))
    system = f"Answer in JSON matching:\n{json.dumps(SCHEMA, ensure_ascii=False)}"

    await openai_provider.complete(structured(Message.system(system), Message.user("Where?")))

    assert server.bodies(OPENAI_PATH)[1]["messages"][0] == {"role": "system", "content": system}


async def test_a_refusal_for_another_reason_is_raised_and_not_remembered(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    # A bad model name is refused in every mode: the last (plain) error is the answer.
    server.script(OPENAI_PATH, *[openai_error(400, "model 'local-model' not found")] * 3)

    with pytest.raises(ProviderRequestError) as caught:
        await openai_provider.complete(structured())

    assert not isinstance(caught.value, StructuredOutputRejected)
    assert "model 'local-model' not found" in str(caught.value)
    assert len(server.requests) == 3
    assert openai_provider.structured_mode == "json_schema"


async def test_a_transient_500_is_retried_not_taken_for_a_refusal(
    server: FakeLLMServer, openai_provider: OpenAIProvider, sleeps: RecordingSleep
) -> None:
    server.script(
        OPENAI_PATH,
        openai_error(
            500, "The server had an error while processing your request.", kind="server_error"
        ),
        json_reply(chat_completion(ANSWER)),
    )

    completion = await openai_provider.complete(structured())

    assert completion.structured_mode == "json_schema"
    assert len(sleeps.delays) == 1
    assert response_format_types(server, OPENAI_PATH) == ["json_schema", "json_schema"]


async def test_a_500_that_is_a_validation_error_of_the_request_is_not_retried(
    server: FakeLLMServer, openai_provider: OpenAIProvider, sleeps: RecordingSleep
) -> None:
    server.script(
        OPENAI_PATH,
        openai_error(500, "1 validation error for ChatRequest: stop: Input should be a list"),
    )
    request = CompletionRequest(model="m", messages=(Message.user("hi"),), stop=("x",))

    with pytest.raises(ProviderRequestError) as caught:
        await openai_provider.complete(request)

    assert not isinstance(caught.value, ProviderRetryableError)
    assert caught.value.status_code == 500
    assert sleeps.delays == []
    assert len(server.requests) == 1


async def test_streaming_falls_back_the_same_way(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    server.reject_response_format("json_schema")
    server.script(OPENAI_PATH, openai_stream(text_chunks('{"city": ', '"Paris"}')))

    chunks = [chunk async for chunk in openai_provider.stream(structured())]

    final = chunks[-1].completion
    assert final is not None
    assert (final.message.text, final.structured_mode) == (ANSWER, "json_object")
    assert response_format_types(server, OPENAI_PATH) == ["json_schema", "json_object"]


async def test_requests_without_a_schema_report_no_mode(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    server.script(OPENAI_PATH, json_reply(chat_completion("hi")))

    completion = await openai_provider.complete(
        CompletionRequest(model="m", messages=(Message.user("hi"),))
    )

    assert completion.structured_mode is None
    assert "response_format" not in server.bodies(OPENAI_PATH)[0]


async def test_anthropic_gateway_refusing_output_config_gets_instructions(
    server: FakeLLMServer, anthropic_provider: AnthropicProvider
) -> None:
    server.script(
        ANTHROPIC_PATH,
        anthropic_error(
            400, "invalid_request_error", "output_config: Extra inputs are not permitted"
        ),
        *[json_reply(anthropic_message([text_block(ANSWER)]))] * 2,
    )

    first = await anthropic_provider.complete(structured())
    second = await anthropic_provider.complete(structured())

    first_body, fallback, later = server.bodies(ANTHROPIC_PATH)
    assert first_body["output_config"]["format"]["type"] == "json_schema"
    assert "output_config" not in fallback
    assert "output_config" not in later
    assert fallback["system"].startswith("Be brief.\n\n")
    assert json.dumps(SCHEMA) in fallback["system"]
    assert (first.structured_mode, second.structured_mode) == ("instructions", "instructions")


async def test_anthropic_native_schema_reports_json_schema(
    server: FakeLLMServer, anthropic_provider: AnthropicProvider
) -> None:
    server.script(ANTHROPIC_PATH, json_reply(anthropic_message([text_block(ANSWER)])))

    completion = await anthropic_provider.complete(structured())

    assert completion.structured_mode == "json_schema"


async def test_anthropic_streaming_falls_back_and_keeps_a_schema_already_in_the_prompt(
    server: FakeLLMServer, anthropic_provider: AnthropicProvider
) -> None:
    system = f"Reply as JSON matching {json.dumps(SCHEMA, ensure_ascii=False)}"
    server.script(
        ANTHROPIC_PATH,
        anthropic_error(422, "invalid_request_error", "output_config is not supported"),
        anthropic_stream(text_events(ANSWER)),
    )

    chunks = [
        chunk
        async for chunk in anthropic_provider.stream(
            structured(Message.system(system), Message.user("Where?"))
        )
    ]

    final = chunks[-1].completion
    assert final is not None
    assert (final.message.text, final.structured_mode) == (ANSWER, "instructions")
    assert server.bodies(ANTHROPIC_PATH)[1]["system"] == system
