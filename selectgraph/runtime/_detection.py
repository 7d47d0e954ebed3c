"""Detection: loops (a node about to run again on a state it saw) and stalls (no change)."""

from __future__ import annotations

from typing import Any

from selectgraph.core._policies import LoopAction
from selectgraph.core._run_errors import LoopDetected
from selectgraph.observe._events import LoopDetected as LoopDetectedEvent
from selectgraph.observe._events import StallDetected
from selectgraph.runtime._run_state import RunState, Stop
from selectgraph.state._output import NodeOutput

__all__ = ["Detection", "changes_nothing"]

_ABSENT: Any = object()


def changes_nothing(output: NodeOutput, data: Any, reducers: Any) -> bool:
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


class Detection(RunState):
    """Loop and stall detection for a walk (not inside branches)."""

    # ------------------------------------------------------------- detection
    def _loop_stop(self, node: str, first: int) -> Stop | None:
        """A loop was seen (``node`` had this state at step ``first``): apply on_loop.

        Returns ``"loop"`` when the run stops here, ``None`` when it goes on.
        """
        self._loops += 1
        self.recorder.record(LoopDetectedEvent, self.steps, node, first)
        action = self.graph.settings.on_loop
        if action is LoopAction.WARN:
            return None
        self.steps -= 1  # the repeated node never ran
        if action is LoopAction.STOP:
            self._degraded = True
            return "loop"
        raise LoopDetected(
            f"node {node!r} is about to run on exactly the state it had at step {first}; with "
            "deterministic nodes the run would repeat forever. Add a stop condition, or set "
            "on_loop=LoopAction.WARN if the node is not deterministic",
            node=node,
        )

    def _stalled(self, node: str, threshold: int, quiet: bool) -> None:
        """After a step: count it as unchanged (``quiet``) or not; report a stall when due.

        Before fingerprints start, ``quiet`` says whether the step's update changed
        nothing; from then on, whether the state's fingerprint stayed the same.
        """
        if not quiet:
            self._unchanged = 0
            return
        self._unchanged += 1
        if self._unchanged >= threshold:
            self._stalls += 1
            self.recorder.record(StallDetected, self.steps, node, self._unchanged)
            self._unchanged = 0
