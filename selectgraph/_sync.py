"""Sync: run a coroutine to completion from synchronous code, inside a running loop or not."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["run_sync"]

T = TypeVar("T")


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` and return its result.

    Called from inside a running event loop (a notebook, an async app), the
    coroutine runs on a worker thread with a loop of its own, so ``run()``
    never fails with "event loop is already running".
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = asyncio.run(coroutine)
        except BaseException as exc:  # re-raised in the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=target, name="selectgraph-run")
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]  # type: ignore[no-any-return]
