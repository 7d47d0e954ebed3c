"""MCP tools: the tools of a Model Context Protocol server, for an agent's ``tools=[...]``.

An :class:`MCPTools` is a toolset: the agent asks it for its tools when a run
starts (:meth:`MCPTools.list_tools`) and runs each call through the same path as
a Python tool's, so ToolCallStarted/Finished events, spans and the tool loop see
no difference.

Event loops: the SDK's sessions belong to the event loop (and task) that opened
them, while ``run()`` starts a new loop per call and a program may run agents
on several loops and threads at once. So each :class:`MCPTools` keeps its one
session on a loop of its own, on a daemon thread started on first use (the
"portal"); callers on any loop or thread hand their requests over and await
the answer. The hop costs tens of microseconds; the session, and the server
process behind it, outlive any single run.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import json
import re
import threading
import weakref
from collections.abc import Awaitable, Coroutine, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from selectgraph.agents._mcp_config import MCPFailure, MCPServerConfig, MCPServerError
from selectgraph.agents._tools import _clip
from selectgraph.core._messages import Message, ToolCall
from selectgraph.providers._base import ToolSpec

if TYPE_CHECKING:
    from selectgraph.agents._mcp_session import Connection

__all__ = ["MCPServerError", "MCPServerConfig", "MCPTools"]

T = TypeVar("T")

# Providers accept tool names of this shape (see _tools._TOOL_NAME).
_BAD_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_MAX_ERROR_CHARS = 2000


class MCPTools:
    """The tools of one MCP server, to put in an agent's ``tools=[...]``.

    Give ``command`` (a stdio server, started as a subprocess) or ``url`` (a
    streamable HTTP server). The session opens on first use; the tool list is
    read once per session and cached. One instance may serve several agents and
    runs at once (they share its session); close it with :meth:`aclose` /
    :meth:`close` or ``async with``; anything still open is closed at
    interpreter exit.

    Example:
        >>> import sys
        >>> tools = MCPTools(command=sys.executable, args=["-m", "my_server"], prefix="files_")
        >>> tools.name
        'files'
    """

    def __init__(
        self,
        command: str | None = None,
        args: Sequence[str] = (),
        *,
        url: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        headers: Mapping[str, str] | None = None,
        name: str | None = None,
        include: Iterable[str] | None = None,
        exclude: Iterable[str] = (),
        prefix: str = "",
        timeout: float = 60.0,
        connect_timeout: float = 30.0,
        server_stderr: bool = True,
    ) -> None:
        """Describe a server; nothing starts until the first use.

        Args:
            command: The executable of a stdio server.
            args: Its arguments.
            url: The endpoint of a streamable HTTP server (instead of ``command``).
            env: Extra environment variables for a stdio server.
            cwd: The working directory of a stdio server.
            headers: HTTP headers for every request to a URL server.
            name: How errors name the server (default: the prefix without its
                trailing ``_``, else the command's or URL's last part).
            include: Offer only these tools (server names, before the prefix).
            exclude: Never offer these tools.
            prefix: Put in front of every tool name the model sees, to avoid clashes.
            timeout: Seconds a tool call or the listing may take before it fails
                with ``MCPServerError(reason="timeout")``.
            connect_timeout: Seconds to start or reach the server and finish the handshake.
            server_stderr: Pass a stdio server's stderr through (``False``: discard it).

        Raises:
            ValueError: neither or both of ``command`` and ``url``, headers for a
                stdio server, or a timeout that is not positive.
        """
        if (command is None) == (url is None):
            raise ValueError("give MCPTools either command=... (stdio) or url=... (HTTP)")
        if command is not None and headers:
            raise ValueError("headers=... is for URL servers; a stdio server takes env=...")
        if timeout <= 0 or connect_timeout <= 0:
            raise ValueError("timeout and connect_timeout must be positive numbers of seconds")
        self.config = MCPServerConfig(
            name=name or _default_name(prefix, command, args, url),
            command=command,
            args=tuple(args),
            env=dict(env) if env is not None else None,
            cwd=cwd,
            server_stderr=server_stderr,
            url=url,
            headers=dict(headers or {}),
            timeout=timeout,
            connect_timeout=connect_timeout,
        )
        """How the server is reached and called (what the constructor was given, checked)."""
        self.include = frozenset(include) if include is not None else None
        self.exclude = frozenset(exclude)
        self.prefix = prefix
        self._portal: _Portal | None = None
        self._portal_lock = threading.Lock()
        self._connection: Connection | None = None
        self._opening: asyncio.Lock | None = None
        self._tools: tuple[_MCPTool, ...] | None = None
        _open.add(self)

    @property
    def name(self) -> str:
        """How errors name the server."""
        return self.config.name

    def __repr__(self) -> str:
        where = self.config.url or " ".join([self.config.command or "", *self.config.args])
        return f"MCPTools(name={self.name!r}, server={where.strip()!r})"

    # ------------------------------------------------------------ public calls
    async def list_tools(self) -> Sequence[_MCPTool]:
        """The server's tools, filtered and prefixed; read once per session.

        Raises:
            MCPServerError: the server could not be started, reached or listed.
        """
        tools = self._tools
        connection = self._connection
        if tools is not None and connection is not None and connection.alive:
            return tools  # cached for this session: no hop to the portal
        return await self._submit(self._list())

    async def acall(self, name: str, arguments: Mapping[str, Any] | None = None) -> Message:
        """Call the server's tool ``name`` (its own name, without the prefix).

        Returns:
            The result as a tool message (``is_error=True`` for an ``isError``
            result), exactly as an agent's model would see it.

        Raises:
            MCPServerError: the server could not be reached, went away during the
                call, did not answer in time, or answered with garbage.
        """
        raw = await self._submit(self._call(name, dict(arguments or {})))
        return _to_message(raw, call_id=name, name=self.prefix + name)

    def call(self, name: str, arguments: Mapping[str, Any] | None = None) -> Message:
        """Blocking :meth:`acall`, from code with no running loop."""
        return self._portal_for_use().run(self._call_message(name, dict(arguments or {})))

    def tools(self) -> Sequence[_MCPTool]:
        """Blocking :meth:`list_tools`."""
        return self._portal_for_use().run(self._list())

    async def aclose(self) -> None:
        """Close the session, stop the server and its thread; a later use opens new ones."""
        with self._portal_lock:
            portal, self._portal = self._portal, None
        if portal is not None:
            try:
                await portal.submit(self._disconnect())
            finally:
                # Not waited for: the thread ends (and closes its loop) on its own.
                portal.stop_soon()
                self._opening = None  # belonged to that loop

    def close(self) -> None:
        """Blocking :meth:`aclose`, from code with no running loop."""
        with self._portal_lock:
            portal, self._portal = self._portal, None
        if portal is not None:
            try:
                portal.run(self._disconnect(), timeout=30)
            finally:
                portal.stop()
                self._opening = None  # belonged to that loop

    async def __aenter__(self) -> MCPTools:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ------------------------------------------------- on the portal's loop
    async def _call_message(self, name: str, arguments: dict[str, Any]) -> Message:
        return _to_message(await self._call(name, arguments), call_id=name, name=self.prefix + name)

    async def _list(self) -> tuple[_MCPTool, ...]:
        connection = await self._connected(None)
        if self._tools is not None and connection is self._connection:
            return self._tools
        listed = await self._bounded(connection.list_tools(), None)
        tools = tuple(self._adopt(listed))
        self._tools = tools
        return tools

    async def _call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        connection = await self._connected(name)
        return await self._bounded(connection.call_tool(name, arguments), name)

    async def _connected(self, tool: str | None) -> Connection:
        """The open connection, opened (or reopened after a crash) if need be."""
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            connection = self._connection
            if connection is not None and connection.alive:
                return connection
            self._connection = None
            self._tools = None  # a new session lists its tools again
            if connection is not None:
                await connection.close()
            connection = await self._open(tool)
            self._connection = connection
            return connection

    async def _open(self, tool: str | None) -> Connection:
        try:
            from selectgraph.agents._mcp_session import open_connection
        except ImportError as exc:
            raise MCPServerError(
                f"MCP server {self.name!r} needs the 'mcp' package: pip install 'selectgraph[mcp]'",
                server=self.name,
                reason="unavailable",
                tool=tool,
            ) from exc
        from selectgraph.agents._mcp_session import ConnectionLost

        try:
            return await open_connection(self.config)
        except TimeoutError as exc:
            raise self._error(
                f"did not finish starting within {self.config.connect_timeout:g} s",
                "unavailable",
                tool,
            ) from exc
        except ConnectionLost as exc:
            raise self._error(
                f"could not be started or reached: {exc}", "unavailable", tool
            ) from exc

    async def _bounded(self, request: Awaitable[T], tool: str | None) -> T:
        """``request`` within the timeout, its failures as :class:`MCPServerError`."""
        from selectgraph.agents._mcp_session import ConnectionLost, ProtocolFailure

        what = "listing its tools" if tool is None else f"calling {tool!r}"
        try:
            async with asyncio.timeout(self.config.timeout):
                return await request
        except TimeoutError as exc:
            raise self._error(
                f"did not answer within {self.config.timeout:g} s while {what}", "timeout", tool
            ) from exc
        except ConnectionLost as exc:
            raise self._error(
                f"went away while {what} ({exc}); it is started again on the next call",
                "crashed",
                tool,
            ) from exc
        except ProtocolFailure as exc:
            raise self._error(f"failed while {what}: {exc}", "protocol", tool) from exc

    async def _disconnect(self) -> None:
        connection, self._connection, self._tools = self._connection, None, None
        if connection is not None:
            await connection.close()

    def _adopt(self, listed: Sequence[dict[str, Any]]) -> list[_MCPTool]:
        tools: list[_MCPTool] = []
        for entry in listed:
            server_name = entry.get("name")
            if not isinstance(server_name, str) or not server_name:
                raise self._error(f"listed a tool without a name: {entry!r:.200}", "protocol", None)
            if self.include is not None and server_name not in self.include:
                continue
            if server_name in self.exclude:
                continue
            schema = entry.get("inputSchema")
            if not isinstance(schema, dict):
                schema = {"type": "object", "properties": {}}
            description = entry.get("description") or entry.get("title") or server_name
            spec = ToolSpec(
                name=_model_name(self.prefix + server_name),
                description=str(description),
                parameters=schema,
            )
            tools.append(_MCPTool(self, server_name, spec))
        return tools

    def _error(self, why: str, reason: MCPFailure, tool: str | None) -> MCPServerError:
        return MCPServerError(
            f"MCP server {self.name!r} {why}", server=self.name, reason=reason, tool=tool
        )

    # ------------------------------------------------------------- the portal
    def _portal_for_use(self) -> _Portal:
        with self._portal_lock:
            if self._portal is None:
                self._portal = _Portal(f"selectgraph-mcp-{self.name}")
            return self._portal

    def _submit(self, work: Coroutine[Any, Any, T]) -> Awaitable[T]:
        return self._portal_for_use().submit(work)


class _MCPTool:
    """One tool of an MCP server, as an agent runs it (the shape of :class:`Tool`)."""

    __slots__ = ("_server_name", "_spec", "_toolset")

    def __init__(self, toolset: MCPTools, server_name: str, spec: ToolSpec) -> None:
        self._toolset = toolset
        self._server_name = server_name
        self._spec = spec

    @property
    def name(self) -> str:
        """The name the model calls the tool by (prefix included)."""
        return self._spec.name

    @property
    def server_name(self) -> str:
        """The tool's name on the server."""
        return self._server_name

    @property
    def spec(self) -> ToolSpec:
        """The tool as a model sees it: the server's input schema, unchanged."""
        return self._spec

    def __repr__(self) -> str:
        return f"MCPTool(name={self.name!r}, server={self._toolset.name!r})"

    async def execute(self, call: ToolCall) -> Message:
        """Run one call from the model; every failure comes back as an error result.

        A failed request (the server crashed, hung, or answered garbage) is
        reported to the model as ``tool 'x' raised MCPServerError: ...``, the
        way a Python tool's exception is.
        """
        if call.raw_arguments is not None and not call.arguments:
            return _error_message(
                call.id,
                self.name,
                f"arguments for tool {self.name!r} are not valid JSON: "
                f"{_clip(call.raw_arguments, 200)!r}; send a JSON object",
                kind="invalid_arguments",
            )
        try:
            raw = await self._toolset._submit(
                self._toolset._call(self._server_name, dict(call.arguments))
            )
        except MCPServerError as exc:
            return _error_message(
                call.id,
                self.name,
                f"tool {self.name!r} raised MCPServerError: {exc}",
                kind="exception",
                exception="MCPServerError",
                reason=exc.reason,
            )
        return _to_message(raw, call_id=call.id, name=self.name)


def _to_message(raw: dict[str, Any], *, call_id: str, name: str) -> Message:
    """A tool result as the model reads it: structured content as JSON, else the text."""
    if raw.get("isError"):
        text = _content_text(raw.get("content")) or "the tool reported an error"
        return _error_message(call_id, name, f"tool {name!r} failed: {text}", kind="tool_error")
    structured = raw.get("structuredContent")
    if isinstance(structured, dict | list):
        return Message.tool(call_id, structured, name=name)
    if structured is not None:
        return Message.tool(call_id, json.dumps(structured, ensure_ascii=False), name=name)
    return Message.tool(call_id, _content_text(raw.get("content")), name=name)


def _content_text(content: Any) -> str:
    """Text blocks joined; anything else named briefly (a model cannot see an image here)."""
    if not isinstance(content, list):
        return ""
    parts: list[str] = []
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind in ("image", "audio"):
            size = len(str(block.get("data", ""))) * 3 // 4
            parts.append(f"[{kind} {block.get('mimeType', '?')}, {size} bytes]")
        elif kind == "resource_link":
            parts.append(f"[resource {block.get('uri', '?')}]")
        elif kind == "resource":
            resource = block.get("resource") or {}
            text = resource.get("text") if isinstance(resource, dict) else None
            uri = resource.get("uri", "?") if isinstance(resource, dict) else "?"
            parts.append(str(text) if isinstance(text, str) else f"[resource {uri}]")
        else:
            parts.append(f"[{kind or 'unknown'} content]")
    return "\n".join(parts)


def _error_message(
    call_id: str,
    name: str,
    message: str,
    *,
    kind: str,
    exception: str | None = None,
    reason: str | None = None,
) -> Message:
    metadata: dict[str, Any] = {"tool_error": kind}
    if exception is not None:
        metadata["exception"] = exception
    if reason is not None:
        metadata["mcp_failure"] = reason
    return Message.tool(
        call_id, _clip(message, _MAX_ERROR_CHARS), name=name, is_error=True, metadata=metadata
    )


def _model_name(name: str) -> str:
    """A name every provider accepts: MCP allows '.' and '/', models do not."""
    return _BAD_NAME_CHARS.sub("_", name)[:64]


def _default_name(prefix: str, command: str | None, args: Sequence[str], url: str | None) -> str:
    if prefix.strip("_-"):
        return prefix.strip("_-")
    if url is not None:
        return url
    assert command is not None
    program = command.replace("\\", "/").rsplit("/", 1)[-1]
    return _clip(" ".join([program, *args]), 80)


class _Portal:
    """An event loop on a daemon thread, holding one server's session for every caller."""

    def __init__(self, name: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        try:
            self._loop.run_forever()
        finally:
            self._loop.close()

    def submit(self, work: Coroutine[Any, Any, T]) -> Awaitable[T]:
        """Run ``work`` on the portal; await it from any loop (cancelling it cancels ``work``)."""
        return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(work, self._loop))

    def run(self, work: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``work`` on the portal and wait for it, blocking this thread."""
        future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(work, self._loop)
        return future.result(timeout)

    def stop_soon(self) -> None:
        """Tell the loop to stop; its thread then closes it and ends."""
        with contextlib.suppress(RuntimeError):  # already closed
            self._loop.call_soon_threadsafe(self._loop.stop)

    def stop(self) -> None:
        """Stop the loop and wait (up to 10 s) for its thread to end."""
        self.stop_soon()
        self._thread.join(timeout=10)


# Every MCPTools not yet closed, so interpreter exit stops their servers.
_open: weakref.WeakSet[MCPTools] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for toolset in list(_open):
        # Exiting anyway: a server that will not stop is left to the OS.
        with contextlib.suppress(Exception):
            toolset.close()
