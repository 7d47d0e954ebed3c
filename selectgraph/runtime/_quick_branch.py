"""Quick branches: a fan-out branch that is one plain function, run without a walk of its own."""

from __future__ import annotations

from time import perf_counter
from typing import Any

from selectgraph.core._policies import ErrorPolicy
from selectgraph.core._sentinels import END, EndType
from selectgraph.core._state import LAST_OUTPUT
from selectgraph.nodes._output import read_output
from selectgraph.observe._events import EdgeFired, NodeFinished, NodeStarted
from selectgraph.runtime._branches import BranchTask
from selectgraph.runtime._join import BranchWrites, relative_to
from selectgraph.runtime._node_call import NodeCalls
from selectgraph.state._layered import light_state
from selectgraph.state._output import NodeOutput
from selectgraph.state._views import StateView

__all__ = ["QuickBranches"]


class QuickBranches(NodeCalls):
    """The usual Scatter or group member: one plain function, then the join."""

    def _quick_call(self, node: str, join: str | EndType | None) -> tuple[Any, bool] | None:
        """``(function, is_async)`` when a branch is just one plain function and its join.

        Such a branch needs no walk of its own (the usual Scatter or group member);
        anything with retries, a timeout, a context, declared reads, a failure
        route or more nodes after it takes the general path.
        """
        if self.tasks is not None:
            return None  # an executor's branch task is a walk, whatever its shape
        max_steps = self.graph.settings.max_steps
        if max_steps is not None and self.steps + 1 > max_steps:
            return None  # a walk reports the step limit properly
        cache = self.graph.quick_branches
        key = (node, join, self.driven_without_loop)
        if key in cache:
            return cache[key]  # type: ignore[no-any-return]
        found: tuple[Any, bool] | None = None
        spec = self.graph.nodes[node]
        routes = self.graph.routes[node]
        static = routes.static_success
        ends_there = join is None or (
            static is not None and (static.target == join or static.target is END)
        )
        plain = (
            spec.group is None
            and spec.max_visits is None
            and not routes.failure
            and (spec.error_policy or self.graph.settings.error_policy) is ErrorPolicy.ABORT
        )
        if ends_there and plain:
            if node in self.graph.direct_async:
                found = (self.graph.direct_async[node], True)
            elif node in self.graph.direct_calls and self.driven_without_loop:
                found = (self.graph.direct_calls[node], False)
        cache[key] = found
        return found

    async def _quick_branch(
        self,
        task: BranchTask,
        call: tuple[Any, bool],
        step: int,
        join: str | EndType | None,
    ) -> tuple[BranchWrites, str | EndType | None]:
        """A one-node branch of a plain function, run without a walk of its own.

        Returns what it wrote and where it asked to go (its goto(), if any).
        """
        fn, is_async = call
        ref = task.ref
        name = task.node
        spec = self.graph.nodes[name]
        recorder = self.recorder
        base = recorder.base_for(ref)
        visit = self._visits.get(name, 0) + 1
        state = self.state if task.patch is None else light_state(self.state, task.patch)
        started = perf_counter()
        recorder.record_as(base, started, NodeStarted, step + 1, name, visit)
        view = StateView(state, name)
        try:
            raw = (await fn(view)) if is_async else fn(view)
            if type(raw) is dict and not view.touched and spec.writes is None:
                output = NodeOutput(raw)
            else:
                output = read_output(raw, view, spec)
                reducers = self.graph.schema.reducers
                if reducers and output.writes is not None:
                    relative_to(output, state.data, reducers)
        except Exception as exc:
            error = self._node_error(spec, exc)
            try:
                if error is exc:
                    raise
                raise error from exc
            finally:
                del error, exc  # the traceback holds this frame: no cycle through locals
        written = output.update
        writes = output.writes
        if writes is not None and writes.assignments:
            written = {**writes.assignments, **written}
        finished = perf_counter()
        duration = (finished - started) * 1000
        entry = (
            name,
            step + 1,
            visit,
            "success",
            written,
            written.get(LAST_OUTPUT),
            None,
            1,
            duration,
            output.usage,
            output.agent_result,
        )
        recorder.record_as(
            base, finished, NodeFinished, step + 1, name, visit, duration, "success", 1
        )
        goto = output.goto
        if join is not None and goto is None:
            recorder.record_as(base, finished, EdgeFired, step + 1, name, join, "static", "")
        elif goto is not None:
            recorder.record_as(base, finished, EdgeFired, step + 1, name, goto, "goto", "")
        if output.usage is not None:
            self.usage = self.usage + output.usage
        return BranchWrites(ref.index, ref.label, [(name, output)], [entry]), goto
