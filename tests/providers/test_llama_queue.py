"""A call queued for the in-process model stops at its cancel, not when the model is free."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

from selectgraph.providers._llama import _Generation


class _HeldModel:
    """A model whose answer goes on until ``release`` is set."""

    def __init__(self, release: threading.Event, generating: threading.Event) -> None:
        self.release = release
        self.generating = generating

    def create_chat_completion(self, **_: Any) -> Iterator[dict[str, Any]]:
        self.generating.set()
        while not self.release.wait(0.01):
            yield {"choices": [{"delta": {"content": "x"}, "finish_reason": None}]}
        yield {"choices": [{"delta": {}, "finish_reason": "stop"}]}


class _Provider:
    name = "llama_cpp"
    _processors_type = list

    def __init__(self, model: _HeldModel) -> None:
        self._lock = threading.Lock()
        self.model = model

    def _live(self) -> _HeldModel:
        return self.model

    def _error(self, exc: Exception) -> Exception:
        return exc


async def test_a_cancelled_call_waiting_for_the_model_returns_at_once() -> None:
    release, generating = threading.Event(), threading.Event()
    provider = _Provider(_HeldModel(release, generating))
    holder = _Generation(provider, {"logit_bias": {}})  # type: ignore[arg-type]
    reading = asyncio.ensure_future(holder.next_text())
    assert await asyncio.to_thread(generating.wait, 30)  # the first call holds the model

    queued = _Generation(provider, {"logit_bias": {}})  # type: ignore[arg-type]
    waiting = asyncio.ensure_future(queued.next_text())
    await asyncio.sleep(0.1)
    waiting.cancel()
    # Stopping the queued call must not wait for the first call's answer to end.
    await asyncio.wait_for(queued.stop(), timeout=10)
    assert not release.is_set()

    release.set()
    await reading
    await holder.stop()
