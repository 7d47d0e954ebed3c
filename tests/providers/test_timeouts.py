"""A provider's ``timeout=`` bounds one attempt's total time: headers, body and stream.

The SDKs' HTTP timeouts bound each read, so a server that drips one byte a
second, or streams keep-alive comments, kept a ``timeout=2`` attempt open for as
long as it dripped (about 12 s, measured before this bound existed). Each test
here uses a one-second limit and a server that would keep going for 20 s or more,
and asserts the call ends well inside 5 s with a typed, retryable timeout.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest

from selectgraph.core._errors import ProviderRetryableError
from selectgraph.core._messages import Message
from selectgraph.providers import ProviderTimeoutError
from selectgraph.providers._anthropic import AnthropicProvider
from selectgraph.providers._base import CompletionRequest, StreamChunk
from selectgraph.providers._openai import OpenAIProvider
from selectgraph.providers._retry import ProviderRetry
from tests.providers.conftest import ANTHROPIC_KEY, OPENAI_KEY, RecordingSleep
from tests.providers.llm_server import (
    FakeLLMServer,
    Reply,
    anthropic_stream,
    json_reply,
    keep_alive_stream,
    openai_stream,
    slow_drip,
)
from tests.providers.payloads import (
    ANTHROPIC_MODEL,
    anthropic_message,
    chat_completion,
    text_block,
    text_chunks,
    text_events,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

Provider = OpenAIProvider | AnthropicProvider

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"
GENEROUS = 5.0
"""Upper bound on a call limited to 1 s per attempt (2 attempts): far from flaky."""


def _provider(
    kind: str,
    server: FakeLLMServer,
    sleeps: RecordingSleep,
    *,
    timeout: float,
    stream_idle_timeout: float | None = 30.0,
) -> Provider:
    retry = ProviderRetry(max_attempts=2)
    if kind == "openai":
        return OpenAIProvider(
            OPENAI_KEY,
            base_url=f"{server.base_url}/v1",
            retry=retry,
            sleep=sleeps,
            timeout=timeout,
            stream_idle_timeout=stream_idle_timeout,
        )
    return AnthropicProvider(
        ANTHROPIC_KEY,
        base_url=server.base_url,
        retry=retry,
        sleep=sleeps,
        timeout=timeout,
        stream_idle_timeout=stream_idle_timeout,
    )


async def _drain(chunks: AsyncIterator[StreamChunk], into: list[StreamChunk]) -> None:
    async for chunk in chunks:
        into.append(chunk)


def _request(kind: str) -> CompletionRequest:
    model = "gpt-4o-mini" if kind == "openai" else ANTHROPIC_MODEL
    return CompletionRequest(model=model, messages=(Message.user("Hi"),), max_tokens=16)


def _answer(kind: str) -> Reply:
    if kind == "openai":
        return json_reply(chat_completion("A fine answer, sent very slowly."))
    return json_reply(anthropic_message([text_block("A fine answer, sent very slowly.")]))


def _path(kind: str) -> str:
    return OPENAI_PATH if kind == "openai" else ANTHROPIC_PATH


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_slow_drip_body_is_cut_at_the_attempts_timeout_and_retried(
    kind: str, server: FakeLLMServer, sleeps: RecordingSleep
) -> None:
    # Each body is a few hundred bytes at 10 bytes a second: 20 s or more apiece.
    server.script(_path(kind), slow_drip(_answer(kind), 0.1), slow_drip(_answer(kind), 0.1))
    provider = _provider(kind, server, sleeps, timeout=1.0)

    started = time.perf_counter()
    with pytest.raises(ProviderTimeoutError) as caught:
        await provider.complete(_request(kind))
    elapsed = time.perf_counter() - started

    assert elapsed < GENEROUS
    error = caught.value
    assert isinstance(error, ProviderRetryableError)
    assert error.retryable
    assert error.provider == kind
    assert error.model == _request(kind).model
    assert error.timeout == 1.0
    assert error.limit == "timeout"
    assert kind in str(error)
    assert repr(_request(kind).model) in str(error)
    assert "timeout=1 s" in str(error)
    # Both attempts were made, each cut at its own limit.
    assert len(server.requests) == 2
    assert len(sleeps.delays) == 1
    await provider.aclose()


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_stream_of_keep_alive_comments_fails_at_the_idle_limit(
    kind: str, server: FakeLLMServer, sleeps: RecordingSleep
) -> None:
    # 60 comments, one every 0.2 s: bytes keep coming for 12 s, but no event does.
    server.script(_path(kind), keep_alive_stream(60, 0.2), keep_alive_stream(60, 0.2))
    provider = _provider(kind, server, sleeps, timeout=30.0, stream_idle_timeout=1.0)

    started = time.perf_counter()
    with pytest.raises(ProviderTimeoutError) as caught:
        await _drain(provider.stream(_request(kind)), [])
    elapsed = time.perf_counter() - started

    assert elapsed < GENEROUS
    assert caught.value.limit == "stream_idle_timeout"
    assert caught.value.timeout == 1.0
    assert "stream_idle_timeout=1 s" in str(caught.value)
    assert len(server.requests) == 2
    await provider.aclose()


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_stream_that_keeps_talking_is_cut_at_the_total_timeout(
    kind: str, server: FakeLLMServer, sleeps: RecordingSleep
) -> None:
    # Text arrives every 0.3 s (inside the idle limit), 80 pieces: 24 s in all.
    pieces = [f"w{i} " for i in range(80)]
    if kind == "openai":
        reply = openai_stream(text_chunks(*pieces, prompt_tokens=3))
    else:
        reply = anthropic_stream(text_events(*pieces))
    paced = Reply(headers=reply.headers, events=reply.events, interval=0.3)
    server.script(_path(kind), paced)
    provider = _provider(kind, server, sleeps, timeout=1.5, stream_idle_timeout=1.0)

    received: list[StreamChunk] = []
    started = time.perf_counter()
    with pytest.raises(ProviderTimeoutError) as caught:
        await _drain(provider.stream(_request(kind)), received)
    elapsed = time.perf_counter() - started

    assert elapsed < GENEROUS
    assert caught.value.limit == "timeout"
    # Text was handed out before the limit, so the attempt is not repeated.
    assert received
    assert all(chunk.completion is None for chunk in received)
    assert len(server.requests) == 1
    await provider.aclose()


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_an_answer_within_the_timeout_is_unaffected(
    kind: str, server: FakeLLMServer, sleeps: RecordingSleep
) -> None:
    server.script(_path(kind), _answer(kind))
    provider = _provider(kind, server, sleeps, timeout=1.0, stream_idle_timeout=0.5)

    completion = await provider.complete(_request(kind))

    assert completion.message.text == "A fine answer, sent very slowly."
    await provider.aclose()


@pytest.mark.parametrize("value", [0.0, -1.0])
def test_a_limit_that_is_not_positive_is_refused(value: float) -> None:
    url = "http://127.0.0.1:9"
    with pytest.raises(ValueError, match="openai: timeout must be > 0"):
        OpenAIProvider(OPENAI_KEY, base_url=url, timeout=value)
    with pytest.raises(ValueError, match="openai: stream_idle_timeout must be > 0"):
        OpenAIProvider(OPENAI_KEY, base_url=url, stream_idle_timeout=value)
    with pytest.raises(ValueError, match="anthropic: timeout must be > 0"):
        AnthropicProvider(ANTHROPIC_KEY, base_url=url, timeout=value)
    with pytest.raises(ValueError, match="anthropic: stream_idle_timeout must be > 0"):
        AnthropicProvider(ANTHROPIC_KEY, base_url=url, stream_idle_timeout=value)
