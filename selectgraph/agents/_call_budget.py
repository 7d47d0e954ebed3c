"""The budget check of one model call: refuse it before it is sent if it could pass a budget."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

from selectgraph.core._control import Budget, BudgetStop, RunControl
from selectgraph.core._usage import Usage

if TYPE_CHECKING:
    from selectgraph.providers._base import CompletionRequest

__all__ = ["check_call"]


def check_call(control: RunControl, request: CompletionRequest) -> CompletionRequest:
    """Refuse a model call that would take the run past a budget, or fit its reply to the budget.

    The call is estimated as its prompt (counted with tiktoken where the
    encoding is available) plus its ``max_tokens``, so a budget is passed by at
    most the part of one call's reply that its ``max_tokens`` did not bound. A
    call whose ``max_tokens`` is a default bound (``max_tokens_fits_budget``,
    set by agents that keep the default) is not refused for it: when its prompt
    fits but the bound does not, it is sent with ``max_tokens`` lowered to what
    the budgets have left, and refused only when not even the prompt and one
    token of reply fit.

    Returns:
        The request to send: ``request`` itself, or a copy with a smaller ``max_tokens``.

    Raises:
        BudgetStop: the budget cannot hold the call (nothing is sent).
    """
    control.check_time()
    budget = control.budget
    if budget.max_total_tokens is None and budget.max_cost_usd is None:
        return request
    reply = request.max_tokens or 0
    used = control.usage
    # Counting with tiktoken costs ~100 µs for a page of prompt: far from the
    # limits, an upper bound on the prompt's tokens settles it without counting.
    bound = _prompt_bound(request)
    if _fits(budget, used, bound, reply, request.model):
        return request
    prompt = _prompt_tokens(request)
    if not request.max_tokens_fits_budget or request.max_tokens is None:
        _refuse_unless_fits(budget, used, prompt, reply, request.model)
        return request
    least = 1
    room = reply
    if budget.max_total_tokens is not None:
        room = min(room, budget.max_total_tokens - used.total_tokens - prompt)
        if room < least:
            needed = prompt + least
            raise BudgetStop("token_budget", budget.max_total_tokens, used.total_tokens, needed)
    if budget.max_cost_usd is not None:
        spent = used.cost_usd
        room = _cost_room(budget.max_cost_usd - spent, request.model, prompt, room)
        if room < least or spent >= budget.max_cost_usd:
            cost = _cost(request.model, prompt, least)
            raise BudgetStop("cost_budget", budget.max_cost_usd, spent, cost)
    if room >= reply:
        return request
    return dataclasses.replace(request, max_tokens=room)


def _refuse_unless_fits(budget: Budget, used: Usage, prompt: int, reply: int, model: str) -> None:
    """Raise BudgetStop unless ``prompt + reply`` tokens fit every budget."""
    if budget.max_total_tokens is not None:
        needed = prompt + reply
        if used.total_tokens + needed > budget.max_total_tokens:
            raise BudgetStop("token_budget", budget.max_total_tokens, used.total_tokens, needed)
    if budget.max_cost_usd is not None:
        spent = used.cost_usd
        cost = _cost(model, prompt, reply)
        if spent + cost > budget.max_cost_usd or spent >= budget.max_cost_usd:
            raise BudgetStop("cost_budget", budget.max_cost_usd, spent, cost)


def _cost_room(left: float, model: str, prompt: int, reply: int) -> int:
    """The most reply tokens (at most ``reply``) a call can have for ``left`` dollars; -1: none."""
    if _cost(model, prompt, 0) > left:
        return -1
    if _cost(model, prompt, reply) <= left:
        return reply
    low, high = 0, reply  # cost(low) fits, cost(high) does not
    while high - low > 1:
        middle = (low + high) // 2
        if _cost(model, prompt, middle) <= left:
            low = middle
        else:
            high = middle
    return low


def _fits(budget: Budget, used: Usage, prompt: int, reply: int, model: str) -> bool:
    """Whether a call of at most ``prompt + reply`` tokens is within every budget."""
    if (
        budget.max_total_tokens is not None
        and used.total_tokens + prompt + reply > budget.max_total_tokens
    ):
        return False
    return budget.max_cost_usd is None or (
        used.cost_usd + _cost(model, prompt, reply) <= budget.max_cost_usd
        and used.cost_usd < budget.max_cost_usd
    )


def _cost(model: str, prompt: int, reply: int) -> float:
    # Imported on first use: the providers package loads every SDK.
    from selectgraph.providers._pricing import cost_usd

    return cost_usd(model or "", prompt, reply) or 0.0


_FRAMING = 16
"""More than the tokens any chat format adds around one message."""


def _prompt_bound(request: CompletionRequest) -> int:
    """An upper bound on the prompt's tokens (a token is at least a byte, a character at most 4)."""
    chars = 0
    for message in request.messages:
        chars += len(message.text) + len(message.name or "") + len(message.tool_call_id or "")
        for call in message.tool_calls:
            chars += (
                len(call.id) + len(call.name) + len(call.raw_arguments or _json(call.arguments))
            )
        chars += _FRAMING
    return 4 * chars + _FRAMING


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _prompt_tokens(request: CompletionRequest) -> int:
    from selectgraph.providers._tokens import count_message_tokens

    return count_message_tokens(list(request.messages), request.model)
