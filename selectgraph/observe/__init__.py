"""Observability: the events a run emits, and the observers that receive them."""

from __future__ import annotations

from selectgraph.observe._events import (
    CheckpointSaved,
    EdgeFired,
    GraphEvent,
    GraphEventType,
    InterruptRaised,
    LoopDetected,
    NodeCacheHit,
    NodeChunk,
    NodeFinished,
    NodeRetried,
    NodeStarted,
    ParallelFinished,
    ParallelStarted,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunPaused,
    RunResumed,
    RunStarted,
    StallDetected,
)
from selectgraph.observe._observer import Observer

__all__ = [
    "CheckpointSaved",
    "EdgeFired",
    "GraphEvent",
    "GraphEventType",
    "InterruptRaised",
    "LoopDetected",
    "NodeCacheHit",
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
    "RunPaused",
    "RunResumed",
    "RunStarted",
    "StallDetected",
]
