"""Fixtures for provider tests: a scripted local server, real SDK-backed providers, no network."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from selectgraph.providers._anthropic import AnthropicProvider
from selectgraph.providers._openai import OpenAIProvider
from selectgraph.providers._retry import ProviderRetry
from tests.providers.llm_server import FakeLLMServer

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

OPENAI_KEY = "sk-test-openai-4f7d2c9a1b8e6f30"
ANTHROPIC_KEY = "sk-ant-api03-test-0a1b2c3d4e5f6789"


class RecordingSleep:
    """A stand-in for ``asyncio.sleep`` that records the delays and returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


@pytest.fixture
def sleeps() -> RecordingSleep:
    return RecordingSleep()


@pytest.fixture
async def server() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer() as running:
        yield running


@pytest.fixture
def retry() -> ProviderRetry:
    return ProviderRetry(max_attempts=3, initial_delay=0.5, max_delay=4.0)


@pytest.fixture
async def openai_provider(
    server: FakeLLMServer, sleeps: RecordingSleep, retry: ProviderRetry
) -> AsyncIterator[OpenAIProvider]:
    provider = OpenAIProvider(
        OPENAI_KEY,
        base_url=f"{server.base_url}/v1",
        retry=retry,
        sleep=sleeps,
        timeout=5.0,
        price_models=True,  # the local server stands in for OpenAI's own API
    )
    async with provider:
        yield provider


@pytest.fixture
async def anthropic_provider(
    server: FakeLLMServer, sleeps: RecordingSleep, retry: ProviderRetry
) -> AsyncIterator[AnthropicProvider]:
    provider = AnthropicProvider(
        ANTHROPIC_KEY,
        base_url=server.base_url,
        retry=retry,
        sleep=sleeps,
        timeout=5.0,
        price_models=True,  # the local server stands in for Anthropic's own API
    )
    async with provider:
        yield provider
