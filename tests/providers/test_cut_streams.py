"""Streams a server cuts short, as llama.cpp's server does to a running request when the next
one arrives (its ``interrupt_requests`` setting, on by default).

The provider sends a stream cut before its first text again once, with a warning
naming the fix, when no other request of the process is in flight to the server;
a second cut is the typed error; after a cut, requests to that server queue.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import pytest

from selectgraph.core._errors import ProviderRetryableError
from selectgraph.core._messages import Message
from selectgraph.providers._base import CompletionRequest
from tests.providers.llm_server import interrupted_stream, openai_stream
from tests.providers.payloads import chunk, text_chunks

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator

    from selectgraph.providers._base import StreamChunk
    from selectgraph.providers._openai import OpenAIProvider
    from tests.providers.conftest import RecordingSleep
    from tests.providers.llm_server import FakeLLMServer

PATH = "/v1/chat/completions"
REQUEST = CompletionRequest(model="some-model", messages=(Message.user("hi"),))
ROLE = chunk({"role": "assistant", "content": ""})


async def answer(provider: OpenAIProvider) -> tuple[str, str]:
    """The streamed text and the final completion's text of one request."""
    deltas: list[str] = []
    final = ""
    async for piece in provider.stream(REQUEST):
        deltas.append(piece.delta)
        if piece.completion is not None:
            final = piece.completion.message.text
    return "".join(deltas), final


def cut_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "cut the answer short" in r.getMessage()
    ]


async def until(condition: object, seconds: float = 10.0) -> None:
    """Wait (generously) until ``condition()`` holds."""
    assert callable(condition)
    async with asyncio.timeout(seconds):
        while not condition():
            await asyncio.sleep(0.01)


async def test_a_stream_cut_once_is_sent_again_once_with_a_warning(
    server: FakeLLMServer,
    openai_provider: OpenAIProvider,
    sleeps: RecordingSleep,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server.script(
        PATH, interrupted_stream(ROLE), openai_stream(text_chunks("The whole ", "answer"))
    )

    with caplog.at_level(logging.WARNING):
        streamed, final = await answer(openai_provider)

    assert (streamed, final) == ("The whole answer", "The whole answer")
    assert len(server.requests) == 2
    assert sleeps.delays == []  # sent again when the server is free, not after a backoff
    [warning] = cut_warnings(caplog)
    assert "interrupts a running request" in warning
    assert "selectgraph local-server" in warning
    assert "--interrupt_requests False" in warning


async def test_a_stream_cut_twice_is_the_typed_error(
    server: FakeLLMServer, openai_provider: OpenAIProvider, caplog: pytest.LogCaptureFixture
) -> None:
    server.script(
        PATH,
        interrupted_stream(ROLE),
        interrupted_stream(ROLE),
        openai_stream(text_chunks("never sent")),
    )

    with caplog.at_level(logging.WARNING), pytest.raises(ProviderRetryableError) as caught:
        await answer(openai_provider)

    assert "the stream ended before the answer finished (no finish reason)" in str(caught.value)
    assert caught.value.__context__ is None
    assert len(server.requests) == 2  # once again, not the ordinary retries
    assert server.unused_replies(PATH) == 1
    assert len(cut_warnings(caplog)) == 2


async def test_a_cut_stream_waits_until_the_server_is_free(
    server: FakeLLMServer, openai_provider: OpenAIProvider, caplog: pytest.LogCaptureFixture
) -> None:
    server.script(
        PATH,
        openai_stream(text_chunks("first ", "one")),
        interrupted_stream(ROLE),
        openai_stream(text_chunks("second one")),
    )
    first: AsyncGenerator[StreamChunk, None] = openai_provider.stream(REQUEST)
    assert (await anext(first)).delta == "first "  # in flight: the server is busy

    with caplog.at_level(logging.WARNING):
        second = asyncio.create_task(answer(openai_provider))
        await until(lambda: cut_warnings(caplog))
        await asyncio.sleep(0.2)
        assert len(server.requests) == 2  # not sent again while the first is in flight
        rest = [piece.delta async for piece in first]
        assert "".join(rest) == "one"
        assert await second == ("second one", "second one")

    assert len(server.requests) == 3


async def test_after_a_cut_requests_to_that_server_queue(
    server: FakeLLMServer, openai_provider: OpenAIProvider, caplog: pytest.LogCaptureFixture
) -> None:
    server.script(
        PATH,
        interrupted_stream(ROLE),
        openai_stream(text_chunks("again")),
        openai_stream(text_chunks("held ", "open")),
        openai_stream(text_chunks("queued")),
    )
    with caplog.at_level(logging.WARNING):
        assert await answer(openai_provider) == ("again", "again")
    held: AsyncGenerator[StreamChunk, None] = openai_provider.stream(REQUEST)
    assert (await anext(held)).delta == "held "

    queued = asyncio.create_task(answer(openai_provider))
    await asyncio.sleep(0.2)
    assert len(server.requests) == 3  # waits: the server cuts parallel requests
    assert "".join([piece.delta async for piece in held]) == "open"
    assert await queued == ("queued", "queued")
    assert len(server.requests) == 4


async def test_a_stream_cut_after_text_warns_and_is_the_typed_error(
    server: FakeLLMServer, openai_provider: OpenAIProvider, caplog: pytest.LogCaptureFixture
) -> None:
    server.script(PATH, interrupted_stream(ROLE, chunk({"content": "The answer"})))
    streamed: list[str] = []

    async def consume() -> None:
        async for piece in openai_provider.stream(REQUEST):
            streamed.append(piece.delta)

    with caplog.at_level(logging.WARNING), pytest.raises(ProviderRetryableError) as caught:
        await consume()

    assert streamed == ["The answer"]  # handed out: sending it again would repeat it
    assert "ended before the answer finished" in str(caught.value)
    assert len(server.requests) == 1
    [warning] = cut_warnings(caplog)
    assert "selectgraph local-server" in warning


async def test_parallel_streams_without_cuts_do_not_queue(
    server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    server.script(PATH, openai_stream(text_chunks("one ", "two")), openai_stream(text_chunks("x")))
    held: AsyncGenerator[StreamChunk, None] = openai_provider.stream(REQUEST)
    assert (await anext(held)).delta == "one "

    assert await answer(openai_provider) == ("x", "x")  # while the first is still open

    assert "".join([piece.delta async for piece in held]) == "two"
