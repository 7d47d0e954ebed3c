"""Run errors: a run stopped; each error keeps the state at failure and the partial result.

Part of the tree drawn in ``core/_errors.py``: ``GraphRunError`` and its kinds, and
``GuardrailBlocked``. They live apart from the other errors because they carry the
run's state and result, which the serializer's errors (raised while reading a state)
must not depend on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from selectgraph.core._errors import SelectGraphError

if TYPE_CHECKING:
    from selectgraph.core._result import GraphResult
    from selectgraph.core._state import GraphState

__all__ = [
    "BranchError",
    "EdgeError",
    "GraphExecutionError",
    "GraphRunError",
    "GuardrailBlocked",
    "LoopDetected",
    "MaxStepsExceeded",
    "MergeConflictError",
    "NodeContractError",
    "NodeError",
    "NodeTimeout",
    "ReducerError",
    "RoutingError",
    "StateValidationError",
    "VisitLimitExceeded",
]


class GraphRunError(SelectGraphError):
    """A run stopped with an error; the state at failure is kept on the error."""

    category: str = "run_error"
    """Stable identifier of the failure kind (OpenArmature's runtime categories)."""

    def __init__(
        self,
        message: str,
        *,
        state: GraphState | None = None,
        node: str | None = None,
        step: int | None = None,
    ) -> None:
        super().__init__(message)
        self.state = state
        """The state at the point of failure (before any failing merge)."""
        self.node = node
        """The node that was running or routing when the run failed."""
        self.step = step
        """The 1-based step at which the run failed."""
        self.result: GraphResult | None = None
        """The partial result of the run, attached by the runner."""


GraphExecutionError = GraphRunError
"""Seed 004's name for a run's error (what ``ErrorPolicy.ABORT`` raises): every run error
(NodeError, RoutingError, LoopDetected...) is one."""


class GuardrailBlocked(SelectGraphError):
    """A guardrail refused a run's input (nothing ran) or its final output."""

    def __init__(self, reason: str, *, guardrail: str, stage: Literal["input", "output"]) -> None:
        super().__init__(f"{stage} guardrail {guardrail!r} blocked the text: {reason}")
        self.reason = reason
        """Why it was blocked, as the guardrail said."""
        self.guardrail = guardrail
        """The name of the guardrail that blocked it."""
        self.stage = stage
        """``"input"`` (before the first node) or ``"output"`` (the final content)."""
        self.result: GraphResult | None = None
        """For an output block: the run's result, whose content was withheld."""


class NodeError(GraphRunError):
    """A node raised; the node's own exception is the ``__cause__``."""

    category = "node_exception"


class NodeContractError(NodeError):
    """A node read or wrote an undeclared key, skipped a required one, or returned a bad type."""

    category = "node_contract_violation"


class VisitLimitExceeded(NodeError):
    """A node would run more often than its ``max_visits`` allows."""

    category = "visit_limit_exceeded"


class EdgeError(GraphRunError):
    """An edge's router or condition raised; its exception is the ``__cause__``."""

    category = "edge_exception"


class ReducerError(GraphRunError):
    """A reducer raised while merging a node's update into the state."""

    category = "reducer_error"

    def __init__(
        self,
        message: str,
        *,
        field: str,
        reducer: str,
        state: GraphState | None = None,
        node: str | None = None,
        step: int | None = None,
    ) -> None:
        super().__init__(message, state=state, node=node, step=step)
        self.field = field
        """The state field whose merge failed."""
        self.reducer = reducer
        """The name of the reducer that raised."""


class RoutingError(GraphRunError):
    """No valid next node: an unknown target, or no edge matched."""

    category = "routing_error"


class StateValidationError(GraphRunError):
    """The state does not satisfy its schema at a graph boundary."""

    category = "state_validation_error"

    def __init__(
        self,
        message: str,
        *,
        fields: list[str],
        state: GraphState | None = None,
        node: str | None = None,
        step: int | None = None,
    ) -> None:
        super().__init__(message, state=state, node=node, step=step)
        self.fields = fields
        """The offending field names (dotted paths for nested fields)."""


class MaxStepsExceeded(GraphRunError):
    """The run reached ``max_steps`` and ``on_max_steps`` is ``THROW``."""

    category = "max_steps_exceeded"


class LoopDetected(GraphRunError):
    """The same node was about to run again on an identical state."""

    category = "loop_detected"


class MergeConflictError(GraphRunError):
    """Parallel branches wrote one key without a reducer under ``MergePolicy.ERROR``."""

    category = "merge_conflict"

    def __init__(self, message: str, *, key: str, branches: list[str], **context: Any) -> None:
        super().__init__(message, **context)
        self.key = key
        """The ``data`` key more than one branch wrote."""
        self.branches = branches
        """The branches that wrote it, in merge order."""


class NodeTimeout(NodeError):
    """A node ran past its ``timeout``; it goes through the node's error policy like any failure."""

    category = "node_timeout"


class BranchError(NodeError):
    """A branch of a fan-out failed; ``branch`` names it and ``__cause__`` is its error.

    Its ``category`` is the one of what failed in the branch (``node_exception``,
    ``node_timeout``, ``reducer_error``...); ``branch_failed`` only when it was
    raised without a cause.
    """

    category = "branch_failed"

    def __init__(self, message: str, *, branch: str, **context: Any) -> None:
        super().__init__(message, **context)
        self.branch = branch
        """The failing branch (a member name, or ``node[i]`` for Scatter)."""
