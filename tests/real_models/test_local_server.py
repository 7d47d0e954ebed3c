"""Parallel requests to a local llama.cpp server (issue 22).

With the settings of ``selectgraph local-server`` (``interrupt_requests`` off),
two concurrent streamed requests queue and both finish. With the server's
default settings, the second request cuts the first short; the provider sends
the cut one again once the server is free, and both still finish.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

import pytest

from selectgraph.core._messages import Message
from selectgraph.providers._base import CompletionRequest
from selectgraph.providers._openai import OpenAIProvider
from tests.real_models.conftest import (
    N_CTX,
    SERVER_MODEL,
    _free_port,
    local_server_command,
    serving,
)

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytestmark = pytest.mark.real_model

QUESTIONS = ("Name three colors.", "Name three animals.")


@pytest.fixture(scope="module")
def helper_server(gguf_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``selectgraph local-server`` on a free port; yields its /v1 base URL."""
    port = _free_port()
    log_path = tmp_path_factory.mktemp("local-server") / "server.log"
    with serving(local_server_command(gguf_path, port, N_CTX), port, log_path) as base_url:
        yield base_url


async def streamed_answer(provider: OpenAIProvider, question: str) -> tuple[str, str | None]:
    """The text streamed for ``question`` (24 tokens at most) and the finish reason."""
    request = CompletionRequest(
        model=SERVER_MODEL, messages=(Message.user(question),), max_tokens=24, temperature=0.0
    )
    text, finish = "", None
    async for piece in provider.stream(request):
        text += piece.delta
        if piece.completion is not None:
            assert piece.completion.message.text == text
            finish = piece.completion.finish_reason
    return text, finish


async def two_at_once(base_url: str) -> tuple[list[tuple[str, str | None]], float]:
    async with OpenAIProvider(
        base_url=base_url, default_model=SERVER_MODEL, timeout=60.0
    ) as provider:
        started = time.perf_counter()
        answers = await asyncio.gather(*(streamed_answer(provider, q) for q in QUESTIONS))
        return list(answers), time.perf_counter() - started


def assert_full(answers: list[tuple[str, str | None]]) -> None:
    for text, finish in answers:
        assert text.strip(), answers
        assert finish in ("stop", "length"), answers


async def test_two_concurrent_streams_both_finish_with_the_helpers_settings(
    helper_server: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        answers, seconds = await two_at_once(helper_server)

    assert_full(answers)
    assert not [r for r in caplog.records if "cut the answer short" in r.getMessage()]
    print(f"two concurrent streams, local-server settings: {seconds:.2f} s")


async def test_two_concurrent_streams_both_finish_with_the_servers_defaults(
    llama_server: str, caplog: pytest.LogCaptureFixture
) -> None:
    # llama_server keeps interrupt_requests on: a cut stream is sent again once, later.
    with caplog.at_level(logging.WARNING):
        answers, seconds = await two_at_once(llama_server)

    assert_full(answers)
    for record in caplog.records:
        if "cut the answer short" in record.getMessage():
            assert "selectgraph local-server" in record.getMessage()
    print(f"two concurrent streams, default settings: {seconds:.2f} s")
