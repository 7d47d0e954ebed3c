"""Every model call the agents layer makes goes through :func:`call_model`.

It is where a run's budgets refuse a call before it is made, where usage is
counted against them once it returns, and where LLMCallStarted/Finished are
recorded for observers and tracing (when the calling node's run has listeners).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from time import perf_counter
from typing import TYPE_CHECKING

from selectgraph.agents._call_budget import check_call
from selectgraph.core._control import BudgetStop, RunControl, current_control
from selectgraph.core._errors import SelectGraphError
from selectgraph.observe._events import (
    LLMCallFinished,
    LLMCallStarted,
    ToolCallFinished,
    ToolCallStarted,
)

if TYPE_CHECKING:
    from selectgraph.core._messages import Message, ToolCall
    from selectgraph.observe._recorder import EventRecorder
    from selectgraph.providers._base import Completion, CompletionRequest, Provider

__all__ = ["CallScope", "call_model", "scope", "tool_finished", "tool_started"]

_ids = itertools.count(1)


@dataclass(slots=True)
class CallScope:
    """The node whose agent is calling, for the events its calls record."""

    recorder: EventRecorder
    step: int
    node: str
    agent: str = ""


_scope: ContextVar[CallScope | None] = ContextVar("selectgraph_call_scope", default=None)


def scope() -> ContextVar[CallScope | None]:
    """The context variable an agent node sets while its agent runs."""
    return _scope


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


async def call_model(
    provider: Provider,
    request: CompletionRequest,
    on_delta: Callable[[str], None] | None = None,
) -> Completion:
    """Make one model call, streamed when ``on_delta`` is given.

    A call whose ``max_tokens`` would take the run past a budget is sent with a
    smaller ``max_tokens`` (what the budget has left) when its prompt fits.

    Raises:
        BudgetStop: the run's budget does not allow the call (nothing was sent), or its
            time budget ran out while the call was in flight (the call was cancelled).
        RunCancelledByToken: the run's token was cancelled.
    """
    control = current_control()
    if control is not None:
        request = check_call(control, request)
    where = _scope.get()
    if where is None or not where.recorder.records_calls:
        completion = await _call(provider, request, on_delta, control)
        if control is not None:
            control.add(completion.usage)
        return completion
    call_id = f"llm-{next(_ids)}"
    recorder = where.recorder
    provider_name = getattr(provider, "name", type(provider).__name__)
    recorder.record_call(
        LLMCallStarted,
        where.step,
        where.node,
        call_id,
        provider_name,
        request.model,
        where.agent,
        on_delta is not None,
        request=request,
    )
    started = perf_counter()
    try:
        completion = await _call(provider, request, on_delta, control)
    except BaseException as exc:
        recorder.record(
            LLMCallFinished,
            where.step,
            where.node,
            call_id,
            provider_name,
            request.model,
            (perf_counter() - started) * 1000,
            0,
            0,
            None,
            "",
            "",
            _describe(exc),
        )
        raise
    if control is not None:
        control.add(completion.usage)
    usage = completion.usage
    recorder.record_call(
        LLMCallFinished,
        where.step,
        where.node,
        call_id,
        provider_name,
        request.model,
        (perf_counter() - started) * 1000,
        usage.input_tokens,
        usage.output_tokens,
        usage.known_cost_usd,
        completion.model,
        completion.finish_reason or "",
        None,
        completion=completion,
    )
    return completion


async def _call(
    provider: Provider,
    request: CompletionRequest,
    on_delta: Callable[[str], None] | None,
    control: RunControl | None = None,
) -> Completion:
    limit = control.budget.max_duration if control is not None else None
    if limit is None:
        return await _send(provider, request, on_delta)
    assert control is not None
    # The time budget is a deadline: a call still running when it passes is cancelled
    # (its stream closed, so a local model stops generating) and the run stops.
    deadline = asyncio.timeout(max(limit - control.elapsed, 0.0))
    try:
        async with deadline:
            return await _send(provider, request, on_delta)
    except TimeoutError:
        if not deadline.expired():
            raise  # the provider's own timeout, not the run's deadline
        raise BudgetStop("time_budget", limit, control.elapsed, 0.0) from None


async def _send(
    provider: Provider, request: CompletionRequest, on_delta: Callable[[str], None] | None
) -> Completion:
    if on_delta is None:
        return await provider.complete(request)
    completion: Completion | None = None
    async for chunk in provider.stream(request):
        if chunk.delta:
            on_delta(chunk.delta)
        if chunk.completion is not None:
            completion = chunk.completion
    if completion is None:
        raise SelectGraphError(
            f"provider {provider.name!r} ended a stream without a final completion"
        )
    return completion


def tool_started(call: ToolCall) -> tuple[CallScope, float] | None:
    """Record ToolCallStarted (when observed); what :func:`tool_finished` needs."""
    where = _scope.get()
    if where is None or not where.recorder.records_calls:
        return None
    where.recorder.record_delivering(
        ToolCallStarted, where.step, where.node, call.name, call.id, arguments=call.arguments
    )
    return where, perf_counter()


def tool_finished(started: tuple[CallScope, float] | None, call: ToolCall, result: Message) -> None:
    """Record ToolCallFinished for a call :func:`tool_started` saw."""
    if started is None:
        return
    where, clock = started
    error = result.text if getattr(result, "is_error", False) else None
    where.recorder.record_delivering(
        ToolCallFinished,
        where.step,
        where.node,
        call.name,
        call.id,
        (perf_counter() - clock) * 1000,
        error,
        result=result.text,
    )
