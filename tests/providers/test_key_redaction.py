"""API keys never reach error messages, reprs, tracebacks or logs, even when echoed back."""

from __future__ import annotations

import logging
import traceback
from typing import TYPE_CHECKING

import pytest

from selectgraph.core._errors import ProviderError, ProviderRequestError, ProviderRetryableError
from selectgraph.core._messages import Message
from selectgraph.providers._base import CompletionRequest
from selectgraph.providers._openai import OpenAIProvider
from tests.providers.conftest import ANTHROPIC_KEY, OPENAI_KEY
from tests.providers.llm_server import (
    FakeLLMServer,
    anthropic_error,
    anthropic_stream,
    drop,
    openai_error,
)
from tests.providers.payloads import block_start, message_start, stream_error, text_delta

if TYPE_CHECKING:
    from selectgraph.providers._anthropic import AnthropicProvider

REQUEST = CompletionRequest(model="some-model", messages=(Message.user("hi"),))


def assert_key_absent(
    key: str, error: ProviderError, provider: object, caplog: pytest.LogCaptureFixture
) -> None:
    rendered = [
        str(error),
        repr(error),
        "".join(traceback.format_exception(error)),
        repr(provider),
        str(provider),
        caplog.text,
        *(record.getMessage() for record in caplog.records),
    ]
    # Every exception linked to the error, printed or not: a suppressed context
    # (``raise ... from None``) still keeps the SDK's exception, body and all.
    linked: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in linked:
        linked.append(current)
        current = current.__cause__ or current.__context__
    rendered += [f"{e!r} {e} {vars(e)!r}" for e in linked]
    assert linked == [error], [type(e).__name__ for e in linked]
    for text in rendered:
        assert key not in text
    # Not even most of it: a key cut short by clipping is still a leak.
    assert key[:16] not in "\n".join(rendered)


async def test_openai_auth_error_echoing_the_key_is_redacted(
    server: FakeLLMServer, openai_provider: OpenAIProvider, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server.script(
        "/v1/chat/completions",
        openai_error(401, f"Incorrect API key provided: {OPENAI_KEY}. Find your key at ..."),
    )

    with pytest.raises(ProviderRequestError) as caught:
        await openai_provider.complete(REQUEST)

    assert "Incorrect API key provided: [redacted]" in str(caught.value)
    assert caught.value.__cause__ is None
    assert_key_absent(OPENAI_KEY, caught.value, openai_provider, caplog)


async def test_openai_retried_errors_echoing_the_key_are_redacted_in_logs(
    server: FakeLLMServer, openai_provider: OpenAIProvider, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    echo = f"upstream rejected Authorization: Bearer {OPENAI_KEY}"
    server.script(
        "/v1/chat/completions",
        openai_error(503, echo, kind="server_error"),
        drop(),
        openai_error(429, echo, kind="requests", retry_after="1"),
    )

    with pytest.raises(ProviderRetryableError) as caught:
        await openai_provider.complete(REQUEST)

    assert len(server.requests) == 3
    assert len([r for r in caplog.records if "retrying in" in r.getMessage()]) == 2
    assert_key_absent(OPENAI_KEY, caught.value, openai_provider, caplog)


async def test_anthropic_auth_error_echoing_the_key_is_redacted(
    server: FakeLLMServer, anthropic_provider: AnthropicProvider, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server.script(
        "/v1/messages",
        anthropic_error(401, "authentication_error", f"invalid x-api-key: {ANTHROPIC_KEY}"),
    )

    with pytest.raises(ProviderRequestError) as caught:
        await anthropic_provider.complete(REQUEST)

    assert "invalid x-api-key: [redacted]" in str(caught.value)
    assert_key_absent(ANTHROPIC_KEY, caught.value, anthropic_provider, caplog)


async def test_anthropic_stream_error_echoing_the_key_is_redacted(
    server: FakeLLMServer, anthropic_provider: AnthropicProvider, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    event = stream_error("overloaded_error", f"overloaded while serving key {ANTHROPIC_KEY}")
    server.script("/v1/messages", *[anthropic_stream([message_start(), event])] * 3)

    with pytest.raises(ProviderRetryableError) as caught:
        await anext(anthropic_provider.stream(REQUEST))

    assert caught.value.status_code == 529
    assert_key_absent(ANTHROPIC_KEY, caught.value, anthropic_provider, caplog)


async def test_custom_key_without_a_known_shape_is_redacted(
    server: FakeLLMServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    key = "vllm-local-secret-9f8e7d6c5b4a"
    server.script("/v1/chat/completions", openai_error(403, f"key {key} may not use this model"))

    async with OpenAIProvider(key, base_url=f"{server.base_url}/v1") as provider:
        with pytest.raises(ProviderRequestError) as caught:
            await provider.complete(REQUEST)

    assert_key_absent(key, caught.value, provider, caplog)


async def test_anthropic_stream_failure_after_text_keeps_no_sdk_exception(
    server: FakeLLMServer, anthropic_provider: AnthropicProvider, caplog: pytest.LogCaptureFixture
) -> None:
    event = stream_error("api_error", f"upstream said {ANTHROPIC_KEY}")
    server.script(
        "/v1/messages",
        anthropic_stream(
            [
                message_start(),
                block_start(0, {"type": "text", "text": ""}),
                text_delta(0, "a"),
                event,
            ]
        ),
    )
    stream = anthropic_provider.stream(REQUEST)
    assert (await anext(stream)).delta == "a"

    with pytest.raises(ProviderRetryableError) as caught:
        await anext(stream)

    assert_key_absent(ANTHROPIC_KEY, caught.value, anthropic_provider, caplog)


async def test_openai_dropped_connection_keeps_no_sdk_exception(
    server: FakeLLMServer, openai_provider: OpenAIProvider, caplog: pytest.LogCaptureFixture
) -> None:
    server.script("/v1/chat/completions", drop(), drop(), drop())

    with pytest.raises(ProviderRetryableError) as caught:
        await openai_provider.complete(REQUEST)

    assert_key_absent(OPENAI_KEY, caught.value, openai_provider, caplog)


URL_PASSWORD = "pw-0a9b8c7d6e5f"
URL_TOKEN = "qtok-1f2e3d4c5b6a"


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_credentials_in_base_url_are_redacted_from_repr_and_errors(
    kind: str, server: FakeLLMServer, caplog: pytest.LogCaptureFixture
) -> None:
    from selectgraph.providers._anthropic import AnthropicProvider

    # Our own warnings only: the SDKs' HTTP clients log whole URLs at INFO/DEBUG
    # (docs/security.md says so).
    caplog.set_level(logging.WARNING)
    host = server.base_url.removeprefix("http://")
    query = f"?api_key={URL_TOKEN}&region=eu"
    base = f"http://gateway-user:{URL_PASSWORD}@{host}"
    # A gateway that quotes the URL it was called with, credentials and all.
    echo = f"no route for {base}{query}"
    provider: OpenAIProvider | AnthropicProvider
    if kind == "openai":
        provider = OpenAIProvider(OPENAI_KEY, base_url=f"{base}/v1{query}")
        # The SDKs append their paths to base_url as text, after its query.
        server.script(f"/v1/{query}chat/completions", openai_error(404, echo))
    else:
        provider = AnthropicProvider(ANTHROPIC_KEY, base_url=f"{base}/{query}")
        server.script(f"/{query}/v1/messages", anthropic_error(404, "not_found_error", echo))

    async with provider:
        with pytest.raises(ProviderRequestError) as caught:
            await provider.complete(REQUEST)

    assert caught.value.status_code == 404
    shown = repr(provider)
    assert "[redacted]@" in shown
    assert "api_key=[redacted]" in shown
    assert "region=eu" in shown
    assert "gateway-user" not in shown
    assert "no route for http://[redacted]@" in str(caught.value)
    for secret in (URL_PASSWORD, URL_TOKEN):
        assert_key_absent(secret, caught.value, provider, caplog)
