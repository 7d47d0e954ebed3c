"""Retries: executor-level retries of a node, entered only once a first attempt has failed.

Building and driving a tenacity retrier costs far more than a step. A node
under ErrorPolicy.RETRY that succeeds at once (the usual case) must not pay
for it, so the first attempt runs bare and tenacity takes over the rest
after a retryable failure, with the waits it would have used anyway.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, TypeVar

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
    wait_random,
)

from selectgraph.core._policies import RetryPolicy
from selectgraph.core._run_errors import GraphRunError, NodeError, NodeTimeout

__all__ = ["clear_retry_frames", "is_retryable", "retry_after_failure"]

T = TypeVar("T")

OnRetry = Callable[[int, BaseException, float], None]
"""``(failed_attempt, error, delay_s)``, called before each wait."""


def is_retryable(retry: RetryPolicy, exc: BaseException) -> bool:
    """Whether ``exc`` is worth another attempt under ``retry``.

    Engine errors never are, except a node's own timeout, which is a failure of
    the node like any other, and a graph run inside the node (a subgraph, a graph
    as a node, a fan-out instance that is one) that failed because one of its
    nodes failed: that is the node's failure too, retried when what failed deep
    inside is an exception the policy retries.
    """
    if not isinstance(exc, GraphRunError) or isinstance(exc, NodeTimeout):
        return isinstance(exc, retry.retry_on)
    if not isinstance(exc, NodeError):
        return False  # routing, reducers, limits: the same input fails the same way
    root = _node_failure(exc)
    return root is not None and isinstance(root, retry.retry_on)


def _node_failure(error: NodeError) -> BaseException | None:
    """What a node raised, under the NodeErrors of the graphs around it (or None)."""
    cause: BaseException | None = error.__cause__
    for _ in range(64):  # nested graphs, each adding one NodeError
        if isinstance(cause, NodeTimeout) or not isinstance(cause, GraphRunError):
            return cause
        if not isinstance(cause, NodeError):
            return None  # an engine error inside the child
        cause = cause.__cause__
    return None


async def retry_after_failure(
    attempt: Callable[[int], Awaitable[T]],
    first_error: BaseException,
    retry: RetryPolicy,
    sleep: Callable[[float], Awaitable[None]],
    on_retry: OnRetry,
) -> T:
    """Attempts 2.. of a node whose attempt 1 raised ``first_error`` (retryable).

    ``attempt(n)`` runs attempt ``n``. The waits follow ``retry``: the first is
    ``initial_delay`` (plus jitter), each later one ``multiplier`` times longer,
    capped at ``max_delay``.

    Raises:
        Exception: the last attempt's error, once the retries are spent or an
            attempt raised something not worth retrying.
    """
    first_delay = min(retry.initial_delay, retry.max_delay) + wait_random(0, retry.jitter)(
        _NO_STATE
    )
    on_retry(1, first_error, first_delay)
    del first_error  # the traceback holds this frame: no cycle through a local
    await sleep(first_delay)
    # tenacity numbers its own attempts from 1; ours are one ahead, so its waits
    # start one multiplier further along.
    retrying = AsyncRetrying(
        stop=stop_after_attempt(retry.max_retries),
        wait=wait_exponential(
            multiplier=retry.initial_delay * retry.multiplier,
            exp_base=retry.multiplier,
            max=retry.max_delay,
        )
        + wait_random(0, retry.jitter),
        retry=retry_if_exception(lambda exc: is_retryable(retry, exc)),
        sleep=sleep,
        before_sleep=lambda call: _report(call, on_retry),
        reraise=True,
    )
    number = 1
    current: Any = None
    try:
        async for current in retrying:
            with current:
                number += 1
                return await attempt(number)
    except BaseException as exc:
        # tenacity's objects refer to each other and keep the last outcome, which
        # holds this error: let go of it, or a failed run's state would wait for
        # the cyclic collector.
        if current is not None:
            current.retry_state.outcome = None
        clear_retry_frames(exc.__traceback__)
        raise
    finally:
        del retrying, current
    raise AssertionError("tenacity stopped without an outcome")  # pragma: no cover


def _report(call: RetryCallState, on_retry: OnRetry) -> None:
    error = call.outcome.exception() if call.outcome else None
    delay = call.next_action.sleep if call.next_action else 0.0
    if error is not None:
        on_retry(call.attempt_number + 1, error, delay)


class _NoState:
    """Stands in for tenacity's RetryCallState where a wait strategy ignores it."""


_NO_STATE: Any = _NoState()


def clear_retry_frames(tb: TracebackType | None) -> None:
    """Drop the locals of tenacity's frames in a traceback that passed through it.

    Those frames hold the retry state, whose last outcome holds the exception
    that holds the traceback: a cycle that would keep a failed run's state
    alive until the cyclic collector ran. The node's own frames are kept.
    """
    while tb is not None:
        frame = tb.tb_frame
        if str(frame.f_globals.get("__name__", "")).startswith(_RETRY_MODULES):
            with contextlib.suppress(RuntimeError):  # a frame still running stays as is
                frame.clear()
        tb = tb.tb_next


_RETRY_MODULES = ("tenacity", "concurrent.futures")
