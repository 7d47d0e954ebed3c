"""Token counts as a server reports them, checked before a budget trusts them.

A budget is only as good as the counts it adds up: a reply claiming -10^30
tokens would make room for any spending, and 10^30 would stop a run for
nothing. A count of the wrong type means the reply is malformed; a count no
call can have is replaced by the provider's own count, with a warning.
"""

from __future__ import annotations

import warnings
from typing import Final

__all__ = ["MAX_TOKENS_PER_CALL", "ImplausibleUsageWarning", "reported_tokens"]

MAX_TOKENS_PER_CALL: Final = 100_000_000
"""More tokens than any model reads or writes in one call (context windows are ~10^7)."""


class ImplausibleUsageWarning(RuntimeWarning):
    """A server reported a token count no call can have; the provider counted instead."""


def reported_tokens(value: object, field: str, provider: str) -> int | None:
    """``value`` as a token count, or ``None`` when the server did not report one.

    ``None`` also stands for a count outside ``0..MAX_TOKENS_PER_CALL``, after a
    warning: the caller counts the tokens itself, so budgets keep holding.

    Raises:
        TypeError: the count is not an integer (the reply is malformed); the
            message names the field.
    """
    if value is None:
        return None
    if type(value) is not int:  # bool is an int subclass, and no count
        raise TypeError(f"{field} is {type(value).__name__} {_brief(value)}, not an integer")
    if 0 <= value <= MAX_TOKENS_PER_CALL:
        return value
    warnings.warn(
        f"{provider}: the reply's {field} = {_brief(value)} is not a possible token count; "
        "the provider's own count is used instead",
        ImplausibleUsageWarning,
        stacklevel=2,
    )
    return None


def _brief(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
