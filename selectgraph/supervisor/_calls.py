"""Supervisor calls: the supervisor's own model calls, each a node of the supervised graph.

A call is an agent node (so its model call is budgeted, traced, streamed and
counted like any other) whose prompt is built from the state and whose
structured answer is turned into the state update and the routing decision
by a function of the strategy's. That function also receives the node's
context, so it can publish events such as ``SupervisorReplanned``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from selectgraph.agents._agent import Agent, AgentOutputError
from selectgraph.agents._node import AgentNode
from selectgraph.core._errors import ProviderError
from selectgraph.core._models import as_models
from selectgraph.core._state import GraphState
from selectgraph.core._usage import Usage
from selectgraph.nodes._spec import NodeContext
from selectgraph.observe._events import SupervisorReplanned
from selectgraph.routing._directives import Directive
from selectgraph.state._output import NodeOutput
from selectgraph.state._views import StateView
from selectgraph.supervisor._schemas import PlanStep, StepRecord

__all__ = [
    "Answer",
    "CallLimits",
    "Fallback",
    "Prompt",
    "SupervisorCall",
    "announce_replan",
    "plan_of",
    "steps_of",
]

Prompt = Callable[[GraphState], str]
"""Builds the call's prompt from the state."""
Answer = Callable[[Any, StateView, NodeContext], "Mapping[str, Any] | Directive"]
"""Turns the parsed answer (a model instance, or text) into an update or a goto()."""
Fallback = Callable[[str, StateView, NodeContext], "Mapping[str, Any] | Directive"]
"""What to do when no usable answer came, given why (an update or a goto())."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CallLimits:
    """How long one supervisor call may take, and how often it is tried again."""

    timeout: float | None
    """Seconds one call may take, the provider's own retries included (None: no limit)."""
    retries: int
    """Further tries after a call timed out or its provider failed."""


class SupervisorCall:
    """A node that asks the supervisor's model and acts on the answer.

    When no usable answer comes (it does not validate even after JSON repair and
    the agent's re-ask, the provider fails, or the call runs past its timeout
    after every try), ``fallback`` decides instead, told why.
    """

    def __init__(
        self,
        agent: Agent,
        prompt: Prompt,
        answer: Answer,
        fallback: Fallback,
        limits: CallLimits,
    ) -> None:
        self.agent = agent
        self.prompt = prompt
        self.answer = answer
        self.fallback = fallback
        self.limits = limits

    @property
    def description(self) -> str:
        """What the node does, for diagrams."""
        return self.agent.description

    def __selectgraph_node__(self, name: str) -> _SupervisorCallAdapter:
        return _SupervisorCallAdapter(self, name)


class _SupervisorCallAdapter:
    kind = "agent"
    is_async = True
    executor_retries = False  # a malformed answer is re-asked by the agent itself
    wants_context = True

    def __init__(self, call: SupervisorCall, name: str) -> None:
        self._call = call
        self._name = name
        self.inner = AgentNode(call.agent, name, input_transform=call.prompt)
        """The agent node that makes the call (its output schema is allowed in checkpoints)."""

    @property
    def description(self) -> str:
        return self._call.description

    async def __call__(self, state: StateView, context: NodeContext | None) -> NodeOutput:
        if context is None:  # wants_context: the engine always passes one
            raise TypeError("a supervisor call needs its node context")
        limits = self._call.limits
        usage = Usage()
        why = ""
        for _ in range(limits.retries + 1):
            try:
                async with asyncio.timeout(limits.timeout):
                    output = await self.inner(state, context)
            except AgentOutputError as error:
                usage = _plus(usage, error)
                why = f"its answer did not validate, even after repair and a re-ask: {error}"
                break  # the agent has re-asked already
            except ProviderError as error:
                usage = _plus(usage, error)
                why = f"its model call failed: {type(error).__name__}: {error}"
            except TimeoutError:
                why = f"no answer within call_timeout={limits.timeout} s"
            else:
                return self._decided(output, state, context)
        decided = self._call.fallback(
            f"the supervisor's {self._name!r} call: {why}", state, context
        )
        return _as_output(NodeOutput(usage=usage), decided)

    def _decided(self, output: NodeOutput, state: StateView, context: NodeContext) -> NodeOutput:
        result = output.agent_result
        parsed = result.output if result.output is not None else result.content
        return _as_output(output, self._call.answer(parsed, state, context))


def _plus(usage: Usage, error: BaseException) -> Usage:
    spent = getattr(error, "usage", None)
    return usage + spent if isinstance(spent, Usage) else usage


def _as_output(output: NodeOutput, decided: Mapping[str, Any] | Directive) -> NodeOutput:
    if isinstance(decided, Directive):
        output.update = dict(decided.values)
        output.goto = decided.target
    else:
        output.update = dict(decided)
    return output


def steps_of(state: GraphState) -> list[StepRecord]:
    """The turns recorded so far."""
    return as_models(state.data.get("steps"), StepRecord)


def plan_of(state: GraphState) -> list[PlanStep]:
    """The current plan's steps."""
    return as_models(state.data.get("plan"), PlanStep)


def announce_replan(context: NodeContext, stall_count: int, new_plan: str, reason: str) -> None:
    """Publish ``SupervisorReplanned`` (``on_supervisor_replan`` for AgentObservers)."""
    context.publish(
        SupervisorReplanned,
        stall_count=stall_count,
        new_plan=new_plan,
        node=context.node,
        reason=reason,
    )


def as_text(value: Any) -> str:
    """A turn's output as text: strings as they are, models as JSON, None as nothing."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return str(value)
