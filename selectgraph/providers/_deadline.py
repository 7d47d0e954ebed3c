"""Deadlines: one provider attempt bounded in total time, and a stream bounded between events.

An HTTP client's timeout bounds each network read, not the whole answer: a
server that sends one byte a second, or a stream of keep-alive comments, keeps
an attempt alive for as long as it likes. The SDK providers therefore run each
attempt under an asyncio deadline (``timeout=``), covering the request, the
body and, for a stream, every event read until the answer ends; and they bound
the wait for each stream event separately (``stream_idle_timeout=``), so a
stream that stops producing events fails fast even when its total budget is
far off. Either limit, when hit, raises :class:`ProviderTimeoutError`, which is
retryable (an attempt that timed out before any text was handed out is retried
like any transient failure).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from selectgraph.core._errors import ProviderRetryableError

__all__ = [
    "DEFAULT_STREAM_IDLE_TIMEOUT",
    "ProviderTimeoutError",
    "check_timeouts",
    "timeout_error",
    "within",
]

T = TypeVar("T")


class ProviderTimeoutError(ProviderRetryableError):
    """One provider attempt ran out of time: its total ``timeout`` or a stream's idle limit.

    Retryable: the provider's retry policy tries again unless text was already
    streamed to the caller.
    """

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        model: str,
        timeout: float | None,
        limit: str = "timeout",
    ) -> None:
        super().__init__(message, provider=provider)
        self.model = model
        """The model the request asked for."""
        self.timeout = timeout
        """The limit that was hit, in seconds (``None`` when the HTTP client's own timeout hit)."""
        self.limit = limit
        """Which limit: ``"timeout"`` (the attempt's total) or ``"stream_idle_timeout"``."""


def timeout_error(
    *, provider: str, model: str, seconds: float, limit: str, what: str
) -> ProviderTimeoutError:
    """The error for an attempt that hit ``limit`` (``seconds`` long) while doing ``what``."""
    return ProviderTimeoutError(
        f"{provider}: request for model {model!r} timed out: {what} took longer than "
        f"{limit}={seconds:g} s",
        provider=provider,
        model=model,
        timeout=seconds,
        limit=limit,
    )


async def within(
    call: Callable[[], Awaitable[T]],
    *,
    deadline: float | None,
    error: Callable[[], ProviderTimeoutError],
) -> T:
    """Await ``call()``, cancelling it at ``deadline`` (event-loop time) and raising ``error()``.

    Args:
        call: The work to bound.
        deadline: ``loop.time()`` by which the work must finish; ``None`` for no bound.
        error: Builds the error raised when the deadline passes.

    Returns:
        What ``call()`` returned.

    Raises:
        ProviderTimeoutError: the deadline passed first.
    """
    if deadline is None:
        return await call()
    timer = asyncio.timeout_at(deadline)
    expired = False
    try:
        async with timer:
            return await call()
    except TimeoutError:
        if not timer.expired():
            raise
        expired = True
    # Raised outside the except clause: the cancelled SDK call is not kept as context.
    assert expired
    raise error()


DEFAULT_STREAM_IDLE_TIMEOUT = 30.0
"""Seconds an SDK provider's stream may go without an event, unless told otherwise."""


def check_timeouts(
    provider: str, timeout: float, stream_idle_timeout: float | None
) -> tuple[float, float | None]:
    """``timeout`` and ``stream_idle_timeout`` as given, once checked to be positive.

    Raises:
        ValueError: either is zero or negative.
    """
    if not timeout > 0:
        raise ValueError(f"{provider}: timeout must be > 0 seconds, got {timeout!r}")
    if stream_idle_timeout is not None and not stream_idle_timeout > 0:
        raise ValueError(
            f"{provider}: stream_idle_timeout must be > 0 seconds or None, "
            f"got {stream_idle_timeout!r}"
        )
    return timeout, stream_idle_timeout
