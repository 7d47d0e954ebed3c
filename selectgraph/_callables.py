"""Callables: tell sync from async from generator functions, partials and callable objects."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

__all__ = ["callable_name", "is_async_callable", "is_generator_callable", "positional_arity"]


def _unwrap(fn: Any) -> Any:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return fn


def _call_target(fn: Any) -> Any:
    fn = _unwrap(fn)
    if inspect.isfunction(fn) or inspect.ismethod(fn) or inspect.isbuiltin(fn):
        return fn
    # A callable object's behaviour is its class's __call__ method.
    call = type(fn).__dict__.get("__call__") or next(
        (klass.__dict__["__call__"] for klass in type(fn).__mro__ if "__call__" in klass.__dict__),
        None,
    )
    return call if call is not None else fn


def is_async_callable(fn: Any) -> bool:
    """Whether calling ``fn`` returns a coroutine."""
    return inspect.iscoroutinefunction(_call_target(fn))


def is_generator_callable(fn: Any) -> bool:
    """Whether calling ``fn`` returns a (sync or async) generator."""
    target = _call_target(fn)
    return inspect.isgeneratorfunction(target) or inspect.isasyncgenfunction(target)


def positional_arity(fn: Callable[..., Any]) -> int | None:
    """How many positional arguments ``fn`` accepts (``None`` for ``*args``/unknown)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    count = 0
    for parameter in signature.parameters.values():
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            return None
        if parameter.kind in (
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        ):
            count += 1
    return count


def callable_name(fn: Any) -> str:
    """A readable name for ``fn`` (function name, class name, or repr)."""
    fn = _unwrap(fn)
    name = getattr(fn, "__name__", None) or type(fn).__name__
    return "lambda" if name == "<lambda>" else str(name)
