"""SupervisorAgent: a team of agents run by a supervising model, with four strategies.

A supervisor compiles to an :class:`~selectgraph.AgentGraph` (``supervisor.graph``),
so everything a graph run offers (streaming, observers, budgets, cancellation,
checkpoints, human-in-the-loop) applies to supervised runs.
"""

from __future__ import annotations

from selectgraph.supervisor._config import ModelSplit, SupervisorStrategy
from selectgraph.supervisor._errors import SupervisorError
from selectgraph.supervisor._result import SupervisorResult
from selectgraph.supervisor._schemas import (
    BoolAnswer,
    Plan,
    PlanStep,
    ProgressLedger,
    RoundVerdict,
    RouteDecision,
    StepRecord,
    SupervisorState,
    TaskLedger,
    TextAnswer,
)
from selectgraph.supervisor._supervisor import SupervisorAgent

__all__ = [
    "BoolAnswer",
    "ModelSplit",
    "Plan",
    "PlanStep",
    "ProgressLedger",
    "RoundVerdict",
    "RouteDecision",
    "StepRecord",
    "SupervisorAgent",
    "SupervisorError",
    "SupervisorResult",
    "SupervisorState",
    "SupervisorStrategy",
    "TaskLedger",
    "TextAnswer",
]
