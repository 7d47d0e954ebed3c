"""The step loop: pick the node, check limits, run it, merge, checkpoint, route; repeat.

One loop serves every way of running a graph: ``arun()`` awaits it,
``astream()`` reads its events as they are emitted, and ``run()`` drives the
same coroutine without an event loop when every node is synchronous. A
branch of a fan-out walks the same loop on its own view of the state (see
``_branch_run``), so a step does the same thing wherever it runs.

The common path of a step (a plain function called directly, a static or
simple conditional edge) is written out in :meth:`Walker.walk` itself: at a
few microseconds per step, every extra call or object shows in the
benchmarks. Everything else is a method of the part it belongs to: node calls
(``_node_call``), routing (``_routing_step``), detection (``_detection``),
fan-outs (``_fan_out_step``), interrupts (``_interrupts``), stops (``_stops``)
and results (``_results``).
"""

from __future__ import annotations

import asyncio
from time import perf_counter
from typing import Any

from selectgraph.core._control import (
    TOKEN_CANCEL,
    Budget,
    BudgetStop,
    RunCancelledByToken,
    RunControl,
    current_control,
)
from selectgraph.core._control import enter as enter_control
from selectgraph.core._control import leave as leave_control
from selectgraph.core._errors import ThreadTakenOver
from selectgraph.core._interrupts import NodeInterrupt
from selectgraph.core._result import GraphResult
from selectgraph.core._run_errors import (
    EdgeError,
    GraphRunError,
    ReducerError,
    RoutingError,
    StateValidationError,
)
from selectgraph.core._sentinels import END, EndType
from selectgraph.nodes._output import read_output
from selectgraph.nodes._spec import NodeSpec
from selectgraph.observe._events import (
    BudgetExceeded,
    EdgeFired,
    NodeStarted,
    RunCancelled,
    RunFailed,
    RunResumed,
    RunStarted,
)
from selectgraph.routing._edges import (
    NodeRoutes,
    aresolve_next,
    match_simple,
    resolve_next,
    route_with_value,
)
from selectgraph.routing._parallel import Branches
from selectgraph.runtime._branches import BranchAborted
from selectgraph.runtime._child_progress import ChildProgress
from selectgraph.runtime._detection import Detection, changes_nothing
from selectgraph.runtime._durable import Durable
from selectgraph.runtime._fan_out_step import FanOuts
from selectgraph.runtime._routing_step import Routing
from selectgraph.runtime._run_state import Stop, describe_error
from selectgraph.runtime._stops import Stops
from selectgraph.state._fingerprint import StateFingerprint
from selectgraph.state._merge import Merger
from selectgraph.state._output import NodeOutput
from selectgraph.state._views import StateView

__all__ = ["Walker"]

_NO_BUDGET = Budget()


def _cancel_reason(exc: BaseException) -> str:
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    if isinstance(exc, GeneratorExit):
        return "closed"
    return "cancelled"


class Walker(FanOuts, Routing, Detection, Stops):
    """A run's or branch's walk through the graph: the step loop and how it ends."""

    _guards = False
    """Whether anything but the step limit may stop this walk before a node (see _refusal)."""
    _checks = False
    """Whether budgets or a token are checked before each node."""
    _nested: RunControl | None = None
    """The control of the run this walk is part of, when its time or token is checked."""

    # A walk is one coroutine: arun()'s task holds it, and every run in flight holds its
    # frame (two frames, the loop's and a wrapper's, cost each of thousands of concurrent
    # runs a third of a KB). How it starts, ends and is cut short are the methods below;
    # a whole run (no ``stop_at``) returns its GraphResult, a branch its Stop.
    async def walk(self, target: str | EndType | Branches | tuple[str, bool, Any]) -> Any:
        """Run nodes from ``target`` until END, the join point, the step limit or a loop stop."""
        graph = self.graph
        nodes, all_routes, reducers = graph.nodes, graph.routes, graph.schema.reducers
        direct_calls, direct_async = self._direct_calls, self._direct_async
        recorder, visits, state = self.recorder, self._visits, self.state
        stop_at, one_node, durable = self.stop_at, self.one_node, self.durable or self.progress
        entered = self._take_control(stop_at is None)
        max_steps, guarded = graph.settings.max_steps, self._guards
        stall_threshold = graph.settings.stall_threshold if self.detect else None
        fp: StateFingerprint | None = None  # each walk starts them afresh, at a revisit
        seen: dict[tuple[str, int], int] | None = None
        output: Any  # a NodeOutput, or what _recover says of a failure (a bool)
        name = source = self._fan_out_source  # where the walk comes from
        start = target
        try:
            if stop_at is None and self._begin(target):
                await self._write_first()
            if isinstance(target, tuple):  # continued from a checkpoint taken after a node
                name, target = target[0], await self.route_after(*target)
            while target is not END and not (  # names compare by value past the identity check
                target is stop_at or (stop_at is not None and target == stop_at)
            ):
                if type(target) is Branches:
                    stop, target = await self._fan_out_at(name, target)
                    if stop is not None:
                        break
                    continue
                if max_steps is not None and self.steps >= max_steps:
                    self._stopped_at, stop = target, "max_steps"
                    break
                if guarded and (stop := self._refusal(target)) is not None:
                    break
                spec = nodes[name := target]  # type: ignore[assignment, index]
                self.steps = step = self.steps + 1
                visit = visits.get(name, 0) + 1
                if visit == 2 and fp is None and self.detect:
                    fp, seen = self._start_detection(stall_threshold)
                if seen is not None and fp is not None:
                    first = seen.setdefault((name, fp.total), step)
                    if first != step and (stop := self._loop_stop(name, first)) is not None:
                        break
                visits[name], state.current_node = visit, name
                recorder.record_at(started := perf_counter(), NodeStarted, step, name, visit)
                quiet = False  # before fingerprints: whether this step left ``data`` as it was
                if spec.group is not None:
                    ok, goto = await self._run_group(spec, visit, started), None
                    if self._group_hit_limit:
                        stop = "max_steps"
                        break
                else:
                    try:
                        if spec.max_visits is not None or spec.reads:
                            self._preflight(spec, visit)
                        view = None  # a plain function is called here, without its adapter
                        if (call := direct_calls.get(name)) is not None:
                            raw = call(view := StateView(state, name))
                        elif (call := direct_async.get(name)) is not None:
                            raw = await call(view := StateView(state, name))
                        if view is None:
                            output = await self._attempt(spec, visit)
                        elif type(raw) is dict and not view.touched and spec.writes is None:
                            output = NodeOutput(raw)  # the common case, without read_output()
                        else:
                            output = read_output(raw, view, spec)
                    except (ReducerError, StateValidationError, ThreadTakenOver):
                        raise  # not the node's failure: no policy absorbs them
                    except Exception as exc:
                        output = await self._recover(spec, visit, exc, started)
                    if type(output) is bool:  # a failure the run survived
                        ok, goto, quiet = output, None, True  # a failed node wrote nothing
                    else:
                        if fp is None and stall_threshold is not None:
                            quiet = changes_nothing(output, state.data, reducers)
                        self._complete(spec, output, visit, started)
                        ok, goto = True, output.goto
                        output = None  # not kept while the next node runs
                if one_node or (durable and await self._checkpointed(durable, name, ok, goto)):
                    stop = "join" if one_node else "paused"
                    break
                routes = all_routes[name]
                if goto is None and ok and (routes.static_success or routes.simple) is not None:
                    edge = routes.static_success or match_simple(name, routes, state)
                    target = self._took(name, edge, step)
                else:
                    target, wrote = await self._route(spec, routes, ok, goto)
                    quiet = quiet and not wrote
                if stall_threshold is not None:
                    if fp is not None:  # from here on, quiet means "fingerprint unchanged"
                        quiet, self._last_total = fp.total == self._last_total, fp.total
                    if quiet or self._unchanged:
                        self._stalled(name, stall_threshold, quiet)
            else:
                stop = "end" if target is END and stop_at is not END else "join"
            name, target = source, start  # the ending's failures: where the walk started
            return await self._ending(stop)
        except BaseException as exc:
            return await self._cut_short(exc, name, target)
        finally:
            leave_control(entered)

    # ------------------------------------------------------- around the loop
    def _begin(self, target: Any) -> bool:
        """Announce a whole run; returns whether its first checkpoint is still to be written."""
        if self.durable is not None and self.durable.event_log:
            self.recorder.records_calls = True  # the log's readers want them
            self.recorder.keeps_content = self.durable.event_log == "content"
        if self.resumed_from is None and not self.resumed_live:
            self.recorder.record_delivering(RunStarted, 0, target, state=self.state)
        else:
            self._announce_resume()
        return self.first_write is not None

    async def _ending(self, stop: Stop) -> Any:
        """Once the steps stopped: a branch's Stop, or a whole run's result (checkpointed)."""
        self._release()  # a walk that stopped after a node, before routing from it
        if self.stop_at is not None:
            return stop
        if self.durable is not None:
            return await self._stop_durably(stop)
        if stop == "max_steps":
            return self._stop_at_limit(self._stopped_at)
        return self._finish("end" if stop == "join" else stop)

    async def _cut_short(self, exc: BaseException, name: str, at: Any) -> Any:
        """A walk ``exc`` stopped at ``name`` (about to run ``at``): its result, or ``exc`` again.

        Budgets, the token, questions and takeovers stop a whole run cleanly; its
        failures are reported (and checkpointed, with a store) and raised on.
        """
        top = self.stop_at is None
        try:
            if isinstance(exc, RoutingError | EdgeError):
                self._held = None  # the node's RunFailed is its completion
            self._release()
            if isinstance(at, tuple):  # a continued run whose route from its checkpoint failed
                name = at[0]
            in_fan_out = type(at) is Branches
            if isinstance(exc, BudgetStop | RunCancelledByToken):
                return await self._stopped_by(exc, name, in_fan_out)
            if isinstance(exc, NodeInterrupt):
                if not top:
                    raise exc  # the run at the top pauses, with every branch's questions
                return await self._asked(exc, name, at)
            if isinstance(exc, ThreadTakenOver):
                if not top:
                    raise exc
                return await self._superseded(exc)
            if isinstance(exc, GraphRunError):
                if top:
                    await self._failed(exc, name, in_fan_out)
                raise exc
            if isinstance(exc, Exception):
                if top:
                    # Not an engine error (a bug, or a failure nothing wrapped): observers
                    # still learn that the run ended.
                    self.recorder.record(
                        RunFailed,
                        self.steps,
                        describe_error(exc),
                        "run_error",
                        self.state.current_node,
                    )
                raise exc
            if self._token_cancelled(exc):
                return await self._stop_safely("cancelled", name, in_fan_out)
            if top:
                self._cancelled_from_outside(exc, name)
            raise exc
        finally:
            del exc  # the traceback holds this frame: no cycle through a local

    def _take_control(self, top: bool) -> Any:
        """Set up budgets, cancellation and gates for this walk; returns what leaving needs.

        The outermost run owns the control (usage so far, budgets, cancellation);
        its subgraphs and branches see it through the context and check its time
        and token before each node.
        """
        durable = self.durable
        self._guards = bool(
            self.abort is not None or (durable is not None and durable.pause_before)
        )
        outer = current_control()
        if outer is not None:
            if outer.checked:
                self._nested = outer
                self._guards = True
            return None
        if not top:
            return None
        settings = self.graph.settings
        control = self._control = RunControl(
            settings.budget or _NO_BUDGET, settings.cancellation_token, self.usage
        )
        self._checks = settings.controlled
        self._guards = self._guards or self._checks
        return enter_control(control)

    def _announce_resume(self) -> None:
        """RunResumed, for a run continued from a checkpoint or a pause in this process."""
        answered_node, answered = self.resumed_answer
        self.recorder.record(
            RunResumed,
            self.steps,
            self.resumed_from,
            self.resumed_live,
            answered_node,
            answered,
        )

    async def _write_first(self) -> None:
        """The checkpoint of the run's input, or of the fork it starts (once announced)."""
        durable = self.durable
        assert durable is not None
        assert self.first_write is not None
        trigger, next_, extra = self.first_write
        self.first_write = None
        await durable.write(self, trigger, next_, extra=extra)

    def _refusal(self, target: Any) -> Stop | None:
        """Before a node: why the walk must stop here (budget, cancel, gate), or None.

        Raises:
            BranchAborted: this branch's fan-out gave up.
        """
        if self.abort is not None and self.abort.is_set():
            if self.stop_at is None:  # a run on a worker thread whose awaiting task was cancelled
                raise asyncio.CancelledError("the task awaiting the run was cancelled")
            raise BranchAborted(f"branch {self.branch!r} stopped: its fan-out failed")
        if self._nested is not None:
            self._nested.check_time()  # raises for the run that owns the control
        control = self._control
        if self._checks and control is not None:
            refused = control.refusal()
            if refused is not None:
                if refused != "cancelled":
                    limit, used = control.spent(refused)
                    self.recorder.record(BudgetExceeded, self.steps, refused, limit, used)
                self._stopped_at = target
                self._degraded = True
                return refused  # type: ignore[return-value]
        durable = self.durable
        if durable is not None and target in durable.pause_before:
            if durable.skip_gate == target:
                durable.skip_gate = None  # the gate this run was continued from
            else:
                self._pause_reason = "pause_before"
                self._pause_next = [target]
                return "paused"
        return None

    async def _checkpointed(
        self, durable: Durable | ChildProgress, name: str, ok: bool, goto: Any
    ) -> bool:
        """Checkpoint after ``name``; returns whether the run pauses there."""
        if not await durable.after_node(self, name, ok, goto):
            return False
        self._pause_reason = "pause_after" if name in durable.pause_after else "requested"
        return True

    def _start_detection(
        self, stall_threshold: int | None
    ) -> tuple[StateFingerprint | None, dict[tuple[str, int], int] | None]:
        """Start fingerprinting the state; returns (fingerprints, states seen by node).

        Until some node comes back the run cannot repeat itself, so fingerprints
        start at the first revisit, with the state then as their baseline.
        """
        settings = self.graph.settings
        if not (settings.detect_loops or stall_threshold):
            return None, None
        if self._merger is self.graph.plain_merger:
            self._merger = Merger(self.graph.schema, None)
        fp = self._fp = self._merger.fingerprints = StateFingerprint()
        if settings.detect_loops:
            self._seen = {}
        return fp, self._seen

    async def _route(
        self, spec: NodeSpec, routes: NodeRoutes, ok: bool, goto: Any
    ) -> tuple[Any, bool]:
        """Route by goto(), a router or the full edge walk; returns (target, whether it wrote)."""
        name = spec.name
        if goto is not None:
            checked = self._check_goto(spec, goto)
            self._release()
            self.recorder.record(EdgeFired, self.steps, name, checked, "goto", "")
            return checked, False
        state = self.state
        if ok and routes.router is not None:
            edge = routes.router
            view = StateView(state, routes.router_view)  # its writes merge like update()
            resolved = route_with_value(edge, state, self.graph.nodes, view)
            target = resolved[0]
            if type(target) is str and resolved[2] is None:
                self._release()
                self.recorder.record(EdgeFired, self.steps, name, target, "router", edge.label, "")
                return target, False
        elif routes.is_async:
            resolved = await aresolve_next(name, routes, ok, state, self.graph.nodes, self._decide)
        else:
            resolved = resolve_next(name, routes, ok, state, self.graph.nodes)
        directive = resolved[2]
        wrote = directive is not None and bool(directive.values or directive.assignments)
        return self._follow(name, resolved), wrote

    async def _fan_out_at(self, source: str, branches: Branches) -> tuple[Stop | None, Any]:
        """Run the fan-out ``source`` routed to; returns (a stop, or None and the join point)."""
        self._fan_out_source = source
        stop = await self._fan_out_from(source, branches)
        return stop, self._after_fan_out

    # ---------------------------------------------------- how a walk is cut short
    async def _stopped_by(
        self, signal: BudgetStop | RunCancelledByToken, name: str, in_fan_out: bool
    ) -> Any:
        """A budget or the token stopped a call: the run that owns the control stops cleanly.

        Raises:
            BudgetStop, RunCancelledByToken: this walk does not own the control.
        """
        if self._control is None:
            raise signal  # the run that owns the budget stops, with its subgraphs and branches
        if type(signal) is BudgetStop:
            self.recorder.record(
                BudgetExceeded,
                self.steps,
                signal.kind,
                signal.limit,
                signal.used,
                signal.needed,
                name,
            )
            return await self._stop_safely(signal.kind, name, in_fan_out)
        return await self._stop_safely("cancelled", name, in_fan_out)

    async def _asked(self, signal: NodeInterrupt, name: str, target: Any) -> Any:
        """A generator node asked a question: the run pauses (a subgraph's run is kept)."""
        if self._book_parent is not None:
            self._pause_child(name, type(target) is Branches)
            raise signal
        return await self._interrupted(
            signal.interrupt, name, target if type(target) is Branches else None
        )

    async def _failed(self, error: GraphRunError, name: str, in_fan_out: bool) -> None:
        """The run failed: attach its state and result, and checkpoint it (with a store)."""
        self._attach(error)
        if self.durable is not None:
            await self._save_failure(error, name, in_fan_out)

    async def _superseded(self, lost: ThreadTakenOver) -> GraphResult:
        """A newer input took the run's thread over: stop here, keeping what was saved.

        The node whose checkpoint was refused completed, but its writes stay
        unsaved: the run that took the thread started from the checkpoint before.
        Its log (kept under ``"interrupt"``, deleted under ``"rollback"``) ends
        with the RunCancelled that says so.
        """
        self._degraded = True
        self.state.current_node = None
        result = self._build_result("superseded", "degraded")
        self.recorder.record(RunCancelled, self.steps, "superseded", None)
        durable = self.durable
        if durable is not None:
            await durable.log_tail(self)
            durable.close()
        return result

    def _token_cancelled(self, exc: BaseException) -> bool:
        """Whether ``exc`` is the run's own token cancelling its task; if so, take it back.

        The token's cancel() cancels the run's task (see cancellable()): an LLM call
        in flight, branches. The walk takes that cancellation back and stops cleanly.
        """
        if self._control is None or not isinstance(exc, asyncio.CancelledError):
            return False
        if TOKEN_CANCEL not in exc.args:
            return False
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
        return True

    def _cancelled_from_outside(self, exc: BaseException, name: str) -> None:
        """Cancelled, timed out, interrupted or closed from outside: say so, and checkpoint."""
        self.recorder.record(RunCancelled, self.steps, _cancel_reason(exc), self.state.current_node)
        if self.durable is not None:
            self._save_cancelled(name)
