"""Generator nodes: a node that yields InterruptRequest to pause for a human, and resumes there.

The adapter drives the generator and asks the run (``context.runtime``) for
what only the run knows: the answer recorded for each yield, and whether a
live generator from an earlier pause of this very task is still in memory.

- In the process that paused, the live generator is sent the answer, so the
  code before the yield does not run again.
- After a restart, the generator starts over and every yield that already has
  an answer is sent it at once, in order; work wrapped in ``context.once()``
  returns its saved result instead of running again.

A question asked with a ``response_schema`` carries it as JSON schema (and, in
this process, its model class). Its recorded answer, checked by ``resume``
before the run went on, is JSON data: a model schema's answer is sent to the
generator as an instance of the model, on both paths.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import AsyncGenerator, Callable, Generator, Mapping
from typing import Any, Protocol

from selectgraph.core._answers import answer_for_node, json_schema_of, model_of
from selectgraph.core._branch import BranchRef
from selectgraph.core._callables import (
    callable_name,
    is_generator_callable,
    positional_arity,
    takes_context,
)
from selectgraph.core._interrupts import Interrupt, InterruptRequest, NodeInterrupt
from selectgraph.core._run_errors import NodeContractError
from selectgraph.nodes._spec import NodeContext
from selectgraph.routing._directives import Directive
from selectgraph.state._output import NodeOutput
from selectgraph.state._views import StateView

__all__ = ["GeneratorAdapter", "InterruptHost"]


class InterruptHost(Protocol):
    """What a generator node needs from the run it belongs to."""

    def task_id(self, node: str, branch: Any) -> str:
        """The stable id of this visit of ``node`` (same after a restart)."""
        ...

    def interrupt_id(self, task: str, index: int) -> str:
        """The id of the ``index``-th yield of ``task``."""
        ...

    def answer_for(self, interrupt_id: str) -> tuple[bool, Any]:
        """``(True, answer)`` when the yield was answered, else ``(False, None)``."""
        ...

    def take_live(self, task: str) -> tuple[Any, StateView, Interrupt] | None:
        """The task's suspended generator, its view and the question it waits on, if kept."""
        ...

    def keep_live(self, task: str, generator: Any, view: StateView, interrupt: Interrupt) -> None:
        """Keep a suspended generator for an in-process resume."""
        ...

    def task_done(self, task: str) -> None:
        """The task's generator returned: its answers and memoized steps are spent."""
        ...


class GeneratorAdapter:
    """A generator function node (sync or async) that may pause at ``yield InterruptRequest``."""

    kind = "function"
    executor_retries = False  # a retry would ask the human again
    wants_context = True  # the run's answers and live generators come through the context

    def __init__(self, name: str, fn: Callable[..., Any]) -> None:
        arity = positional_arity(fn)
        if arity == 0:
            raise TypeError(
                f"node {name!r}: {callable_name(fn)} takes no arguments; a generator node "
                "takes the state: def node(state) or def node(state, context)"
            )
        self.fn = fn
        self.node = name
        self.name = callable_name(fn)
        self.is_async = is_generator_callable(fn) and _is_async_generator(fn)
        self.takes_context = takes_context(fn)

    async def __call__(self, state: StateView, context: NodeContext | None) -> NodeOutput:
        assert context is not None  # wants_context
        host: InterruptHost = context.runtime
        task = host.task_id(context.node, context.branch)
        live = host.take_live(task)
        if live is not None:
            generator, state, waiting = live
            index = waiting.index
            found, value = host.answer_for(waiting.id)
            if not found:  # nothing to say yet: suspend again at the same yield
                host.keep_live(task, generator, state, waiting)
                raise NodeInterrupt(waiting)
            try:
                sending: Any = answer_for_node(waiting.response_model, value, waiting.id)
            except BaseException:
                _close(generator)
                raise
            index += 1
        else:
            generator = self.fn(state, context) if self.takes_context else self.fn(state)
            index = 0
            sending = None
        if self.is_async:
            raw = await self._drive_async(
                generator, sending, index, task, host, state, context.branch
            )
        else:
            raw = self._drive_sync(generator, sending, index, task, host, state, context.branch)
        host.task_done(task)
        return _output(raw, state, context.node)

    def _drive_sync(
        self,
        generator: Generator[Any, Any, Any],
        sending: Any,
        index: int,
        task: str,
        host: InterruptHost,
        view: StateView,
        branch: BranchRef | None,
    ) -> Any:
        while True:
            try:
                request = generator.send(sending)
            except StopIteration as stop:
                return stop.value
            sending = self._answer(generator, request, index, task, host, view, branch)
            index += 1

    async def _drive_async(
        self,
        generator: AsyncGenerator[Any, Any],
        sending: Any,
        index: int,
        task: str,
        host: InterruptHost,
        view: StateView,
        branch: BranchRef | None,
    ) -> Any:
        if index == 0:
            # An event loop finalises the async generators first run in it when it
            # closes (asyncio.run does): one kept for a resume from another run()
            # call must not be, so it is started with the loop's hooks unset.
            hooks = sys.get_asyncgen_hooks()
            sys.set_asyncgen_hooks(firstiter=None, finalizer=None)
            try:
                first = generator.asend(sending)
            finally:
                sys.set_asyncgen_hooks(*hooks)
            try:
                request = await first
            except StopAsyncIteration:
                return None
            sending = self._answer(generator, request, index, task, host, view, branch)
            index += 1
        while True:
            try:
                request = await generator.asend(sending)
            except StopAsyncIteration:
                return None
            sending = self._answer(generator, request, index, task, host, view, branch)
            index += 1

    def _answer(
        self,
        generator: Any,
        request: Any,
        index: int,
        task: str,
        host: InterruptHost,
        view: StateView,
        branch: BranchRef | None,
    ) -> Any:
        """The recorded answer to the ``index``-th yield; NodeInterrupt when there is none."""
        if not isinstance(request, InterruptRequest):
            _close(generator)
            raise NodeContractError(
                f"node {self.node!r} yielded {type(request).__name__} {request!r}; a generator "
                "node yields only InterruptRequest(prompt, payload) (return or write to the "
                "state for updates)",
                node=self.node,
            )
        interrupt_id = host.interrupt_id(task, index)
        found, value = host.answer_for(interrupt_id)
        schema = request.response_schema
        if found:
            try:
                return answer_for_node(schema, value, interrupt_id)
            except BaseException:
                _close(generator)
                raise
        interrupt = Interrupt(
            id=interrupt_id,
            node=self.node,
            prompt=request.prompt,
            payload=request.payload,
            index=index,
            response_schema=json_schema_of(schema),
            response_model=model_of(schema),
            branch=branch,
        )
        host.keep_live(task, generator, view, interrupt)
        raise NodeInterrupt(interrupt)

    def __repr__(self) -> str:
        return f"GeneratorAdapter({self.name})"


def _is_async_generator(fn: Any) -> bool:
    target = fn
    while isinstance(target, functools.partial):
        target = target.func
    if not inspect.isfunction(target) and not inspect.ismethod(target):
        target = getattr(target, "__call__", target)  # noqa: B004 - an object's own method
    return inspect.isasyncgenfunction(target)


def _close(generator: Any) -> None:
    close = getattr(generator, "close", None)
    if close is not None and not inspect.isasyncgen(generator):
        close()


def _output(raw: Any, view: StateView, node: str) -> NodeOutput:
    """The node's output: what it returned (a sync generator may return) plus its view writes."""
    if raw is None:
        return NodeOutput({}, view.collect())
    if isinstance(raw, Directive):
        return NodeOutput(raw.values, view.collect(), raw.target)
    if isinstance(raw, Mapping):
        return NodeOutput(raw, view.collect())
    raise NodeContractError(
        f"generator node {node!r} returned {type(raw).__name__}; it may return a mapping of "
        "updates, goto()/update() or nothing",
        node=node,
    )
