"""Error mapping: turn HTTP statuses and dropped connections into redacted ProviderErrors."""

from __future__ import annotations

import email.utils
import math
import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from selectgraph._errors import ProviderError, ProviderRequestError, ProviderRetryableError

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

__all__ = [
    "connection_error",
    "is_retryable_status",
    "parse_retry_after",
    "redact",
    "status_error",
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

_REDACTED = "[redacted]"
_MAX_SERVER_MESSAGE = 500
_MIN_SECRET_LENGTH = 4


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
    return _KEY_SHAPES.sub(_REDACTED, text)


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
    if retryable:
        return ProviderRetryableError(
            message,
            provider=provider,
            status_code=status,
            retry_after=parse_retry_after(headers),
        )
    return ProviderRequestError(message, provider=provider, status_code=status)


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
        The error to raise (and retry).
    """
    what = "timed out" if timed_out else "lost its connection"
    message = f"{provider}: request for model {model!r} {what}"
    if reason:
        message += f" ({_clip(reason)})"
    return ProviderRetryableError(redact(message, secrets), provider=provider)


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
