"""A compatible or local server's model is never priced as the vendor model of the same name.

llama.cpp's server answers whatever model name it is sent, so a provider left at
its default model name (``gpt-4o-mini``) used to bill a local model at
gpt-4o-mini's price. Calls to any server but the vendor's own API are now
unpriced unless ``price_models=True`` says the server bills like the vendor.
"""

from __future__ import annotations

from selectgraph.core._messages import Message
from selectgraph.providers._anthropic import AnthropicProvider
from selectgraph.providers._base import CompletionRequest
from selectgraph.providers._openai import OpenAIProvider
from tests.providers.conftest import ANTHROPIC_KEY
from tests.providers.llm_server import FakeLLMServer, json_reply
from tests.providers.payloads import (
    ANTHROPIC_MODEL,
    anthropic_message,
    chat_completion,
    text_block,
)


def _ask(model: str = "") -> CompletionRequest:
    return CompletionRequest(model=model, messages=(Message.user("hi"),))


async def test_a_compatible_server_answering_as_gpt_4o_mini_is_unpriced(
    server: FakeLLMServer,
) -> None:
    # The server echoes the default model name, as llama.cpp's does.
    server.script("/v1/chat/completions", json_reply(chat_completion("hello")))
    async with OpenAIProvider(base_url=f"{server.base_url}/v1") as provider:
        assert provider.default_model == "gpt-4o-mini"
        completion = await provider.complete(_ask())

    assert completion.model.startswith("gpt-4o-mini")
    assert completion.usage.known_cost_usd is None
    assert completion.usage.unpriced_calls == 1
    assert completion.usage.cost_usd == 0.0
    assert completion.usage.input_tokens > 0


async def test_a_compatible_server_that_bills_like_openai_is_priced_when_asked(
    server: FakeLLMServer,
) -> None:
    server.script("/v1/chat/completions", json_reply(chat_completion("hello")))
    async with OpenAIProvider(base_url=f"{server.base_url}/v1", price_models=True) as provider:
        completion = await provider.complete(_ask())

    assert completion.usage.unpriced_calls == 0
    assert completion.usage.cost_usd > 0


async def test_a_gateway_in_front_of_anthropic_is_unpriced_by_default(
    server: FakeLLMServer,
) -> None:
    server.script("/v1/messages", json_reply(anthropic_message([text_block("hello")])))
    async with AnthropicProvider(ANTHROPIC_KEY, base_url=server.base_url) as provider:
        completion = await provider.complete(_ask(ANTHROPIC_MODEL))

    assert completion.usage.known_cost_usd is None
    assert completion.usage.unpriced_calls == 1


def test_the_vendors_own_apis_are_priced_by_default() -> None:
    openai = OpenAIProvider("sk-test-0123456789abcdef")
    anthropic = AnthropicProvider(ANTHROPIC_KEY)

    assert openai._priced
    assert anthropic._priced
