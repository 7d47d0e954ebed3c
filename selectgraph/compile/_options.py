"""Run options: what a compiled graph's run, resume and stream methods take."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypedDict

from selectgraph.core._serialization import StateSerializer
from selectgraph.core._state import GraphState
from selectgraph.observe._observer import Observer
from selectgraph.observe._recorder import Listener
from selectgraph.observe._stream import StreamMode
from selectgraph.persistence._protocol import CheckpointStore
from selectgraph.runtime._durable import Durability, EventLog

__all__ = [
    "NO_RESPONSE",
    "GraphInput",
    "PauseSignal",
    "ResumeOptions",
    "RunOptions",
    "StreamOptions",
]

GraphInput = GraphState | Mapping[str, Any] | str | None
"""What a run starts from: a state, a mapping of data, a user prompt, or nothing."""


NO_RESPONSE: Any = object()
"""``resume(interrupt_id)`` was not given an answer (None is a valid answer)."""

PauseSignal = Any
"""A PauseToken, threading.Event or asyncio.Event: anything with ``is_set()``."""


class ResumeOptions(TypedDict, total=False):
    """Keyword options of ``resume()`` / ``aresume()``."""

    checkpoint_store: CheckpointStore | None
    observers: Sequence[Observer | Listener]
    durability: Durability
    pause: PauseSignal | None
    serializer: StateSerializer | None
    migrate: Mapping[str, str] | None
    event_log: EventLog | None


class RunOptions(ResumeOptions, total=False):
    """Keyword options of ``run()``, ``arun()`` and ``astream()``."""

    run_id: str | None
    checkpoint_id: str | None
    pause_before: Iterable[str] | None
    pause_after: Iterable[str] | None


class StreamOptions(RunOptions, total=False):
    """Keyword options of ``astream()``."""

    stream_mode: StreamMode | Sequence[StreamMode]
