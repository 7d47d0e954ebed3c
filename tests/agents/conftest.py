"""Agent-test helpers: reading what a scripted provider was sent, and wire-format fixtures."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from selectgraph import Message, Role, Usage
from selectgraph.providers import AnthropicProvider, OpenAIProvider, ProviderRetry
from tests.providers.conftest import ANTHROPIC_KEY, OPENAI_KEY, RecordingSleep
from tests.providers.llm_server import FakeLLMServer

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

    from selectgraph.providers import CompletionRequest


def turns(messages: Sequence[Message]) -> list[tuple[str, str]]:
    """``(role, text)`` of each message: the shape most assertions compare against."""
    return [(message.role.value, message.text) for message in messages]


def sent(request: CompletionRequest) -> list[tuple[str, str]]:
    """``(role, text)`` of every message a provider was sent in ``request``."""
    return turns(request.messages)


def system_of(request: CompletionRequest) -> str:
    """The system prompt of ``request`` ("" when it has none)."""
    systems = [m.text for m in request.messages if m.role is Role.SYSTEM]
    assert len(systems) <= 1, f"more than one system message: {systems}"
    return systems[0] if systems else ""


def usage(input_tokens: int, output_tokens: int, cost_usd: float = 0.0) -> Usage:
    """The usage of one model call."""
    return Usage(input_tokens=input_tokens, output_tokens=output_tokens, cost_usd=cost_usd, calls=1)


# --- wire-format fixtures (the same setup as tests/providers/conftest.py) -------------


@pytest.fixture
def sleeps() -> RecordingSleep:
    return RecordingSleep()


@pytest.fixture
async def server() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer() as running:
        yield running


@pytest.fixture
def wire_retry() -> ProviderRetry:
    return ProviderRetry(max_attempts=3, initial_delay=0.5, max_delay=4.0)


@pytest.fixture
async def openai_provider(
    server: FakeLLMServer, sleeps: RecordingSleep, wire_retry: ProviderRetry
) -> AsyncIterator[OpenAIProvider]:
    provider = OpenAIProvider(
        OPENAI_KEY, base_url=f"{server.base_url}/v1", retry=wire_retry, sleep=sleeps, timeout=5.0
    )
    async with provider:
        yield provider


@pytest.fixture
async def anthropic_provider(
    server: FakeLLMServer, sleeps: RecordingSleep, wire_retry: ProviderRetry
) -> AsyncIterator[AnthropicProvider]:
    provider = AnthropicProvider(
        ANTHROPIC_KEY, base_url=server.base_url, retry=wire_retry, sleep=sleeps, timeout=5.0
    )
    async with provider:
        yield provider
