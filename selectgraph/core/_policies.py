"""Policies: what the engine does on node failure, at the step limit, and on a detected loop."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final, Literal

__all__ = [
    "MAX_STEPS_FLAG",
    "Conversation",
    "ErrorPolicy",
    "LoopAction",
    "MaxStepsAction",
    "Outcome",
    "Quality",
    "RetryPolicy",
    "StopReason",
    "SyncNodes",
]


class ErrorPolicy(StrEnum):
    """What happens when a node raises (after any on_failure edge has had its chance)."""

    ABORT = "abort"
    """Stop the run and raise NodeError with the state at failure."""
    SKIP = "skip"
    """Record the error in ``state.errors`` and continue along the node's success edges."""
    RETRY = "retry"
    """Run the node again with exponential backoff (RetryPolicy), then abort."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """Executor-level retries of a function node (agent nodes retry through their judge)."""

    max_retries: int = 3
    """Retries after the first attempt."""
    initial_delay: float = 0.1
    """Seconds before the first retry; later waits grow exponentially."""
    max_delay: float = 10.0
    """Upper bound of one wait, in seconds."""
    multiplier: float = 2.0
    """Growth factor of the wait between retries."""
    jitter: float = 0.1
    """Up to this many seconds of random delay added to each wait."""
    retry_on: tuple[type[BaseException], ...] = (Exception,)
    """Exception types worth retrying; others fail at once."""

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"RetryPolicy.max_retries must be >= 0, got {self.max_retries}")
        if self.initial_delay < 0 or self.max_delay < 0 or self.jitter < 0:
            raise ValueError("RetryPolicy delays must be >= 0")


class MaxStepsAction(StrEnum):
    """What happens when a run reaches ``max_steps`` without reaching END."""

    RETURN_LAST = "return_last"
    """Return the state as it is: ``stop_reason="max_steps"``, ``result.max_steps_reached``
    set and quality "degraded" (a cut-off run never looks clean)."""
    THROW = "throw"
    """Raise MaxStepsExceeded (the partial result is on the error)."""
    RETURN_WITH_FLAG = "return_with_flag"
    """As RETURN_LAST, and the state itself is flagged: ``state.metadata["max_steps_reached"]``
    is True, so a parent graph, a thread or a stored checkpoint that takes the state on
    sees the cut too."""


MAX_STEPS_FLAG: Final = "max_steps_reached"
"""The ``metadata`` key RETURN_WITH_FLAG sets on the state of a run cut off by max_steps."""


class LoopAction(StrEnum):
    """What happens when a node is about to run again on an identical state."""

    RAISE = "raise"
    """Raise LoopDetected (the partial result is on the error)."""
    STOP = "stop"
    """Stop and return the result, with ``stop_reason="loop"``."""
    WARN = "warn"
    """Count it in ``result.loops_detected``, emit LoopDetected, and continue."""


Outcome = Literal["success", "failure", "skipped", "interrupted", "cancelled"]
"""How a node's step ended.

- ``"success"``: the node returned and its output was merged.
- ``"failure"``: the node failed and an on_failure edge took over.
- ``"skipped"``: the node failed under ErrorPolicy.SKIP; the run went on.
- ``"interrupted"``: a generator node paused for an answer; it continues on resume.
- ``"cancelled"``: a budget or a CancellationToken stopped the run while the node ran;
  it runs again when the run is continued.
"""

Quality = Literal["clean", "degraded", "failed"]
"""How well a run went.

- ``"clean"``: every node succeeded (retried successes count as clean).
- ``"degraded"``: some node failed but the run reached a stop through a fallback
  (SKIP, an on_failure edge) or was cut off by RETURN_WITH_FLAG or a loop stop.
- ``"failed"``: the run raised.
"""

SyncNodes = Literal["thread", "loop"]
"""Where a synchronous node runs when the run has an event loop (``arun``, ``astream``,
``run`` of a graph with async nodes).

- ``"thread"`` (default): on a worker thread, so a blocking node (a local model, a
  request, ``time.sleep``) leaves the loop free: other runs, branches and the
  stream go on meanwhile. Like LangGraph's sync nodes under ``ainvoke``.
- ``"loop"``: called on the event loop's thread, for code that must run there (it
  touches loop-bound objects) or nodes so quick a thread hop would dominate.

``run()`` of a graph whose nodes are all synchronous has no event loop; its nodes
run on the caller's thread either way.
"""

Conversation = Literal["isolated", "continuous"]
"""How a graph threads its conversation through agent nodes.

- ``"isolated"``: each agent node starts a fresh conversation built by its
  ContextMode (LAST_MESSAGE unless set). Cheap and predictable; the default.
- ``"continuous"``: each agent node inherits the whole accumulated conversation,
  tool calls included, with a transition marker between nodes; older turns are
  summarised once the thread grows past ``compact_at_tokens``.
"""

StopReason = Literal[
    "end",
    "max_steps",
    "loop",
    "error",
    "interrupted",
    "paused",
    "token_budget",
    "cost_budget",
    "time_budget",
    "cancelled",
    "superseded",
]
"""Why a run stopped.

- ``"end"``: routing reached END.
- ``"max_steps"``: the step limit was reached.
- ``"loop"``: loop detection stopped the run (LoopAction.STOP or RAISE).
- ``"interrupted"``: a generator node is waiting for an answer (``result.interrupts``).
- ``"paused"``: a pause gate or a PauseToken stopped the run at a node boundary.
- ``"token_budget"``, ``"cost_budget"``, ``"time_budget"``: a budget refused the
  next model call (or the next node); what was done is kept, quality is degraded.
- ``"cancelled"``: the graph's CancellationToken was cancelled.
- ``"error"``: an error ended the run.
- ``"superseded"``: a newer input took the run's thread over (``multitask_strategy``
  interrupt or rollback); the run stopped at the checkpoint it could not write.
"""
