"""Recorder: keep a run's events as its trace and hand each one to the run's listeners.

Events are the single record of a run. The recorder keeps each event as a
compact tuple and builds the event object only when the trace is read, so a run
does not pay for objects nobody looks at. With listeners (an observer, astream(),
a tracer), each event some listener wants is also built once, shared by all of
them, and delivered in order: filled in full for listeners that named the events
they want (``event_types``), else with its fields filled on first read.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from time import perf_counter
from typing import TYPE_CHECKING, Any, Final, overload

from selectgraph.observe._delivery import run_ended
from selectgraph.observe._events import (
    _FILLERS,
    EdgeFired,
    GraphEvent,
    NodeFinished,
    NodeStarted,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunPaused,
    _Deferred,
)

if TYPE_CHECKING:
    from selectgraph.core._branch import BranchRef
    from selectgraph.observe._steps import TraceStep

__all__ = ["EventRecorder", "Listener", "Trace", "wanted_types"]

logger = logging.getLogger("selectgraph")

Listener = Callable[[GraphEvent], None]

# (event class code, (run_id, graph, namespace, branch), step, timestamp, *event values):
# one flat tuple per event, so a long run leaves the garbage collector less to walk.
RawEvent = tuple[Any, ...]

_BASE_FIELDS = frozenset(f.name for f in dataclasses.fields(GraphEvent))
_OWN_FIELDS: dict[type[GraphEvent], tuple[str, ...]] = {}


def _own_fields(cls: type[GraphEvent]) -> tuple[str, ...]:
    names = _OWN_FIELDS.get(cls)
    if names is None:
        names = tuple(f.name for f in dataclasses.fields(cls) if f.name not in _BASE_FIELDS)
        _OWN_FIELDS[cls] = names
    return names


_LAST_EVENTS = frozenset({RunFinished, RunFailed, RunCancelled, RunPaused})

_SPAN = -1
"""Marks a raw entry that holds a node's NodeStarted and NodeFinished at once (and, in
a longer one, the EdgeFired of the edge the run took from it)."""
SPAN: Final = _SPAN
"""The code of a span entry (see :func:`span_parts`)."""
_SPAN_LENGTH = 10
"""The length of a span entry without its EdgeFired."""

# A raw entry names its event class by a small int, not the class itself: a tuple
# of plain values is one the garbage collector stops tracking, so a long run's
# trace is not walked again by every full collection.
_CLASSES: list[type[GraphEvent]] = []
_CODES: dict[type[GraphEvent], int] = {}


def _code(cls: type[GraphEvent]) -> int:
    code = _CODES.get(cls)
    if code is None:
        code = _CODES[cls] = len(_CLASSES)
        _CLASSES.append(cls)
    return code


def _register_all(cls: type[GraphEvent]) -> None:
    """Give every event class its code at import, before any thread records one."""
    for sub in cls.__subclasses__():
        _code(sub)
        _register_all(sub)


_register_all(GraphEvent)
_NODE_STARTED = _code(NodeStarted)
_NODE_FINISHED = _code(NodeFinished)
_EDGE_FIRED = _code(EdgeFired)
_LAST_CODES = frozenset(_code(cls) for cls in _LAST_EVENTS)
"""Built and passed to ``run_ended`` even when no listener wants them."""

Route = tuple[Listener, ...]
"""The listeners of one event class, outermost graph's first."""
_Way = tuple[Route, "Maker | None", bool, int, "type[GraphEvent] | None"]
"""For an event class and number of values: its listeners, its maker (``None``: nobody
listens, keep the tuple), whether it ends a run, its code, and the class again when its
events are deferred (their log entry is their pending fields)."""


_Found = tuple[Route, "dict[tuple[int, int], Maker]"]
"""The listeners of an event class, and the makers their events are built with."""
_UNHEARD_ROUTES: dict[int, _Found] = {}
"""The routes of every run's recorder that has no listeners and no parent: none."""
_UNHEARD_WAYS: dict[tuple[type[GraphEvent], int], _Way] = {}
"""How such recorders record each event class (the same for all of them)."""


def wanted_types(listener: Callable[..., Any]) -> tuple[type[GraphEvent], ...] | None:
    """The event classes ``listener`` declared it wants (``event_types``); ``None``: all.

    Read from the listener itself (a function given the attribute) or, for a bound
    ``on_event``, from its observer.
    """
    types = getattr(listener, "event_types", None)
    if types is None:
        types = getattr(getattr(listener, "__self__", None), "event_types", None)
    return None if types is None else tuple(types)


def span_parts(raw: RawEvent) -> tuple[RawEvent, ...]:
    """The entries a span entry holds: NodeStarted, NodeFinished, and any EdgeFired.

    A span is ``(SPAN, base, step, started, node, visit, finished, duration, outcome,
    attempts)``, followed by ``(fired, target, kind, label)`` when it holds the edge.
    """
    base, step, name, visit = raw[1], raw[2], raw[4], raw[5]
    started = (_NODE_STARTED, base, step, raw[3], name, visit)
    finished = (_NODE_FINISHED, base, step, raw[6], name, visit, raw[7], raw[8], raw[9])
    if len(raw) == _SPAN_LENGTH:
        return started, finished
    return started, finished, (_EDGE_FIRED, base, step, raw[10], name, *raw[11:])


def event_class(code: int) -> type[GraphEvent]:
    """The event class a raw entry's code names."""
    return _CLASSES[code]


def own_fields(cls: type[GraphEvent]) -> tuple[str, ...]:
    """The fields of ``cls`` beyond every event's, in the order raw entries hold them."""
    return _own_fields(cls)


def build_raw(raw: RawEvent) -> GraphEvent:
    """The event a raw entry (not a span) records."""
    return _build(raw)


Maker = Callable[[tuple[Any, ...], int, float, tuple[Any, ...]], GraphEvent]
"""Builds an event from (base, step, timestamp, own values)."""

_new = object.__new__
_pend = _Deferred._pending.__set__  # type: ignore[attr-defined]
"""Sets a deferred event's log entry, from which its fields are filled on first read."""

_MAKERS: dict[tuple[int, int], Maker] = {}
"""A constructor per (event class code, number of own values given)."""
_DEFERS: dict[tuple[int, int], Maker] = {}
"""The same, building events whose fields are filled when first read (``_Deferred``)."""


def _makers(code: int, given: int) -> tuple[Maker, Maker]:
    """Constructors filling the event's slots one by one, skipping ``__init__``.

    The first builds the event whole; the second leaves its fields to be filled
    when one is first read (see ``_Deferred``).

    A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``
    by name; setting the slots through their descriptors costs a third of that,
    and building events is most of what watching a run costs. Classes this cannot
    build (no slots of their own, a ``__post_init__``) go through ``__init__``.
    """
    cls = _CLASSES[code]
    own = _own_fields(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    if "__slots__" not in cls.__dict__ or hasattr(cls, "__post_init__"):
        construct = _through_init(cls, own[:given])
        return construct, construct
    env: dict[str, Any] = {"new": object.__new__, "cls": cls}
    sources = [f"base[{i}]" for i in range(4)] + ["step", "timestamp"]
    names = ["run_id", "graph", "namespace", "branch", "step", "timestamp", *own]
    for index, name in enumerate(own):
        if index < given:
            sources.append(f"values[{index}]")
        else:
            default = fields[name].default
            if default is dataclasses.MISSING:
                raise TypeError(f"{cls.__name__} needs its field {name!r}: {given} values given")
            env[f"d{index}"] = default
            sources.append(f"d{index}")
    sets = []
    for index, (name, source) in enumerate(zip(names, sources, strict=True)):
        env[f"s{index}"] = getattr(cls, name).__set__
        sets.append(f"    s{index}(event, {source})")
    lines = [
        "def fill(event, raw):",  # from a log entry: (code, base, step, timestamp, *values)
        "    base, step, timestamp, values = raw[1], raw[2], raw[3], raw[4:]",
        *sets,
        "def make(base, step, timestamp, values):",
        "    event = new(cls)",
        *sets,
        "    return event",
        "def defer(base, step, timestamp, values):",
        "    event = new(cls)",
        "    pend(event, (code, base, step, timestamp, *values))",
        "    return event",
    ]
    env["code"] = code
    env["pend"] = _pend
    # The source is built from our own dataclasses' field names only, never from data.
    exec("\n".join(lines), env)
    made: Maker = env["make"]
    if not issubclass(cls, _Deferred):
        return made, made
    _FILLERS[cls, 4 + given] = env["fill"]
    deferred: Maker = env["defer"]
    return made, deferred


def _through_init(cls: type[GraphEvent], names: tuple[str, ...]) -> Maker:
    """A constructor calling ``cls(...)`` with the fields ``names`` given."""

    def construct(
        base: tuple[Any, ...], step: int, timestamp: float, values: tuple[Any, ...]
    ) -> GraphEvent:
        run_id, graph, namespace, branch = base
        own = dict(zip(names, values, strict=False))
        return cls(run_id=run_id, graph=graph, namespace=namespace, branch=branch,
                   step=step, timestamp=timestamp, **own)  # fmt: skip

    return construct


def _make(code: int, given: int, deferred: bool = False) -> Maker:
    """The constructor of events of class ``code`` from ``given`` values (made on first use)."""
    key = (code, given)
    if key not in _MAKERS:
        made, deferring = _makers(code, given)
        _DEFERS[key] = deferring  # first: a thread that finds _MAKERS' entry finds this too
        _MAKERS[key] = made
    return _DEFERS[key] if deferred else _MAKERS[key]


def _build(raw: RawEvent, extra: dict[str, Any] | None = None) -> GraphEvent:
    values = raw[4:]
    event = _make(raw[0], len(values))(raw[1], raw[2], raw[3], values)
    if extra:
        event = dataclasses.replace(event, **extra)
    return event


class Trace(Sequence[GraphEvent]):
    """The events of a run, in order; built on first access."""

    __slots__ = ("_log",)

    def __init__(self, log: list[Any]) -> None:
        self._log = log

    @property
    def run_id(self) -> str | None:
        """The run these events belong to (``store.list(result.trace.run_id)``, seed 004)."""
        for entry in self._log[:1]:
            if type(entry) is tuple:
                return str(entry[1][0])
            return str(entry.run_id)
        return None

    def _materialize(self) -> list[GraphEvent]:
        log = self._log
        spans = False
        for index, entry in enumerate(log):
            if type(entry) is tuple:
                if entry[0] == _SPAN:
                    spans = True
                else:
                    log[index] = _build(entry)
        if spans:
            expanded: list[Any] = []
            for entry in log:
                if type(entry) is tuple:
                    expanded.extend(map(_build, span_parts(entry)))
                else:
                    expanded.append(entry)
            log[:] = expanded
        return log

    @overload
    def __getitem__(self, index: int) -> GraphEvent: ...
    @overload
    def __getitem__(self, index: slice) -> list[GraphEvent]: ...
    def __getitem__(self, index: int | slice) -> GraphEvent | list[GraphEvent]:
        return self._materialize()[index]

    def __iter__(self) -> Iterator[GraphEvent]:
        return iter(self._materialize())

    def __len__(self) -> int:
        return len(self._materialize())

    @property
    def steps(self) -> list[TraceStep]:
        """The seed's trace steps (node start/end, routing, checkpoints...), in order."""
        from selectgraph.observe._steps import steps_of

        return steps_of(self._materialize())

    def __repr__(self) -> str:
        return f"Trace({len(self)} events)"


_offset: list[float] = [time.time() - time.perf_counter(), time.perf_counter()]
"""The wall clock minus perf_counter(), and when it was read."""


def _wall_offset() -> float:
    """What turns a perf_counter() reading into wall-clock time.

    Read again at most once a second, so a clock the system adjusts is followed,
    while the runs started in between share one float instead of one each.
    """
    now = time.perf_counter()
    if now - _offset[1] > 1.0:
        _offset[0] = time.time() - now
        _offset[1] = now
    return _offset[0]


class EventRecorder:
    """Records a run's events and delivers them to listeners; a failing listener is logged.

    A subgraph's recorder writes into its parent's, so the outermost trace and
    every listener see nested events too (with their ``namespace`` set).
    """

    __slots__ = (
        "_base",
        "_listeners",
        "_log",
        "_parent",
        "_routes",
        "_wall_offset",
        "_wants",
        "_ways",
        "keeps_content",
        "listener_errors",
        "live",
        "records_calls",
    )

    def __init__(
        self,
        run_id: str,
        graph: str,
        namespace: tuple[str, ...] = (),
        listeners: Sequence[Listener] = (),
        *,
        parent: EventRecorder | None = None,
        branch: BranchRef | None = None,
    ) -> None:
        if branch is None and parent is not None:
            branch = parent.branch  # a subgraph inside a branch is in that branch too
        self._base: tuple[str, str, tuple[str, ...], BranchRef | None] = (
            run_id,
            graph,
            namespace,
            branch,
        )
        self._listeners = tuple(listeners)
        self._wants = tuple((listener, wanted_types(listener)) for listener in self._listeners)
        # Who gets each event class, by code, worked out on first use; a recorder
        # without listeners of its own (a branch's) routes as its parent does, and
        # a run's with none at all as every such run does (a table for each would
        # cost each of thousands of concurrent runs two empty dicts).
        if self._listeners:
            self._routes: dict[int, _Found] = {}
            self._ways: dict[tuple[type[GraphEvent], int], _Way] = {}
        elif parent is not None:
            self._routes, self._ways = parent._routes, parent._ways
        else:
            self._routes, self._ways = _UNHEARD_ROUTES, _UNHEARD_WAYS
        self._parent = parent
        self.listener_errors = 0
        """Listener calls that raised (counted on the outermost recorder)."""
        self._log: list[Any] = parent._log if parent is not None else []
        self.live: bool = bool(self._listeners) or (parent is not None and parent.live)
        """Whether events are built and delivered as they happen."""
        self.records_calls: bool = self.live or (parent is not None and parent.records_calls)
        """Whether agents record their model and tool calls: when someone listens, or
        the run keeps an event log (whose readers want them whoever listened)."""
        self.keeps_content: bool = parent is not None and parent.keeps_content
        """Whether model calls keep their request and completion in the log: for an
        event log that stores content (``event_log="content"``: prompts, replies)."""
        # Every event of a run is timed by perf_counter() plus one anchor, the
        # run's (subgraphs and branches take their parent's): timestamps then
        # follow the order events were recorded in, which time.time() beside
        # perf_counter() readings did not (the two drift apart by microseconds).
        self._wall_offset: float = parent._wall_offset if parent is not None else _wall_offset()

    def now(self) -> float:
        """The wall-clock time of an event recorded now, on the run's one clock."""
        return perf_counter() + self._wall_offset

    @property
    def branch(self) -> BranchRef | None:
        """The fan-out branch this recorder's events come from."""
        return self._base[3]

    def base_for(self, branch: BranchRef) -> tuple[Any, ...]:
        """What :meth:`record_as` needs to tag events with ``branch``, built once per branch."""
        run_id, graph, namespace, _ = self._base
        return (run_id, graph, namespace, branch)

    def record_as(
        self, base: tuple[Any, ...], clock: float, cls: type[GraphEvent], step: int, *values: Any
    ) -> None:
        """Like :meth:`record_at`, for a branch that runs without a recorder of its own."""
        if self.live:
            self._record(cls, base, step, clock + self._wall_offset, values)
            return
        code = _CODES.get(cls)
        if code is None:
            code = _code(cls)
        self._log.append((code, base, step, clock + self._wall_offset, *values))

    def for_branch(self, branch: BranchRef) -> EventRecorder:
        """A recorder for one branch of a fan-out: same trace and listeners, tagged events."""
        run_id, graph, namespace, _ = self._base
        return EventRecorder(run_id, graph, namespace, parent=self, branch=branch)

    @property
    def outermost(self) -> EventRecorder:
        """The recorder of the outermost graph's run (this one, outside subgraphs)."""
        recorder = self
        while recorder._parent is not None:
            recorder = recorder._parent
        return recorder

    @property
    def trace(self) -> Trace:
        """The run's events (a subgraph shares its outermost graph's trace)."""
        return Trace(self._log)

    @property
    def logged(self) -> int:
        """How many entries the run's log holds: a mark for :meth:`raw_since`."""
        return len(self._log)

    def raw_since(self, mark: int) -> list[Any]:
        """The log's entries after ``mark`` as it keeps them: raw tuples, spans, events.

        For :func:`~selectgraph.observe._log_json.log_entries`, which writes the
        stored event log from them without building events.
        """
        return self._log[mark:]

    def record(self, cls: type[GraphEvent], step: int, *values: Any) -> None:
        """Record an event of ``cls``; ``values`` are its own fields in declaration order."""
        if self.live:
            # _record's body, inline: this runs for every event of an observed run.
            way = self._ways.get((cls, len(values))) or self._way(cls, len(values))
            if way[1] is None:
                self._log.append(
                    (way[3], self._base, step, perf_counter() + self._wall_offset, *values)
                )
                return
            raw = (way[3], self._base, step, perf_counter() + self._wall_offset, *values)
            # The trace keeps the tuple: the event dies with its last listener's use
            # of it, not in a garbage collection of a long run's trace.
            self._log.append(raw)
            if way[4] is not None:  # deferred: the entry is what fills it when read
                event = _new(way[4])
                _pend(event, raw)
            else:
                event = way[1](self._base, step, raw[3], values)
            for listener in way[0]:
                try:
                    listener(event)
                except Exception:
                    self._listener_failed(self.outermost, listener, event)
            if way[2]:
                run_ended(event)
            return
        code = _CODES.get(cls)
        if code is None:
            code = _code(cls)
        self._log.append((code, self._base, step, perf_counter() + self._wall_offset, *values))

    def record_at(self, clock: float, cls: type[GraphEvent], step: int, *values: Any) -> None:
        """Like :meth:`record`, timestamped from a ``perf_counter()`` reading the caller took."""
        if self.live:
            # _record's body, inline: this runs for every event of an observed run.
            way = self._ways.get((cls, len(values))) or self._way(cls, len(values))
            if way[1] is None:
                self._log.append((way[3], self._base, step, clock + self._wall_offset, *values))
                return
            raw = (way[3], self._base, step, clock + self._wall_offset, *values)
            # The trace keeps the tuple: the event dies with its last listener's use
            # of it, not in a garbage collection of a long run's trace.
            self._log.append(raw)
            if way[4] is not None:  # deferred: the entry is what fills it when read
                event = _new(way[4])
                _pend(event, raw)
            else:
                event = way[1](self._base, step, raw[3], values)
            for listener in way[0]:
                try:
                    listener(event)
                except Exception:
                    self._listener_failed(self.outermost, listener, event)
            if way[2]:
                run_ended(event)
            return
        code = _CODES.get(cls)
        if code is None:
            code = _code(cls)
        self._log.append((code, self._base, step, clock + self._wall_offset, *values))

    def _record(
        self,
        cls: type[GraphEvent],
        base: tuple[Any, ...],
        step: int,
        timestamp: float,
        values: tuple[Any, ...],
    ) -> None:
        way = self._ways.get((cls, len(values)))
        if way is None:
            way = self._way(cls, len(values))
        routes, make, last, code, _ = way
        if make is None:
            # Nobody listens for it: kept as a tuple, built only if the trace is read.
            self._log.append((code, base, step, timestamp, *values))
            return
        self._log.append((code, base, step, timestamp, *values))  # as record() does
        event = make(base, step, timestamp, values)
        # As _send does, inline: this runs for every event of an observed run.
        for listener in routes:
            try:
                listener(event)
            except Exception:
                self._listener_failed(self.outermost, listener, event)
        if last:
            run_ended(event)  # async observers' queue closes behind the run's last event

    def _way(self, cls: type[GraphEvent], given: int) -> _Way:
        """How an event of ``cls`` made of ``given`` values is recorded, worked out once."""
        code = _CODES.get(cls)
        if code is None:
            code = _code(cls)
        found = self._routes.get(code)
        if found is None:
            found = self._route(code)
        routes, makers = found
        last = code in _LAST_CODES
        make = _make(code, given, makers is _DEFERS) if routes or last else None
        # A class whose events record() may defer inline (its filler is registered).
        inline = cls if make is not None and (cls, 4 + given) in _FILLERS else None
        way = self._ways[cls, given] = (routes, make, last, code, inline)
        return way

    def _route(self, code: int) -> _Found:
        """The listeners of events of class ``code`` (outermost graph's first), and their makers.

        Events are built with their fields filled on first read unless a listener
        named the events it wants (``event_types``): such a listener reads them,
        while one taking every event (a counter, a stream handed on) often does not.
        """
        cls = _CLASSES[code]
        chain: list[EventRecorder] = []
        recorder: EventRecorder | None = self
        while recorder is not None:
            chain.append(recorder)
            recorder = recorder._parent
        wanted = [
            (listener, wants)
            for recorder in reversed(chain)
            for listener, wants in recorder._wants
            if wants is None or issubclass(cls, wants)
        ]
        readers = any(wants is not None for _, wants in wanted)
        found = (tuple(listener for listener, _ in wanted), _MAKERS if readers else _DEFERS)
        self._routes[code] = found
        return found

    def finish_node(
        self,
        clock: float,
        step: int,
        node: str,
        visit: int,
        duration: float,
        outcome: str,
        attempts: int,
        update: Any = None,
        state: Any = None,
    ) -> None:
        """Record NodeFinished; unobserved, it joins the node's NodeStarted in one entry.

        Listeners also get ``update`` (what the node wrote) and ``state``.

        A long unobserved run keeps one tuple per node instead of two, so the
        garbage collector has fewer objects to walk.
        """
        base = self._base
        if self.live:
            finished = clock + self._wall_offset
            # The trace keeps the plain tuple: holding the state there would keep it
            # alive as long as anything holds the trace.
            self._log.append((_NODE_FINISHED, base, step, finished, node, visit, duration,
                              outcome, attempts))  # fmt: skip
            way = self._ways.get((NodeFinished, 8))
            if way is None:
                way = self._way(NodeFinished, 8)
            routes, make, _, _, _ = way
            if make is not None:
                values = (node, visit, duration, outcome, attempts, None, update, state)
                event = make(base, step, finished, values)
                for listener in routes:
                    try:
                        listener(event)
                    except Exception:
                        self._listener_failed(self.outermost, listener, event)
            return
        # Only a run's own recorder folds: recorders of branches and subgraphs share
        # their parent's log with other threads, and log[-1] may change under them.
        if self._parent is None:
            log = self._log
            last = log[-1] if log else None
            if (
                type(last) is tuple
                and last[0] == _NODE_STARTED
                and last[1] is base
                and last[2] == step
                and last[4] == node
            ):
                finished = clock + self._wall_offset
                log[-1] = (_SPAN, base, step, last[3], node, visit, finished, duration,
                           outcome, attempts)  # fmt: skip
                return
        self.record_at(clock, NodeFinished, step, node, visit, duration, outcome, attempts)

    def record_edge(self, step: int, source: str, target: Any, kind: str, label: str) -> None:
        """Record EdgeFired; unobserved, it joins the span of the node it leaves.

        Only a run's own recorder folds (see :meth:`finish_node`), and only when the
        run keeps no event log: that log's writer counts the entries it has stored,
        and the span may be among them already.
        """
        if not self.live and self._parent is None and not self.records_calls:
            log = self._log
            last = log[-1] if log else None
            if (
                type(last) is tuple
                and last[0] == _SPAN
                and len(last) == _SPAN_LENGTH
                and last[1] is self._base
                and last[2] == step
                and last[4] == source
            ):
                log[-1] = (*last, perf_counter() + self._wall_offset, target, kind, label)
                return
        self.record(EdgeFired, step, source, target, kind, label)

    def record_delivering(
        self, cls: type[GraphEvent], step: int, *values: Any, **deliver_only: Any
    ) -> None:
        """Like :meth:`record`; listeners also get the fields ``deliver_only``, the trace does not.

        For values that hold the trace themselves (a run's result): keeping them
        in it would make a reference cycle, and a finished run's state would
        then wait for the cyclic garbage collector instead of being freed at once.
        """
        raw = (_code(cls), self._base, step, self.now(), *values)
        self._log.append(raw)
        if self._wanted(cls):
            self._deliver(_build(raw, deliver_only))

    def record_call(self, cls: type[GraphEvent], step: int, *values: Any, **content: Any) -> None:
        """Record a model call's event, with its ``content`` (request, completion).

        The content stays in the log only when the run stores content; listeners
        always get it.
        """
        raw = (_code(cls), self._base, step, self.now(), *values)
        if self.keeps_content:
            event = _build(raw, content)
            self._log.append(event)
            if self.live:
                self._deliver(event)
            return
        self._log.append(raw)
        if self._wanted(cls):
            self._deliver(_build(raw, content))

    def _wanted(self, cls: type[GraphEvent]) -> bool:
        """Whether an event of ``cls`` is built for listeners (or to end the run)."""
        if not self.live:
            return False
        code = _CODES.get(cls)
        if code is None:
            code = _code(cls)
        found = self._routes.get(code)
        if found is None:
            found = self._route(code)
        return bool(found[0]) or code in _LAST_CODES

    def emit(self, event: GraphEvent) -> None:
        """Record an already-built ``event`` and deliver it to every listener up the chain."""
        self._log.append(event)
        self._deliver(event)

    def _deliver(self, event: GraphEvent) -> None:
        code = _CODES.get(type(event))
        if code is None:
            code = _code(type(event))
        found = self._routes.get(code)
        if found is None:
            found = self._route(code)
        self._send(found[0], event)

    def _send(self, routes: Route, event: GraphEvent) -> None:
        """Call each listener of ``routes`` with ``event``; a failing one is counted and logged."""
        for listener in routes:
            try:
                listener(event)
            except Exception:
                self._listener_failed(self.outermost, listener, event)
        if type(event) in _LAST_EVENTS:
            run_ended(event)  # async observers' queue closes behind the run's last event

    @staticmethod
    def _listener_failed(outermost: EventRecorder, listener: Listener, event: GraphEvent) -> None:
        # An observer must never break the run it observes.
        outermost.listener_errors += 1
        logger.exception("selectgraph: listener %r failed on %s", listener, event.type)
