"""Supervisor calls: the supervisor's own model calls, each a node of the supervised graph.

A call is an agent node (so its model call is budgeted, traced, streamed and
counted like any other) whose prompt is built from the state and whose
structured answer is turned into the state update and the routing decision
by a function of the strategy's. That function also receives the node's
context, so it can publish events such as ``SupervisorReplanned``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel

from selectgraph.agents._agent import Agent
from selectgraph.agents._node import AgentNode
from selectgraph.core._models import as_models
from selectgraph.core._state import GraphState
from selectgraph.nodes._spec import NodeContext
from selectgraph.observe._events import SupervisorReplanned
from selectgraph.routing._directives import Directive
from selectgraph.state._output import NodeOutput
from selectgraph.state._views import StateView
from selectgraph.supervisor._schemas import PlanStep, StepRecord

__all__ = ["Answer", "Prompt", "SupervisorCall", "announce_replan", "plan_of", "steps_of"]

Prompt = Callable[[GraphState], str]
"""Builds the call's prompt from the state."""
Answer = Callable[[Any, StateView, NodeContext], "Mapping[str, Any] | Directive"]
"""Turns the parsed answer (a model instance, or text) into an update or a goto()."""


class SupervisorCall:
    """A node that asks the supervisor's model and acts on the answer."""

    def __init__(self, agent: Agent, prompt: Prompt, answer: Answer) -> None:
        self.agent = agent
        self.prompt = prompt
        self.answer = answer

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
        self.inner = AgentNode(call.agent, name, input_transform=call.prompt)
        """The agent node that makes the call (its output schema is allowed in checkpoints)."""

    @property
    def description(self) -> str:
        return self._call.description

    async def __call__(self, state: StateView, context: NodeContext | None) -> NodeOutput:
        if context is None:  # wants_context: the engine always passes one
            raise TypeError("a supervisor call needs its node context")
        output = await self.inner(state, context)
        result = output.agent_result
        parsed = result.output if result.output is not None else result.content
        decided = self._call.answer(parsed, state, context)
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
