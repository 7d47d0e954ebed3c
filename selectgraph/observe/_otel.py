"""OpenTelemetry tracing: an observer that turns a run's events into spans.

One span for the run (``invoke_workflow {graph}``), one per node visit, one
per fan-out, one per model call (``chat {model}``) and one per tool call
(``execute_tool {tool}``), named and tagged after the OpenTelemetry GenAI
semantic conventions. Spans are opened and closed from the events'
timestamps, so a late delivery does not stretch them.

It is only an observer: a run it is not attached to pays nothing for it.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from selectgraph.observe._events import (
    BudgetExceeded,
    GraphEvent,
    InterruptRaised,
    LLMCallFinished,
    LLMCallStarted,
    LoopDetected,
    NodeCacheHit,
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
    ToolCallFinished,
    ToolCallStarted,
)
from selectgraph.observe._observer import Observer

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from opentelemetry.trace import Span, SpanContext, Tracer, TracerProvider
    from opentelemetry.util.types import AttributeValue

    from selectgraph.core._branch import BranchRef

__all__ = ["OTelObserver"]

_PROVIDER_NAMES: Final[Mapping[str, str]] = {"openai": "openai", "anthropic": "anthropic"}
"""selectgraph provider names and their ``gen_ai.provider.name`` values; others pass as given."""

_FAILED_OUTCOMES: Final = frozenset({"failure", "cancelled"})

_PAUSED_LINKS: Final = 256
"""Paused runs remembered, so a resumed run's span can link to the span that paused."""

# Events that become span events on the node (or enclosing) span: name and the fields kept.
_MARKS: Final[Mapping[type[GraphEvent], tuple[str, tuple[str, ...]]]] = {
    BudgetExceeded: ("selectgraph.budget_exceeded", ("budget", "limit", "used", "needed")),
    InterruptRaised: ("selectgraph.interrupt", ("interrupt_id",)),
    NodeCacheHit: ("selectgraph.cache_hit", ("key",)),
    StallDetected: ("selectgraph.stall", ("unchanged_steps",)),
    LoopDetected: ("selectgraph.loop", ("first_step",)),
}

_Key = tuple[tuple[str, ...], str | None, str]
"""(namespace, branch task id, name): where an open node or fan-out span is filed."""


@dataclass(slots=True)
class _Unstarted:
    """A node span not started yet.

    Started when the node ends, with every attribute in one go (the SDK checks
    attributes as they are set, under a lock), or as soon as something needs it:
    a span inside the node, an event on it, the run ending first.
    """

    name: str
    parent: Span
    attributes: dict[str, AttributeValue]
    start: int


@dataclass(slots=True)
class _RunSpans:
    """The open spans of one run; dropped as soon as the run ends."""

    root: Span
    root_context: Any
    """The OpenTelemetry context holding ``root``: the parent of most node spans."""
    nodes: dict[_Key, Span | _Unstarted] = field(default_factory=dict)
    parallels: dict[_Key, Span] = field(default_factory=dict)
    calls: dict[tuple[str, ...], Span] = field(default_factory=dict)
    """Open model and tool call spans."""


def _ns(timestamp: float) -> int:
    return int(timestamp * 1_000_000_000)


def _task_id(branch: BranchRef | None) -> str | None:
    return None if branch is None else branch.task_id


def _error_type(error: str | None, fallback: str = "_OTHER") -> str:
    """The exception type of a ``Type: message`` description (low cardinality for error.type)."""
    if error:
        head = error.split(":", 1)[0].strip()
        if head and head.replace(".", "_").isidentifier():
            return head
    return fallback


def _parts(message: Any) -> list[dict[str, Any]]:
    """A message's content as GenAI semconv parts (text, tool calls, tool responses)."""
    parts: list[dict[str, Any]] = []
    role = str(message.role)
    if role == "tool":
        parts.append(
            {"type": "tool_call_response", "id": message.tool_call_id, "response": message.text}
        )
        return parts
    if message.content is not None:
        parts.append({"type": "text", "content": message.text})
    for call in message.tool_calls:
        parts.append(
            {"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.arguments}
        )
    return parts


def _messages_json(messages: Sequence[Any]) -> str:
    return json.dumps(
        [{"role": str(m.role), "parts": _parts(m)} for m in messages],
        ensure_ascii=False,
        default=str,
    )


class OTelObserver(Observer):
    """Trace runs with OpenTelemetry: pass it in ``observers=[...]``.

    Spans follow the OpenTelemetry GenAI semantic conventions where they
    exist: the run is an ``invoke_workflow`` span, each model call a ``chat``
    client span, each tool call an ``execute_tool`` span; node visits and
    fan-outs are ``selectgraph.node`` / ``selectgraph.parallel`` spans (an
    agent node becomes ``invoke_agent {agent}`` once its agent calls its model).
    Nodes of a subgraph nest under the subgraph's node, branch nodes under
    their fan-out. Prompts and answers are recorded only with
    ``capture_content=True``; credentials and headers never are.

    The run span is a child of whatever span is current when the run starts,
    so a run made inside a traced request joins that request's trace.

    Example:
        >>> from opentelemetry.sdk.trace import TracerProvider
        >>> from selectgraph import END, AgentGraph
        >>> provider = TracerProvider()
        >>> graph = AgentGraph("demo").add_node("a", lambda s: {"x": 1}, next_node=END)
        >>> _ = graph.set_entry("a").run({}, observers=[OTelObserver(provider)])
    """

    def __init__(
        self, tracer_provider: TracerProvider | None = None, capture_content: bool = False
    ) -> None:
        """Trace runs with ``tracer_provider`` (the global one by default).

        Args:
            tracer_provider: Where spans go; ``None`` uses
                ``opentelemetry.trace.get_tracer_provider()``.
            capture_content: Also record prompts, answers, tool arguments and
                results (they may hold personal data).

        Raises:
            ImportError: OpenTelemetry is not installed (``pip install 'selectgraph[otel]'``).
        """
        try:
            from opentelemetry import trace
        except ImportError as exc:  # the api is an optional extra
            raise ImportError(
                "OTelObserver needs OpenTelemetry: install it with pip install 'selectgraph[otel]'"
            ) from exc
        self._api = trace
        provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
        self._tracer: Tracer = provider.get_tracer("selectgraph", _version())
        self.capture_content = capture_content
        """Whether prompts, answers and tool traffic are recorded."""
        self._lock = threading.Lock()
        self._runs: dict[str, _RunSpans] = {}
        self._paused: OrderedDict[str, SpanContext] = OrderedDict()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "on_event" in cls.__dict__ and "event_types" not in cls.__dict__:
            cls.event_types = None  # its own on_event may want what spans do not

    @property
    def open_runs(self) -> int:
        """Runs being traced right now (their spans are still open)."""
        with self._lock:
            return len(self._runs)

    def on_event(self, event: GraphEvent) -> None:
        """Open, annotate or close the spans ``event`` concerns."""
        # Branches of a synchronous run deliver from worker threads.
        with self._lock:
            self._handle(event)

    # --- dispatch --------------------------------------------------------------------

    def _handle(self, event: GraphEvent) -> None:
        found = _HANDLERS.get(type(event), _UNKNOWN)
        if found is _UNKNOWN:
            found = _handler_of(type(event))
        if found is None:
            return  # an event that makes no span
        handle, in_run = found
        if not in_run:
            handle(self, event)
            return
        run = self._runs.get(event.run_id)
        if run is not None:  # else a run that began before this observer was attached
            handle(self, run, event)

    def _run_started(self, event: RunStarted | RunResumed) -> None:
        if not event.namespace and event.branch is None:
            self._start_run(event)

    def _run_stopped(
        self, run: _RunSpans, event: RunFinished | RunFailed | RunCancelled | RunPaused
    ) -> None:
        if not event.namespace and event.branch is None:
            self._end_run(run, event)
        elif isinstance(event, RunFailed | RunCancelled):
            self._subgraph_stopped(run, event)

    # --- where a span belongs ----------------------------------------------------------

    def _enclosing(
        self, run: _RunSpans, namespace: tuple[str, ...], branch: BranchRef | None
    ) -> Span:
        """The span a node at ``namespace``/``branch`` runs inside: fan-out, subgraph or run."""
        if branch is not None:
            fan_out = run.parallels.get((namespace, _task_id(branch.parent), branch.source))
            if fan_out is not None:
                return fan_out
        if namespace:
            subgraph = self._node_span(run, (namespace[:-1], _task_id(branch), namespace[-1]))
            if subgraph is not None:
                return subgraph
        if branch is not None:
            return self._enclosing(run, namespace, branch.parent)
        return run.root

    def _owner(self, run: _RunSpans, event: GraphEvent) -> Span:
        """The node span an event happened in, else the span enclosing it."""
        node = event.node_name
        if node is not None:
            span = self._node_span(run, (event.namespace, _task_id(event.branch), node))
            if span is not None:
                return span
        return self._enclosing(run, event.namespace, event.branch)

    def _context_of(self, run: _RunSpans, parent: Span) -> Any:
        """The context to start a child of ``parent`` in (the run's own made once)."""
        if parent is run.root:
            return run.root_context
        return self._api.set_span_in_context(parent)

    def _start(
        self,
        run: _RunSpans,
        name: str,
        parent: Span,
        event: GraphEvent,
        attributes: dict[str, AttributeValue],
        *,
        client: bool = False,
    ) -> Span:
        kind = self._api.SpanKind.CLIENT if client else self._api.SpanKind.INTERNAL
        return self._tracer.start_span(
            name,
            context=self._context_of(run, parent),
            kind=kind,
            attributes=attributes,
            start_time=_ns(event.timestamp),
        )

    def _fail(self, span: Span, error: str | None, error_type: str) -> None:
        span.set_status(self._api.Status(self._api.StatusCode.ERROR, error or error_type))
        span.set_attribute("error.type", error_type)

    @staticmethod
    def _where(event: GraphEvent) -> dict[str, AttributeValue]:
        """Attributes saying where in the run an event happened."""
        attributes: dict[str, AttributeValue] = {
            "selectgraph.run_id": event.run_id,
            "selectgraph.graph": event.graph,
            "selectgraph.step": event.step,
            "selectgraph.namespace": list(event.namespace),
        }
        if event.branch is not None:
            attributes["selectgraph.branch"] = event.branch.label
            attributes["selectgraph.branch.index"] = event.branch.index
            attributes["selectgraph.branch.task_id"] = event.branch.task_id
        return attributes

    # --- the run ---------------------------------------------------------------------

    def _start_run(self, event: RunStarted | RunResumed) -> None:
        stale = self._runs.pop(event.run_id, None)
        if stale is not None:  # a run id seen again before it ended: close what it left
            self._close_all(stale, _ns(event.timestamp))
            stale.root.end(_ns(event.timestamp))
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "invoke_workflow",
            "gen_ai.workflow.name": event.graph,
            "selectgraph.graph": event.graph,
            "selectgraph.run_id": event.run_id,
        }
        links = []
        if isinstance(event, RunStarted):
            attributes["selectgraph.entry"] = event.entry
        else:
            attributes["selectgraph.resumed"] = True
            attributes["selectgraph.resumed.live"] = event.live
            if event.checkpoint_id is not None:
                attributes["selectgraph.checkpoint_id"] = event.checkpoint_id
            paused = self._paused.pop(event.run_id, None)
            if paused is not None:
                links.append(self._api.Link(paused))
        # No explicit parent: the run joins the span current where it was started.
        root = self._tracer.start_span(
            f"invoke_workflow {event.graph}",
            kind=self._api.SpanKind.INTERNAL,
            attributes=attributes,
            links=links,
            start_time=_ns(event.timestamp),
        )
        self._runs[event.run_id] = _RunSpans(root, self._api.set_span_in_context(root))

    def _end_run(
        self, run: _RunSpans, event: RunFinished | RunFailed | RunCancelled | RunPaused
    ) -> None:
        del self._runs[event.run_id]
        end = _ns(event.timestamp)
        root = run.root
        if isinstance(event, RunFailed):
            self._subgraph_stopped(run, event)  # the node at fault, when it is still open
            self._fail(root, event.error, _error_type(event.error))
            root.set_attribute("selectgraph.error.category", event.category)
            if event.exception is not None:
                root.record_exception(event.exception, timestamp=end, escaped=True)
        elif isinstance(event, RunCancelled):
            self._subgraph_stopped(run, event)
            self._fail(root, f"run cancelled ({event.reason})", "cancelled")
            root.set_attribute("selectgraph.cancel_reason", event.reason)
        elif isinstance(event, RunPaused):
            root.set_attribute("selectgraph.paused", True)
            root.set_attribute("selectgraph.pause_reason", event.reason)
            root.set_attribute("selectgraph.next", list(event.next))
            if event.checkpoint_id is not None:
                root.set_attribute("selectgraph.checkpoint_id", event.checkpoint_id)
            self._paused[event.run_id] = root.get_span_context()
            while len(self._paused) > _PAUSED_LINKS:
                self._paused.popitem(last=False)
        else:
            root.set_attribute("selectgraph.steps", event.steps)
            root.set_attribute("selectgraph.quality", str(event.quality))
            root.set_attribute("selectgraph.stop_reason", str(event.stop_reason))
        self._close_all(run, end)
        root.end(end)

    def _close_all(self, run: _RunSpans, end: int) -> None:
        """End every span the run left open (a node a budget stopped, a branch cut off)."""
        for spans in (run.calls, run.nodes, run.parallels):
            # Innermost first: the most recently opened span of each kind ends first.
            for span in reversed(list(spans.values())):
                span = self._started(run, span)
                span.set_attribute("selectgraph.ended_with_run", True)
                span.end(end)
            spans.clear()

    def _subgraph_stopped(self, run: _RunSpans, event: RunFailed | RunCancelled) -> None:
        """A (sub)graph failed or was cancelled in a node that has no NodeFinished: close it."""
        if event.node is None:
            return
        found = run.nodes.pop((event.namespace, _task_id(event.branch), event.node), None)
        if found is None:
            return
        span = self._started(run, found)
        if isinstance(event, RunFailed):
            self._fail(span, event.error, _error_type(event.error))
            span.set_attribute("selectgraph.outcome", "failure")
        else:
            self._fail(span, f"cancelled ({event.reason})", "cancelled")
            span.set_attribute("selectgraph.outcome", "cancelled")
        span.end(_ns(event.timestamp))

    # --- nodes and fan-outs ----------------------------------------------------------

    def _start_node(self, run: _RunSpans, event: NodeStarted) -> None:
        key = (event.namespace, _task_id(event.branch), event.node)
        previous = run.nodes.pop(key, None)
        if previous is not None:  # never finished: do not let it leak
            self._started(run, previous).end(_ns(event.timestamp))
        attributes = self._where(event)
        attributes["selectgraph.node"] = event.node
        attributes["selectgraph.visit"] = event.visit
        parent = self._enclosing(run, event.namespace, event.branch)
        name = f"selectgraph.node {event.node}"
        run.nodes[key] = _Unstarted(name, parent, attributes, _ns(event.timestamp))

    def _node_span(self, run: _RunSpans, key: _Key) -> Span | None:
        """The open span of a node, started now if it was not yet."""
        found = run.nodes.get(key)
        if isinstance(found, _Unstarted):
            found = run.nodes[key] = self._started(run, found)
        return found

    def _started(self, run: _RunSpans, span: Span | _Unstarted) -> Span:
        """``span``, started if it was an :class:`_Unstarted` one."""
        if not isinstance(span, _Unstarted):
            return span
        return self._tracer.start_span(
            span.name,
            context=self._context_of(run, span.parent),
            kind=self._api.SpanKind.INTERNAL,
            attributes=span.attributes,
            start_time=span.start,
        )

    def _finish_node(self, run: _RunSpans, event: NodeFinished) -> None:
        found = run.nodes.pop((event.namespace, _task_id(event.branch), event.node), None)
        if found is None:
            return
        outcome = str(event.outcome)
        ended: dict[str, AttributeValue] = {
            "selectgraph.outcome": outcome,
            "selectgraph.attempts": event.attempts,
        }
        if isinstance(found, _Unstarted):
            found.attributes.update(ended)
            span = self._started(run, found)
        else:
            span = found
            span.set_attributes(ended)
        if outcome in _FAILED_OUTCOMES or (outcome == "skipped" and event.error):
            self._fail(span, event.error or outcome, _error_type(event.error, outcome))
        span.end(_ns(event.timestamp))

    def _retried(self, run: _RunSpans, event: NodeRetried) -> None:
        self._owner(run, event).add_event(
            "selectgraph.node.retry",
            {
                "selectgraph.attempt": event.attempt,
                "selectgraph.retry_delay_s": event.delay_s,
                "error.type": _error_type(event.error),
                "selectgraph.error": event.error,
            },
            timestamp=_ns(event.timestamp),
        )

    def _start_parallel(self, run: _RunSpans, event: ParallelStarted) -> None:
        key = (event.namespace, _task_id(event.branch), event.source)
        previous = run.parallels.pop(key, None)
        if previous is not None:
            previous.end(_ns(event.timestamp))
        attributes = self._where(event)
        attributes["selectgraph.parallel.source"] = event.source
        attributes["selectgraph.parallel.branches"] = list(event.branches)
        attributes["selectgraph.parallel.failure_mode"] = event.failure_mode
        parent = self._owner(run, event)
        run.parallels[key] = self._start(
            run, f"selectgraph.parallel {event.source}", parent, event, attributes
        )

    def _finish_parallel(self, run: _RunSpans, event: ParallelFinished) -> None:
        span = run.parallels.pop((event.namespace, _task_id(event.branch), event.source), None)
        if span is None:
            return
        span.set_attribute("selectgraph.parallel.succeeded", list(event.succeeded))
        span.set_attribute("selectgraph.parallel.failed", list(event.failed))
        span.set_attribute("selectgraph.parallel.cancelled", list(event.cancelled))
        if event.failed:
            self._fail(span, f"branches failed: {', '.join(event.failed)}", "branch_failed")
        span.end(_ns(event.timestamp))

    def _mark(self, run: _RunSpans, event: GraphEvent) -> None:
        name, fields = _MARKS[type(event)]
        attributes: dict[str, AttributeValue] = {
            f"selectgraph.{f}": getattr(event, f) for f in fields
        }
        if isinstance(event, InterruptRaised) and self.capture_content:
            attributes["selectgraph.prompt"] = event.prompt
        self._owner(run, event).add_event(name, attributes, timestamp=_ns(event.timestamp))

    # --- model and tool calls ----------------------------------------------------------

    def _call_key(self, event: GraphEvent, call_id: str, kind: str) -> tuple[str, ...]:
        return (kind, *event.namespace, _task_id(event.branch) or "", call_id)

    def _start_llm(self, run: _RunSpans, event: LLMCallStarted) -> None:
        owner = self._owner(run, event)
        if (
            event.agent
            and event.node is not None
            and owner is run.nodes.get((event.namespace, _task_id(event.branch), event.node))
        ):
            # The node runs an agent: name its span as the GenAI agent span it is.
            owner.update_name(f"invoke_agent {event.agent}")
            owner.set_attribute("gen_ai.operation.name", "invoke_agent")
            owner.set_attribute("gen_ai.agent.name", event.agent)
        attributes = self._where(event)
        attributes["gen_ai.operation.name"] = "chat"
        attributes["gen_ai.provider.name"] = _PROVIDER_NAMES.get(event.provider, event.provider)
        attributes["gen_ai.request.model"] = event.model
        if event.node is not None:
            attributes["selectgraph.node"] = event.node
        if event.agent:
            attributes["gen_ai.agent.name"] = event.agent
        attributes["gen_ai.request.stream"] = event.streaming
        request = event.request
        if request is not None:
            if request.temperature is not None:
                attributes["gen_ai.request.temperature"] = request.temperature
            if request.max_tokens is not None:
                attributes["gen_ai.request.max_tokens"] = request.max_tokens
            if request.stop:
                attributes["gen_ai.request.stop_sequences"] = list(request.stop)
            if self.capture_content:
                attributes["gen_ai.input.messages"] = _messages_json(request.messages)
        span = self._start(run, f"chat {event.model}", owner, event, attributes, client=True)
        run.calls[self._call_key(event, event.call_id, "llm")] = span

    def _finish_llm(self, run: _RunSpans, event: LLMCallFinished) -> None:
        span = run.calls.pop(self._call_key(event, event.call_id, "llm"), None)
        if span is None:
            return
        if event.response_model:
            span.set_attribute("gen_ai.response.model", event.response_model)
        span.set_attribute("gen_ai.usage.input_tokens", event.input_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", event.output_tokens)
        if event.finish_reason:
            span.set_attribute("gen_ai.response.finish_reasons", [event.finish_reason])
        if event.cost_usd is not None:
            span.set_attribute("selectgraph.cost_usd", event.cost_usd)
        if event.error is not None:
            self._fail(span, event.error, _error_type(event.error))
        completion = event.completion
        if self.capture_content and completion is not None:
            output: dict[str, Any] = {"role": "assistant", "parts": _parts(completion.message)}
            if completion.finish_reason:
                output["finish_reason"] = completion.finish_reason
            span.set_attribute(
                "gen_ai.output.messages", json.dumps([output], ensure_ascii=False, default=str)
            )
        span.end(_ns(event.timestamp))

    def _start_tool(self, run: _RunSpans, event: ToolCallStarted) -> None:
        attributes = self._where(event)
        attributes["gen_ai.operation.name"] = "execute_tool"
        attributes["gen_ai.tool.name"] = event.tool
        attributes["gen_ai.tool.call.id"] = event.call_id
        attributes["gen_ai.tool.type"] = "function"
        if event.node is not None:
            attributes["selectgraph.node"] = event.node
        if self.capture_content and event.arguments is not None:
            attributes["gen_ai.tool.call.arguments"] = json.dumps(
                dict(event.arguments), ensure_ascii=False, default=str
            )
        owner = self._owner(run, event)
        span = self._start(run, f"execute_tool {event.tool}", owner, event, attributes)
        run.calls[self._call_key(event, event.call_id, "tool")] = span

    def _finish_tool(self, run: _RunSpans, event: ToolCallFinished) -> None:
        span = run.calls.pop(self._call_key(event, event.call_id, "tool"), None)
        if span is None:
            return
        if event.error is not None:
            self._fail(span, event.error, _error_type(event.error, "tool_error"))
        if self.capture_content and event.result is not None:
            span.set_attribute("gen_ai.tool.call.result", event.result)
        span.end(_ns(event.timestamp))


_Handler = tuple[Callable[..., None], bool]
"""An OTelObserver method for an event class, and whether it takes the run's spans."""

_UNKNOWN: Any = object()

_HANDLERS: dict[type[GraphEvent], _Handler | None] = {
    RunStarted: (OTelObserver._run_started, False),
    RunResumed: (OTelObserver._run_started, False),
    NodeStarted: (OTelObserver._start_node, True),
    NodeFinished: (OTelObserver._finish_node, True),
    NodeRetried: (OTelObserver._retried, True),
    ParallelStarted: (OTelObserver._start_parallel, True),
    ParallelFinished: (OTelObserver._finish_parallel, True),
    LLMCallStarted: (OTelObserver._start_llm, True),
    LLMCallFinished: (OTelObserver._finish_llm, True),
    ToolCallStarted: (OTelObserver._start_tool, True),
    ToolCallFinished: (OTelObserver._finish_tool, True),
    RunFinished: (OTelObserver._run_stopped, True),
    RunFailed: (OTelObserver._run_stopped, True),
    RunCancelled: (OTelObserver._run_stopped, True),
    RunPaused: (OTelObserver._run_stopped, True),
    **dict.fromkeys(_MARKS, (OTelObserver._mark, True)),
}
"""What each event class does to the spans; classes not here make none."""

OTelObserver.event_types = tuple(_HANDLERS)


def _handler_of(cls: type[GraphEvent]) -> _Handler | None:
    """The handler of the nearest class ``cls`` derives from (remembered for ``cls``)."""
    handle = next((h for base in cls.__mro__ if (h := _HANDLERS.get(base)) is not None), None)
    _HANDLERS[cls] = handle
    return handle


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("selectgraph")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0"
