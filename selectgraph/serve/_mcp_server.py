"""MCP server: each served graph offered as one tool of an MCP server (the official ``mcp`` SDK).

A tool call is one turn of a conversation: ``input`` is the message, ``thread_id``
names the conversation to continue (a new one when left out). The result's text is
the graph's reply; its structured content carries the thread id, so a client
continues the conversation, or answers the graph's question, by passing it back.

The low-level SDK server is used because each tool's schema is given as JSON
schema (``ServedGraph.input_schema``), not derived from a Python signature.
Imported only by what serves MCP (``import selectgraph`` does not import ``mcp``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from selectgraph.serve._turns import ServedGraph, ServeError, Turn

__all__ = ["OUTPUT_SCHEMA", "mcp_server", "run_stdio", "tool_name"]

_INVALID_CHARACTERS: Final = re.compile(r"[^A-Za-z0-9_.-]+")
_MAX_TOOL_NAME: Final = 128
"""SEP-986: tool names are 1 to 128 of ``A-Z a-z 0-9 _ - .``."""

OUTPUT_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "thread_id": {
            "type": "string",
            "description": "The conversation: pass it back as thread_id to continue it.",
        },
        "run_id": {"type": "string", "description": "The run that answered."},
        "status": {
            "type": "string",
            "enum": ["done", "interrupted", "paused", "cancelled"],
            "description": "interrupted: the graph asks a question; call again with the "
            "answer as input and the same thread_id.",
        },
        "reply": {"type": "string", "description": "The graph's reply, or its question."},
        "output": {"description": "The run's final content as JSON."},
        "question": {
            "type": ["object", "null"],
            "description": "The pending question when status is interrupted.",
        },
    },
    "required": ["thread_id", "run_id", "status", "reply", "output", "question"],
}
"""The structured content of every successful call (``Turn.as_json()``)."""

_ARGUMENTS: Final = ("input", "thread_id")


def tool_name(name: str) -> str:
    """``name`` made a valid MCP tool name: other characters become ``_``, at most 128."""
    cleaned = _INVALID_CHARACTERS.sub("_", name).strip("_")[:_MAX_TOOL_NAME]
    return cleaned or "graph"


def mcp_server(graphs: Sequence[ServedGraph], *, name: str | None = None) -> Server[Any]:
    """An MCP server offering each of ``graphs`` as a tool.

    Args:
        graphs: The graphs; each is the tool named after its ``name``, described by
            its ``description``, taking ``input`` and an optional ``thread_id``.
        name: The server's name in the MCP handshake; the graph's name when there is
            one graph, else ``"selectgraph"``.

    Returns:
        The SDK's low-level server: run it over stdio (:func:`run_stdio`) or mount it
        over streamable HTTP (``mcp_part``).

    Raises:
        ValueError: no graphs, or two graphs that would be tools of one name.
    """
    tools = _tools_by_name(graphs)
    listing = [_tool(tool, served) for tool, served in tools.items()]

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listing)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        served = tools.get(params.name)
        if served is None:
            # The spec answers an unknown tool with a protocol error, not a tool result.
            known = ", ".join(repr(tool) for tool in tools)
            raise MCPError(
                types.INVALID_PARAMS, f"unknown tool {params.name!r}; this server has {known}"
            )
        return await _call(ctx, params.name, served, params.arguments or {})

    def input_schema(tool: str) -> Mapping[str, Any] | None:
        served = tools.get(tool)
        return None if served is None else served.input_schema

    if name is None:
        name = graphs[0].name if len(graphs) == 1 else "selectgraph"
    return Server(
        name,
        version=_version(),
        instructions="Each tool is a selectgraph graph. Pass the thread_id a result gives "
        "back to continue that conversation, or to answer the graph's question.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        get_tool_input_schema=input_schema,
    )


async def run_stdio(server: Server[Any]) -> None:
    """Serve ``server`` over this process's stdin and stdout until the client closes them."""
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def _tools_by_name(graphs: Sequence[ServedGraph]) -> dict[str, ServedGraph]:
    if not graphs:
        raise ValueError("mcp_server needs at least one ServedGraph to serve")
    tools: dict[str, ServedGraph] = {}
    for served in graphs:
        if not isinstance(served, ServedGraph):
            raise ValueError(f"graphs holds a {type(served).__name__}, not a ServedGraph")
        tool = tool_name(served.name)
        if tool in tools:
            raise ValueError(
                f"graphs {tools[tool].name!r} and {served.name!r} would both be the MCP tool "
                f"{tool!r}; give one another name (ServedGraph(..., name=...))"
            )
        tools[tool] = served
    return tools


def _tool(name: str, served: ServedGraph) -> types.Tool:
    return types.Tool(
        name=name,
        title=served.name,
        description=served.description,
        input_schema=served.input_schema,
        output_schema=OUTPUT_SCHEMA,
    )


async def _call(
    ctx: ServerRequestContext[Any], tool: str, served: ServedGraph, arguments: Mapping[str, Any]
) -> types.CallToolResult:
    """One turn; text the graph streams goes out as progress when the client asked for it."""
    problem = _argument_problem(tool, arguments)
    if problem is not None:
        return _error(problem)
    thread_id = arguments.get("thread_id")
    sent = 0
    try:
        async for item in served.stream(arguments["input"], thread_id=thread_id):
            if isinstance(item, Turn):
                return _result(item)
            sent += 1
            await ctx.session.report_progress(sent, None, item)  # a no-op unless asked
    except ServeError as error:
        return _error(f"{tool}: {error.message} (status {error.status})")
    raise AssertionError("ServedGraph.stream ended without a Turn")


def _argument_problem(tool: str, arguments: Mapping[str, Any]) -> str | None:
    """What is wrong with a call's arguments, said so a model can correct them; or None."""
    unknown = sorted(set(arguments) - set(_ARGUMENTS))
    if unknown:
        return f"{tool}: unknown arguments {unknown}; it takes 'input' and optionally 'thread_id'"
    if "input" not in arguments:
        return f"{tool}: the argument 'input' (the message for the graph) is missing"
    for key in _ARGUMENTS:
        value = arguments.get(key)
        if key in arguments and not isinstance(value, str):
            return f"{tool}: the argument {key!r} must be a string, got {_json_type(value)}"
    return None


def _json_type(value: Any) -> str:
    """What a JSON value other than a string is, in words (arguments arrive as JSON)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return "an array" if isinstance(value, list) else "an object"


def _result(turn: Turn) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=turn.reply)],
        structured_content=turn.as_json(),
    )


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)], is_error=True
    )


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("selectgraph")
    except PackageNotFoundError:  # run from a source tree that is not installed
        return "0"
