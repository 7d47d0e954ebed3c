"""HTTP statuses and transport failures become the right ProviderError, with secrets hidden."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from selectgraph._errors import ProviderRequestError, ProviderRetryableError
from selectgraph.providers._errors_map import (
    connection_error,
    is_retryable_status,
    parse_retry_after,
    redact,
    status_error,
)

NOW = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after": "-3"}, 0.0),
        ({"retry-after": "Sat, 01 Mar 2025 12:00:30 GMT"}, 30.0),
        ({"retry-after": "Sat, 01 Mar 2025 11:59:00 GMT"}, 0.0),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "inf"}, None),
        ({}, None),
    ],
)
def test_retry_after_is_read_as_seconds_or_an_http_date(
    headers: dict[str, str], expected: float | None
) -> None:
    assert parse_retry_after(headers, now=NOW) == expected


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504, 529])
def test_transient_statuses_are_retryable(status: int) -> None:
    assert is_retryable_status(status)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422])
def test_request_statuses_are_not_retryable(status: int) -> None:
    assert not is_retryable_status(status)


def test_status_error_names_status_model_server_message_and_request_id() -> None:
    error = status_error(
        provider="openai",
        status=429,
        model="gpt-4o",
        server_message="Rate limit reached",
        headers={"retry-after": "4"},
        request_id="req_42",
        secrets=(),
    )

    assert isinstance(error, ProviderRetryableError)
    assert str(error) == (
        "openai: HTTP 429 (rate limited) for model 'gpt-4o': Rate limit reached [request id req_42]"
    )
    assert (error.status_code, error.retry_after, error.provider) == (429, 4.0, "openai")


def test_authentication_error_hints_at_the_key_and_is_not_retryable() -> None:
    error = status_error(
        provider="anthropic",
        status=401,
        model="claude-haiku-4-5",
        server_message="invalid x-api-key",
        headers={},
        request_id=None,
        secrets=(),
    )

    assert isinstance(error, ProviderRequestError)
    assert str(error) == (
        "anthropic: HTTP 401 (authentication failed) for model 'claude-haiku-4-5': "
        "invalid x-api-key; check the API key"
    )


def test_long_server_messages_are_clipped() -> None:
    error = status_error(
        provider="openai",
        status=502,
        model="m",
        server_message="<html>" + "x" * 5000,
        headers={},
        request_id=None,
        secrets=(),
    )

    assert len(str(error)) < 600


def test_connection_error_is_retryable_and_says_what_happened() -> None:
    error = connection_error(
        provider="openai",
        model="gpt-4o",
        reason="ReadTimeout: timed out",
        timed_out=True,
        secrets=(),
    )

    assert isinstance(error, ProviderRetryableError)
    assert str(error) == "openai: request for model 'gpt-4o' timed out (ReadTimeout: timed out)"


def test_redact_hides_known_secrets_and_key_shaped_strings() -> None:
    text = "key my-custom-secret-123 or sk-proj-abcdefghijklmnop, header Bearer abc.def-ghi_jkl"

    redacted = redact(text, ["my-custom-secret-123"])

    assert redacted == "key [redacted] or [redacted], header [redacted]"


def test_redact_ignores_secrets_too_short_to_matter() -> None:
    assert redact("a b c", ["a"]) == "a b c"


@pytest.mark.parametrize(
    ("status", "header", "retryable"),
    [(400, "true", True), (503, "false", False), (409, "maybe", True)],
)
def test_x_should_retry_header_overrides_the_status(
    status: int, header: str, retryable: bool
) -> None:
    error = status_error(
        provider="openai",
        status=status,
        model="m",
        server_message=None,
        headers={"x-should-retry": header},
        request_id=None,
        secrets=(),
    )

    assert error.retryable is retryable
