"""Node calls: one visit of a node through its adapter, with timeouts and retries.

A failure goes through the node's error policy; a success is recorded with what
the node produced.
"""

from __future__ import annotations

import asyncio
from time import perf_counter
from typing import Any

from selectgraph.core._node_result import NodeResult
from selectgraph.core._policies import ErrorPolicy, RetryPolicy
from selectgraph.core._run_errors import (
    GraphRunError,
    NodeContractError,
    NodeError,
    NodeTimeout,
    ReducerError,
    StateValidationError,
    VisitLimitExceeded,
)
from selectgraph.core._state import LAST_OUTPUT
from selectgraph.core._usage import Usage
from selectgraph.nodes._output import read_output
from selectgraph.nodes._spec import NodeContext, NodeSpec
from selectgraph.observe._events import NodeFinished, NodeRetried
from selectgraph.runtime._branches import run_blocking
from selectgraph.runtime._retry import is_retryable, retry_after_failure
from selectgraph.runtime._run_state import RunState, describe_error
from selectgraph.state._output import NodeOutput
from selectgraph.state._views import StateView

__all__ = ["NodeCalls"]


class NodeCalls(RunState):
    """Calling a node and taking what it produced, or what its failure means."""

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
        self._record_success(spec, output, visit, started)

    def _record_success(
        self, spec: NodeSpec, output: NodeOutput, visit: int, started: float
    ) -> None:
        """Usage, a history entry and NodeFinished for a node whose output was taken."""
        name = spec.name
        step = self.steps
        usage = output.usage
        if usage is not None:
            self.usage = self.usage + usage
        writes = output.writes
        written = output.update
        if writes is not None and writes.assignments:
            written = {**writes.assignments, **written}
        finished = perf_counter()
        duration = (finished - started) * 1000
        attempts = self.attempts
        if attempts != 1:
            self.attempts = 1
        content = written.get(LAST_OUTPUT)
        agent_result = output.agent_result
        entry: tuple[Any, ...]  # NodeResult's fields, in order
        if usage is None and agent_result is None:
            # The last two left to their defaults: 16 bytes less a step in the history.
            entry = (name, step, visit, "success", written, content, None, attempts, duration)
        else:
            entry = (name, step, visit, "success", written, content, None, attempts, duration,
                     usage, agent_result)  # fmt: skip
        self._history.append(entry)
        if (
            (output.goto is None and self.graph.routes[name].static_success is not None)
            or self.durable is not None
            or self.progress is not None
        ):
            # Its edge cannot fail, or the run checkpoints: recorded now, so it is stored
            # with the node's checkpoint (see RunState._held for why the others wait).
            self.recorder.finish_node(
                finished, step, name, visit, duration, "success", attempts, written, self.state
            )
        else:  # recorded once the edge is resolved
            self._held = (
                finished,
                step,
                name,
                visit,
                duration,
                "success",
                attempts,
                written,
                self.state,
            )

    async def _recover(
        self, spec: NodeSpec, visit: int, exc: Exception, started: float
    ) -> NodeOutput | bool:
        """After a node raised: its retries' output, else whether its success edges apply.

        Nodes called directly get their retries here, so the first attempt of a
        node under ErrorPolicy.RETRY costs what any direct call costs.
        """
        name = spec.name
        if name in self.graph.retried_directly and (
            name in self._direct_calls or name in self._direct_async
        ):  # the first attempt was a direct call: its retries are made here
            retry = spec.retry or self.graph.settings.retry
            if retry.max_retries and is_retryable(retry, exc):
                try:
                    return await self._retries(spec, visit, retry, exc)
                except (ReducerError, StateValidationError):
                    raise
                except Exception as last:
                    exc = last
        try:
            return self._handle_failure(spec, visit, exc, started)
        finally:
            del exc  # the traceback holds this frame: no cycle through a local

    async def _attempt(self, spec: NodeSpec, visit: int) -> NodeOutput:
        tasks = self.tasks
        if tasks is not None:
            return await tasks.node(self, spec, visit, lambda: self._attempt_here(spec, visit))
        return await self._attempt_here(spec, visit)

    async def _attempt_here(self, spec: NodeSpec, visit: int) -> NodeOutput:
        policy = spec.error_policy or self.graph.settings.error_policy
        if policy is not ErrorPolicy.RETRY or not spec.adapter.executor_retries:
            return await self._call(spec, visit, 1)
        retry = spec.retry or self.graph.settings.retry
        try:
            # The first attempt runs bare: a node that succeeds never pays for tenacity.
            return await self._call(spec, visit, 1)
        except Exception as exc:
            if not retry.max_retries or not is_retryable(retry, exc):
                raise
            first = exc
        try:
            return await self._retries(spec, visit, retry, first)
        finally:
            del first

    async def _retries(
        self, spec: NodeSpec, visit: int, retry: RetryPolicy, first: BaseException
    ) -> NodeOutput:
        """Attempts 2.. of a node whose first attempt raised ``first`` (retryable)."""
        # tenacity's objects form cycles among themselves: the hooks handed to
        # them must not hold the run (and so its state), only what they use.
        record, step, name = self.recorder.record, self.steps, spec.name
        attempts = [1]

        def on_retry(failed: int, error: BaseException, delay: float) -> None:
            attempts[0] = failed + 1
            record(NodeRetried, step, name, failed, describe_error(error), delay)

        async def attempt(number: int) -> NodeOutput:
            # Each attempt gets a fresh view of the unchanged state: a failed
            # attempt's writes were never merged, so nothing needs undoing.
            return await self._call(spec, visit, number)

        try:
            return await retry_after_failure(attempt, first, retry, self.sleep, on_retry)
        finally:
            self.attempts = attempts[0]  # read and reset by _complete / _handle_failure
            del first

    async def _call(self, spec: NodeSpec, visit: int, attempt: int) -> NodeOutput:
        adapter = spec.adapter
        view = StateView(self.state, spec.name, reads=spec.reads)
        context = None
        if adapter.wants_context:
            context = NodeContext(
                spec.name,
                self.steps,
                visit,
                attempt,
                self.run_id,
                self.graph.name,
                self.namespace,
                self.graph.settings.goal,
                self.recorder.emit,
                self,
                self.branch,
            )
        timeout = spec.timeout
        # A blocking function runs on a worker thread when the run has an event loop
        # (other runs, siblings and the stream go on), unless sync_nodes="loop".
        if timeout is None and not (spec.offload and self.offloads):
            raw = await adapter(view, context)
        else:
            raw = await self._call_bounded(spec, adapter(view, context), timeout)
        return read_output(raw, view, spec)

    async def _call_bounded(self, spec: NodeSpec, pending: Any, timeout: float | None) -> Any:
        """Await a node on a worker thread (a blocking function) and/or under its timeout."""
        if spec.offload and not self.driven_without_loop:
            pending = run_blocking(pending)  # a blocking function must not stall its siblings
        if timeout is None:
            return await pending
        try:
            async with asyncio.timeout(timeout):
                return await pending
        except TimeoutError as exc:
            raise NodeTimeout(
                f"node {spec.name!r} ran past its timeout of {timeout:g} s",
                node=spec.name,
                step=self.steps,
            ) from exc

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
        error_text = describe_error(exc)
        attempts = self.attempts
        self.attempts = 1
        self._record_error(
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
            f"node {spec.name!r} raised {describe_error(exc)}",
            node=spec.name,
            step=self.steps,
            state=self.state,
        )
