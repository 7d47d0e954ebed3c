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
from selectgraph.graph._directives import Directive
from selectgraph.graph._nodes import NodeContext
from selectgraph.graph._output import NodeOutput
from selectgraph.graph._state import GraphState
from selectgraph.graph._views import StateView
from selectgraph.supervisor._schemas import PlanStep, StepRecord

__all__ = ["Answer", "Prompt", "SupervisorCall", "plan_of", "steps_of"]

Prompt = Callable[[GraphState], str]
"""Builds the call's prompt from the state."""
Answer = Callable[[Any, GraphState, NodeContext], "Mapping[str, Any] | Directive"]
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
        assert context is not None
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
    """The turns recorded so far (restored checkpoints may hold them as plain dicts)."""
    return [
        step if isinstance(step, StepRecord) else StepRecord.model_validate(step)
        for step in state.data.get("steps") or ()
    ]


def plan_of(state: GraphState) -> list[PlanStep]:
    """The current plan's steps."""
    return [
        step if isinstance(step, PlanStep) else PlanStep.model_validate(step)
        for step in state.data.get("plan") or ()
    ]


def as_text(value: Any) -> str:
    """A turn's output as text: strings as they are, models as JSON, None as nothing."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return str(value)
