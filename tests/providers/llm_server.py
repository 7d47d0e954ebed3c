"""A local HTTP/1.1 server that speaks OpenAI's and Anthropic's wire formats from a script.

Tests queue replies per path (``server.script("/v1/messages", reply, ...)``), point a
real SDK client at ``server.base_url``, and read back what the SDK sent from
``server.requests``. Replies can be JSON bodies, server-sent event streams written
one event at a time, error statuses with any headers, a connection closed before
any response, a stream cut off midway, a stream interrupted the way llama.cpp's server
interrupts one for the next request, or a reply that never comes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

Action = Literal["respond", "drop", "stall"]


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted answer to one HTTP request."""

    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    events: tuple[bytes, ...] | None = None
    """When set, the body is streamed (chunked), one item per write."""
    cut_after: int | None = None
    """For a stream: close the connection after this many events, mid-body."""
    action: Action = "respond"
    """``drop`` closes the connection without answering; ``stall`` never answers."""
    interval: float = 0.0
    """Seconds to wait before each write: between stream events, or between the bytes
    of a body (which is then sent one byte at a time, a slow drip)."""


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """A request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def json_reply(
    payload: object, *, status: int = 200, headers: Mapping[str, str] | None = None
) -> Reply:
    return Reply(
        status=status,
        headers=(("content-type", "application/json"), *(headers or {}).items()),
        body=json.dumps(payload).encode(),
    )


def openai_error(
    status: int, message: str, *, kind: str = "invalid_request_error", **headers: str
) -> Reply:
    body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
    return json_reply(body, status=status, headers=_header_names(headers))


def anthropic_error(status: int, kind: str, message: str, **headers: str) -> Reply:
    body = {
        "type": "error",
        "error": {"type": kind, "message": message},
        "request_id": "req_011test",
    }
    return json_reply(
        body, status=status, headers={"request-id": "req_011test", **_header_names(headers)}
    )


def openai_stream(chunks: Iterable[Mapping[str, Any]], *, cut_after: int | None = None) -> Reply:
    """Chat Completions SSE: ``data: <chunk>`` events, then ``data: [DONE]``."""
    events = [f"data: {json.dumps(c)}\n\n".encode() for c in chunks]
    events.append(b"data: [DONE]\n\n")
    return _sse(events, cut_after)


def anthropic_stream(events: Iterable[Mapping[str, Any]], *, cut_after: int | None = None) -> Reply:
    """Messages SSE: each event named by its ``type``, as the API sends them."""
    encoded = [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]
    return _sse(encoded, cut_after)


def interrupted_stream(*chunks: Mapping[str, Any]) -> Reply:
    """A stream cut short the way llama.cpp's server cuts one when the next request arrives.

    Its ``interrupt_requests`` setting (on by default) ends a running stream
    after the chunk it just sent with ``data: [DONE]``, no chunk carrying a
    finish reason: ``chunks`` (none of which should finish), then ``[DONE]``.
    """
    return openai_stream(chunks)


def drop() -> Reply:
    return Reply(action="drop")


def stall() -> Reply:
    return Reply(action="stall")


def _sse(events: list[bytes], cut_after: int | None) -> Reply:
    return Reply(
        headers=(
            ("content-type", "text/event-stream; charset=utf-8"),
            ("cache-control", "no-cache"),
        ),
        events=tuple(events),
        cut_after=cut_after,
    )


def _header_names(headers: Mapping[str, str]) -> dict[str, str]:
    # Keyword arguments cannot hold dashes: retry_after -> retry-after.
    return {name.replace("_", "-"): value for name, value in headers.items()}


@dataclass
class FakeLLMServer:
    """The server; use as ``async with FakeLLMServer() as server``."""

    requests: list[RecordedRequest] = field(default_factory=list)
    errors: list[Exception] = field(default_factory=list)
    _scripts: dict[str, deque[Reply]] = field(default_factory=dict)
    _refusals: dict[str, Reply] = field(default_factory=dict)
    _server: asyncio.Server | None = None
    _handlers: set[asyncio.Task[None]] = field(default_factory=set)
    _writers: set[asyncio.StreamWriter] = field(default_factory=set)
    _closing: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def base_url(self) -> str:
        assert self._server is not None, "server not started"
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    def script(self, path: str, *replies: Reply) -> None:
        self._scripts.setdefault(path, deque()).extend(replies)

    def reject_response_format(self, *kinds: str, reply: Reply | None = None) -> None:
        """Refuse every request whose ``response_format.type`` is one of ``kinds``.

        The refusal is answered before the script (which it does not consume), the
        way a server that does not support a structured-output mode behaves. The
        default reply is llama.cpp's server refusing ``json_schema``: HTTP 500.
        """
        for kind in kinds:
            self._refusals[kind] = reply or llama_cpp_format_refusal(kind)

    def unused_replies(self, path: str) -> int:
        return len(self._scripts.get(path, ()))

    def bodies(self, path: str) -> list[Any]:
        return [r.json() for r in self.requests if r.path == path]

    async def __aenter__(self) -> FakeLLMServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._closing.set()
        self._server.close()
        for writer in list(self._writers):
            writer.close()
        if self._handlers:
            await asyncio.gather(*self._handlers, return_exceptions=True)
        await self._server.wait_closed()
        if self.errors:
            raise self.errors[0]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        self._writers.add(writer)
        try:
            while not self._closing.is_set():
                request = await self._read_request(reader)
                if request is None:
                    break
                self.requests.append(request)
                if not await self._answer(request, writer):
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except Exception as exc:
            # Surfaced by __aexit__, so a broken script fails the test that used it.
            self.errors.append(exc)
        finally:
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
            self._handlers.discard(task)

    async def _read_request(self, reader: asyncio.StreamReader) -> RecordedRequest | None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            return None
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        method, target, _version = request_line.split(" ", 2)
        headers: dict[str, str] = {}
        for line in header_lines:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        assert "chunked" not in headers.get("transfer-encoding", ""), "chunked uploads unsupported"
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        return RecordedRequest(method=method, path=target, headers=headers, body=body)

    async def _answer(self, request: RecordedRequest, writer: asyncio.StreamWriter) -> bool:
        """Send the next scripted reply; returns whether the connection stays usable."""
        refusal = self._refusal(request)
        queue = self._scripts.get(request.path)
        if refusal is not None:
            reply = refusal
        else:
            reply = queue.popleft() if queue else _unscripted(request)
        if reply.action == "drop":
            return False
        if reply.action == "stall":
            await self._closing.wait()
            return False
        try:
            reason = HTTPStatus(reply.status).phrase
        except ValueError:
            reason = "Unknown"
        head = [f"HTTP/1.1 {reply.status} {reason}"]
        head += [f"{name}: {value}" for name, value in reply.headers]
        if reply.events is None:
            head.append(f"content-length: {len(reply.body)}")
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
            if not reply.interval:
                writer.write(reply.body)
            for byte in range(len(reply.body) if reply.interval else 0):
                if not await self._pause(reply.interval):
                    return False
                writer.write(reply.body[byte : byte + 1])
                await writer.drain()
            await writer.drain()
            return True
        head.append("transfer-encoding: chunked")
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        await writer.drain()
        for number, event in enumerate(reply.events):
            if reply.cut_after is not None and number >= reply.cut_after:
                return False
            if reply.interval and not await self._pause(reply.interval):
                return False
            writer.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True

    async def _pause(self, seconds: float) -> bool:
        """Wait ``seconds``; returns False when the server is closing meanwhile."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._closing.wait(), seconds)
        return not self._closing.is_set()

    def _refusal(self, request: RecordedRequest) -> Reply | None:
        if not self._refusals or not request.body:
            return None
        body = request.json()
        if not isinstance(body, dict):
            return None
        response_format = body.get("response_format")
        kind = response_format.get("type") if isinstance(response_format, dict) else None
        if isinstance(kind, str) and kind in self._refusals:
            return self._refusals[kind]
        choice = body.get("tool_choice")
        if isinstance(choice, dict):
            choice = "named"
        if isinstance(choice, str) and f"tool_choice:{choice}" in self._refusals:
            return self._refusals[f"tool_choice:{choice}"]
        return None

    def reject_tool_choice(self, *kinds: str, reply: Reply | None = None) -> None:
        """Refuse every request whose ``tool_choice`` is one of ``kinds``.

        ``kinds`` are ``"required"``, ``"auto"``, ``"none"`` or ``"named"`` (any
        ``{"type": "function", ...}`` choice). The default reply is an HTTP 500
        naming the field, as llama.cpp's server words such refusals.
        """
        for kind in kinds:
            self._refusals[f"tool_choice:{kind}"] = reply or tool_choice_refusal(kind)


def llama_cpp_format_refusal(kind: str) -> Reply:
    """What llama.cpp's server answers a response_format type it does not support."""
    message = 'response_format type must be one of "text" or "json_object", but got: ' + kind
    return json_reply(
        {"error": {"code": 500, "message": message, "type": "server_error"}}, status=500
    )


def tool_choice_refusal(kind: str) -> Reply:
    """A server error refusing a ``tool_choice`` it does not support."""
    message = f"tool_choice {kind!r} is not supported; use 'auto' or 'none'"
    return json_reply(
        {"error": {"code": 500, "message": message, "type": "server_error"}}, status=500
    )


def slow_drip(reply: Reply, interval: float = 1.0) -> Reply:
    """``reply`` with its body sent one byte every ``interval`` seconds."""
    return Reply(status=reply.status, headers=reply.headers, body=reply.body, interval=interval)


def keep_alive_stream(count: int, interval: float) -> Reply:
    """An event stream of ``count`` SSE comments, one every ``interval`` seconds, and no event."""
    return Reply(
        headers=(
            ("content-type", "text/event-stream; charset=utf-8"),
            ("cache-control", "no-cache"),
        ),
        events=(b": keep-alive\n\n",) * count,
        interval=interval,
    )


def _unscripted(request: RecordedRequest) -> Reply:
    # Loud, so a test that forgot to script a reply fails with a clear message.
    return json_reply(
        {"error": {"message": f"no scripted reply for {request.path}", "type": "test_error"}},
        status=418,
    )


class ServerThread:
    """A :class:`FakeLLMServer` on a loop of its own, for tests that call providers synchronously.

    ``agent.run()`` starts and closes an event loop per call, so the server cannot
    live on the test's loop; here it runs on a daemon thread until ``stop()``.
    """

    def __init__(self) -> None:
        self.server = FakeLLMServer()
        self._loop = asyncio.new_event_loop()
        self._stopped: asyncio.Future[None] | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, name="fake-llm-server", daemon=True)

    @property
    def base_url(self) -> str:
        return self.server.base_url

    def start(self) -> ServerThread:
        self._thread.start()
        if not self._ready.wait(timeout=10):
            raise RuntimeError("the fake LLM server did not start")
        return self

    def stop(self) -> None:
        """Stop the server; re-raises what a broken script raised inside it."""
        assert self._stopped is not None
        self._loop.call_soon_threadsafe(self._stopped.set_result, None)
        self._thread.join(timeout=10)
        self._loop.close()
        if self.server.errors:
            raise self.server.errors[0]

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        # A broken script's exception is kept in server.errors; stop() re-raises it.
        with contextlib.suppress(Exception):
            self._loop.run_until_complete(self._serve())

    async def _serve(self) -> None:
        self._stopped = asyncio.get_running_loop().create_future()
        async with self.server:
            self._ready.set()
            await self._stopped


def raw_reply(body: bytes, *, content_type: str = "application/json", status: int = 200) -> Reply:
    """A body sent exactly as given: an HTML error page, JSON cut short, anything."""
    return Reply(status=status, headers=(("content-type", content_type),), body=body)


def raw_stream(*events: bytes) -> Reply:
    """An event stream of the given raw SSE events, nothing added (no ``[DONE]``)."""
    return _sse(list(events), None)
