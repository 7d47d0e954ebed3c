"""Observability: the events a run emits, and the observers that receive them."""

from __future__ import annotations

from selectgraph.observe._events import (
    EdgeFired,
    GraphEvent,
    GraphEventType,
    LoopDetected,
    NodeChunk,
    NodeFinished,
    NodeRetried,
    NodeStarted,
    ParallelFinished,
    ParallelStarted,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunStarted,
    StallDetected,
)
from selectgraph.observe._observer import Observer

__all__ = [
    "EdgeFired",
    "GraphEvent",
    "GraphEventType",
    "LoopDetected",
    "NodeChunk",
    "NodeFinished",
    "NodeRetried",
    "NodeStarted",
    "Observer",
    "ParallelFinished",
    "ParallelStarted",
    "RunCancelled",
    "RunFailed",
    "RunFinished",
    "RunStarted",
    "StallDetected",
]
