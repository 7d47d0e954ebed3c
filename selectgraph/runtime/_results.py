"""Results: ending a run — the output guardrail, exit validation, RunFinished, the GraphResult."""

from __future__ import annotations

from time import perf_counter
from typing import Any

from selectgraph.core._node_result import NodeResult
from selectgraph.core._policies import MAX_STEPS_FLAG, MaxStepsAction, StopReason
from selectgraph.core._result import GraphResult
from selectgraph.core._run_errors import (
    GraphRunError,
    GuardrailBlocked,
    LoopDetected,
    MaxStepsExceeded,
    StateValidationError,
)
from selectgraph.core._sentinels import EndType
from selectgraph.observe._events import RunFailed, RunFinished
from selectgraph.runtime._guard import guard_output
from selectgraph.runtime._run_state import RunState, describe_error

__all__ = ["RunResults"]


class RunResults(RunState):
    """Building a run's result, and the ways a run ends: the limit, END, a failure."""

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
        # RETURN_LAST and RETURN_WITH_FLAG both return the state; a run cut off before
        # END is never reported as clean. RETURN_WITH_FLAG also marks the state itself,
        # so whatever takes the state on (a parent graph, a thread) sees the cut.
        self._max_steps_reached = True
        self._degraded = True
        if action is MaxStepsAction.RETURN_WITH_FLAG:
            self.state.metadata[MAX_STEPS_FLAG] = True
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
            interrupts=self._interrupts,
            checkpoint_id=self._checkpoint_id,
            observer_errors=self.recorder.outermost.listener_errors,
        )

    def _finish(self, stop_reason: StopReason) -> GraphResult:
        self.state.current_node = None
        guard = self.graph.settings.output_guardrails
        if guard is not None and not self.namespace:
            try:
                guard_output(guard, self.state)
            except GuardrailBlocked as blocked:
                blocked.result = self._build_result(stop_reason, "failed")
                raise
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
        self.recorder.record_delivering(
            RunFailed,
            self.steps,
            describe_error(error),
            error.category,
            error.node,
            exception=error,
        )
