"""Agent nodes: run an agent as a graph node — build its context and prompt, write its answer.

What an agent node writes, unless ``output_transform`` decides otherwise:

- ``state.last_output`` (and ``data[output_key]`` when set) = the answer
  (the parsed output model when the agent has an ``output_schema``, in ``output_key``);
- ``state.messages``: the answer, named after the node; in a continuous
  conversation also a transition marker and the node's tool traffic;
- the node's usage, summed into ``GraphResult.total_usage``.

Agent nodes retry through their judge only: the engine never retries them
(``executor_retries = False``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from selectgraph.agents._calls import CallScope
from selectgraph.agents._calls import scope as call_scope
from selectgraph.agents._config import AgentConfig, ContextMode
from selectgraph.agents._context import BuiltContext, build_context, well_formed
from selectgraph.agents._prompts import (
    PromptLayers,
    narrative_for,
    output_requirements,
    revision_note,
    transition_marker,
)
from selectgraph.agents._result import AgentChunk, AgentResult
from selectgraph.core._errors import SelectGraphError
from selectgraph.core._messages import Message, Role
from selectgraph.core._policies import Conversation
from selectgraph.core._serialization import schema_types
from selectgraph.core._state import CONVERSATION_SUMMARY, LAST_OUTPUT, GraphState
from selectgraph.core._usage import NO_USAGE
from selectgraph.nodes._output import read_output
from selectgraph.nodes._spec import NodeContext
from selectgraph.observe._events import NodeChunk
from selectgraph.runtime._nested import CallingNode, calling_node, forget_tool_children
from selectgraph.state._output import NodeOutput
from selectgraph.state._views import StateView, ViewWrites

if TYPE_CHECKING:
    from selectgraph.providers._base import Provider
    from selectgraph.runtime._run import Run

__all__ = ["AgentNode", "NodeAgent"]

InputTransform = Callable[[GraphState], "str | Message | Sequence[Message]"]
OutputTransform = Callable[[AgentResult, GraphState], Any]


class NodeAgent(Protocol):
    """What an agent node needs of its agent (an :class:`~selectgraph.Agent`)."""

    name: str
    config: AgentConfig
    provider: Provider

    @property
    def model(self) -> str:
        """The model the agent asks."""
        ...

    @property
    def description(self) -> str:
        """What the agent does."""
        ...

    async def execute(
        self,
        messages: Sequence[Message],
        *,
        name: str | None = None,
        goal: str = "",
        task: str = "",
        on_chunk: Callable[[AgentChunk], None] | None = None,
    ) -> AgentResult:
        """Answer ``messages``, judging included."""
        ...


class AgentNode:
    """The adapter that runs an :class:`Agent` as one node of a graph."""

    kind = "agent"
    """Shown in diagrams."""
    is_async = True
    """An agent node is awaited (it calls its model asynchronously)."""
    executor_retries = False
    """ErrorPolicy.RETRY does not apply: an agent retries through its judge instead."""
    wants_context = True
    """It is given the :class:`~selectgraph.NodeContext`."""

    def __init__(
        self,
        agent: NodeAgent,
        name: str,
        *,
        context_mode: ContextMode | str | None = None,
        context_n: int = 6,
        focus: str | None = None,
        input_transform: InputTransform | None = None,
        output_transform: OutputTransform | None = None,
        output_key: str | None = None,
        conversation: Conversation | None = None,
        feedback_on_revisit: bool = True,
    ) -> None:
        """Configure how the agent runs at this node.

        Args:
            agent: The agent.
            name: The node's name.
            context_mode: What part of the conversation it sees (default LAST_MESSAGE,
                or FULL in a continuous conversation).
            context_n: Messages kept verbatim for LAST_N and SUMMARY.
            focus: This node's own instructions (the innermost prompt layer);
                defaults to the agent's ``instructions``.
            input_transform: ``(state) -> prompt | message | messages``; replaces
                the context mode (required for ContextMode.CUSTOM).
            output_transform: ``(result, state) -> update``; replaces the default
                writes (return a mapping, a GraphState, None or goto()).
            output_key: Also write the answer (or parsed output) to ``data[output_key]``.
            conversation: Overrides the graph's conversation threading for this node.
            feedback_on_revisit: On a revisit, tell the agent which visit this is
                and what it answered before.

        Raises:
            ValueError: an option is inconsistent, naming the node.
        """
        mode = ContextMode(context_mode) if context_mode is not None else None
        if mode is ContextMode.CUSTOM and input_transform is None:
            raise ValueError(f"node {name!r}: ContextMode.CUSTOM needs an input_transform")
        if context_n < 1:
            raise ValueError(f"node {name!r}: context_n must be at least 1, got {context_n}")
        if conversation not in (None, "isolated", "continuous"):
            raise ValueError(
                f"node {name!r}: conversation must be 'isolated' or 'continuous', "
                f"got {conversation!r}"
            )
        self.agent = agent
        self.name = name
        self.context_mode = mode
        self.context_n = context_n
        self.focus = focus
        self.input_transform = input_transform
        self.output_transform = output_transform
        self.output_key = output_key
        self.conversation = conversation
        self.feedback_on_revisit = feedback_on_revisit

    @property
    def state_types(self) -> list[type]:
        """Classes this node's results may hold: the agent's output schema and what it nests."""
        schema = self.agent.config.output_schema
        return schema_types(schema) if schema is not None else []

    @property
    def description(self) -> str:
        """What this node does (its focus, else the agent's description)."""
        return (self.focus or "").strip().split("\n")[0] or self.agent.description

    async def __call__(self, state: StateView, context: NodeContext | None) -> NodeOutput:
        assert context is not None
        run: Run = context.runtime
        settings = run.graph.settings
        conversation = self.conversation or settings.conversation
        continuous = conversation == "continuous"

        built = await self._context(state, context, continuous, settings.compact_at_tokens)
        layers = self._layers(state, context, run)
        marker = (
            transition_marker(self._previous_node(state), self.name, self._own_focus())
            if continuous
            else None
        )
        system = layers.message()
        # The marker joins a trailing user turn, so turns still alternate.
        turns = well_formed([*built.messages, *([marker] if marker else [])])
        messages = [*([system] if system else []), *turns]
        on_chunk = None
        entered = None
        if run.recorder.live:
            on_chunk = self._chunk_handler(run, context)
        if run.recorder.records_calls:
            # The agent's model and tool calls are recorded as this node's.
            entered = call_scope().set(
                CallScope(run.recorder, context.step, self.name, self.agent.name)
            )
        where, task = self._node_call(context, run)
        calling = calling_node.set(where)
        try:
            result = await self.agent.execute(
                messages,
                name=self.name,
                goal=context.goal,
                task=self._task(state),
                on_chunk=on_chunk,
            )
        except Exception as error:
            if task is not None:
                run.task_done(task)  # a retry asks the model again, it does not replay
                forget_tool_children(run, task)
            if where.usage.calls and isinstance(error, SelectGraphError):
                # What the tools' graphs spent is spent too (the engine counts error.usage).
                error.usage = (getattr(error, "usage", None) or NO_USAGE) + where.usage  # type: ignore[attr-defined]
            raise
        finally:
            calling_node.reset(calling)
            if entered is not None:
                call_scope().reset(entered)
        if task is not None:
            run.task_done(task)  # the visit finished: its replay memory is spent
            forget_tool_children(run, task)
        usage = result.usage + built.usage + where.usage
        if self.output_transform is not None:
            raw = self.output_transform(result, state)
            if inspect.isawaitable(raw):
                raw = await raw
            output = read_output(raw, state, run.graph.nodes[self.name])
            _own_entry_once(output, self.name)
            if built.summary is not None:  # the rolling summary is engine bookkeeping
                output.update = {**output.update, CONVERSATION_SUMMARY: built.summary}
        else:
            output = NodeOutput(
                self._update(result, built), self._messages(result, marker, continuous)
            )
        output.usage = usage if output.usage is None else output.usage + usage
        output.agent_result = result
        return output

    def _node_call(self, context: NodeContext, run: Run) -> tuple[CallingNode, str | None]:
        """What the agent's tools see of this node; with a memo when a tool may pause the run."""
        tools = getattr(self.agent, "tools", None) or {}
        pausable = any(getattr(tool, "may_interrupt", False) for tool in tools.values())
        if not pausable or not hasattr(run, "memo_for"):
            return CallingNode(context), None
        task = run.task_id(context.node, context.branch)
        return CallingNode(context, memo=run.memo_for(task)), task

    # ------------------------------------------------------------ context
    async def _context(
        self, state: StateView, context: NodeContext, continuous: bool, compact_at: int
    ) -> BuiltContext:
        if self.input_transform is not None:
            raw = self.input_transform(state)
            if inspect.isawaitable(raw):
                raw = await raw
            if isinstance(raw, str):
                return BuiltContext(messages=[Message.user(raw)])
            if isinstance(raw, Message):
                return BuiltContext(messages=[raw])
            return BuiltContext(messages=list(raw))
        mode = self.context_mode or (ContextMode.FULL if continuous else ContextMode.LAST_MESSAGE)
        return await build_context(
            state,
            mode=mode,
            n=self.context_n,
            me=self.name,
            provider=self.agent.provider,
            model=self.agent.model,
            compact_at_tokens=compact_at if continuous else None,
        )

    def _layers(self, state: StateView, context: NodeContext, run: Run) -> PromptLayers:
        config = self.agent.config
        schema = config.output_schema
        parts = [
            self.focus if self.focus is not None else config.instructions,
            output_requirements(schema.model_json_schema() if schema else None),
        ]
        if self.feedback_on_revisit and context.visit > 1:
            previous = context.previous.content if context.previous is not None else None
            parts.append(revision_note(self.name, context.visit, previous))
        goal = context.goal or self._user_request(state)
        return PromptLayers(
            identity=config.identity,
            narrative=narrative_for(goal, run.graph.name, self.name, list(run.graph.nodes)),
            focus="\n\n".join(part for part in parts if part),
        )

    def _own_focus(self) -> str:
        return self.focus if self.focus is not None else self.agent.config.instructions

    def _task(self, state: StateView) -> str:
        """What a judge is told the node was asked: the user's request and this step."""
        request = self._user_request(state)
        focus = self._own_focus().strip()
        return "\n".join(part for part in (request, f"This step: {focus}" if focus else "") if part)

    @staticmethod
    def _user_request(state: StateView) -> str:
        """Without a graph goal, the user's first message is the best statement of it."""
        for message in state.messages:
            if message.role is Role.USER and not message.metadata.get("transition"):
                return f"The user's request: {message.text}"
        return ""

    @staticmethod
    def _previous_node(state: StateView) -> str | None:
        history = state.history
        return history[-1][0] if len(history) else None

    # ------------------------------------------------------------- output
    def _update(self, result: AgentResult, built: BuiltContext) -> dict[str, Any]:
        update: dict[str, Any] = {LAST_OUTPUT: result.content}
        if self.output_key is not None:
            update[self.output_key] = result.output if result.output is not None else result.content
        if built.summary is not None:
            update[CONVERSATION_SUMMARY] = built.summary
        return update

    def _messages(
        self, result: AgentResult, marker: Message | None, continuous: bool
    ) -> ViewWrites:
        if continuous:
            # The thread keeps everything: the hand-over, tool traffic, the answer.
            added = [*([marker] if marker else []), *result.new_messages]
        else:
            # Only the answer: the node's tool traffic and retries stay private.
            added = [Message.assistant(result.content, name=self.name)]
        return ViewWrites(messages=added)

    def _chunk_handler(self, run: Run, context: NodeContext) -> Callable[[AgentChunk], None]:
        def forward(chunk: AgentChunk) -> None:
            if chunk.delta:
                run.recorder.record(NodeChunk, context.step, self.name, chunk.delta)

        return forward


def _own_entry_once(output: NodeOutput, name: str) -> None:
    """Drop history entries an output_transform appended for its own node.

    The engine records one entry per visit; seed 004's example transform appends
    ``(state.current_node, result)`` itself, which would record the visit twice.
    """
    writes = output.writes
    if writes is not None and writes.history:
        writes.history = [
            entry
            for entry in writes.history
            if not (isinstance(entry, tuple) and entry and entry[0] == name)
        ]
