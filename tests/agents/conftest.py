"""Agent-test helpers: reading what a scripted provider was sent, and wire-format fixtures."""

from __future__ import annotations

from typing import TYPE_CHECKING

from selectgraph import Message, Role, Usage

# The wire-format fixtures (a local OpenAI/Anthropic server and providers pointed at
# it) are defined once, for the provider tests; the agent tests use the same ones.
from tests.providers.conftest import (  # noqa: F401
    anthropic_provider,
    openai_provider,
    retry,
    server,
    sleeps,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

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
