"""Supervisor settings: the strategies, and which model does the planning and which the work."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["ModelSplit", "SupervisorStrategy"]


class SupervisorStrategy(StrEnum):
    """How a supervisor coordinates its team."""

    PLAN_AND_EXECUTE = "plan_and_execute"
    """The supervisor writes a plan (validated structured output); the steps run in
    order, each step's output handed to the next; a failed step is replanned once."""
    ROUND_ROBIN = "round_robin"
    """Members take turns in declaration order; after each full round the supervisor
    decides whether the task is complete."""
    DYNAMIC = "dynamic"
    """Before each turn the supervisor picks the member and its instruction, until it
    says the task is done."""
    MAGENTIC = "magentic"
    """Magentic-One: a task ledger (facts, guesses, plan) and a progress ledger each
    round; after ``max_stalls`` rounds without progress the ledger is redone (replan)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSplit:
    """Which model plans and which one works.

    Every supervisor call (planning, routing, verdicts, ledgers, the final answer)
    asks ``planner_model``; every member's turn asks ``executor_model``, unless the
    member's own ``AgentConfig.model`` names a model, which it keeps. ``None`` leaves
    the provider's (or the agent's) default.
    """

    planner_model: str | None = None
    """The model the supervisor's own calls use."""
    executor_model: str | None = None
    """The model team members use when their config names none."""
