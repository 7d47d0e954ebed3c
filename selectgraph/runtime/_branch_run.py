"""Branch runs: one branch of a fan-out, walking the graph on its own view of the state.

A branch runs the same step loop as a whole run, from its start node until
its join point (or END). It starts from the parent's state as it was at the
fork and sees its own writes, never a sibling's: its state is a layer over
the parent's (``LayeredData``), built only when the branch goes on past its
first node. Every output it produces is kept as a pending write, converted
to what it added relative to what its node read, and handed to the join.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from selectgraph.core._history import History
from selectgraph.core._node_result import NodeResult
from selectgraph.core._sentinels import END, EndType
from selectgraph.core._usage import NO_USAGE
from selectgraph.nodes._spec import NodeSpec
from selectgraph.runtime._branches import BranchTask
from selectgraph.runtime._join import BranchWrites, relative_to
from selectgraph.runtime._run_state import RunState
from selectgraph.runtime._walk import Walker
from selectgraph.state._layered import LayeredData, light_state
from selectgraph.state._merge import Merger
from selectgraph.state._output import NodeOutput

if TYPE_CHECKING:
    from selectgraph.runtime._fanout import FanOutPlan

__all__ = ["BranchRun"]


class BranchRun(Walker):
    """A branch of a fan-out: a walk whose writes are kept for the join, not merged upward."""

    detect = False  # loops inside a branch are bounded by max_steps, not fingerprints

    def __init__(
        self,
        parent: RunState,
        task: BranchTask,
        stop_at: str | EndType | None,
        one_node: bool,
        abort: threading.Event | None = None,
        seed: BranchWrites | None = None,
    ) -> None:
        # Run.__init__ is not called: a branch shares most of its parent's setup.
        graph = parent.graph
        self.graph = graph
        self.run_id = parent.run_id
        self.namespace = parent.namespace
        self.sleep = parent.sleep
        self.config = parent.config
        self.branch = task.ref
        self.recorder = parent.recorder.for_branch(task.ref)
        self.steps = parent.steps
        self.usage = NO_USAGE
        self.written_keys = None
        self.writes = seed or BranchWrites(task.ref.index, task.ref.label)
        """What this branch produced, in order: the join's input."""
        self.abort = abort
        self.ran: dict[str, int] = {}
        """How many times each node ran in this branch (added to the parent's visits)."""
        self.hit_limit = False
        """Whether the walk stopped at max_steps."""
        self._parent_run = parent
        self._book_parent = parent
        self._parent_visits = parent._visits
        self._visits = dict(parent._visits)
        self._history = self.writes.history
        self._history_start = 0
        self._merger = Merger(graph.schema, None)
        self._started = parent._started
        self.stop_at = END if stop_at is None else stop_at
        self.one_node = one_node
        self._direct_calls = {} if not parent.driven_without_loop else graph.direct_calls
        self.offloads = not parent.driven_without_loop  # siblings share the loop
        self._direct_async = graph.direct_async
        self._own_state = False
        self.state = light_state(parent.state, task.patch)
        self._walk_slots()
        if seed is not None:
            # The branch's first node already ran (a quick branch that chose a goto):
            # its writes are the branch's state from here on.
            self.steps += 1
            self._detach()
            for source, output in seed.outputs:
                self._merger.merge(self.state, output, source, self.steps)

    async def run(self, node: str | EndType) -> BranchWrites:
        """Walk from ``node`` to the join point; returns what the branch wrote."""
        try:
            stop: str = await self.walk(node)
        finally:
            # Counted even when the branch failed, so max_visits still holds.
            for name, count in self._visits.items():
                added = count - self._parent_visits.get(name, 0)
                if added:
                    self.ran[name] = added
        self.hit_limit = stop == "max_steps"
        return self.writes

    def previous_result(self, node: str) -> NodeResult | None:
        """The node's latest result in this branch, else in the run before the fan-out."""
        own = History()
        own.raw = self.writes.history
        for index in range(len(own) - 1, -1, -1):
            name, result = own[index]
            if name == node and isinstance(result, NodeResult):
                return result
        return self._parent_run.previous_result(node)

    # ------------------------------------------------------------ own state
    def _detach(self) -> None:
        """Give the branch containers of its own before anything is merged into its state."""
        if self._own_state:
            return
        self._own_state = True
        state = self.state
        if type(state.data) is not LayeredData:
            state.data = LayeredData(state.data)
        state.messages = list(state.messages)
        state.history = History()
        state.history.raw = self.writes.history  # nested joins add their entries here
        state.metadata = dict(state.metadata)
        state.errors = self.writes.errors

    def _goes_on(self, spec: NodeSpec, output: NodeOutput) -> bool:
        """Whether anything after this node reads the branch's state."""
        if self.one_node:
            return False
        goto = output.goto
        if goto is not None:
            return goto != self.stop_at and goto is not END
        static = self.graph.routes[spec.name].static_success
        return static is None or (static.target != self.stop_at and static.target is not END)

    # ------------------------------------------------------------ overrides
    def _complete(self, spec: NodeSpec, output: NodeOutput, visit: int, started: float) -> None:
        reducers = self.graph.schema.reducers
        if reducers and output.writes is not None:
            relative_to(output, self.state.data, reducers)
        self.writes.outputs.append((spec.name, output))
        if self._goes_on(spec, output):
            self._detach()
            self._merger.merge(self.state, output, spec.name, self.steps)
        self._record_success(spec, output, visit, started)

    def _merge_directive(self, source: str, output: NodeOutput) -> None:
        reducers = self.graph.schema.reducers
        if reducers and output.writes is not None:  # a router's view writes, as a node's
            relative_to(output, self.state.data, reducers)
        self.writes.outputs.append((source, output))
        self._detach()
        self._merger.merge(self.state, output, source, self.steps)

    def _record_error(self, record: dict[str, Any]) -> None:
        if self.branch is not None:
            record.setdefault("branch", self.branch.label)  # a nested branch names itself
        self.writes.errors.append(record)

    def _new_branch(
        self,
        task: BranchTask,
        join: str | EndType | None,
        one_node: bool,
        abort: threading.Event,
        seed: BranchWrites | None = None,
    ) -> BranchRun:
        """A walk for one branch of a fan-out nested in this branch."""
        return BranchRun(self, task, join, one_node, abort, seed)

    def _merge_branches(
        self, plan: FanOutPlan, done: list[BranchWrites]
    ) -> list[tuple[str, NodeOutput]]:
        # A fan-out nested in this branch joins into this branch's state, and what
        # that join wrote (under its own merge rules) becomes this branch's writes.
        self._detach()
        merged = super()._merge_branches(plan, done)
        self.writes.outputs.extend(merged)
        return merged
