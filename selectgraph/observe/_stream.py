"""astream()'s modes: what a consumer is handed for each event of the run."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal, get_args

from selectgraph.observe._events import (
    CustomEvent,
    GraphEvent,
    NodeChunk,
    NodeFinished,
    ParallelFinished,
    RunStarted,
)

__all__ = ["StreamMode", "stream_converter"]

StreamMode = Literal["events", "updates", "values", "messages", "custom"]
"""What ``astream(input, stream_mode=...)`` yields (see :meth:`~selectgraph.CompiledGraph.astream`).

- ``"events"`` (default): every :class:`~selectgraph.GraphEvent`.
- ``"updates"``: ``{node: what it wrote}`` after each node that succeeded.
- ``"values"``: a copy of ``state.data`` at the start, after each node and after each
  fan-out's merge.
- ``"messages"``: ``(text, metadata)`` for each piece of text an agent streams.
- ``"custom"``: whatever nodes publish with ``context.emit_custom(data)``.

A list of modes yields ``(mode, item)`` pairs, in event order.
"""

_MODES: tuple[str, ...] = get_args(StreamMode)
_NOTHING: tuple[Any, ...] = ()


def _outermost(event: GraphEvent) -> bool:
    return not event.namespace and event.branch is None


def _updates(event: GraphEvent) -> Any:
    if type(event) is NodeFinished and not event.namespace and event.outcome == "success":
        return {event.node: dict(event.update or {})}
    return _NOTHING


def _values(event: GraphEvent) -> Any:
    # Copied now: the state goes on changing after this event.
    kind = type(event)
    if (kind is NodeFinished or kind is RunStarted or kind is ParallelFinished) and _outermost(
        event
    ):
        state = event.state  # type: ignore[attr-defined]
        if state is not None:
            return dict(state.data)
    return _NOTHING


def _messages(event: GraphEvent) -> Any:
    if type(event) is NodeChunk:
        return (
            event.delta,
            {
                "node": event.node,
                "node_path": event.node_path,
                "namespace": event.namespace,
                "branch": event.branch.label if event.branch is not None else None,
                "run_id": event.run_id,
                "step": event.step,
            },
        )
    return _NOTHING


def _custom(event: GraphEvent) -> Any:
    if type(event) is CustomEvent:
        return event.data
    return _NOTHING


_CONVERTERS: dict[str, Callable[[GraphEvent], Any]] = {
    "events": lambda event: event,
    "updates": _updates,
    "values": _values,
    "messages": _messages,
    "custom": _custom,
}


_NEEDS: dict[str, tuple[type[GraphEvent], ...] | None] = {
    "events": None,
    "updates": (NodeFinished,),
    "values": (NodeFinished, RunStarted, ParallelFinished),
    "messages": (NodeChunk,),
    "custom": (CustomEvent,),
}
"""The events each mode makes items of (``None``: every event)."""


def every_event_converter(event: GraphEvent) -> tuple[Any, ...]:
    """The ``"events"`` mode's converter: every event is its own item."""
    return (event,)


def stream_converter(
    mode: StreamMode | Sequence[StreamMode],
) -> Callable[[GraphEvent], tuple[Any, ...]]:
    """A function giving the items to yield for one event (none, usually, in data modes).

    The function's ``event_types`` names the events it can make items of (``None``:
    every event); a listener calling it may declare the same (see
    :attr:`~selectgraph.observe.Observer.event_types`), so a run builds no others for it.

    Raises:
        ValueError: an unknown mode, or an empty list of modes.
    """
    single = isinstance(mode, str)
    modes = (mode,) if isinstance(mode, str) else tuple(mode)
    if not modes:
        raise ValueError(f"stream_mode needs at least one mode of {', '.join(_MODES)}")
    for name in modes:
        if name not in _CONVERTERS:
            raise ValueError(
                f"unknown stream_mode {name!r}; use one of {', '.join(map(repr, _MODES))}"
            )
    needs = [_NEEDS[name] for name in modes]
    types = None if None in needs else tuple(cls for need in needs for cls in need or ())
    if single:
        return _marked(_single(modes[0]), types)
    chosen = [(name, _CONVERTERS[name]) for name in modes]

    def several(event: GraphEvent) -> tuple[Any, ...]:
        out = []
        for name, convert in chosen:
            item = convert(event)
            if item is not _NOTHING:
                out.append((name, item))
        return tuple(out)

    return _marked(several, types)


def _single(mode: str) -> Callable[[GraphEvent], tuple[Any, ...]]:
    """The converter of one mode: its item in a tuple, or an empty tuple."""
    if mode == "events":
        return every_event_converter  # every event is an item: nothing to look at
    only = _CONVERTERS[mode]

    def one(event: GraphEvent) -> tuple[Any, ...]:
        item = only(event)
        return _NOTHING if item is _NOTHING else (item,)

    return one


def _marked(
    convert: Callable[[GraphEvent], tuple[Any, ...]], types: tuple[type[GraphEvent], ...] | None
) -> Callable[[GraphEvent], tuple[Any, ...]]:
    """``convert``, with ``event_types`` saying which events it needs (``None``: all)."""
    if types is not None:
        convert.event_types = types  # type: ignore[attr-defined]
    return convert
