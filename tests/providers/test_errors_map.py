"""HTTP statuses and transport failures become the right ProviderError, with secrets hidden."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from selectgraph.core._errors import ProviderRequestError, ProviderRetryableError
from selectgraph.providers._errors_map import (
    connection_error,
    is_request_validation_error,
    is_retryable_status,
    is_structured_rejection,
    parse_retry_after,
    redact,
    redact_url,
    status_error,
    url_secrets,
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


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://u:pw-secret@gw.example/v1", "http://[redacted]@gw.example/v1"),
        ("https://token-only@gw.example", "https://[redacted]@gw.example"),
        (
            "http://gw.example/v1?api_key=abc123&region=eu&X-Amz-Signature=f00d",
            "http://gw.example/v1?api_key=[redacted]&region=eu&X-Amz-Signature=[redacted]",
        ),
        ("http://gw.example/v1?access_token=t0k3n", "http://gw.example/v1?access_token=[redacted]"),
        ("http://localhost:8080/v1", "http://localhost:8080/v1"),
    ],
)
def test_redact_url_hides_userinfo_and_secret_query_values(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_url_secrets_finds_the_password_and_secret_query_values() -> None:
    url = "http://user:pw-1234@gw.example/v1?api_key=k-5678&region=eu&sig=s-9"
    assert url_secrets(url) == ("pw-1234", "k-5678", "s-9")
    assert url_secrets(None) == ()
    assert url_secrets("http://gw.example/v1") == ()
    # A URL the standard library cannot split (a bad IPv6 host) has nothing to add.
    assert url_secrets("http://[::1/v1?key=x") == ()


@pytest.mark.parametrize(
    ("status", "message", "expected"),
    [
        (500, "1 validation error for ChatRequest", True),
        (500, 'response_format type must be one of "text" or "json_object"', True),
        (500, "messages.0.content: Input should be a valid string", True),
        (500, "The server had an error while processing your request.", False),
        (503, None, False),
        (400, "unknown field: response_format", False),
    ],
)
def test_a_server_error_quoting_the_request_is_a_validation_error(
    status: int, message: str | None, expected: bool
) -> None:
    assert is_request_validation_error(status, message) is expected


@pytest.mark.parametrize(
    ("status", "message", "expected"),
    [
        (400, "anything at all", True),
        (422, None, True),
        (500, 'response_format type must be one of "text" or "json_object"', True),
        (500, "CUDA out of memory", False),
        (404, "model not found", False),
        (429, "slow down", False),
    ],
)
def test_which_refusals_trigger_the_structured_output_fallback(
    status: int, message: str | None, expected: bool
) -> None:
    assert is_structured_rejection(status, message) is expected


def test_a_500_validation_error_is_not_retryable_unless_the_server_says_so() -> None:
    def error(headers: dict[str, str]) -> object:
        return status_error(
            provider="openai",
            status=500,
            model="m",
            server_message="1 validation error for ChatRequest",
            headers=headers,
            request_id=None,
            secrets=(),
        )

    assert type(error({})) is ProviderRequestError
    assert type(error({"x-should-retry": "true"})) is ProviderRetryableError
