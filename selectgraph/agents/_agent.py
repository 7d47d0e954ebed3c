"""Agent: a model with tools, a layered prompt and an optional judge; runs alone or as a node."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any, TypeGuard, cast

from pydantic import ValidationError

from selectgraph.agents._calls import call_model, tool_finished, tool_started
from selectgraph.agents._config import AgentConfig
from selectgraph.agents._defaults import default_provider
from selectgraph.agents._judge import Judge, JudgeEscalated, JudgeRequest, as_judge
from selectgraph.agents._prompts import PromptLayers, output_requirements
from selectgraph.agents._replay import replay_for
from selectgraph.agents._result import AgentChunk, AgentResult
from selectgraph.agents._structured import parse_answer
from selectgraph.agents._tools import RunnableTool, Tool, ToolDefinitionError, Toolset
from selectgraph.agents._verdict import JudgeDecision, Verdict
from selectgraph.core._errors import SelectGraphError
from selectgraph.core._messages import Message, Role, ToolCall
from selectgraph.core._sync import run_sync
from selectgraph.core._usage import NO_USAGE, Usage
from selectgraph.providers._base import (
    Completion,
    CompletionRequest,
    Provider,
    ResponseFormat,
    ToolChoice,
)
from selectgraph.runtime._nested import calling_node, tool_slot

__all__ = ["Agent", "AgentInput", "AgentOutputError"]

AgentInput = str | Message | Sequence[Message]
"""What an agent answers: a prompt, a message, or a conversation."""

ChunkHandler = Callable[[AgentChunk], None]


class AgentOutputError(SelectGraphError):
    """The model's answer did not match ``output_schema``, even after re-asking."""

    def __init__(self, message: str, *, content: str) -> None:
        super().__init__(message)
        self.content = content
        """The last answer, as the model wrote it."""


@dataclass(slots=True)
class _Turns:
    """What one run accumulates across model calls and judge attempts."""

    conversation: list[Message]
    new: list[Message] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = NO_USAGE
    iterations: int = 0

    def add(self, message: Message) -> None:
        self.conversation.append(message)
        self.new.append(message)


def _as_messages(value: AgentInput) -> list[Message]:
    if isinstance(value, str):
        return [Message.user(value)]
    if isinstance(value, Message):
        return [value]
    return list(value)


def _last_user_text(messages: Sequence[Message]) -> str:
    for message in reversed(messages):
        if message.role is Role.USER:
            return message.text
    return ""


class Agent:
    """A model, its tools, and how it should behave.

    Example:
        >>> from selectgraph import Agent, AgentConfig
        >>> from selectgraph.testing import ScriptedProvider
        >>> agent = Agent(AgentConfig(name="greeter"), provider=ScriptedProvider(["Hello!"]))
        >>> agent.run("Say hello").content
        'Hello!'
    """

    def __init__(
        self,
        config: AgentConfig | None = None,
        *,
        provider: Provider | None = None,
        tools: Sequence[RunnableTool | Toolset | Callable[..., Any]] = (),
        judge: Judge | Callable[..., Any] | None = None,
        judge_attempts: int = 3,
        name: str | None = None,
    ) -> None:
        """Create an agent.

        Args:
            config: Model and behaviour settings (defaults: the provider's model).
            provider: Who answers (default: LocalProvider offline, or OpenAI/Anthropic
                when their key is set; see ``SELECTGRAPH_PROVIDER``).
            tools: Tools or plain typed functions the model may call, graphs made
                tools (``graph.as_tool(...)``), and toolsets (``MCPTools``) whose
                tools are listed when a run starts.
            judge: Reviews each answer: ACCEPT, RETRY with feedback, or ESCALATE.
            judge_attempts: Answers a judge may see before RETRY turns into escalation.
            name: The agent's name (overrides ``config.name``).

        Raises:
            ValueError: two tools share a name, or ``judge_attempts`` < 1.
        """
        self.config = config or AgentConfig()
        self.provider: Provider = provider or default_provider()
        self.tools: dict[str, RunnableTool] = {}
        self.toolsets: list[Toolset] = []
        """Tool providers listed when an answer starts (an :class:`~selectgraph.MCPTools`)."""
        for item in tools:
            if isinstance(item, Toolset):
                self.toolsets.append(item)
                continue
            candidate: RunnableTool
            if _is_runnable(item):
                candidate = item
            else:
                candidate = Tool.from_function(cast("Callable[..., Any]", item))
            if candidate.name in self.tools:
                raise ValueError(f"two tools are named {candidate.name!r}; tool names must differ")
            self.tools[candidate.name] = candidate
        self.judge = as_judge(judge) if judge is not None else None
        if judge_attempts < 1:
            raise ValueError("judge_attempts must be at least 1")
        self.judge_attempts = judge_attempts
        self.name = name or self.config.name or "agent"

    @property
    def model(self) -> str:
        """The model this agent asks."""
        return self.config.model or self.provider.default_model

    @property
    def description(self) -> str:
        """What the agent does (its instructions, else its identity), for diagrams and routing."""
        return (self.config.instructions or self.config.identity).strip().split("\n")[0]

    def __repr__(self) -> str:
        return f"Agent(name={self.name!r}, model={self.model!r}, tools={list(self.tools)})"

    # ------------------------------------------------------------- entry points
    def system_layers(self) -> PromptLayers:
        """The prompt layers this agent uses on its own (identity and instructions)."""
        schema = self.config.output_schema
        focus = "\n\n".join(
            part
            for part in (
                self.config.instructions,
                output_requirements(schema.model_json_schema() if schema else None),
            )
            if part
        )
        return PromptLayers(identity=self.config.identity, focus=focus)

    async def arun(self, input: AgentInput) -> AgentResult:
        """Answer ``input`` (tool calls, structured output and judging included).

        Raises:
            ProviderError: the model call failed for good.
            AgentOutputError: the answer never matched ``output_schema``.
            JudgeEscalated: the judge escalated or kept asking for retries.
        """
        return await self.execute(self._conversation(input))

    def run(self, input: AgentInput) -> AgentResult:
        """Blocking :meth:`arun`."""
        return run_sync(self.arun(input))

    async def astream(self, input: AgentInput) -> AsyncIterator[AgentChunk]:
        """Answer ``input``, yielding text as it arrives; the last chunk carries the result."""
        queue: asyncio.Queue[AgentChunk | None] = asyncio.Queue()
        task = asyncio.ensure_future(
            self.execute(self._conversation(input), on_chunk=queue.put_nowait)
        )
        task.add_done_callback(lambda _: queue.put_nowait(None))
        try:
            while (chunk := await queue.get()) is not None:
                yield chunk
            yield AgentChunk(result=task.result())
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    def _conversation(self, input: AgentInput) -> list[Message]:
        system = self.system_layers().message()
        return [*([system] if system else []), *_as_messages(input)]

    # ------------------------------------------------------------------ core
    async def execute(
        self,
        messages: Sequence[Message],
        *,
        name: str | None = None,
        goal: str = "",
        task: str = "",
        on_chunk: ChunkHandler | None = None,
    ) -> AgentResult:
        """Answer the conversation ``messages`` (system prompt included), judging included.

        This is what ``arun`` and agent nodes call.

        Args:
            messages: The whole prompt.
            name: The name on the answer's messages (a node name; default the agent's).
            goal: The graph's goal, passed to the judge.
            task: What the judge is told the agent was asked (default: the last
                user message).
            on_chunk: Receives text deltas and tool activity as they happen.
        """
        started = perf_counter()
        turns = _Turns(conversation=list(messages))
        author = name or self.name
        task = task or _last_user_text(messages)
        try:
            return await self._attempts(turns, author, task, goal, on_chunk, started)
        except SelectGraphError as error:
            # Whatever was spent before the failure is still spent: the engine
            # adds error.usage to the node's and the run's usage.
            if getattr(error, "usage", None) is None:
                error.usage = turns.usage  # type: ignore[attr-defined]
            raise

    async def _attempts(
        self,
        turns: _Turns,
        author: str,
        task: str,
        goal: str,
        on_chunk: ChunkHandler | None,
        started: float,
    ) -> AgentResult:
        """Answer, have the judge look, and answer again until accepted or escalated."""
        verdicts: list[Verdict] = []
        attempt = 0
        while True:
            attempt += 1
            content, output, last = await self._answer(turns, author, on_chunk)
            result = AgentResult(
                content=content,
                output=output,
                messages=tuple(turns.conversation),
                new_messages=tuple(turns.new),
                tool_calls=tuple(turns.tool_calls),
                usage=turns.usage,
                model=self.model,
                duration_ms=(perf_counter() - started) * 1000,
                iterations=turns.iterations,
                attempts=attempt,
                verdicts=tuple(verdicts),
                finish_reason=last.finish_reason,
                structured_mode=last.structured_mode,
            )
            if self.judge is None:
                return result
            verdict = await self._verdict(
                JudgeRequest(task=task, answer=result, attempt=attempt, goal=goal)
            )
            verdicts.append(verdict)
            if verdict.usage is not None:
                turns.usage = turns.usage + verdict.usage
            if verdict.decision is JudgeDecision.ACCEPT:
                return dataclasses.replace(
                    result,
                    usage=turns.usage,
                    verdicts=tuple(verdicts),
                    duration_ms=(perf_counter() - started) * 1000,
                )
            if verdict.decision is JudgeDecision.ESCALATE or attempt >= self.judge_attempts:
                result = dataclasses.replace(result, usage=turns.usage, verdicts=tuple(verdicts))
                why = (
                    f"the judge escalated: {verdict.feedback}"
                    if verdict.decision is JudgeDecision.ESCALATE
                    else f"the judge still asked for a retry after {attempt} attempts: "
                    f"{verdict.feedback}"
                )
                escalation = JudgeEscalated(
                    f"agent {author!r}: {why}", result=result, verdicts=tuple(verdicts)
                )
                escalation.usage = turns.usage  # type: ignore[attr-defined]
                raise escalation
            turns.add(
                Message.user(
                    f"A reviewer asked for changes: {verdict.feedback}\nRevise your answer.",
                    metadata={"judge_feedback": True},
                )
            )

    async def _answer(
        self, turns: _Turns, author: str, on_chunk: ChunkHandler | None
    ) -> tuple[str, Any, Completion]:
        """Call the model until it answers in text, running the tools it asks for.

        Returns:
            The answer's text, its parsed ``output_schema`` instance (or ``None``),
            and the completion that gave it.
        """
        config = self.config
        schema = config.output_schema
        response_format = (
            ResponseFormat(name=schema.__name__, json_schema=schema.model_json_schema())
            if schema is not None
            else None
        )
        available = await self._available_tools()
        specs = tuple(t.spec for t in available.values())
        tool_rounds = 0
        output_retries = 0
        while True:
            must_answer = tool_rounds >= config.max_tool_iterations
            choice: ToolChoice | None = "none" if must_answer else None
            if not must_answer and tool_rounds == 0 and not turns.new:
                choice = config.tool_choice
            request = CompletionRequest(
                model=self.model,
                messages=tuple(turns.conversation),
                tools=specs,
                tool_choice=choice if specs else None,
                response_format=response_format,
                temperature=config.temperature,
                max_tokens=config.max_tokens,
                max_tokens_fits_budget=config.default_max_tokens,
                extra=dict(config.extra or {}),
            )
            completion = await self._complete(request, on_chunk)
            turns.iterations += 1
            turns.usage = turns.usage + completion.usage
            reply = completion.message.model_copy(update={"name": author})
            turns.add(reply)
            if reply.tool_calls:
                await self._run_tools(
                    turns, reply.tool_calls, available, on_chunk, run=not must_answer
                )
                tool_rounds += 1
                if not must_answer:
                    continue
            content = reply.text
            if schema is None:
                return content, None, completion
            try:
                return content, parse_answer(schema, content), completion
            except ValidationError as exc:
                if output_retries >= config.max_output_retries:
                    raise AgentOutputError(
                        f"agent {author!r}: the answer does not match {schema.__name__} after "
                        f"{output_retries + 1} attempts: {_errors(exc)}",
                        content=content,
                    ) from exc
                output_retries += 1
                turns.add(
                    Message.user(
                        f"Your answer does not match the required JSON schema ({_errors(exc)}). "
                        "Reply again with only the corrected JSON object."
                    )
                )

    async def _complete(
        self, request: CompletionRequest, on_chunk: ChunkHandler | None
    ) -> Completion:
        replay = replay_for(calling_node.get())
        if replay is not None:
            saved = replay.completion(request)
            if saved is not None:
                return saved
        if on_chunk is None:
            completion = await call_model(self.provider, request)
        else:
            completion = await call_model(
                self.provider, request, lambda delta: on_chunk(AgentChunk(delta=delta))
            )
        if replay is not None:
            replay.keep_completion(request, completion)
        return completion

    async def _available_tools(self) -> Mapping[str, RunnableTool]:
        """The Python tools and the toolsets' tools (listed now; each toolset caches them).

        Raises:
            ToolDefinitionError: a toolset's tool has the name of another tool.
        """
        if not self.toolsets:
            return self.tools
        available: dict[str, RunnableTool] = dict(self.tools)
        for toolset in self.toolsets:
            for found in await toolset.list_tools():
                if found.name in available:
                    raise ToolDefinitionError(
                        f"agent {self.name!r}: {toolset!r} offers a tool named {found.name!r}, "
                        "and another tool has that name; give the toolset a prefix=... "
                        "or exclude=[...] it"
                    )
                available[found.name] = found
        return available

    async def _run_tools(
        self,
        turns: _Turns,
        calls: Sequence[ToolCall],
        available: Mapping[str, RunnableTool],
        on_chunk: ChunkHandler | None,
        *,
        run: bool,
    ) -> None:
        turns.tool_calls.extend(calls)
        if on_chunk is not None:
            for call in calls:
                on_chunk(AgentChunk(tool_call=call))
        if run:
            # Every call finishes before a question one of them asked pauses the run,
            # so the others' results are memoized and not run again on resume.
            replay = replay_for(calling_node.get())
            turn = replay.turn() if replay is not None else None
            outcomes = await asyncio.gather(
                *(
                    self._run_tool(call, available, None if turn is None else (turn, position))
                    for position, call in enumerate(calls)
                ),
                return_exceptions=True,
            )
            for outcome in outcomes:
                if isinstance(outcome, BaseException):
                    raise outcome
            results = [outcome for outcome in outcomes if isinstance(outcome, Message)]
        else:
            # Answer every call so the conversation stays well formed for the provider.
            results = [
                Message.tool(
                    call.id,
                    "not run: the tool-call limit was reached; answer with what you have",
                    name=call.name,
                    is_error=True,
                )
                for call in calls
            ]
        for message in results:
            turns.add(message)
            if on_chunk is not None:
                on_chunk(AgentChunk(tool_result=message))

    async def _run_tool(
        self,
        call: ToolCall,
        available: Mapping[str, RunnableTool],
        slot: tuple[int, int] | None,
    ) -> Message:
        """Run one call (in its own task); with a slot, its result is memoized for a resume."""
        replay = replay_for(calling_node.get())
        key = f"{slot[0]}:{slot[1]}" if slot is not None else ""
        if replay is not None and slot is not None:
            saved = replay.tool_result(key)
            if saved is not None:
                return saved
        if getattr(available.get(call.name), "may_interrupt", False):
            tool_slot.set(slot)  # this task's own context: the graph tool reads it
        else:
            # An agent a plain tool runs is not this node's: it must not take its memo.
            calling_node.set(None)
        started = tool_started(call)
        message = await self._tool_answer(call, available)
        tool_finished(started, call, message)
        if replay is not None and slot is not None:
            replay.keep_tool_result(key, message)
        return message

    async def _verdict(self, request: JudgeRequest) -> Verdict:
        """The judge's verdict, replayed when this answer had one before a pause."""
        assert self.judge is not None
        replay = replay_for(calling_node.get())
        if replay is not None:
            saved = replay.verdict(request.attempt)
            if saved is not None:
                return saved
        verdict = await self.judge.evaluate(request)
        if replay is not None:
            replay.keep_verdict(request.attempt, verdict)
        return verdict

    async def _tool_answer(self, call: ToolCall, available: Mapping[str, RunnableTool]) -> Message:
        tool = available.get(call.name)
        if tool is None:
            known = ", ".join(available) or "none"
            return Message.tool(
                call.id,
                f"there is no tool named {call.name!r}; available tools: {known}",
                name=call.name,
                is_error=True,
            )
        return await tool.execute(call)

    # ------------------------------------------------------------- graph node
    def __selectgraph_node__(self, name: str, **options: Any) -> Any:
        from selectgraph.agents._node import AgentNode

        return AgentNode(self, name, **options)


def _is_runnable(item: object) -> TypeGuard[RunnableTool]:
    """A Tool, or an object that runs calls as one does (a graph's ``as_tool()``)."""
    return isinstance(item, Tool) or (
        hasattr(item, "spec") and hasattr(item, "name") and callable(getattr(item, "execute", None))
    )


def _errors(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'value'}: {err['msg']}" for err in exc.errors()
    )
