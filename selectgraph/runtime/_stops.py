"""Stops: ending a run so that it can be continued, or so that nothing is left half done.

A pause, a budget or a cancellation in the middle of a node, a failure, a
cancellation from outside: each leaves a checkpoint (with a store) and a result.
"""

from __future__ import annotations

from typing import Any

from selectgraph.core._control import RunControl
from selectgraph.core._result import GraphResult
from selectgraph.core._run_errors import GraphRunError
from selectgraph.observe._events import NodeFinished, RunFailed, RunPaused
from selectgraph.runtime._durable import encode_next
from selectgraph.runtime._interrupts import Interrupts
from selectgraph.runtime._run_state import Stop, describe_error

__all__ = ["Stops"]

_STOPPED_EARLY = frozenset({"max_steps", "token_budget", "cost_budget", "time_budget", "cancelled"})
"""Stops before a node ran: continuing the run starts at that node."""
_TRIGGERS = {
    "join": "end",
    "token_budget": "budget",
    "cost_budget": "budget",
    "time_budget": "budget",
    "cancelled": "cancel",
}


class Stops(Interrupts):
    """Stopping a run where it can be continued from, and stopping it safely."""

    _control: RunControl | None = None
    """The run control this walk owns (the outermost walk of a run), else None."""

    async def _stop_safely(self, reason: Stop, name: str, in_fan_out: bool) -> GraphResult:
        """:meth:`_stop_inside`, making sure a failure while stopping still ends the run."""
        control = self._control
        assert control is not None  # only the walk that owns the control stops this way
        # Calls of the node that was stopped (and of its branches) are spent too.
        if control.usage.total_tokens > self.usage.total_tokens:
            self.usage = control.usage
        try:
            return await self._stop_inside(reason, name, in_fan_out)
        except GraphRunError as error:
            self._attach(error)
            raise
        except Exception as exc:
            self.recorder.record(
                RunFailed, self.steps, describe_error(exc), "run_error", self.state.current_node
            )
            raise

    async def _stop_inside(self, reason: Stop, name: str, in_fan_out: bool) -> GraphResult:
        """Stop for a budget or a cancellation that came in the middle of ``name``.

        What completed is kept; ``name`` runs again when the run is continued
        from the checkpoint saved here (with a store).
        """
        self._degraded = True
        if not in_fan_out and self.state.current_node == name:
            self.recorder.record(
                NodeFinished,
                self.steps,
                name,
                self._visits.get(name, 1),
                0.0,
                "cancelled",
                1,
                f"stopped: {reason}",
            )
        durable = self.durable
        if durable is not None:
            try:
                await durable.flush(self)
                checkpoint = await durable.write(
                    self,
                    "cancel" if reason == "cancelled" else "budget",
                    self._resume_point(name, in_fan_out),
                    extra={"stop_reason": reason},
                )
                await durable.flush(self)
                self._checkpoint_id = checkpoint.checkpoint_id
            finally:
                durable.close()
        else:
            self._roll_back(name)
        result = self._finish(reason)  # type: ignore[arg-type]
        if durable is not None:
            await durable.log_tail(self)
        return result

    async def _stop_durably(self, stop: Stop) -> GraphResult:
        """End a run that has a checkpoint store: write its last checkpoint, then report."""
        durable = self.durable
        assert durable is not None
        if stop == "paused":
            if self._pause_next is not None:
                checkpoint = await durable.write(self, "pause", self._pause_next)
            else:
                assert durable.head is not None  # after_node wrote it
                checkpoint = durable.head
            await durable.flush(self)
            durable.close()
            self._checkpoint_id = checkpoint.checkpoint_id
            self.state.current_node = None
            result = self._build_result("paused", "degraded" if self._degraded else "clean")
            self.recorder.record_delivering(
                RunPaused,
                self.steps,
                self._pause_reason,
                tuple(n if isinstance(n, str) else n["after"] for n in checkpoint.next),
                self._checkpoint_id,
                result=result,
            )
            await durable.log_tail(self)
            return result
        self.state.current_node = None
        if stop in _STOPPED_EARLY and isinstance(self._stopped_at, str):
            next_: list[Any] = [self._stopped_at]  # a later call may continue from there
        else:
            next_ = []
        trigger = _TRIGGERS.get(stop, stop)
        checkpoint = await durable.write(self, trigger, next_)
        await durable.flush(self)
        durable.close()
        self._checkpoint_id = checkpoint.checkpoint_id
        if stop == "max_steps":
            result = self._stop_at_limit(self._stopped_at)
        else:
            result = self._finish("end" if stop == "join" else stop)
        await durable.log_tail(self)
        return result

    def _resume_point(self, name: str, in_fan_out: bool = False) -> list[Any]:
        """Where a run that stopped inside ``name`` continues, rolling back its unfinished visit."""
        durable = self.durable
        assert durable is not None
        completed = durable.completed
        if completed is not None and (
            completed[0] == self.steps or (in_fan_out and completed[1] == name)
        ):
            # The node finished; what came after it (routing, a fan-out) did not.
            step, node, ok, goto = completed
            self.steps = step
            return encode_next("after", node, ok=ok, goto=goto)
        if not name or name not in self.graph.nodes:
            return [self.graph.entry] if not self.steps else []
        self._roll_back(name)
        return [name]

    async def _save_failure(self, error: GraphRunError, name: str, in_fan_out: bool) -> None:
        """Checkpoint a failed run so it can be fixed and continued; never hides ``error``."""
        durable = self.durable
        assert durable is not None
        try:
            await durable.flush(self)
            checkpoint = await durable.write(
                self,
                "error",
                self._resume_point(name if in_fan_out else error.node or name, in_fan_out),
                extra={"error": str(error)},
            )
            await durable.flush(self)
            self._checkpoint_id = checkpoint.checkpoint_id
            if error.result is not None:
                error.result.checkpoint_id = checkpoint.checkpoint_id
        except Exception as failure:  # the run's own error matters more
            error.add_note(f"its checkpoint could not be saved: {describe_error(failure)}")
        finally:
            durable.close()

    def _save_cancelled(self, name: str) -> None:
        """Checkpoint a cancelled run synchronously (no awaiting while cancelled)."""
        durable = self.durable
        assert durable is not None
        try:
            for future in durable.pending_writes():
                future.result()
            checkpoint = durable.make(self, "cancel", self._resume_point(name))
            durable.store.save(checkpoint, expected_version=checkpoint.version - 1)
            self._checkpoint_id = checkpoint.checkpoint_id
        except Exception:  # cancellation must go on; the last good checkpoint stands
            pass
        finally:
            durable.close()
