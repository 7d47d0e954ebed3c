"""SDK providers: the lifecycle, retries and streaming the OpenAI and Anthropic providers share.

Both wrap a vendor SDK client, retry through one layer (the SDKs' own retries
are off), and stream by retrying until the first text arrives, then relaying.
"""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Generic, Self, TypeVar

from selectgraph._errors import ProviderError
from selectgraph.providers._base import StreamChunk
from selectgraph.providers._errors_map import redact
from selectgraph.providers._retry import ProviderRetry, call_with_retries

__all__ = ["OpenStream", "SDKProvider", "elapsed_ms"]

_log = logging.getLogger("selectgraph.providers")

T = TypeVar("T")
S = TypeVar("S")


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


class SDKProvider(ABC, Generic[S]):
    """Base of providers that wrap a vendor SDK client.

    Subclasses set ``_client``, ``_owns_client``, ``_secrets``, ``_retry`` and
    ``_sleep`` in ``__init__`` and implement :meth:`_next_text` (read one stream
    item into the assembler, returning its text) and :meth:`_close_stream`.
    """

    name: str
    default_model: str
    _client: Any
    _owns_client: bool
    _secrets: tuple[str, ...]
    _retry: ProviderRetry
    _sleep: Callable[[float], Awaitable[None]]

    def __repr__(self) -> str:
        base_url = redact(str(self._client.base_url), self._secrets)
        return f"{type(self).__name__}(base_url={base_url!r}, default_model={self.default_model!r})"

    async def aclose(self) -> None:
        """Close the HTTP connections of the client this provider built."""
        if self._owns_client:
            await self._client.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _with_retries(self, attempt: Callable[[], Awaitable[T]]) -> T:
        return await call_with_retries(
            attempt, self._retry, sleep=self._sleep, on_retry=self._log_retry
        )

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

    async def _read_until_text(self, opened: OpenStream[S], model: str) -> None:
        """Read until an item carries text (kept in ``first_text``) or the stream ends."""
        while True:
            text = await self._next_text(opened, model)
            if text is None:
                opened.finished = True
                return
            if text:
                opened.first_text = text
                return

    async def _open_streaming(
        self, open_stream: Callable[[], Awaitable[OpenStream[S]]], model: str
    ) -> OpenStream[S]:
        """Open a stream and read to its first text, retrying failures up to that point.

        Once text has been handed out, retrying would repeat what the caller has
        already seen, so later failures are raised as they come.
        """

        async def attempt() -> OpenStream[S]:
            opened = await open_stream()
            try:
                await self._read_until_text(opened, model)
            except BaseException:
                await self._close_stream(opened.stream)
                raise
            return opened

        return await self._with_retries(attempt)

    async def _relay(self, opened: OpenStream[S], model: str) -> AsyncGenerator[StreamChunk, None]:
        """Yield the text of an opened stream as it arrives, then close it."""
        try:
            while opened.first_text:
                yield StreamChunk(delta=opened.first_text)
                opened.first_text = ""
                if not opened.finished:
                    await self._read_until_text(opened, model)
        finally:
            await self._close_stream(opened.stream)
