"""MCP sessions: one connection to a server through the official ``mcp`` SDK, on the portal loop.

Imported only when a server is first used (``import selectgraph`` does not
import ``mcp``). Everything here runs on the loop of :mod:`._mcp`'s portal
thread: the SDK's transports are anyio task groups that must be entered and
left by one task, so a connection is owned by one task that opens it, waits,
and closes it; calls are made from other tasks of the same loop.

Results and listings are handed back as wire-shaped dicts (``inputSchema``,
``structuredContent``, ``isError``), so nothing outside this module depends on
the SDK's model classes.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import sys
from collections.abc import AsyncIterator, Coroutine
from typing import TYPE_CHECKING, Any, Final, TypeVar

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError
from mcp.types import CONNECTION_CLOSED, PaginatedRequestParams
from pydantic import ValidationError

if TYPE_CHECKING:
    from selectgraph.agents._mcp_config import MCPServerConfig

__all__ = ["Connection", "ConnectionLost", "ProtocolFailure", "open_connection"]

T = TypeVar("T")
_LINE_START: Final = 80
"""Characters of a line that is not JSON-RPC shown in the error."""


class ConnectionLost(Exception):
    """The server went away (exited, closed its pipes, or stopped answering HTTP)."""


class ProtocolFailure(Exception):
    """The server answered with an MCP error or a result the SDK could not read."""


class Connection:
    """One initialised MCP session and the task that owns its transport."""

    def __init__(self, config: MCPServerConfig) -> None:
        self._config = config
        self._session: ClientSession | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._failure: BaseException | None = None
        self._owner: asyncio.Task[None] | None = None
        self._waiting: set[asyncio.Future[str]] = set()
        """One future per request in flight, told when the server writes garbage."""
        self.lost = False
        """Set once the server went away; the next use opens a new connection."""

    @property
    def alive(self) -> bool:
        """Open, and the server has not gone away."""
        return self._session is not None and not self.lost and not self._stop.is_set()

    async def start(self) -> None:
        """Start the server (stdio) or connect (HTTP), and initialise the session.

        Raises:
            ConnectionLost: the server could not be started or reached.
            TimeoutError: initialisation took longer than the connect timeout.
        """
        self._owner = asyncio.get_running_loop().create_task(self._own())
        try:
            with anyio.fail_after(self._config.connect_timeout):
                await self._ready.wait()
        except TimeoutError:
            await self.close()
            raise
        if self._failure is not None:
            raise ConnectionLost(_describe(self._failure)) from self._failure

    async def _own(self) -> None:
        try:
            async with self._transport() as (read, write):
                watched = _Watched(read, self)
                async with ClientSession(watched, write) as session:
                    await self._unless_garbled(session.initialize())
                    self._session = session
                    self._ready.set()
                    await self._stop.wait()
        except BaseException as exc:  # the opener re-raises it; the task must not
            self._failure = exc
            self.lost = True
        finally:
            self._session = None
            self._ready.set()

    def _transport(self) -> contextlib.AbstractAsyncContextManager[tuple[Any, Any]]:
        config = self._config
        if config.url is not None:
            return _http(config.url, dict(config.headers))
        assert config.command is not None
        params = StdioServerParameters(
            command=config.command,
            args=list(config.args),
            env=dict(config.env) if config.env is not None else None,
            cwd=config.cwd,
        )
        errlog = _stderr() if config.server_stderr else None
        if errlog is None:
            errlog = open(os.devnull, "w")  # noqa: SIM115  # closed by _closing
        return _closing(stdio_client(params, errlog=errlog), errlog)

    async def list_tools(self) -> list[dict[str, Any]]:
        """Every tool of the server, page by page, as wire-shaped dicts.

        Raises:
            ConnectionLost: the server went away.
            ProtocolFailure: the server answered with an error or garbage.
        """
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            params = PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await self._request(functools.partial(_list_page, params=params))
            tools.extend(_wire(tool) for tool in page.tools)
            cursor = page.next_cursor
            if not cursor:
                return tools

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Call one tool; its result as a wire-shaped dict (``content``, ``isError``...).

        Raises:
            ConnectionLost: the server went away before answering.
            ProtocolFailure: the server answered with an error or garbage.
        """
        result = await self._request(lambda s: s.call_tool(name, arguments))
        return _wire(result)

    async def _request(self, send: Any) -> Any:
        session = self._session
        if session is None or self.lost:
            raise ConnectionLost("the connection is closed")
        try:
            return await self._unless_garbled(send(session))
        except ProtocolFailure:
            raise
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED or self.lost:
                self.lost = True
                raise ConnectionLost(exc.message) from exc
            raise ProtocolFailure(f"MCP error {exc.code}: {exc.message}") from exc
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as exc:
            self.lost = True
            raise ConnectionLost(_describe(exc)) from exc
        except Exception as exc:  # the SDK could not read the answer (validation, JSON)
            if self.lost:
                raise ConnectionLost(_describe(exc)) from exc
            raise ProtocolFailure(_describe(exc)) from exc

    async def _unless_garbled(self, request: Coroutine[Any, Any, T]) -> T:
        """``request``'s answer, or ProtocolFailure at once if the server writes garbage.

        The SDK cannot tell which request a line it could not parse answered (it
        logs it and passes it on as an exception), so every request in flight then
        fails, instead of waiting out its timeout for an answer that never comes.

        Raises:
            ProtocolFailure: the server wrote a line that is not JSON-RPC.
        """
        garbled: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        work = asyncio.ensure_future(request)
        self._waiting.add(garbled)
        try:
            either: list[asyncio.Future[Any]] = [work, garbled]
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            work.cancel()
            raise
        finally:
            self._waiting.discard(garbled)
        if work.done():
            garbled.cancel()
            return work.result()
        work.cancel()
        with contextlib.suppress(BaseException):
            await work
        raise ProtocolFailure(garbled.result())

    def garbled(self, line: str) -> None:
        """The server wrote ``line`` (its start), which is not JSON-RPC: fail what waits."""
        for waiting in self._waiting:
            if not waiting.done():
                waiting.set_result(f"it wrote a line that is not JSON-RPC: {line}")

    async def close(self) -> None:
        """Close the session and stop the server (bounded by the SDK's own shutdown waits)."""
        self._stop.set()
        owner = self._owner
        if owner is not None and not owner.done():
            with contextlib.suppress(BaseException):
                await owner


class _Watched:
    """The transport's read stream, noting when it ends: the server has gone away."""

    def __init__(self, stream: Any, connection: Connection) -> None:
        self._stream = stream
        self._connection = connection

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def __aiter__(self) -> _Watched:
        return self

    async def __anext__(self) -> Any:
        try:
            item = await self._stream.__anext__()
        except (StopAsyncIteration, anyio.EndOfStream, anyio.ClosedResourceError):
            self._connection.lost = True
            raise
        if isinstance(item, Exception):
            if _is_transport_failure(item):
                self._connection.lost = True
            elif isinstance(item, ValueError):  # the SDK's parse error for one line
                self._connection.garbled(_bad_line(item))
        return item

    async def receive(self) -> Any:
        try:
            return await self._stream.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._connection.lost = True
            raise

    async def __aenter__(self) -> _Watched:
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stream.__aexit__(*exc)


def _bad_line(error: ValueError) -> str:
    """The start of the line a parse error is about, as well as the error tells it."""
    shown: Any = None
    if isinstance(error, ValidationError) and error.errors():
        shown = error.errors()[0].get("input")
    if shown is None:
        shown = str(error)
    elif not isinstance(shown, str):
        try:
            shown = json.dumps(shown, ensure_ascii=False)
        except (TypeError, ValueError):
            shown = repr(shown)
    start = shown.strip()[:_LINE_START]
    return repr(start + ("..." if len(shown.strip()) > _LINE_START else ""))


async def _list_page(session: ClientSession, *, params: PaginatedRequestParams | None) -> Any:
    return await session.list_tools(params=params)


def _is_transport_failure(item: Exception) -> bool:
    return (
        isinstance(item, OSError | anyio.BrokenResourceError)
        or "httpx" in type(item).__module__.lower()
    )


@contextlib.asynccontextmanager
async def _http(url: str, headers: dict[str, str]) -> AsyncIterator[tuple[Any, Any]]:
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with (
        create_mcp_http_client(headers=headers or None) as client,
        streamable_http_client(url, http_client=client) as streams,
    ):
        yield streams[0], streams[1]


def _stderr() -> Any:
    """A stderr the server's can be passed to: one with a file descriptor, or None.

    Under Jupyter or pytest's capture ``sys.stderr`` is a Python object without one,
    and a subprocess cannot write to it; the process's own stderr still has one.
    """
    for stream in (sys.stderr, sys.__stderr__):
        try:
            if stream is not None:
                stream.fileno()
                return stream
        except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
            continue
    return None


@contextlib.asynccontextmanager
async def _closing(
    transport: contextlib.AbstractAsyncContextManager[Any], errlog: Any
) -> AsyncIterator[tuple[Any, Any]]:
    try:
        async with transport as streams:
            yield streams[0], streams[1]
    finally:
        if errlog is not sys.stderr and errlog is not sys.__stderr__:
            errlog.close()


async def open_connection(config: MCPServerConfig) -> Connection:
    """A started, initialised connection to the server ``config`` names.

    Raises:
        ConnectionLost: the server could not be started or reached.
        TimeoutError: it did not finish the MCP handshake within the connect timeout.
    """
    connection = Connection(config)
    await connection.start()
    return connection


def _wire(model: Any) -> dict[str, Any]:
    """The SDK model as it travels: camelCase keys, JSON values, unset fields left out."""
    dumped = model.model_dump(by_alias=True, mode="json", exclude_none=True)
    if not isinstance(dumped, dict):
        raise ProtocolFailure(f"expected an object, got {type(dumped).__name__}")
    return dumped


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(inner) for inner in exc.exceptions)
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
