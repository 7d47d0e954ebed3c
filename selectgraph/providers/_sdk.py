"""SDK providers: the lifecycle, retries and streaming the OpenAI and Anthropic providers share.

Both wrap a vendor SDK client, retry through one layer (the SDKs' own retries
are off), and stream by retrying until the first text arrives, then relaying.

One client per event loop
    An SDK client pools its HTTP connections, and a pooled connection belongs to
    the event loop that opened it. Every sync ``run()`` starts and closes a loop
    of its own (so do ``asyncio.run`` and worker threads), so a single client
    shared across loops fails the second run with "Event loop is closed" (or, in
    the Anthropic SDK, silently sends the request again on a new connection).
    A provider that builds its own client therefore keeps one client per loop,
    keyed weakly by the loop. Each client is closed inside its loop when the loop
    shuts down: a small async generator, started in that loop, is finalised by
    ``loop.shutdown_asyncgens()`` (which ``asyncio.run`` and ``asyncio.Runner``
    call before closing), and closing it closes the client. A client passed in
    by the caller is used as given on every loop; its connections are the
    caller's to manage.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Generic, Self, TypeVar

from selectgraph.core._errors import ProviderError
from selectgraph.providers._base import CompletionRequest, StreamChunk, StructuredMode
from selectgraph.providers._deadline import ProviderTimeoutError, timeout_error, within
from selectgraph.providers._errors_map import (
    StructuredOutputRejected,
    is_structured_rejection,
    redact_url,
)
from selectgraph.providers._retry import ProviderRetry, call_with_retries
from selectgraph.providers._tool_fallback import ToolChoiceFallback

__all__ = ["LoopClients", "OpenStream", "SDKProvider", "StreamCut", "elapsed_ms"]

_log = logging.getLogger("selectgraph.providers")

T = TypeVar("T")
S = TypeVar("S")
C = TypeVar("C")


def elapsed_ms(started: float) -> float:
    """Milliseconds since ``started`` (a ``time.perf_counter()`` reading)."""
    return (time.perf_counter() - started) * 1000


@dataclass(slots=True)
class OpenStream(Generic[S]):
    """A vendor stream that has been opened and read up to its first text (or its end)."""

    stream: S
    """The SDK's async stream (it has ``close()``)."""
    assembler: Any
    """Accumulates the items into a Completion."""
    first_text: str = ""
    """Text read but not yet yielded."""
    finished: bool = False
    """Whether the stream has no more items."""
    deadline: float | None = None
    """Event-loop time by which the whole attempt, stream included, must end."""
    release: Callable[[], None] | None = None
    """Tells the server's gate this stream is over (called when it closes)."""


CUT_ADVICE = (
    "the server cut the answer short, probably because it interrupts a running "
    "request when the next one arrives, "
    "as llama.cpp's server does by default; serve the model with "
    "`selectgraph local-server`, or start llama_cpp.server with "
    "--interrupt_requests False, so parallel requests queue instead"
)
"""What the warning about a cut stream says: why it happens and how to stop it."""

_MAX_PATIENCE = 300.0
"""Seconds a cut stream waits for the server to be free when the provider has no timeout."""


class StreamCut(Exception):
    """A stream the server ended before the answer finished: no finish reason came.

    ``_next_text`` raises it instead of the typed error it carries, so the
    ordinary retries (which would send the request again at once, cutting the
    request that interrupted it in turn) leave it to :class:`SDKProvider`: it
    waits until the server is free and sends the request again, once.
    """

    def __init__(self, error: ProviderError) -> None:
        super().__init__(str(error))
        self.error = error
        """The typed error raised when the request is cut a second time."""


class _ServerGate:
    """The requests this process has in flight to one server, in one event loop.

    A server that interrupts a running stream when the next request arrives
    cuts parallel requests short. Once it has cut one, the gate turns
    ``serial``: each request then waits (up to its provider's patience) until no
    other is in flight, so this process stops cutting its own requests. Another
    process's requests can still cut a stream.
    """

    def __init__(self) -> None:
        self.active = 0
        self.serial = False
        self._waiters: list[asyncio.Future[None]] = []

    async def enter(self, patience: float) -> Callable[[], None]:
        """Wait until the request may go; returns the call that ends it (idempotent).

        Under ``serial``, waits until no other request is in flight; still busy
        after ``patience`` seconds, the request goes ahead anyway.
        """
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(patience):
                await self._wait_until(lambda: not self.serial or self.active == 0)
        self.active += 1
        left = False

        def leave() -> None:
            nonlocal left
            if not left:
                left = True
                self.active -= 1
                self._wake()

        return leave

    async def _wait_until(self, ready: Callable[[], bool]) -> None:
        while not ready():
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)


_GATES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, _ServerGate]] = (
    weakref.WeakKeyDictionary()
)
"""One gate per server (base URL) per event loop, shared by every provider in the loop."""


def _gate(base_url: str) -> _ServerGate:
    gates = _GATES.setdefault(asyncio.get_running_loop(), {})
    return gates.setdefault(base_url, _ServerGate())


@dataclass(slots=True)
class _LoopClient(Generic[C]):
    client: C
    lifetime: AsyncGenerator[None, None]


class LoopClients(Generic[C]):
    """SDK clients, one per event loop, each closed when its loop shuts down.

    Args:
        build: Makes a new client (with its own connection pool).
        close: Closes a client's connections (awaited in the client's loop).
        first: A client built already (to check credentials up front); the first
            loop to ask gets it, so it is not built twice.
    """

    def __init__(
        self,
        build: Callable[[], C],
        close: Callable[[C], Awaitable[None]],
        *,
        first: C | None = None,
    ) -> None:
        self._build = build
        self._close = close
        self._spare = first
        self._lock = threading.RLock()
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopClient[C]] = (
            weakref.WeakKeyDictionary()
        )

    def __len__(self) -> int:
        """How many loops hold a client now."""
        with self._lock:
            return len(self._clients)

    async def get(self) -> C:
        """The client of the running loop, built (and tied to the loop's shutdown) if new."""
        loop = asyncio.get_running_loop()
        with self._lock:
            entry = self._clients.get(loop)
            if entry is not None:
                return entry.client
            self._forget_closed_loops()
            client = self._spare if self._spare is not None else self._build()
            self._spare = None
            entry = _LoopClient(client, self._lifetime(loop, client))
            self._clients[loop] = entry
        # Started here, the generator is registered with this loop, whose
        # shutdown_asyncgens() will finalise it (and so close the client).
        await entry.lifetime.__anext__()
        return client

    async def aclose(self) -> None:
        """Close the running loop's client now, and forget clients of closed loops."""
        loop = asyncio.get_running_loop()
        with self._lock:
            entry = self._clients.pop(loop, None)
            self._forget_closed_loops()
        if entry is not None:
            await entry.lifetime.aclose()

    async def _lifetime(
        self, loop: asyncio.AbstractEventLoop, client: C
    ) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            with self._lock:
                current = self._clients.get(loop)
                if current is not None and current.client is client:
                    del self._clients[loop]
            if not loop.is_closed():
                await self._close(client)

    def _forget_closed_loops(self) -> None:
        # A loop closed without shutdown_asyncgens() (a hand-managed loop) never
        # finalised its generator; finish it without the loop, which can no longer
        # run anything. Called with the lock held.
        for loop in [loop for loop in self._clients if loop.is_closed()]:
            entry = self._clients.pop(loop)
            closing = entry.lifetime.aclose()
            try:
                closing.send(None)
            except (StopIteration, StopAsyncIteration):
                pass
            else:  # pragma: no cover - the finally never awaits once the loop is closed
                closing.close()


class SDKProvider(ToolChoiceFallback, ABC, Generic[C, S]):
    """Base of providers that wrap a vendor SDK client.

    Subclasses set ``_clients`` (or ``_shared_client`` for a client the caller
    passed in), ``_base_url``, ``_secrets``, ``_retry`` and ``_sleep`` in
    ``__init__`` and implement :meth:`_next_text` (read one stream item into the
    assembler, returning its text) and :meth:`_close_stream`.

    Structured output falls back through ``structured_modes`` (best first): when
    a server refuses one mode, the request is sent again in the next, and the
    mode that worked is remembered for later requests. A required or named tool
    choice the server refuses or ignores falls back to a prompted JSON tool call
    (see :mod:`selectgraph.providers._tool_fallback`).
    """

    name: str
    default_model: str
    structured_modes: tuple[StructuredMode, ...] = ("json_schema", "instructions")
    """The structured-output modes this provider can use, best first."""
    _structured_mode: StructuredMode | None = None
    _clients: LoopClients[C] | None
    _shared_client: C | None
    _base_url: str
    _secrets: tuple[str, ...]
    _retry: ProviderRetry
    _sleep: Callable[[float], Awaitable[None]]
    _timeout: float | None = None
    """Seconds one attempt may take in total: request, body and stream."""
    _stream_idle_timeout: float | None = None
    """Seconds a stream may go without an event."""

    def __repr__(self) -> str:
        base_url = redact_url(self._base_url, self._secrets)
        return f"{type(self).__name__}(base_url={base_url!r}, default_model={self.default_model!r})"

    async def _client(self) -> C:
        """The SDK client to use in the running event loop."""
        if self._shared_client is not None:
            return self._shared_client
        assert self._clients is not None
        return await self._clients.get()

    async def aclose(self) -> None:
        """Close the HTTP connections this provider opened in the running event loop.

        Clients it opened in other loops close when those loops shut down; a client
        passed in by the caller is left open.
        """
        if self._clients is not None:
            await self._clients.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    @property
    def structured_mode(self) -> StructuredMode:
        """The structured-output mode the next request with a response_format will try first."""
        return self._structured_mode or self.structured_modes[0]

    def _rejection(
        self, error: ProviderError, server_message: str | None, mode: StructuredMode | None
    ) -> ProviderError:
        """``error``, or a StructuredOutputRejected when it refuses ``mode``, not the request."""
        if mode is None or mode == "instructions" or error.status_code is None:
            return error
        if not is_structured_rejection(error.status_code, server_message):
            return error
        return StructuredOutputRejected(
            f"{error} (structured output mode {mode!r})",
            provider=self.name,
            status_code=error.status_code,
        )

    async def _structured(
        self,
        request: CompletionRequest,
        call: Callable[[StructuredMode | None], Awaitable[T]],
    ) -> tuple[T, StructuredMode | None]:
        """``call(mode)`` in the best mode the server accepts; returns its result and the mode.

        Without a response_format, ``call(None)`` runs once. Otherwise the modes are
        tried from the remembered one on; a refusal moves to the next mode, and a
        success remembers it, so each provider pays for a refused mode once.
        """
        if request.response_format is None:
            return await call(None), None
        modes = self.structured_modes
        index = modes.index(self.structured_mode)
        while True:
            mode = modes[index]
            try:
                result = await call(mode)
            except StructuredOutputRejected as refused:
                if index + 1 >= len(modes):  # pragma: no cover - "instructions" is never refused
                    raise
                _log.warning(
                    "%s; falling back to structured output mode %r", refused, modes[index + 1]
                )
                index += 1
                continue
            if index > modes.index(self.structured_mode):
                self._structured_mode = mode
            return result, mode

    async def _with_retries(self, attempt: Callable[[], Awaitable[T]], model: str) -> T:
        """``attempt()`` with retries, each attempt bounded by the provider's ``timeout``."""

        async def bounded() -> T:
            leave = await _gate(self._base_url).enter(self._patience())
            try:
                return await within(
                    attempt, deadline=self._deadline(), error=self._timed_out(model)
                )
            finally:
                leave()

        return await call_with_retries(
            bounded, self._retry, sleep=self._sleep, on_retry=self._log_retry
        )

    def _deadline(self) -> float | None:
        """The event-loop time by which an attempt starting now must end."""
        if self._timeout is None:
            return None
        return asyncio.get_running_loop().time() + self._timeout

    def _timed_out(self, model: str) -> Callable[[], ProviderTimeoutError]:
        def error() -> ProviderTimeoutError:
            assert self._timeout is not None
            return timeout_error(
                provider=self.name,
                model=model,
                seconds=self._timeout,
                limit="timeout",
                what="the attempt (request, reply body and stream)",
            )

        return error

    def _log_retry(self, error: ProviderError, attempt: int, delay: float) -> None:
        _log.warning(
            "%s; retrying in %.2f s (attempt %d of %d)",
            error,
            delay,
            attempt + 1,
            self._retry.max_attempts,
        )

    # ------------------------------------------------------------ streaming
    @abstractmethod
    async def _next_text(self, opened: OpenStream[S], model: str) -> str | None:
        """Read one item of the stream into its assembler and return its text.

        Returns ``None`` at the end of the stream; raises ProviderError on failure.
        """

    @abstractmethod
    async def _close_stream(self, stream: S) -> None:
        """Close the SDK's stream (and its HTTP response)."""

    async def _next_event(self, opened: OpenStream[S], model: str) -> str | None:
        """:meth:`_next_text`, failing when no event comes within ``stream_idle_timeout``."""
        idle = self._stream_idle_timeout
        if idle is None:
            return await self._next_text(opened, model)

        def error() -> ProviderTimeoutError:
            return timeout_error(
                provider=self.name,
                model=model,
                seconds=idle,
                limit="stream_idle_timeout",
                what="waiting for the next stream event",
            )

        deadline = asyncio.get_running_loop().time() + idle
        return await within(lambda: self._next_text(opened, model), deadline=deadline, error=error)

    async def _read_until_text(self, opened: OpenStream[S], model: str) -> None:
        """Read until an item carries text (kept in ``first_text``) or the stream ends."""
        while True:
            text = await self._next_event(opened, model)
            if text is None:
                opened.finished = True
                return
            if text:
                opened.first_text = text
                return

    async def _open_streaming(
        self,
        open_stream: Callable[[], Awaitable[OpenStream[S]]],
        model: str,
        *,
        again: bool = False,
    ) -> OpenStream[S]:
        """Open a stream and read to its first text, retrying failures up to that point.

        Once text has been handed out, retrying would repeat what the caller has
        already seen, so later failures are raised as they come. Each attempt's
        deadline (``timeout`` from its start) holds until the stream ends.

        A stream the server cuts short (:class:`StreamCut`) is not retried at
        once, which would cut the request that interrupted it in turn: after a
        warning, it is sent again (``again=True``) once this process has no other
        request in flight to the server, and later requests to it queue the same
        way. Cut again, it raises its typed error.
        """
        gate = _gate(self._base_url)
        leave = await gate.enter(self._patience())

        async def attempt() -> OpenStream[S]:
            deadline = self._deadline()

            async def open_and_read() -> OpenStream[S]:
                opened = await open_stream()
                opened.deadline = deadline
                try:
                    await self._read_until_text(opened, model)
                except BaseException:
                    await self._close_stream(opened.stream)
                    raise
                return opened

            return await within(open_and_read, deadline=deadline, error=self._timed_out(model))

        try:
            opened = await call_with_retries(
                attempt, self._retry, sleep=self._sleep, on_retry=self._log_retry
            )
        except StreamCut as cut:
            error = cut.error
        except BaseException:
            leave()
            raise
        else:
            opened.release = leave
            return opened
        # Out of the except clause, so the StreamCut is no error's context.
        leave()
        gate.serial = True
        if again:
            self._warn_cut(error, "it was cut a second time, so it is an error")
            raise error
        self._warn_cut(error, "sending the request again once the server is free")
        return await self._open_streaming(open_stream, model, again=True)

    def _patience(self) -> float:
        """Seconds a cut stream waits for the server to be free before it is sent anyway.

        Every attempt in flight ends within ``timeout`` of its start, so waiting
        that long is enough.
        """
        return self._timeout if self._timeout is not None else _MAX_PATIENCE

    def _warn_cut(self, error: ProviderError, then: str) -> None:
        _log.warning("%s; %s; %s", error, CUT_ADVICE, then)

    async def _relay(self, opened: OpenStream[S], model: str) -> AsyncGenerator[StreamChunk, None]:
        """Yield the text of an opened stream as it arrives, then close it.

        A stream cut short after text was yielded raises its typed error (with
        the warning of :meth:`_open_streaming`): sent again, it would repeat text.
        Later requests to the server queue.
        """
        try:
            while opened.first_text:
                yield StreamChunk(delta=opened.first_text)
                opened.first_text = ""
                if not opened.finished:
                    try:
                        await within(
                            lambda: self._read_until_text(opened, model),
                            deadline=opened.deadline,
                            error=self._timed_out(model),
                        )
                    except StreamCut as cut:
                        error = cut.error
                    else:
                        continue
                    # Raised outside the except clause: the StreamCut is not its context.
                    _gate(self._base_url).serial = True
                    self._warn_cut(error, "text was already handed out, so it is an error")
                    raise error
        finally:
            await self._close_stream(opened.stream)
            if opened.release is not None:
                opened.release()
