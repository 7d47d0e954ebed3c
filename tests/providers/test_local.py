from __future__ import annotations

import asyncio
import doctest
import json
import time
from datetime import datetime
from enum import Enum
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from selectgraph.core._errors import ProviderRequestError, ProviderRetryableError
from selectgraph.core._messages import Message, Role, ToolCall
from selectgraph.core._usage import Usage
from selectgraph.providers import _local
from selectgraph.providers._base import (
    CompletionRequest,
    Provider,
    ResponseFormat,
    ToolChoice,
    ToolSpec,
)
from selectgraph.providers._local import (
    LocalProvider,
    LocalReply,
    ScriptEntry,
    ScriptExhausted,
    _schema_example,
)
from selectgraph.providers._retry import ProviderRetry
from selectgraph.providers._tokens import count_message_tokens, count_text_tokens


def request(
    text: str = "hello",
    *,
    model: str = "local",
    messages: tuple[Message, ...] | None = None,
    response_format: ResponseFormat | None = None,
    tools: tuple[ToolSpec, ...] = (),
    tool_choice: ToolChoice | None = None,
) -> CompletionRequest:
    return CompletionRequest(
        model=model,
        messages=messages if messages is not None else (Message.user(text),),
        response_format=response_format,
        tools=tools,
        tool_choice=tool_choice,
    )


class FakeSleep:
    """Records retry waits instead of sleeping."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def rate_limited(retry_after: float | None = None) -> ProviderRetryableError:
    return ProviderRetryableError(
        "rate limited", provider="local", status_code=429, retry_after=retry_after
    )


# --- scripted replies --------------------------------------------------------


async def test_scripted_text_replies_answer_calls_in_order() -> None:
    provider = LocalProvider(["first", "second"])

    first = await provider.complete(request())
    second = await provider.complete(request())

    assert [first.message.text, second.message.text] == ["first", "second"]
    assert first.message.role is Role.ASSISTANT
    assert first.finish_reason == "stop"
    assert provider.remaining == 0


async def test_reply_record_sets_usage_and_finish_reason() -> None:
    usage = Usage(input_tokens=7, output_tokens=3, cost_usd=0.5, calls=1)
    provider = LocalProvider([LocalReply(text="cut", usage=usage, finish_reason="length")])

    completion = await provider.complete(request())

    assert completion.usage == usage
    assert completion.finish_reason == "length"


async def test_tool_call_reply_asks_for_the_tool_with_a_deterministic_id() -> None:
    provider = LocalProvider(["thinking", LocalReply.tool_call("search", {"q": "x"})])
    await provider.complete(request())

    completion = await provider.complete(request())

    assert completion.message.content is None
    assert completion.message.tool_calls == (
        ToolCall(id="call_2_1", name="search", arguments={"q": "x"}),
    )
    assert completion.finish_reason == "tool_calls"


async def test_tool_call_reply_keeps_given_ids_and_text() -> None:
    calls = [
        ToolCall(id="a", name="search", arguments={"q": "x"}),
        ToolCall(id="", name="fetch", arguments={"url": "u"}),
    ]
    provider = LocalProvider([LocalReply(text="Let me look.", tool_calls=calls)])

    completion = await provider.complete(request())

    assert completion.message.text == "Let me look."
    assert [c.id for c in completion.message.tool_calls] == ["a", "call_1_2"]


async def test_function_entry_answers_from_the_request() -> None:
    provider = LocalProvider([lambda req: f"you said {req.messages[-1].text}"])

    completion = await provider.complete(request("ping"))

    assert completion.message.text == "you said ping"


async def test_function_entry_can_fail_the_call() -> None:
    failure = ProviderRequestError("bad request", provider="local", status_code=400)
    provider = LocalProvider([lambda _req: failure])

    with pytest.raises(ProviderRequestError) as info:
        await provider.complete(request())

    assert info.value is failure


async def test_function_entry_returning_something_else_is_a_type_error() -> None:
    def not_a_reply(_request: CompletionRequest) -> Any:
        return 42

    provider = LocalProvider([not_a_reply])

    with pytest.raises(TypeError, match="returned int"):
        await provider.complete(request())


def test_exception_class_in_script_is_rejected() -> None:
    with pytest.raises(TypeError, match="pass an instance"):
        LocalProvider([ProviderRetryableError])  # type: ignore[list-item]


def test_a_bare_string_script_is_rejected() -> None:
    with pytest.raises(TypeError, match=r"wrap it in \[...\]"):
        LocalProvider("hello")


def test_unsupported_script_entry_is_rejected() -> None:
    with pytest.raises(TypeError, match="is a int"):
        LocalProvider([42])  # type: ignore[list-item]


async def test_extend_appends_replies_after_queued_ones() -> None:
    provider = LocalProvider(["one"])
    provider.extend(["two"])

    texts = [(await provider.complete(request())).message.text for _ in range(2)]

    assert texts == ["one", "two"]
    assert provider.scripted == 2


def test_json_reply_serialises_mappings_and_models() -> None:
    class Point(BaseModel):
        x: int

    assert LocalReply.json({"a": [1, "é"]}).text == '{"a": [1, "é"]}'
    assert LocalReply.json(Point(x=1)).text == '{"x":1}'


def test_local_reply_rejects_negative_latency() -> None:
    with pytest.raises(ValueError, match="latency"):
        LocalReply(text="x", latency=-1)


# --- failures and retries ----------------------------------------------------


async def test_retryable_failure_is_retried_honouring_retry_after() -> None:
    sleep = FakeSleep()
    provider = LocalProvider([rate_limited(retry_after=2.0), "ok"], sleep=sleep)

    completion = await provider.complete(request())

    assert completion.message.text == "ok"
    assert sleep.delays == [2.0]
    assert provider.retry_delays == [2.0]
    assert len(provider.requests) == 2  # one request per attempt, as a server sees them


async def test_retry_after_is_capped_by_the_policy() -> None:
    sleep = FakeSleep()
    policy = ProviderRetry(max_retry_after=5.0)
    provider = LocalProvider([rate_limited(retry_after=600.0), "ok"], retry=policy, sleep=sleep)

    await provider.complete(request())

    assert sleep.delays == [5.0]


async def test_backoff_without_retry_after_stays_within_the_policy() -> None:
    sleep = FakeSleep()
    policy = ProviderRetry(max_attempts=3, initial_delay=0.5, max_delay=1.0)
    provider = LocalProvider([rate_limited(), rate_limited(), "ok"], retry=policy, sleep=sleep)

    await provider.complete(request())

    assert len(sleep.delays) == 2
    assert all(0 <= delay <= 1.0 for delay in sleep.delays)


async def test_retryable_failure_raises_once_attempts_run_out() -> None:
    sleep = FakeSleep()
    policy = ProviderRetry(max_attempts=2)
    provider = LocalProvider(
        [rate_limited(1.0), rate_limited(1.0), "never"], retry=policy, sleep=sleep
    )

    with pytest.raises(ProviderRetryableError):
        await provider.complete(request())

    assert sleep.delays == [1.0]
    assert provider.remaining == 1


async def test_request_failure_is_raised_without_retrying() -> None:
    sleep = FakeSleep()
    failure = ProviderRequestError("no such model", provider="local", status_code=404)
    provider = LocalProvider([failure, "unused"], sleep=sleep)

    with pytest.raises(ProviderRequestError, match="no such model"):
        await provider.complete(request())

    assert sleep.delays == []
    assert provider.remaining == 1


# --- latency -----------------------------------------------------------------


async def test_reply_latency_is_really_awaited() -> None:
    provider = LocalProvider([LocalReply(text="slow", latency=0.05)])

    started = time.perf_counter()
    completion = await provider.complete(request())

    assert time.perf_counter() - started >= 0.05
    assert completion.latency_ms >= 50


async def test_latency_does_not_block_other_calls() -> None:
    provider = LocalProvider(latency=0.1)

    started = time.perf_counter()
    await asyncio.gather(provider.complete(request("a")), provider.complete(request("b")))

    assert 0.1 <= time.perf_counter() - started < 0.19


async def test_reply_latency_replaces_the_provider_latency() -> None:
    provider = LocalProvider([LocalReply(text="fast", latency=0.0)], latency=10.0)

    completion = await asyncio.wait_for(provider.complete(request()), timeout=1.0)

    assert completion.message.text == "fast"


def test_negative_provider_latency_is_rejected() -> None:
    with pytest.raises(ValueError, match="latency"):
        LocalProvider(latency=-0.1)


# --- default replies ---------------------------------------------------------


async def test_default_reply_names_the_model_and_quotes_the_last_user_message() -> None:
    provider = LocalProvider()
    messages = (
        Message.system("Be brief."),
        Message.user("first question"),
        Message.assistant("an answer"),
        Message.user("What is   the capital\nof France?"),
    )

    completion = await provider.complete(request(model="gpt-4o", messages=messages))

    assert completion.message.text == '[gpt-4o] reply to: "What is the capital of France?"'
    assert completion.model == "gpt-4o"


async def test_default_reply_mentions_tool_results_fed_back() -> None:
    provider = LocalProvider()
    messages = (
        Message.user("weather?"),
        Message.assistant(tool_calls=(ToolCall(id="c1", name="weather"),)),
        Message.tool("c1", {"temp": 21}, name="weather"),
    )

    completion = await provider.complete(request(messages=messages))

    assert completion.message.text == (
        '[local] reply to: "weather?" after tool results: weather -> {"temp":21}'
    )


async def test_default_reply_without_a_user_message_says_so() -> None:
    completion = await LocalProvider().complete(request(messages=(Message.system("sys"),)))

    assert completion.message.text == "[local] reply: no user message"


async def test_default_reply_is_deterministic() -> None:
    texts = {(await LocalProvider().complete(request("same"))).message.text for _ in range(3)}

    assert len(texts) == 1


async def test_default_reply_uses_the_default_model_when_the_request_names_none() -> None:
    provider = LocalProvider(default_model="offline")

    completion = await provider.complete(request("hi", model=""))

    assert completion.model == "offline"
    assert completion.message.text.startswith("[offline]")


async def test_non_strict_provider_falls_back_to_default_replies() -> None:
    provider = LocalProvider(["scripted"])
    await provider.complete(request())

    completion = await provider.complete(request("after"))

    assert completion.message.text == '[local] reply to: "after"'


class Severity(Enum):
    LOW = "low"
    HIGH = "high"


class Finding(BaseModel):
    line: int = Field(ge=1)
    severity: Severity
    note: str | None


class Review(BaseModel):
    verdict: Literal["approve", "reject"]
    score: float = Field(gt=0, lt=1)
    findings: list[Finding] = Field(min_length=2)
    reviewed_at: datetime
    tags: list[str] = Field(default_factory=list)
    summary: str = Field(min_length=3)


async def test_default_reply_for_response_format_validates_against_the_schema() -> None:
    schema = Review.model_json_schema()
    response_format = ResponseFormat(name="Review", json_schema=schema)

    completion = await LocalProvider().complete(request(response_format=response_format))

    review = Review.model_validate_json(completion.message.text)
    assert review.verdict == "approve"
    assert len(review.findings) == 2
    assert review.findings[0].severity is Severity.LOW


async def test_required_tool_choice_defaults_to_calling_the_first_tool() -> None:
    spec = ToolSpec(
        name="lookup",
        description="Look a word up.",
        parameters={
            "type": "object",
            "properties": {"word": {"type": "string", "minLength": 2}, "n": {"type": "integer"}},
            "required": ["word"],
        },
    )

    completion = await LocalProvider().complete(request(tools=(spec,), tool_choice="required"))

    assert completion.message.tool_calls == (
        ToolCall(id="call_1_1", name="lookup", arguments={"word": "xx"}),
    )


async def test_auto_tool_choice_defaults_to_text() -> None:
    spec = ToolSpec(name="lookup", description="d", parameters={"type": "object"})

    completion = await LocalProvider().complete(request(tools=(spec,), tool_choice="auto"))

    assert completion.message.tool_calls == ()


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"enum": ["b", "a"]}, "b"),
        ({"const": 3}, 3),
        ({"type": "integer", "minimum": 4}, 4),
        ({"type": "integer", "default": 7}, 7),
        ({"type": "integer", "exclusiveMinimum": 4}, 5),
        ({"type": "integer", "maximum": -2}, -2),
        ({"type": "integer", "minimum": 1, "multipleOf": 5}, 5),
        ({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 0.5}, 0.25),
        ({"type": "string", "format": "date"}, "1970-01-01"),
        ({"type": "string", "minLength": 3}, "xxx"),
        ({"type": ["null", "boolean"]}, False),
        ({"type": "array", "items": {"type": "integer"}, "minItems": 2}, [0, 0]),
        ({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]}, ["", 0]),
        ({"anyOf": [{"type": "null"}, {"type": "integer"}]}, 0),
        ({"oneOf": [{"type": "null"}]}, None),
        (
            {"allOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]}]},
            {"a": 0},
        ),
        (
            {
                "$defs": {"Leaf": {"type": "object", "properties": {"v": {"type": "boolean"}}}},
                "type": "object",
                "properties": {"leaf": {"$ref": "#/$defs/Leaf"}},
                "required": ["leaf"],
            },
            {"leaf": {}},
        ),
        (
            {
                "allOf": [
                    {"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                    {"properties": {"b": {"const": "x"}}, "required": ["a", "b"]},
                    True,
                ]
            },
            {"a": 0, "b": "x"},
        ),
        ({"$ref": "#/$defs/Missing"}, None),
        ({"$ref": "https://example.com/remote.json"}, None),
        ({}, None),
    ],
)
def test_schema_example_builds_a_minimal_valid_value(schema: dict[str, Any], expected: Any) -> None:
    assert _schema_example(schema, schema) == expected


def test_schema_example_stops_on_recursive_schemas() -> None:
    schema = {
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {"child": {"$ref": "#/$defs/Node"}},
                "required": ["child"],
            }
        },
        "$ref": "#/$defs/Node",
    }

    value = _schema_example(schema, schema)

    depth = 0
    while isinstance(value, dict):
        value, depth = value["child"], depth + 1
    assert value is None
    assert depth > 1


# --- strict mode -------------------------------------------------------------


async def test_strict_provider_raises_when_the_script_runs_out() -> None:
    provider = LocalProvider(["only one"], strict=True)
    await provider.complete(request())

    with pytest.raises(ScriptExhausted, match=r"call 2 but only 1 reply was scripted") as info:
        await provider.complete(request("next question"))

    assert isinstance(info.value, ProviderRequestError)
    assert "next question" in str(info.value)
    assert (info.value.scripted, info.value.call) == (1, 2)
    assert provider.retry_delays == []  # not a transient failure, so never retried


# --- recording, streaming, tokens -------------------------------------------


async def test_every_request_is_recorded_in_order() -> None:
    provider = LocalProvider()
    sent = [request("a"), request("b", model="gpt-4o")]

    for req in sent:
        await provider.complete(req)

    assert provider.requests == sent


async def test_stream_yields_the_text_in_pieces_then_the_completion() -> None:
    provider = LocalProvider(["The quick brown fox."])

    chunks = [chunk async for chunk in provider.stream(request())]

    assert [c.delta for c in chunks[:-1]] == ["The", " quick", " brown", " fox."]
    assert all(c.completion is None for c in chunks[:-1])
    final = chunks[-1]
    assert final.delta == ""
    assert final.completion is not None
    assert final.completion.message.text == "The quick brown fox."


async def test_stream_of_a_tool_call_has_only_the_final_chunk() -> None:
    provider = LocalProvider([LocalReply.tool_call("search", {"q": "x"})])

    chunks = [chunk async for chunk in provider.stream(request())]

    assert len(chunks) == 1
    assert chunks[0].completion is not None
    assert chunks[0].completion.message.tool_calls[0].name == "search"


async def test_stream_raises_scripted_failures() -> None:
    provider = LocalProvider([ProviderRequestError("denied", provider="local")])

    with pytest.raises(ProviderRequestError, match="denied"):
        _ = [chunk async for chunk in provider.stream(request())]


@settings(max_examples=60, deadline=None)
@given(st.text())
def test_streamed_pieces_rejoin_to_the_exact_text(text: str) -> None:
    async def pieces() -> list[str]:
        provider = LocalProvider([text])
        return [chunk.delta async for chunk in provider.stream(request())]

    assert "".join(asyncio.run(pieces())) == text


async def test_usage_counts_request_and_reply_tokens_at_no_cost() -> None:
    req = request("How many tokens is this?", model="gpt-4o")
    provider = LocalProvider(["Some answer text.", LocalReply.tool_call("search", {"q": "tokens"})])

    text_reply = await provider.complete(req)
    tool_reply = await provider.complete(req)

    assert text_reply.usage == Usage(
        input_tokens=count_message_tokens(req.messages, "gpt-4o"),
        output_tokens=count_text_tokens("Some answer text.", "gpt-4o"),
        cost_usd=0.0,
        calls=1,
    )
    assert tool_reply.usage.output_tokens == count_text_tokens(
        "search" + json.dumps({"q": "tokens"}), "gpt-4o"
    )


def test_count_tokens_uses_the_token_module() -> None:
    messages = [Message.system("Be brief."), Message.user("Hello there")]

    assert LocalProvider().count_tokens(messages, "gpt-4o") == count_message_tokens(
        messages, "gpt-4o"
    )


def test_local_provider_satisfies_the_provider_protocol() -> None:
    provider = LocalProvider()

    assert isinstance(provider, Provider)
    assert (provider.name, provider.default_model) == ("local", "local")


def test_script_entry_alias_accepts_every_kind() -> None:
    entries: list[ScriptEntry] = ["text", LocalReply(text="r"), rate_limited(), lambda _r: "f"]

    assert LocalProvider(entries).remaining == 4


def test_docstring_examples_run() -> None:
    result = doctest.testmod(_local, optionflags=doctest.ELLIPSIS)

    assert result.attempted > 0
    assert result.failed == 0


def test_free_strings_in_a_grammar_schema_are_bounded_and_others_left_alone() -> None:
    from selectgraph.providers._llama import bounded_strings

    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "code": {"type": "string", "pattern": "^[A-Z]+$"},
            "short": {"type": "string", "maxLength": 5},
            "tags": {"type": "array", "items": {"type": ["string", "null"]}},
            "kind": {"type": "string", "enum": ["a", "b"]},
        },
        "$defs": {"Note": {"type": "string"}},
    }

    bounded = bounded_strings(schema, 100)

    props = bounded["properties"]
    assert props["title"]["maxLength"] == 100
    assert props["tags"]["items"]["maxLength"] == 100
    assert bounded["$defs"]["Note"]["maxLength"] == 100
    assert "maxLength" not in props["code"]
    assert "maxLength" not in props["kind"]
    assert props["short"]["maxLength"] == 5
    assert "maxLength" not in schema["properties"]["title"]  # the caller's schema untouched
