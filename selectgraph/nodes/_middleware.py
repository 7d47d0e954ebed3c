"""Node middleware: functions wrapped around every call of a node.

A middleware is ``middleware(call, proceed)``: ``call`` says which node runs and
on what (:class:`NodeCall`), ``proceed()`` runs the rest of the chain and the
node, and what the middleware returns is the node's output. So one function can
time or log a node, cache or short-circuit it (return without proceeding), or
retry it (proceed again). ``async def`` middleware awaits ``proceed()``; a plain
``def`` one calls it and gets the output back (it runs on a worker thread while
the node runs on the event loop, or, a blocking node, on a worker thread of its own
as it would unwrapped).

Middleware given to the graph wraps every node (outermost, in the order given),
then the node's own. It sees the node's output as the node returned it (a mapping,
a GraphState, a directive...), before the engine merges it; events, retries by
the node's error policy and OTel spans are the engine's and stay around it.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from selectgraph.core._state import GraphState
from selectgraph.nodes._spec import NodeAdapter, NodeContext

__all__ = ["Middleware", "MiddlewareAdapter", "NodeCall", "check_middleware"]

Middleware = Callable[["NodeCall", Callable[[], Any]], Any]
"""``middleware(call, proceed) -> output``; ``async def`` or ``def``."""


@dataclass(frozen=True, slots=True)
class NodeCall:
    """What a middleware is told about the node call it wraps."""

    node: str
    """The node's name."""
    state: GraphState
    """The node's view of the state (its writes reach the state only through its output)."""
    context: NodeContext | None
    """The node's context (step, visit, attempt, run id...); None for a node without one."""

    @property
    def attempt(self) -> int:
        """Which attempt of this visit (1 for the first; retries by the error policy add up)."""
        return self.context.attempt if self.context is not None else 1


def check_middleware(where: str, middleware: Sequence[Any] | None) -> tuple[Middleware, ...]:
    """``middleware`` as a tuple, each a callable.

    Raises:
        TypeError: one is not callable, or the argument is not a sequence.
    """
    if middleware is None:
        return ()
    if isinstance(middleware, str | bytes) or not isinstance(middleware, Sequence):
        raise TypeError(f"{where}: middleware must be a list of callables, got {middleware!r}")
    for index, item in enumerate(middleware):
        if not callable(item):
            raise TypeError(
                f"{where}: middleware[{index}] must be a callable (call, proceed) -> output, "
                f"got {type(item).__name__}"
            )
    return tuple(middleware)


class MiddlewareAdapter:
    """A node's adapter with its middleware around it."""

    is_async = True  # plain middleware runs on a worker thread: the run needs a loop
    wants_context = True  # the middleware is told the step, attempt...

    def __init__(
        self,
        inner: NodeAdapter,
        middleware: Sequence[Middleware],
        *,
        node: str,
        blocking: Callable[[Any], Awaitable[Any]] | None = None,
    ) -> None:
        self.inner = inner
        """The wrapped adapter."""
        self.blocking = blocking
        """For a blocking node: awaits its call on a worker thread (when the run offloads)."""
        self.middleware = tuple(middleware)
        self.node = node
        self.kind = inner.kind
        self.executor_retries = inner.executor_retries
        self._async = tuple(_is_async(item) for item in self.middleware)

    def __repr__(self) -> str:
        return f"MiddlewareAdapter({self.inner!r}, {len(self.middleware)} middleware)"

    def __getattr__(self, name: str) -> Any:
        # What tools read of a node's adapter (its function, its agent, its state types)
        # is the wrapped one's.
        return getattr(self.inner, name)

    async def __call__(self, state: Any, context: NodeContext | None) -> Any:
        call = NodeCall(self.node, state, context)
        inner = self.inner
        inner_context = context if inner.wants_context else None
        chain = self.middleware
        is_async = self._async

        async def run(index: int) -> Any:
            if index == len(chain):
                pending = inner(state, inner_context)
                runtime = context.runtime if context is not None else None
                if self.blocking is not None and getattr(runtime, "offloads", False):
                    return await self.blocking(pending)  # as the node would run unwrapped
                return await pending
            middleware = chain[index]
            if is_async[index]:
                return await middleware(call, lambda: run(index + 1))
            loop = asyncio.get_running_loop()

            def proceed() -> Any:  # called on the worker thread: the node runs on the loop
                return asyncio.run_coroutine_threadsafe(run(index + 1), loop).result()

            return await asyncio.to_thread(middleware, call, proceed)

        return await run(0)


def _is_async(middleware: Any) -> bool:
    """An ``async def`` function, or an object whose ``__call__`` is one."""
    if inspect.iscoroutinefunction(middleware):
        return True
    call = type(middleware).__dict__.get("__call__")
    return call is not None and inspect.iscoroutinefunction(call)
