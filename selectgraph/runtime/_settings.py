"""Settings: the run-time rules of a graph (limits, policies, detection, budgets, gates)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from selectgraph.core._control import Budget, CancellationToken
from selectgraph.core._policies import (
    Conversation,
    ErrorPolicy,
    LoopAction,
    MaxStepsAction,
    RetryPolicy,
    SyncNodes,
)

__all__ = ["GraphSettings"]


@dataclass(frozen=True, slots=True, kw_only=True)
class GraphSettings:
    """Run-time rules of a graph."""

    max_steps: int | None = 50
    """Nodes a run may execute; ``None`` is unlimited."""
    on_max_steps: MaxStepsAction = MaxStepsAction.RETURN_LAST
    """What happens at the limit."""
    error_policy: ErrorPolicy = ErrorPolicy.ABORT
    """Default failure policy of nodes."""
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    """Default retry policy for ErrorPolicy.RETRY."""
    detect_loops: bool = True
    """Detect a node about to run on a state it has seen before."""
    on_loop: LoopAction = LoopAction.RAISE
    """What happens when a loop is detected."""
    stall_threshold: int | None = 3
    """Consecutive unchanged steps that count as a stall; ``None`` disables."""
    goal: str = ""
    """What the graph is for; agents and llm_decide edges are told it."""
    input_field: str | None = None
    """The state field text input from outside goes to (the CLI, the studio, serving,
    graph tools); ``None``: the state schema's ``input_field``, else none."""
    conversation: Conversation = "isolated"
    """How agent nodes share the conversation: ``"isolated"`` or ``"continuous"``."""
    compact_at_tokens: int = 8000
    """In a continuous conversation, older turns are summarised past this many tokens."""
    max_concurrency: int | None = None
    """Branches of one fan-out running at once, unless its group or edge says otherwise."""
    sync_nodes: SyncNodes = "thread"
    """Where synchronous nodes run when the run has an event loop."""
    pause_before: frozenset[str] = frozenset()
    """Nodes a run with a checkpoint store pauses before (seed 000's ``pause_nodes``)."""
    pause_after: frozenset[str] = frozenset()
    """Nodes a run with a checkpoint store pauses after."""
    budget: Budget | None = None
    """Token, cost and time limits, checked before every model call; ``None``: none."""
    cancellation_token: CancellationToken | None = None
    """Cancels every run of the graph when cancelled."""
    input_guardrails: Any = None
    """A GuardrailsPipeline run on the input prompt before the first node."""
    output_guardrails: Any = None
    """A GuardrailsPipeline run on the final content."""
    fast_route_fn: Callable[[Any], Any] | None = None
    """Called with the input state; a node name it returns is the only node run."""
    state_version: int = 1
    """The version of the state schema; checkpoints store it with the state."""
    state_migrations: Mapping[int, Callable[[dict[str, Any]], dict[str, Any]]] = field(
        default_factory=dict
    )
    """``{n: fn}``: ``fn(data)`` turns a state stored at version ``n`` into version ``n + 1``'s."""

    @property
    def controlled(self) -> bool:
        """Whether runs need a RunControl (budgets or a cancellation token)."""
        return self.budget is not None or self.cancellation_token is not None
