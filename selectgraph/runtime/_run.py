"""Run: one execution of a compiled graph, put together from the parts of the step loop.

``Run`` is :class:`~selectgraph.runtime._walk.Walker` (the loop and everything
it calls, in the modules its bases come from) for a whole run, whose fan-outs'
branches are :class:`~selectgraph.runtime._branch_run.BranchRun` walks.
"""

from __future__ import annotations

import threading
from collections.abc import Coroutine
from typing import Any

from selectgraph.core._result import GraphResult
from selectgraph.core._sentinels import EndType
from selectgraph.runtime._branch_run import BranchRun
from selectgraph.runtime._branches import BranchTask
from selectgraph.runtime._join import BranchWrites
from selectgraph.runtime._run_state import Sleep, blocking_sleep, new_run_id
from selectgraph.runtime._walk import Walker

__all__ = ["Run", "Sleep", "blocking_sleep", "new_run_id"]


class Run(Walker):
    """One execution of a compiled graph and everything it keeps track of."""

    def execute(self) -> Coroutine[Any, Any, GraphResult]:
        """Run to a stop; the coroutine returns the result.

        Raises:
            GraphRunError: the run failed; ``error.state`` and ``error.result`` keep what was done.
        """
        return self.walk(self.graph.entry)

    def _new_branch(
        self,
        task: BranchTask,
        join: str | EndType | None,
        one_node: bool,
        abort: threading.Event,
        seed: BranchWrites | None = None,
    ) -> BranchRun:
        """A walk for one branch of a fan-out of this run."""
        return BranchRun(self, task, join, one_node, abort, seed)
