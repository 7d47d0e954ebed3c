"""Replies with a success status that are not answers: typed ProviderErrors, never raw ones.

A proxy or gateway that fails often answers 200 with an HTML page or a body cut
short; those are retried. A readable reply of the wrong shape (``{}``, a list)
is the same on every try, so it fails at once and says to check ``base_url``.
A stream that ends before the answer finished is an error, not a short answer.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from selectgraph.core._errors import ProviderError, ProviderRequestError, ProviderRetryableError
from selectgraph.core._messages import Message
from selectgraph.providers import ImplausibleUsageWarning
from selectgraph.providers._base import CompletionRequest
from tests.providers.llm_server import (
    anthropic_stream,
    json_reply,
    openai_stream,
    raw_reply,
    raw_stream,
)
from tests.providers.payloads import (
    anthropic_message,
    block_start,
    chat_completion,
    chunk,
    message_start,
    text_block,
    text_chunks,
    text_delta,
    text_events,
)

if TYPE_CHECKING:
    from selectgraph.providers._anthropic import AnthropicProvider
    from selectgraph.providers._openai import OpenAIProvider
    from tests.providers.conftest import RecordingSleep
    from tests.providers.llm_server import FakeLLMServer

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"
REQUEST = CompletionRequest(model="some-model", messages=(Message.user("hi"),))

HTML_PAGE = raw_reply(
    b"<html><body><h1>502 Bad Gateway</h1></body></html>", content_type="text/html"
)
CUT_SHORT = raw_reply(b'{"id": "chatcmpl-1", "choices": [{"index": 0, "mess')

# (reply, retryable, words the message must contain)
GARBAGE = {
    "html": (HTML_PAGE, True, "not a JSON object"),
    "truncated-json": (CUT_SHORT, True, "not valid JSON"),
    "json-string": (json_reply("Service Unavailable"), True, "not a JSON object"),
}
WRONG_SHAPE = {
    "empty-object": (json_reply({}), False, "check that base_url"),
    "list": (json_reply([{"choices": []}]), False, "got list"),
    "null": (json_reply(None), False, "got null"),
}
CASES = {**GARBAGE, **WRONG_SHAPE}


async def complete_fails(provider: OpenAIProvider | AnthropicProvider) -> ProviderError:
    with pytest.raises(ProviderError) as caught:
        await provider.complete(REQUEST)
    return caught.value


async def stream_fails(provider: OpenAIProvider | AnthropicProvider) -> tuple[str, ProviderError]:
    text: list[str] = []

    async def consume() -> None:
        async for piece in provider.stream(REQUEST):
            text.append(piece.delta)

    with pytest.raises(ProviderError) as caught:
        await consume()
    return "".join(text), caught.value


def assert_typed(error: ProviderError, retryable: bool, words: str) -> None:
    assert type(error) is (ProviderRetryableError if retryable else ProviderRequestError)
    assert error.status_code == 200
    assert "malformed response for model 'some-model'" in str(error)
    assert words in str(error)
    # Not a raw parsing error dressed up: nothing chained, nothing to leak.
    assert error.__cause__ is None
    assert error.__context__ is None


# --- whole replies ---------------------------------------------------------------------


@pytest.mark.parametrize("case", list(CASES))
async def test_openai_malformed_reply_is_a_typed_error(
    case: str, server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    reply, retryable, words = CASES[case]
    server.script(OPENAI_PATH, *[reply] * 3)

    error = await complete_fails(openai_provider)

    assert_typed(error, retryable, words)
    # Garbage is retried (3 attempts); a wrong shape is asked for once.
    assert len(server.requests) == (3 if retryable else 1)


@pytest.mark.parametrize("case", list(CASES))
async def test_anthropic_malformed_reply_is_a_typed_error(
    case: str, server: FakeLLMServer, anthropic_provider: AnthropicProvider
) -> None:
    reply, retryable, words = CASES[case]
    if case == "empty-object":
        words = "no content list"
    server.script(ANTHROPIC_PATH, *[reply] * 3)

    error = await complete_fails(anthropic_provider)

    assert_typed(error, retryable, words)
    assert len(server.requests) == (3 if retryable else 1)


async def test_openai_empty_object_is_not_an_empty_answer(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    server.script(OPENAI_PATH, json_reply({}), json_reply({"choices": []}))

    first = await complete_fails(openai_provider)
    second = await complete_fails(openai_provider)

    assert "no choices" in str(first)
    assert "no choices" in str(second)


async def test_openai_wrongly_typed_field_is_a_typed_error(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    body = chat_completion("hi")
    body["choices"][0]["message"] = "hi"
    server.script(OPENAI_PATH, json_reply(body))

    error = await complete_fails(openai_provider)

    assert_typed(error, False, "wrong shape")


async def test_a_gateway_page_then_an_answer_succeeds(
    server: FakeLLMServer, openai_provider: OpenAIProvider, sleeps: RecordingSleep
) -> None:
    server.script(OPENAI_PATH, HTML_PAGE, CUT_SHORT, json_reply(chat_completion("fine")))

    completion = await openai_provider.complete(REQUEST)

    assert completion.message.text == "fine"
    assert len(sleeps.delays) == 2


# --- streams ---------------------------------------------------------------------------


def openai_event(payload: object) -> bytes:
    return f"data: {json.dumps(payload)}\n\n".encode()


def anthropic_event(payload: dict[str, object]) -> bytes:
    return f"event: {payload['type']}\ndata: {json.dumps(payload)}\n\n".encode()


async def test_openai_stream_event_with_bad_json_is_retried_then_typed(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    bad = raw_stream(b'data: {"id": "chatcmpl-1", "cho\n\n', b"data: [DONE]\n\n")
    server.script(OPENAI_PATH, bad, bad, bad)

    text, error = await stream_fails(openai_provider)

    assert text == ""
    assert_typed(error, True, "not valid JSON")
    assert len(server.requests) == 3


async def test_openai_stream_event_of_the_wrong_shape_is_typed(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    server.script(OPENAI_PATH, raw_stream(openai_event([1, 2]), b"data: [DONE]\n\n"))

    _, error = await stream_fails(openai_provider)

    assert_typed(error, False, "not a chat completion chunk")


async def test_openai_stream_cut_short_after_text_is_an_error_not_an_answer(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    # No finish reason, no [DONE]: the connection ended cleanly mid-answer.
    server.script(
        OPENAI_PATH,
        raw_stream(
            openai_event(chunk({"role": "assistant", "content": ""})),
            openai_event(chunk({"content": "The answer is"})),
        ),
    )

    text, error = await stream_fails(openai_provider)

    assert text == "The answer is"
    assert_typed(error, True, "ended before the answer finished")
    # Text was already handed out: retrying would repeat it.
    assert len(server.requests) == 1


async def test_openai_html_instead_of_a_stream_is_retried(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    server.script(OPENAI_PATH, HTML_PAGE, openai_stream(text_chunks("ok")))

    pieces = [c async for c in openai_provider.stream(REQUEST)]

    assert "".join(c.delta for c in pieces) == "ok"
    assert len(server.requests) == 2


async def test_openai_stream_with_a_finish_reason_but_no_done_is_complete(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    server.script(
        OPENAI_PATH,
        raw_stream(
            openai_event(chunk({"content": "whole"})),
            openai_event(chunk({}, finish_reason="stop")),
        ),
    )

    pieces = [c async for c in openai_provider.stream(REQUEST)]

    final = pieces[-1].completion
    assert final is not None
    assert (final.message.text, final.finish_reason) == ("whole", "stop")


async def test_anthropic_stream_event_with_bad_json_is_typed(
    server: FakeLLMServer, anthropic_provider: AnthropicProvider
) -> None:
    bad = raw_stream(b'event: message_start\ndata: {"type": "message_st\n\n')
    server.script(ANTHROPIC_PATH, bad, bad, bad)

    _, error = await stream_fails(anthropic_provider)

    assert_typed(error, True, "not valid JSON")
    assert len(server.requests) == 3


@pytest.mark.parametrize("payload", [b"[1, 2]", b"{}"], ids=["list", "empty-object"])
async def test_anthropic_stream_event_of_the_wrong_shape_is_typed(
    payload: bytes, server: FakeLLMServer, anthropic_provider: AnthropicProvider
) -> None:
    server.script(ANTHROPIC_PATH, raw_stream(b"event: message_start\ndata: " + payload + b"\n\n"))

    _, error = await stream_fails(anthropic_provider)

    assert_typed(error, False, "not a Messages API event")


async def test_anthropic_stream_cut_short_after_text_is_an_error(
    server: FakeLLMServer, anthropic_provider: AnthropicProvider
) -> None:
    server.script(
        ANTHROPIC_PATH,
        raw_stream(
            anthropic_event(message_start()),
            anthropic_event(block_start(0, {"type": "text", "text": ""})),
            anthropic_event(text_delta(0, "The answer is")),
        ),
    )

    text, error = await stream_fails(anthropic_provider)

    assert text == "The answer is"
    assert_typed(error, True, "no message_stop")
    assert len(server.requests) == 1


async def test_anthropic_stream_with_a_stop_reason_but_no_message_stop_is_complete(
    server: FakeLLMServer, anthropic_provider: AnthropicProvider
) -> None:
    events = [e for e in text_events("whole") if e["type"] != "message_stop"]
    server.script(ANTHROPIC_PATH, anthropic_stream(events))

    pieces = [c async for c in anthropic_provider.stream(REQUEST)]

    final = pieces[-1].completion
    assert final is not None
    assert (final.message.text, final.finish_reason) == ("whole", "stop")


async def test_anthropic_html_instead_of_a_stream_is_retried(
    server: FakeLLMServer, anthropic_provider: AnthropicProvider
) -> None:
    server.script(ANTHROPIC_PATH, HTML_PAGE, anthropic_stream(text_events("ok")))

    pieces = [c async for c in anthropic_provider.stream(REQUEST)]

    assert "".join(c.delta for c in pieces) == "ok"
    assert len(server.requests) == 2


# --- shapes the SDKs let through, read field by field ---------------------------------


async def test_openai_choice_without_a_message_is_typed(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    body = chat_completion("hi")
    del body["choices"][0]["message"]
    server.script(OPENAI_PATH, json_reply(body))

    error = await complete_fails(openai_provider)

    assert_typed(error, False, "no message")


async def test_openai_usage_without_numbers_is_counted_locally(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    body = chat_completion("four words in all")
    body["usage"] = {"prompt_tokens": None}
    server.script(OPENAI_PATH, json_reply(body))

    completion = await openai_provider.complete(REQUEST)

    assert completion.message.text == "four words in all"
    assert completion.usage.input_tokens > 0
    assert completion.usage.output_tokens > 0


@pytest.mark.parametrize(
    ("field", "value"),
    [("prompt_tokens", "many"), ("completion_tokens", 2.5)],
)
async def test_openai_usage_of_the_wrong_type_is_a_malformed_reply(
    field: str, value: object, server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    body = chat_completion("hi")
    body["usage"][field] = value
    server.script(OPENAI_PATH, json_reply(body))

    error = await complete_fails(openai_provider)

    assert_typed(error, False, f"usage.{field} is")


async def test_openai_content_that_is_not_text_is_a_malformed_reply(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    body = chat_completion("hi")
    body["choices"][0]["message"]["content"] = 7
    server.script(OPENAI_PATH, json_reply(body))

    error = await complete_fails(openai_provider)

    assert_typed(error, False, "content is int, not a string")


@pytest.mark.parametrize("count", [-(10**30), 10**30, -1])
async def test_openai_impossible_usage_is_counted_locally_with_a_warning(
    count: int, server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    body = chat_completion("four words in all", prompt_tokens=count)
    server.script(OPENAI_PATH, json_reply(body))

    with pytest.warns(ImplausibleUsageWarning, match="usage.prompt_tokens"):
        completion = await openai_provider.complete(REQUEST)

    # The local count: a budget can neither be defeated nor tripped by the claim.
    assert 0 < completion.usage.input_tokens < 1_000
    assert 0 < completion.usage.output_tokens < 1_000


async def test_openai_impossible_usage_in_a_stream_is_counted_locally(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    server.script(OPENAI_PATH, openai_stream(text_chunks("a", "b", prompt_tokens=-(10**30))))

    with pytest.warns(ImplausibleUsageWarning):
        pieces = [c async for c in openai_provider.stream(REQUEST)]

    usage = pieces[-1].completion.usage  # type: ignore[union-attr]
    assert 0 < usage.input_tokens < 1_000


@pytest.mark.parametrize("field", ["input_tokens", "output_tokens"])
@pytest.mark.parametrize("count", [-(10**30), 10**30])
async def test_anthropic_impossible_usage_is_counted_locally_with_a_warning(
    field: str, count: int, server: FakeLLMServer, anthropic_provider: AnthropicProvider
) -> None:
    body = anthropic_message([text_block("four words in all")])
    body["usage"][field] = count
    server.script(ANTHROPIC_PATH, json_reply(body))

    with pytest.warns(ImplausibleUsageWarning, match=f"usage.{field}"):
        completion = await anthropic_provider.complete(REQUEST)

    assert 0 < completion.usage.input_tokens < 1_000
    assert 0 < completion.usage.output_tokens < 1_000
    assert completion.usage.cost_usd is None or 0 <= completion.usage.cost_usd < 1


async def test_anthropic_text_that_is_not_text_is_a_malformed_reply(
    server: FakeLLMServer, anthropic_provider: AnthropicProvider
) -> None:
    body = anthropic_message([text_block("hi")])
    body["content"][0]["text"] = 7
    server.script(ANTHROPIC_PATH, json_reply(body))

    error = await complete_fails(anthropic_provider)

    assert_typed(error, False, "content[0].text is int")


async def test_openai_chunk_with_a_wrongly_typed_delta_is_typed(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    server.script(
        OPENAI_PATH,
        raw_stream(openai_event({"choices": [{"index": 0, "delta": 5}]}), b"data: [DONE]\n\n"),
    )

    _, error = await stream_fails(openai_provider)

    assert_typed(error, False, "not a chat completion chunk")


async def test_a_stream_event_that_is_not_utf8_is_garbage(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    bad = raw_stream(b"data: \xff\xfe{}\n\n")
    server.script(OPENAI_PATH, bad, bad, bad)

    _, error = await stream_fails(openai_provider)

    assert isinstance(error, ProviderRetryableError)
    assert error.status_code == 200


async def test_anthropic_usage_of_the_wrong_type_is_typed(
    server: FakeLLMServer, anthropic_provider: AnthropicProvider
) -> None:
    body = anthropic_message([text_block("hi")])
    body["usage"]["input_tokens"] = "many"
    server.script(ANTHROPIC_PATH, json_reply(body))

    error = await complete_fails(anthropic_provider)

    assert_typed(error, False, "wrong shape")


@pytest.mark.parametrize(
    "event",
    [
        {"type": "content_block_delta", "index": 0, "delta": 5},
        {"type": "message_start", "message": {"content": [], "usage": {"input_tokens": "x"}}},
    ],
    ids=["delta", "message-start"],
)
async def test_anthropic_event_with_a_wrongly_typed_field_is_typed(
    event: dict[str, object], server: FakeLLMServer, anthropic_provider: AnthropicProvider
) -> None:
    server.script(ANTHROPIC_PATH, raw_stream(anthropic_event(event)))

    _, error = await stream_fails(anthropic_provider)

    assert_typed(error, False, "not a Messages API event")


class _BrokenStream:
    """An SDK stream whose next item fails inside the SDK with a raw TypeError."""

    async def __anext__(self) -> object:
        raise TypeError("'NoneType' object is not subscriptable")

    async def close(self) -> None:
        pass


async def test_a_raw_error_inside_the_sdks_stream_is_typed(
    openai_provider: OpenAIProvider, anthropic_provider: AnthropicProvider
) -> None:
    from selectgraph.providers import _anthropic, _openai
    from selectgraph.providers._sdk import OpenStream

    for provider, assembler in (
        (openai_provider, _openai._Assembler(model="m")),
        (anthropic_provider, _anthropic._Assembler(model="m")),
    ):
        opened: OpenStream[Any] = OpenStream(stream=_BrokenStream(), assembler=assembler)
        with pytest.raises(ProviderRequestError) as caught:
            await provider._next_text(opened, "some-model")
        assert_typed(caught.value, False, "wrong shape")
