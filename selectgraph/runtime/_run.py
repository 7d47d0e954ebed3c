"""Runner: the step loop — pick a node, run it, merge its output, route, detect loops, repeat.

One loop serves every way of running a graph: ``arun()`` awaits it,
``astream()`` reads its events as they are emitted, and ``run()`` drives the
same coroutine without an event loop when every node is synchronous.

The loop body is kept flat on purpose: at a few microseconds per step, every
extra call or object shows in the benchmarks.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Awaitable, Callable
from time import perf_counter
from types import TracebackType
from typing import TYPE_CHECKING, Any

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
    wait_random,
)

from selectgraph._errors import (
    GraphRunError,
    LoopDetected,
    MaxStepsExceeded,
    NodeContractError,
    NodeError,
    ReducerError,
    RoutingError,
    StateValidationError,
    VisitLimitExceeded,
)
from selectgraph._sentinels import END, EndType
from selectgraph._usage import NO_USAGE, Usage
from selectgraph.graph._edges import Resolved, aresolve_next, match_simple, resolve_next
from selectgraph.graph._fingerprint import StateFingerprint
from selectgraph.graph._merge import Merger
from selectgraph.graph._nodes import NodeContext, NodeSpec
from selectgraph.graph._output import NodeOutput, read_output
from selectgraph.graph._policies import ErrorPolicy, LoopAction, MaxStepsAction, StopReason
from selectgraph.graph._result import GraphResult, NodeResult
from selectgraph.graph._state import LAST_OUTPUT, GraphState
from selectgraph.graph._views import StateView
from selectgraph.observe._events import (
    EdgeFired,
    NodeFinished,
    NodeRetried,
    NodeStarted,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunStarted,
    StallDetected,
)
from selectgraph.observe._events import (
    LoopDetected as LoopDetectedEvent,
)
from selectgraph.observe._recorder import EventRecorder

if TYPE_CHECKING:
    from selectgraph.graph._compiled import CompiledGraph

__all__ = ["Run", "blocking_sleep", "new_run_id"]

Sleep = Callable[[float], Awaitable[None]]

_random_bits = random.getrandbits


async def blocking_sleep(seconds: float) -> None:
    """Sleep without an event loop; used when run() drives a synchronous graph."""
    time.sleep(seconds)


def new_run_id() -> str:
    """A random run identifier (64 bits, hex).

    ``random`` is seeded from the OS at import and reseeded after fork; asking
    the OS for fresh bytes on every run is a syscall too many for the hot path.
    """
    return f"{_random_bits(64):016x}"


def _describe_error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _changes_nothing(output: NodeOutput, data: Any, reducers: Any) -> bool:
    """Whether merging ``output`` leaves ``data`` as it is (a cheap, conservative check).

    Looks only at the update, never the rest of the state: each key must be a
    last-write-wins key given a value equal to (and of the same type as) the one
    it holds. Anything else counts as a change, as does a write through the view.
    """
    writes = output.writes
    if writes is not None and (writes.assignments or writes.deletions):
        return False
    for key, value in output.update.items():
        if key in reducers:
            return False
        current = data.get(key, _ABSENT)
        if current is value:
            continue
        try:
            if current != value:
                return False
        except Exception:  # e.g. an array whose == is elementwise: count it as a change
            return False
        if type(current) is not type(value):  # 1 == True == 1.0, but they differ
            return False
    return True


_ABSENT: Any = object()


def _clear_retry_frames(tb: TracebackType | None) -> None:
    """Drop the locals of tenacity's frames in a traceback that passed through it.

    Those frames hold the retry state, whose last outcome holds the exception
    that holds the traceback: a cycle that would keep a failed run's state
    alive until the cyclic collector ran. The node's own frames are kept.
    """
    while tb is not None:
        frame = tb.tb_frame
        if str(frame.f_globals.get("__name__", "")).startswith(_RETRY_MODULES):
            with contextlib.suppress(RuntimeError):  # a frame still running stays as is
                frame.clear()
        tb = tb.tb_next


_RETRY_MODULES = ("tenacity", "concurrent.futures")


def _cancel_reason(exc: BaseException) -> str:
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    if isinstance(exc, GeneratorExit):
        return "closed"
    return "cancelled"


class Run:
    """One execution of a compiled graph and everything it keeps track of."""

    def __init__(
        self,
        graph: CompiledGraph,
        state: GraphState,
        *,
        run_id: str,
        recorder: EventRecorder,
        sleep: Sleep,
        namespace: tuple[str, ...] = (),
        track_writes: bool = False,
    ) -> None:
        self.graph = graph
        self.state = state
        self.run_id = run_id
        self.namespace = namespace
        self.recorder = recorder
        self.sleep = sleep
        self.steps = 0
        self.usage: Usage = NO_USAGE
        self.written_keys: set[str] | None = set() if track_writes else None
        """Data keys any node wrote (kept for graphs used as a node with full passthrough)."""
        self._visits: dict[str, int] = {}
        self._history = state.history.raw  # type: ignore[attr-defined]  # always a History here
        self._history_start = len(self._history)
        self._merger = Merger(graph.schema, None)
        self._seen: dict[tuple[str, int], int] = {}
        self._started = perf_counter()

    # Counters most runs never touch live on the class until first written, so
    # starting a run does not pay for them.
    _fp: StateFingerprint | None = None
    """Set at the first revisit of a node, when loop and stall detection begin."""
    _last_total = 0
    _unchanged = 0
    _stalls = 0
    _loops = 0
    _attempts = 1
    _degraded = False
    _max_steps_reached = False

    # ------------------------------------------------------------------- loop
    async def execute(self) -> GraphResult:
        """Run to a stop and return the result.

        Raises:
            GraphRunError: the run failed; ``error.state`` and ``error.result`` keep what was done.
        """
        # The loop lives in this one coroutine: run() drives it without an event
        # loop, and each extra coroutine layer would cost every run.
        try:
            graph = self.graph
            nodes = graph.nodes
            all_routes = graph.routes
            direct_calls = graph.direct_calls
            settings = graph.settings
            max_steps = settings.max_steps
            fp: StateFingerprint | None = None
            check_loops = False
            # Stalls are watched from the first step: until fingerprints start, a
            # step that wrote nothing new (checked on its update alone) is unchanged.
            stall_threshold = settings.stall_threshold
            reducers = graph.schema.reducers
            quiet = False  # before fingerprints: whether this step left ``data`` as it was
            seen = self._seen
            record = self.recorder.record
            record_at = self.recorder.record_at
            visits = self._visits
            state = self.state
            target: str | EndType = graph.entry
            record(RunStarted, 0, target)
            while target is not END:
                if max_steps is not None and self.steps >= max_steps:
                    return self._stop_at_limit(target)
                name = target
                spec = nodes[name]
                self.steps = step = self.steps + 1
                visit = visits.get(name, 0) + 1
                if (
                    visit == 2
                    and fp is None
                    and (settings.detect_loops or settings.stall_threshold)
                ):
                    # Until some node comes back the run cannot repeat itself, so
                    # fingerprints start here, with this state as their baseline.
                    fp = self._fp = self._merger.fingerprints = StateFingerprint()
                    check_loops = settings.detect_loops
                if check_loops:
                    assert fp is not None
                    seen_at = seen.setdefault((name, fp.total), step)
                    if seen_at != step and self._loop_stops_run(name, seen_at):
                        return self._finish("loop")
                visits[name] = visit
                state.current_node = name
                started = perf_counter()
                record_at(started, NodeStarted, step, name, visit)
                try:
                    if spec.max_visits is not None or spec.reads:
                        self._preflight(spec, visit)
                    call = direct_calls.get(name)
                    if call is not None:
                        view = StateView(state, name)
                        raw = call(view)
                        if type(raw) is dict and not view.touched and spec.writes is None:
                            output = NodeOutput(raw)  # the common case, without read_output()
                        else:
                            output = read_output(raw, view, spec)
                    else:
                        output = await self._attempt(spec, visit)
                except (ReducerError, StateValidationError):
                    raise
                except Exception as exc:
                    ok = self._handle_failure(spec, visit, exc, started)
                    goto = None
                    quiet = True  # a failed node wrote nothing
                else:
                    if fp is None and stall_threshold is not None:
                        quiet = _changes_nothing(output, state.data, reducers)
                    self._complete(spec, output, visit, started)
                    ok, goto = True, output.goto

                routes = all_routes[name]
                if goto is not None:
                    target = self._check_goto(spec, goto)
                    record(EdgeFired, step, name, target, "goto", "")
                elif ok and routes.static_success is not None:
                    edge = routes.static_success
                    target = edge.target  # type: ignore[assignment]
                    record(EdgeFired, step, name, target, "static", edge.label)
                elif ok and routes.simple is not None:
                    edge = match_simple(name, routes, state)
                    target = edge.target  # type: ignore[assignment]
                    record(EdgeFired, step, name, target, edge.kind, edge.label)
                else:
                    if routes.is_async:
                        resolved = await aresolve_next(name, routes, ok, state, nodes)
                    else:
                        resolved = resolve_next(name, routes, ok, state, nodes)
                    target = self._follow(name, resolved)
                    if resolved[2] is not None and resolved[2].values:
                        quiet = False  # the router wrote
                if stall_threshold is not None:
                    if fp is None:
                        changed = not quiet
                    elif fp.total != self._last_total:
                        self._last_total = fp.total
                        changed = True
                    else:
                        changed = False
                    if not changed:
                        self._stalled(name, stall_threshold)
                    elif self._unchanged:
                        self._unchanged = 0
            return self._finish("end")
        except GraphRunError as error:
            self._attach(error)
            raise
        except Exception as exc:
            # Not an engine error (a bug, or a failure nothing wrapped): observers
            # still learn that the run ended.
            self.recorder.record(
                RunFailed, self.steps, _describe_error(exc), "run_error", self.state.current_node
            )
            raise
        except BaseException as exc:
            # Cancelled, timed out, interrupted or closed from outside.
            self.recorder.record(
                RunCancelled, self.steps, _cancel_reason(exc), self.state.current_node
            )
            raise

    # ------------------------------------------------------------- one node
    def _preflight(self, spec: NodeSpec, visit: int) -> None:
        if spec.max_visits is not None and visit > spec.max_visits:
            raise VisitLimitExceeded(
                f"node {spec.name!r} would run for visit {visit} but max_visits={spec.max_visits}",
                node=spec.name,
            )
        missing = sorted(key for key in spec.reads or () if key not in self.state.data)
        if missing:
            raise NodeContractError(
                f"node {spec.name!r} reads {', '.join(map(repr, missing))} but the state has "
                "no such key yet; did an earlier node fail to write it?",
                node=spec.name,
            )

    def _complete(self, spec: NodeSpec, output: NodeOutput, visit: int, started: float) -> None:
        name = spec.name
        step = self.steps
        self._merger.merge(self.state, output, name, step)
        if visit > 1 and spec.optional_writes:
            stale = set(spec.optional_writes) - output.written_keys()
            if stale:
                self._merger.clear(self.state, stale)
        if self.written_keys is not None:
            self.written_keys.update(output.written_keys())
        usage = output.usage
        if usage is not None:
            self.usage = self.usage + usage
        writes = output.writes
        written = output.update
        if writes is not None and writes.assignments:
            written = {**writes.assignments, **written}
        finished = perf_counter()
        duration = (finished - started) * 1000
        attempts = self._attempts
        if attempts != 1:
            self._attempts = 1
        self._history.append(
            (
                name,
                step,
                visit,
                "success",
                written,
                written.get(LAST_OUTPUT),
                None,
                attempts,
                duration,
                usage,
                output.agent_result,
            )
        )
        self.recorder.record_at(
            finished, NodeFinished, step, name, visit, duration, "success", attempts
        )

    async def _attempt(self, spec: NodeSpec, visit: int) -> NodeOutput:
        policy = spec.error_policy or self.graph.settings.error_policy
        if policy is not ErrorPolicy.RETRY or not spec.adapter.executor_retries:
            return await self._call(spec, visit, 1)
        retry = spec.retry or self.graph.settings.retry

        def retryable(exc: BaseException) -> bool:
            return isinstance(exc, retry.retry_on) and not isinstance(exc, GraphRunError)

        # tenacity's objects form cycles among themselves: the hooks handed to
        # them must not hold the run (and so its state), only what they use.
        record, step, name = self.recorder.record, self.steps, spec.name

        def before_sleep(call: RetryCallState) -> None:
            error = call.outcome.exception() if call.outcome else None
            delay = call.next_action.sleep if call.next_action else 0.0
            record(
                NodeRetried,
                step,
                name,
                call.attempt_number,
                _describe_error(error) if error else "",
                delay,
            )

        retrying = AsyncRetrying(
            stop=stop_after_attempt(retry.max_retries + 1),
            wait=wait_exponential(
                multiplier=retry.initial_delay, exp_base=retry.multiplier, max=retry.max_delay
            )
            + wait_random(0, retry.jitter),
            retry=retry_if_exception(retryable),
            sleep=self.sleep,
            before_sleep=before_sleep,
            reraise=True,
        )
        output: NodeOutput | None = None
        self._attempts = 0  # counted here; read and reset by _complete / _handle_failure
        attempt: Any = None
        try:
            async for attempt in retrying:
                with attempt:
                    self._attempts += 1
                    # Each attempt gets a fresh view of the unchanged state: a failed
                    # attempt's writes were never merged, so nothing needs undoing.
                    output = await self._call(spec, visit, self._attempts)
        except BaseException as exc:
            # tenacity's retry objects refer to each other, and the last outcome
            # they keep holds this error: let go of it, or the failed run's
            # state would wait for the cyclic collector.
            if attempt is not None:
                attempt.retry_state.outcome = None
            _clear_retry_frames(exc.__traceback__)
            raise
        finally:
            del retrying, attempt  # they hold the last outcome, hence the error
        assert output is not None
        return output

    async def _call(self, spec: NodeSpec, visit: int, attempt: int) -> NodeOutput:
        adapter = spec.adapter
        view = StateView(self.state, spec.name, reads=spec.reads)
        context = None
        if adapter.wants_context:
            context = NodeContext(
                node=spec.name,
                step=self.steps,
                visit=visit,
                attempt=attempt,
                run_id=self.run_id,
                graph=self.graph.name,
                namespace=self.namespace,
                goal=self.graph.settings.goal,
                previous=self._previous_result(spec.name),
                emit=self.recorder.emit,
                runtime=self,
            )
        raw = await adapter(view, context)
        return read_output(raw, view, spec)

    def _previous_result(self, node: str) -> NodeResult | None:
        """This node's result from its previous visit in this run, if any."""
        history = self.state.history
        for index in range(len(history) - 1, self._history_start - 1, -1):
            name, result = history[index]
            if name == node and isinstance(result, NodeResult):
                return result
        return None

    def _handle_failure(self, spec: NodeSpec, visit: int, exc: Exception, started: float) -> bool:
        """Record a failure the run survives and return whether success edges apply; else raise."""
        name = spec.name
        routes = self.graph.routes[name]
        policy = spec.error_policy or self.graph.settings.error_policy
        if routes.failure:
            outcome: Any = "failure"
        elif policy is ErrorPolicy.SKIP:
            outcome = "skipped"
        else:
            error = self._node_error(spec, exc)
            try:
                if error is exc:
                    raise error  # an engine error keeps its own cause chain
                raise error from exc
            finally:
                # The traceback holds this frame, whose locals hold the error: a
                # cycle that would keep the failed run's state alive until the
                # cyclic collector ran.
                del error, exc
        error_text = _describe_error(exc)
        attempts = self._attempts
        self._attempts = 1
        self.state.errors.append(
            {
                "node": name,
                "step": self.steps,
                "visit": visit,
                "error": str(exc),
                "type": type(exc).__name__,
                "attempts": attempts,
                "handled_by": "on_failure edge" if outcome == "failure" else "skip",
            }
        )
        self._degraded = True
        duration = (perf_counter() - started) * 1000
        usage = getattr(exc, "usage", None)  # what a model-calling node spent before failing
        if isinstance(usage, Usage):
            self.usage = self.usage + usage
        else:
            usage = None
        result = NodeResult(
            node=name,
            step=self.steps,
            visit=visit,
            outcome=outcome,
            error=error_text,
            attempts=attempts,
            duration_ms=duration,
            usage=usage,
        )
        self._history.append((name, result))
        self.recorder.record(
            NodeFinished, self.steps, name, visit, duration, outcome, attempts, error_text
        )
        return bool(outcome == "skipped")

    def _node_error(self, spec: NodeSpec, exc: Exception) -> GraphRunError:
        if isinstance(exc, GraphRunError):
            if exc.node is None:
                exc.node = spec.name
            if exc.step is None:
                exc.step = self.steps
            return exc
        return NodeError(
            f"node {spec.name!r} raised {_describe_error(exc)}",
            node=spec.name,
            step=self.steps,
            state=self.state,
        )

    # ---------------------------------------------------------------- routing
    def _follow(self, source: str, resolved: Resolved) -> str | EndType:
        target, edge, directive, decision = resolved
        if directive is not None and directive.values:
            self._merger.merge(self.state, NodeOutput(directive.values), source, self.steps)
            if self.written_keys is not None:
                self.written_keys.update(directive.values)
        reason = ""
        if decision is not None:
            reason = decision.reasoning
            if decision.usage is not None:
                self.usage = self.usage + decision.usage
        kind, label = (edge.kind, edge.label) if edge is not None else ("static", "")
        self.recorder.record(EdgeFired, self.steps, source, target, kind, label, reason)
        return target

    def _check_goto(self, spec: NodeSpec, goto: str | EndType) -> str | EndType:
        if goto is not END and goto not in self.graph.nodes:
            raise RoutingError(
                f"node {spec.name!r} returned goto({goto!r}), which is not a node of this graph; "
                f"nodes: {', '.join(sorted(self.graph.nodes))}",
                node=spec.name,
            )
        if spec.destinations is not None and goto not in spec.destinations:
            allowed = ", ".join(repr(d) for d in spec.destinations)
            raise RoutingError(
                f"node {spec.name!r} returned goto({goto!r}) but declares destinations=[{allowed}]",
                node=spec.name,
            )
        return goto

    # ------------------------------------------------------------- detection
    def _loop_stops_run(self, node: str, first: int) -> bool:
        """A loop was seen (``node`` had this state at step ``first``): apply on_loop."""
        self._loops += 1
        self.recorder.record(LoopDetectedEvent, self.steps, node, first)
        action = self.graph.settings.on_loop
        if action is LoopAction.WARN:
            return False
        self.steps -= 1  # the repeated node never ran
        if action is LoopAction.STOP:
            self._degraded = True
            return True
        raise LoopDetected(
            f"node {node!r} is about to run on exactly the state it had at step {first}; with "
            "deterministic nodes the run would repeat forever. Add a stop condition, or set "
            "on_loop=LoopAction.WARN if the node is not deterministic",
            node=node,
        )

    def _stalled(self, node: str, threshold: int) -> None:
        """One more step left the state unchanged; report a stall every ``threshold`` of them."""
        self._unchanged += 1
        if self._unchanged >= threshold:
            self._stalls += 1
            self.recorder.record(StallDetected, self.steps, node, self._unchanged)
            self._unchanged = 0

    # ------------------------------------------------------------- stopping
    def _stop_at_limit(self, next_node: str | EndType) -> GraphResult:
        limit = self.graph.settings.max_steps
        action = self.graph.settings.on_max_steps
        if action is MaxStepsAction.THROW:
            raise MaxStepsExceeded(
                f"run reached max_steps={limit} before END (next node would have been "
                f"{next_node!r}); raise max_steps or add a stop condition",
                node=str(next_node),
            )
        # RETURN_LAST and RETURN_WITH_FLAG both return the state as it is; a run
        # cut off before END is never reported as clean.
        self._max_steps_reached = True
        self._degraded = True
        return self._finish("max_steps")

    def _build_result(self, stop_reason: StopReason, quality: Any) -> GraphResult:
        return GraphResult(
            state=self.state,
            steps=self.steps,
            trace=self.recorder.trace,
            quality=quality,
            stop_reason=stop_reason,
            run_id=self.run_id,
            duration_ms=(perf_counter() - self._started) * 1000,
            stalls=self._stalls,
            loops_detected=self._loops,
            max_steps_reached=self._max_steps_reached,
            total_usage=self.usage,
            history_start=self._history_start,
        )

    def _finish(self, stop_reason: StopReason) -> GraphResult:
        self.state.current_node = None
        if self.graph.schema.model is not None:
            try:
                self.graph.schema.validate_exit(self.state.data, state=self.state)
            except StateValidationError as error:
                self._blame(error)
                raise
        result = self._build_result(stop_reason, "degraded" if self._degraded else "clean")
        self.recorder.record_delivering(
            RunFinished,
            self.steps,
            self.steps,
            result.duration_ms,
            result.quality,
            stop_reason,
            result=result,
        )
        return result

    def _blame(self, error: StateValidationError) -> None:
        """Name the node that last wrote a field the exit validation rejected.

        Validation runs once, at exit, so that a step never pays for it; the
        history already says which node wrote what.
        """
        fields = {path.split(".", 1)[0] for path in error.fields}
        raw = self._history
        for index in range(len(raw) - 1, self._history_start - 1, -1):
            entry = raw[index]
            if type(entry) is tuple and len(entry) != 2:
                node, step, written = entry[0], entry[1], entry[4]
            else:
                result = entry[1]
                if not isinstance(result, NodeResult) or not result.output:
                    continue
                node, step, written = result.node, result.step, result.output
            if not fields.isdisjoint(written):
                error.node, error.step = node, step
                error.args = (f"{error.args[0]}; last written by node {node!r} at step {step}",)
                return

    def _attach(self, error: GraphRunError) -> None:
        if error.state is None:
            error.state = self.state
        if error.step is None:
            error.step = self.steps
        if error.result is None:
            stop: StopReason = "error"
            if isinstance(error, LoopDetected):
                stop = "loop"
            elif isinstance(error, MaxStepsExceeded):
                stop = "max_steps"
            error.result = self._build_result(stop, "failed")
        self.recorder.record(
            RunFailed, self.steps, _describe_error(error), error.category, error.node
        )
