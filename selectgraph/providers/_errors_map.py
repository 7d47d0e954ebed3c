"""Error mapping: turn HTTP statuses and dropped connections into redacted ProviderErrors."""

from __future__ import annotations

import email.utils
import math
import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlsplit

from selectgraph.core._errors import ProviderError, ProviderRequestError, ProviderRetryableError
from selectgraph.providers._deadline import ProviderTimeoutError

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

__all__ = [
    "StructuredOutputRejected",
    "connection_error",
    "is_request_validation_error",
    "is_structured_rejection",
    "malformed_response",
    "names_response_format",
    "is_retryable_status",
    "parse_retry_after",
    "redact",
    "redact_url",
    "status_error",
    "url_secrets",
]

_STATUS_LABELS: dict[int, str] = {
    400: "bad request",
    401: "authentication failed",
    402: "payment required",
    403: "permission denied",
    404: "not found",
    408: "request timeout",
    409: "conflict",
    413: "request too large",
    422: "unprocessable request",
    429: "rate limited",
    500: "server error",
    502: "bad gateway",
    503: "service unavailable",
    504: "gateway timeout",
    529: "overloaded",
}

_HINTS: dict[int, str] = {
    401: "check the API key",
    403: "check that the API key may use this model",
    404: "check the model name and base_url",
    413: "shorten the prompt or lower max_tokens",
}

# Shapes that look like credentials even when they are not the key we know of,
# e.g. a proxy echoing an Authorization header back in its error page.
_KEY_SHAPES = re.compile(r"(sk-[A-Za-z0-9_\-]{8,})|((?i:bearer)\s+[A-Za-z0-9._~+/\-]{8,}=*)")

# Credentials written into a URL: ``scheme://user:password@host`` and query
# parameters whose name says they carry a secret (``?api_key=...``, ``&sig=...``).
_URL_USERINFO = re.compile(r"(?<=://)[^/?#@\s]+@")
_SECRET_PARAM_NAME = (
    r"[A-Za-z0-9_.\-]*(?:key|token|secret|passw(?:or)?d|pwd|auth|signature|sig|credential)"
    r"[A-Za-z0-9_.\-]*"
)
_URL_SECRET_PARAM = re.compile(rf"(?i)([?&;]{_SECRET_PARAM_NAME}=)[^&;#\s'\"]+")
_SECRET_PARAM = re.compile(rf"(?i){_SECRET_PARAM_NAME}")

# A server error that quotes the request's fields is a refusal of the request,
# not a transient failure (llama.cpp's server answers an unsupported
# response_format with HTTP 500).
_NAMES_RESPONSE_FORMAT = re.compile(r"(?i)response_format|json_schema|json_object")
_NAMES_REQUEST_FIELD = re.compile(
    r"(?i)response_format|json_schema|json_object|tool_choice|validation error|unprocessable|"
    r"unrecognized (?:request )?(?:argument|field)|extra fields? not permitted|"
    r"input should be"
)

_REDACTED = "[redacted]"
_MAX_SERVER_MESSAGE = 500
_MIN_SECRET_LENGTH = 4


class StructuredOutputRejected(ProviderRequestError):
    """The server refused the structured-output mode of the request (not the request itself).

    SDK providers catch this and fall back to a mode the server accepts
    (``json_schema`` → ``json_object`` → instructions); it reaches the caller
    only when every mode was refused.
    """


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret, and anything shaped like an API key, replaced.

    Args:
        text: A message that may quote a request, a header or a server reply.
        secrets: The exact strings to hide (API keys, tokens); very short ones are
            ignored, since hiding every "a" would garble the message without hiding
            anything worth hiding.

    Returns:
        The text with ``[redacted]`` in place of each secret.
    """
    for secret in secrets:
        if len(secret) >= _MIN_SECRET_LENGTH:
            text = text.replace(secret, _REDACTED)
    text = _URL_USERINFO.sub(_REDACTED + "@", text)
    text = _URL_SECRET_PARAM.sub(rf"\1{_REDACTED}", text)
    return _KEY_SHAPES.sub(_REDACTED, text)


def redact_url(url: str, secrets: Iterable[str] = ()) -> str:
    """``url`` fit to print: no user or password, no secret-looking query values.

    Args:
        url: A base URL as configured, e.g. ``http://u:pw@host/v1?api_key=...``.
        secrets: Further strings to hide.

    Returns:
        The URL with ``[redacted]`` in place of its credentials.
    """
    return redact(url, secrets)


def url_secrets(url: str | None) -> tuple[str, ...]:
    """The credentials written into ``url``: its password and secret query values.

    These join a provider's secrets, so a server that echoes its URL back in an
    error message cannot leak them either.
    """
    if not url:
        return ()
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return ()
    found = [password] if password else []
    found += [
        value
        for name, value in parse_qsl(parts.query, keep_blank_values=True)
        if value and _SECRET_PARAM.fullmatch(name)
    ]
    return tuple(found)


def is_retryable_status(status: int) -> bool:
    """Whether an HTTP status is worth retrying: timeouts, conflicts, rate limits, 5xx."""
    return status in (408, 409, 429) or status >= 500


def parse_retry_after(headers: Mapping[str, str], *, now: datetime | None = None) -> float | None:
    """Seconds a server asked us to wait, from ``retry-after-ms`` or ``Retry-After``.

    ``Retry-After`` may be a number of seconds or an HTTP date (RFC 9110 §10.2.3);
    ``retry-after-ms`` is OpenAI's finer-grained variant and wins when present.

    Args:
        headers: Response headers; lookups must be case-insensitive (httpx headers are).
        now: The current time, for HTTP dates; defaults to the clock.

    Returns:
        A non-negative delay, or ``None`` when no usable header is present.
    """
    millis = _finite_float(headers.get("retry-after-ms"))
    if millis is not None:
        return max(millis / 1000.0, 0.0)
    value = headers.get("retry-after")
    if value is None:
        return None
    seconds = _finite_float(value)
    if seconds is not None:
        return max(seconds, 0.0)
    try:
        when = email.utils.parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    current = now if now is not None else datetime.now(UTC)
    return max((when - current).total_seconds(), 0.0)


def status_error(
    *,
    provider: str,
    status: int,
    model: str,
    server_message: str | None,
    headers: Mapping[str, str],
    request_id: str | None,
    secrets: Iterable[str],
) -> ProviderError:
    """The ProviderError for an HTTP error status, retryable or not.

    Args:
        provider: The provider's name, e.g. ``"openai"``.
        status: The HTTP status code.
        model: The model the request asked for.
        server_message: What the server said went wrong, when it said.
        headers: Response headers (for ``Retry-After``).
        request_id: The server's request id, useful when reporting a problem upstream.
        secrets: Strings that must not appear in the message.

    Returns:
        A :class:`ProviderRetryableError` for transient statuses (or when the
        server's ``x-should-retry`` header says ``true``), else a
        :class:`ProviderRequestError`.
    """
    label = _STATUS_LABELS.get(status, "error")
    message = f"{provider}: HTTP {status} ({label}) for model {model!r}"
    if server_message:
        message += f": {_clip(server_message)}"
    hint = _HINTS.get(status)
    if hint:
        message += f"; {hint}"
    if request_id:
        message += f" [request id {request_id}]"
    message = redact(message, secrets)
    # Both vendors may say outright whether a retry can help; their word beats the status.
    verdict = headers.get("x-should-retry")
    retryable = verdict == "true" if verdict in ("true", "false") else is_retryable_status(status)
    if retryable and verdict is None and is_request_validation_error(status, server_message):
        # A 5xx that quotes our request's fields refuses the request; it is not transient.
        retryable = False
    if retryable:
        return ProviderRetryableError(
            message,
            provider=provider,
            status_code=status,
            retry_after=parse_retry_after(headers),
        )
    return ProviderRequestError(message, provider=provider, status_code=status)


def is_request_validation_error(status: int, server_message: str | None) -> bool:
    """Whether a server error (5xx) is really the server refusing our request's shape.

    Some OpenAI-compatible servers answer a request they cannot validate (an
    unsupported ``response_format``, an unknown field) with a 500 rather than a
    400; retrying such a request only repeats the refusal.
    """
    return (
        status >= 500
        and server_message is not None
        and _NAMES_REQUEST_FIELD.search(server_message) is not None
    )


def is_structured_rejection(status: int, server_message: str | None) -> bool:
    """Whether an error status, for a request asking for structured output, refuses that mode.

    A 400 or 422 is taken as a refusal (servers word it many ways, and the
    fallback request without the mode shows whether it was the cause); a 500 only
    when its message names the structured-output settings, as llama.cpp's does.
    """
    return status in (400, 422) or (status >= 500 and names_response_format(server_message))


def names_response_format(server_message: str | None) -> bool:
    """Whether an error message is about the request's structured-output settings."""
    return server_message is not None and _NAMES_RESPONSE_FORMAT.search(server_message) is not None


def malformed_response(
    *, provider: str, model: str, what: str, garbage: bool, secrets: Iterable[str]
) -> ProviderError:
    """The ProviderError for a success status whose body is not an answer.

    Args:
        provider: The provider's name.
        model: The model the request asked for.
        what: What was wrong, e.g. ``"the body is not JSON (text/html)"``.
        garbage: Whether the body is unreadable (not JSON, cut short): what a
            proxy or gateway sends when it fails, so worth retrying. A readable body
            of the wrong shape (``{}``, a list) is the same on every try.
        secrets: Strings that must not appear in the message.

    Returns:
        A :class:`ProviderRetryableError` for garbage, else a
        :class:`ProviderRequestError`; both with ``status_code`` 200.
    """
    message = f"{provider}: malformed response for model {model!r}: {_clip(what)}"
    if not garbage:
        message += "; check that base_url points at a server that speaks this API"
    message = redact(message, secrets)
    if garbage:
        return ProviderRetryableError(message, provider=provider, status_code=200)
    return ProviderRequestError(message, provider=provider, status_code=200)


def connection_error(
    *,
    provider: str,
    model: str,
    reason: str,
    timed_out: bool,
    secrets: Iterable[str],
) -> ProviderRetryableError:
    """The ProviderRetryableError for a timeout or a connection that failed or dropped.

    Args:
        provider: The provider's name.
        model: The model the request asked for.
        reason: What the transport said, e.g. ``"RemoteProtocolError: Server disconnected"``.
        timed_out: Whether the request ran out of time rather than losing its connection.
        secrets: Strings that must not appear in the message.

    Returns:
        The error to raise (and retry): a
        :class:`~selectgraph.providers.ProviderTimeoutError` when it timed out.
    """
    what = "timed out" if timed_out else "lost its connection"
    message = f"{provider}: request for model {model!r} {what}"
    if reason:
        message += f" ({_clip(reason)})"
    message = redact(message, secrets)
    if timed_out:
        # The HTTP client's own timeout (connecting, or one read): no total limit known.
        return ProviderTimeoutError(message, provider=provider, model=model, timeout=None)
    return ProviderRetryableError(message, provider=provider)


def _finite_float(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value.strip())
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _clip(text: str) -> str:
    text = " ".join(text.split())
    if len(text) <= _MAX_SERVER_MESSAGE:
        return text
    return text[: _MAX_SERVER_MESSAGE - 3] + "..."
