"""Provider retries: exponential backoff with jitter that honours Retry-After."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
    wait_random_exponential,
)
from tenacity.wait import wait_base

from selectgraph.core._errors import ProviderError, ProviderRetryableError

__all__ = ["ProviderRetry", "call_with_retries"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderRetry:
    """How a provider retries transient failures."""

    max_attempts: int = 4
    """Total attempts, the first included; 1 disables retrying."""
    initial_delay: float = 0.5
    """Scale of the first backoff, in seconds."""
    max_delay: float = 30.0
    """Upper bound of one backoff, in seconds."""
    respect_retry_after: bool = True
    """Wait what the server's Retry-After asks for, when it says."""
    max_retry_after: float = 60.0
    """Cap on a server-requested wait, so a bad header cannot stall a run."""

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"ProviderRetry.max_attempts must be >= 1, got {self.max_attempts}")
        if self.initial_delay < 0 or self.max_delay < 0:
            raise ValueError("ProviderRetry delays must be >= 0")


class _RetryAfterOrBackoff(wait_base):
    """Wait the server's Retry-After when given, else full-jitter exponential backoff."""

    def __init__(self, policy: ProviderRetry) -> None:
        self._policy = policy
        self._backoff = wait_random_exponential(
            multiplier=policy.initial_delay, max=policy.max_delay
        )

    def __call__(self, retry_state: RetryCallState) -> float:
        outcome = retry_state.outcome
        error = outcome.exception() if outcome is not None else None
        if (
            self._policy.respect_retry_after
            and isinstance(error, ProviderError)
            and error.retry_after is not None
        ):
            return min(max(error.retry_after, 0.0), self._policy.max_retry_after)
        return float(self._backoff(retry_state))


async def call_with_retries(
    call: Callable[[], Awaitable[T]],
    policy: ProviderRetry,
    *,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    on_retry: Callable[[ProviderError, int, float], None] | None = None,
) -> T:
    """Await ``call()``, retrying :class:`ProviderRetryableError` per ``policy``.

    Args:
        call: Makes one attempt; must raise ``ProviderError`` subclasses on failure.
        policy: Attempts and backoff.
        sleep: Awaitable sleep, replaceable in tests.
        on_retry: Told ``(error, attempt_number, delay_seconds)`` before each wait.

    Returns:
        The first successful result.

    Raises:
        ProviderRetryableError: every attempt failed transiently.
        ProviderRequestError: a non-retryable failure, raised at once.
    """

    def before_sleep(state: RetryCallState) -> None:
        if on_retry is None or state.outcome is None or state.next_action is None:
            return
        error = state.outcome.exception()
        if isinstance(error, ProviderError):
            on_retry(error, state.attempt_number, state.next_action.sleep)

    retrying = AsyncRetrying(
        stop=stop_after_attempt(policy.max_attempts),
        wait=_RetryAfterOrBackoff(policy),
        retry=retry_if_exception_type(ProviderRetryableError),
        sleep=sleep,
        before_sleep=before_sleep,
        reraise=True,
    )
    async for attempt in retrying:
        with attempt:
            return await call()
    raise AssertionError("unreachable: tenacity either returns or re-raises")  # pragma: no cover
