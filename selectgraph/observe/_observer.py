"""Observers: objects told about every event of a run, as it happens."""

from __future__ import annotations

from typing import Any

from selectgraph.observe._events import GraphEvent
from selectgraph.observe._recorder import Listener

__all__ = ["Observer", "as_listener"]


class Observer:
    """Base for objects notified of every event of a run; override :meth:`on_event`.

    Observers are called synchronously, in the order given; an exception in one
    is logged and never reaches the run.
    """

    def on_event(self, event: GraphEvent) -> None:
        """Called for each event."""


def as_listener(observer: Any) -> Listener:
    """The callable that delivers events to ``observer`` (an Observer or a plain function)."""
    on_event = getattr(observer, "on_event", None)
    if callable(on_event):
        return on_event  # type: ignore[no-any-return]
    if callable(observer):
        return observer  # type: ignore[no-any-return]
    raise TypeError(f"an observer needs an on_event(event) method, got {observer!r}")
