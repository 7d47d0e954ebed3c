"""Research deadlines: ``max_seconds`` is a deadline, and every model call and search keeps it.

A run's deadline (``deadline`` in its state, seconds since the epoch) is fixed
when the run starts: ``ResearchBudget.max_seconds`` from then. Each
model-calling node of a research graph is wrapped by :class:`Bounded`, which
gives the call only the time left before its own cut-off, the deadline less
the time kept for what still comes after it (the writer, the synthesis). A call
still running at its cut-off is cancelled (the in-process model stops within a
token, an HTTP request is dropped) and the node fails with
:class:`DeadlineReached`; the graph's failure edges then go on without it, to
a report written from the evidence gathered. A node whose cut-off has passed
fails at once without calling the model.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Any

from selectgraph.agents._agent import Agent
from selectgraph.agents._node import AgentNode
from selectgraph.nodes._spec import NodeContext
from selectgraph.research._budget import ResearchBudget
from selectgraph.state._output import NodeOutput
from selectgraph.state._views import StateView

__all__ = ["Bounded", "DeadlineReached", "deadline_of", "seconds_left", "start_deadline"]

Reserve = Callable[[Mapping[str, Any]], float]
"""Seconds a node leaves before the deadline, given the state's data."""


class DeadlineReached(TimeoutError):
    """A research step was cut (or not started) because the run's time limit was reached."""


def start_deadline(budget: ResearchBudget) -> float | None:
    """The deadline of a run starting now (seconds since the epoch), or None without a limit."""
    if budget.max_seconds is None:
        return None
    return time.time() + budget.max_seconds


def deadline_of(data: Mapping[str, Any], budget: ResearchBudget, elapsed: float) -> float | None:
    """The run's deadline: the one in its state, else ``max_seconds`` after the run began.

    ``elapsed`` is the seconds since the run began (a graph run directly, without a
    deadline in its input, counts from its own start).
    """
    stored = data.get("deadline")
    if stored is not None:
        return float(stored)
    if budget.max_seconds is None:
        return None
    return time.time() - elapsed + budget.max_seconds


def seconds_left(
    data: Mapping[str, Any], budget: ResearchBudget, elapsed: float, reserve: float = 0.0
) -> float | None:
    """Seconds until the deadline less ``reserve`` (may be negative), or None without one."""
    deadline = deadline_of(data, budget, elapsed)
    return None if deadline is None else deadline - reserve - time.time()


class Bounded:
    """An agent, as a node whose model calls end at the run's deadline less ``reserve``."""

    def __init__(self, agent: Agent, budget: ResearchBudget, reserve: Reserve) -> None:
        self.agent = agent
        self.budget = budget
        self.reserve = reserve

    @property
    def description(self) -> str:
        """What the agent does, for diagrams."""
        return self.agent.description

    def __selectgraph_node__(self, name: str, **options: Any) -> _BoundedNode:
        return _BoundedNode(self, AgentNode(self.agent, name, **options))


class _BoundedNode:
    kind = "agent"
    is_async = True
    executor_retries = False
    wants_context = True

    def __init__(self, bounded: Bounded, inner: AgentNode) -> None:
        self._bounded = bounded
        self.inner = inner
        """The agent node that makes the call."""

    @property
    def state_types(self) -> list[type]:
        """Classes this node's results may hold (the agent's output schema)."""
        return self.inner.state_types

    @property
    def description(self) -> str:
        return self.inner.description

    async def __call__(self, state: StateView, context: NodeContext | None) -> NodeOutput:
        if context is None:  # wants_context: the engine always passes one
            raise TypeError("a research node needs its node context")
        data = state.data
        reserve = self._bounded.reserve(data)
        left = seconds_left(data, self._bounded.budget, context.elapsed, reserve)
        if left is None:
            return await self.inner(state, context)
        if left <= 0:
            raise DeadlineReached(_message(self.inner.name, reserve, started=False))
        timer = asyncio.timeout(left)
        try:
            async with timer:
                return await self.inner(state, context)
        except TimeoutError as error:
            if not timer.expired():
                raise  # a timeout of the node's own (a tool's, a provider's), not the deadline
            raise DeadlineReached(_message(self.inner.name, reserve, started=True)) from error


def _message(node: str, reserve: float, *, started: bool) -> str:
    kept = f" less the {reserve:g} s kept for what follows" if reserve > 0 else ""
    if started:
        return f"{node!r} was cut at the run's time limit{kept}"
    return f"{node!r} was not started: the run's time limit{kept} had passed"
