"""A graph an agent calls as a tool: ``graph.as_tool(name, description, input_schema)``.

Inside a graph run (the agent is a node's), the graph runs as a child of that
node, as a subgraph does: its model calls count against the run's budgets and
its usage is added to the node's, its events are nested under the node (their
namespace is the node's, then ``<tool>.call<n>-<i>``: the ``i``-th call of the
agent's ``n``-th model answer), and a question one of its
generator nodes asks pauses the whole run. Answered, the agent's node replays
its model answers and finished tool calls from memory and the paused graph
continues at its yield.

Called outside a graph run (``agent.run(...)`` on its own), the graph runs on
its own; a question it asks cannot be answered there, so it comes back to the
model as an error result.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol

from pydantic import BaseModel, ValidationError

from selectgraph.compile._outside import final_output, text_state
from selectgraph.core._errors import SelectGraphError
from selectgraph.core._messages import Message, tool_content
from selectgraph.core._run_errors import GraphRunError
from selectgraph.providers._base import ToolSpec
from selectgraph.runtime._nested import calling_node, run_child, tool_slot
from selectgraph.runtime._start import prepare_state

if TYPE_CHECKING:
    from selectgraph.core._messages import ToolCall
    from selectgraph.core._result import GraphResult

__all__ = ["GraphTool", "TOOL_INPUT"]

_TOOL_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_.-]")
TOOL_INPUT: Final = "input"
"""The argument a graph tool without an ``input_schema`` takes: the text to run on."""


class ToolGraph(Protocol):
    """A graph as a tool runs it: its compiled form, and a run on its own."""

    def _compiled_graph(self) -> Any:
        """The compiled graph (a GraphProgram)."""
        ...

    async def arun(self, input: Any) -> GraphResult:
        """Run to the end (or a question) on its own."""
        ...


class GraphTool:
    """A compiled graph (or a supervisor) offered to a model as one tool.

    Make one with ``graph.as_tool(...)``; give it to an agent like any tool:
    ``Agent(..., tools=[research.as_tool("research", "Answer a question")])``.
    """

    may_interrupt: Final = True
    """A question asked inside the graph pauses the calling run (agents memoize for it)."""

    def __init__(
        self,
        graph: ToolGraph,
        *,
        name: str | None = None,
        description: str | None = None,
        input_schema: type[BaseModel] | Mapping[str, Any] | None = None,
        text_input: Callable[[str], Any] | None = None,
        output: Callable[[GraphResult], Any] | None = None,
    ) -> None:
        """Describe ``graph`` as a tool.

        Args:
            graph: The graph to run (an AgentGraph is compiled now).
            name: The name the model calls it by (default: the graph's name).
            description: What it does, for the model (default: the graph's description).
            input_schema: Its arguments: a Pydantic model (validated; its fields are
                the state the run starts from) or a JSON schema dict (the arguments
                are the state). Default: one string argument, ``input``, which becomes
                the run's input as text (the graph's input field, else its first
                user message).
            text_input: How the ``input`` text becomes the run's input (a
                supervisor's task); default as above.
            output: What goes back to the model from the finished run (default: its
                last output, else its last assistant message, else its data).

        Raises:
            ValueError: the name is not 1-64 letters, digits, '_' or '-', there is no
                description, or ``input_schema`` is neither a model nor an object schema.
        """
        self.graph = graph
        """The graph as given (it runs on its own outside a graph run)."""
        self.program = graph._compiled_graph()
        """Its compiled form (what runs inside a graph run)."""
        tool_name = name if name is not None else _UNSAFE.sub("_", self.program.name)[:64]
        if not _TOOL_NAME.fullmatch(tool_name):
            raise ValueError(
                f"graph {self.program.name!r}: tool name {tool_name!r} must be 1-64 letters, "
                "digits, '_' or '-'; pass as_tool(name=...)"
            )
        about = (description if description is not None else _description(self.program)).strip()
        if not about:
            raise ValueError(
                f"graph {self.program.name!r} has no description for the model to choose it by; "
                "pass as_tool(description=...)"
            )
        self._name = tool_name
        self._model = input_schema if isinstance(input_schema, type) else None
        self._spec = ToolSpec(
            name=tool_name, description=about, parameters=_parameters(tool_name, input_schema)
        )
        self._takes_text = input_schema is None
        self._text_input = text_input or (lambda text: text_state(self.program, text))
        self._output = output or final_output

    @property
    def name(self) -> str:
        """The name the model calls the tool by."""
        return self._name

    @property
    def spec(self) -> ToolSpec:
        """The tool as a model sees it."""
        return self._spec

    def __repr__(self) -> str:
        return f"GraphTool(name={self._name!r}, graph={self.program.name!r})"

    async def execute(self, call: ToolCall) -> Message:
        """Run the graph for one call; its answer (or what went wrong) is the result.

        Raises:
            NodeInterrupt: a node inside asked a question (inside a graph run): the
                calling run pauses, and continues this graph when it is answered.
        """
        try:
            start = self._input(call.arguments)
        except ValueError as bad:
            return self._error(call, f"invalid arguments: {bad}")
        where = calling_node.get()
        if where is None:
            return await self._run_alone(call, start)
        try:
            state = prepare_state(self.program, start)
        except SelectGraphError as bad:
            return self._error(call, f"invalid arguments: {bad}")
        slot = tool_slot.get()
        # Stable on replay and distinct per call: the answer that asked and the position.
        place = f"call{slot[0]}-{slot[1]}" if slot is not None else _escaped(call.id)
        part = f"{self._name}.{place}"  # another tool at that place is another child
        # The graph's own agents are not the caller: they must not take its memo.
        entered = calling_node.set(None)
        try:
            _, result = await run_child(self.program, state, where.context, call=part)
        except GraphRunError as failed:
            usage = failed.result.total_usage if failed.result is not None else None
            if usage is not None:
                where.add(usage)
            return self._error(call, str(failed))
        finally:
            calling_node.reset(entered)
        where.add(result.total_usage)
        if slot is not None and where.memo is not None:
            # Replayed with the result after a resume, so it is counted again then.
            where.memo[f"usage:{slot[0]}:{slot[1]}"] = result.total_usage.to_dict()
        return self._answer(call, result)

    # ------------------------------------------------------------------ parts
    def _input(self, arguments: Mapping[str, Any]) -> Any:
        """The run's input from the model's arguments.

        Raises:
            ValueError: they do not match the tool's parameters (the message says how).
        """
        if self._takes_text:
            text = arguments.get(TOOL_INPUT)
            if not isinstance(text, str):
                raise ValueError(f"{TOOL_INPUT!r} must be a string, got {_kind(text)}")
            return self._text_input(text)
        if self._model is not None:
            try:
                return dict(self._model.model_validate(dict(arguments)))
            except ValidationError as exc:
                raise ValueError(_errors(exc)) from None
        return dict(arguments)

    async def _run_alone(self, call: ToolCall, start: Any) -> Message:
        try:
            result = await self.graph.arun(start)
        except GraphRunError as failed:
            return self._error(call, str(failed))
        if result.interrupts:
            asked = "; ".join(str(item.prompt) for item in result.interrupts)
            return self._error(
                call,
                f"the graph asked a question that cannot be answered here ({asked}): an agent "
                "run on its own cannot pause; run the agent as a node of a graph to answer it",
            )
        return self._answer(call, result)

    def _answer(self, call: ToolCall, result: GraphResult) -> Message:
        if result.stop_reason not in ("end", "max_steps"):
            return self._error(call, f"the graph stopped before its end ({result.stop_reason})")
        return Message.tool(call.id, tool_content(self._output(result)), name=call.name)

    def _error(self, call: ToolCall, why: str) -> Message:
        return Message.tool(call.id, f"tool {self._name!r}: {why}", name=call.name, is_error=True)


def _parameters(name: str, schema: type[BaseModel] | Mapping[str, Any] | None) -> dict[str, Any]:
    if schema is None:
        return {
            "type": "object",
            "properties": {TOOL_INPUT: {"type": "string", "description": f"What to ask {name}."}},
            "required": [TOOL_INPUT],
            "additionalProperties": False,
        }
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema.model_json_schema()
    if isinstance(schema, Mapping) and schema.get("type") == "object":
        return dict(schema)
    raise ValueError(
        f"tool {name!r}: input_schema must be a Pydantic model class or a JSON schema of "
        f"type 'object', got {_kind(schema)}"
    )


def _escaped(call_id: str) -> str:
    """A call id as a namespace part: distinct ids stay distinct (``_`` escapes itself)."""
    return "id-" + "".join(
        ch if ch.isascii() and (ch.isalnum() or ch in ".-") else f"_{ord(ch):x}_" for ch in call_id
    )


def _description(program: Any) -> str:
    return str(getattr(program, "description", "") or "")


def _errors(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'value'}: {err['msg']}" for err in exc.errors()
    )


def _kind(value: Any) -> str:
    return "nothing" if value is None else type(value).__name__
