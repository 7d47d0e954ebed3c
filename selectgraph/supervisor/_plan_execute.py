"""PLAN_AND_EXECUTE: a validated plan, run step by step; a failed step is replanned once.

plan -> member -> member -> ... -> finish
          |  (a step fails)
          v
        replan -> member -> ... -> finish     (a second failure fails the run)

A plan that cannot be used (invalid even after repair and a re-ask, a failed or
timed-out call) falls back to every member in order, each told the task; a
replan that cannot be used goes on with the rest of the plan. Either is recorded
in ``fallbacks`` (the run is then "degraded").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from selectgraph.core._models import as_model
from selectgraph.core._state import GraphState
from selectgraph.nodes._spec import NodeContext
from selectgraph.routing._directives import Directive
from selectgraph.supervisor._build import (
    Build,
    failed_turn,
    fell_back,
    start_turn,
    to_finish,
)
from selectgraph.supervisor._calls import announce_replan, plan_of, steps_of
from selectgraph.supervisor._errors import SupervisorError
from selectgraph.supervisor._prompts import plan_prompt, replan_prompt, task_of
from selectgraph.supervisor._schemas import Plan, PlanStep, StepRecord, plan_model

__all__ = ["NODES", "build_plan_and_execute"]

NODES = frozenset({"plan", "replan", "finish"})
"""The strategy's own node names (members may not use them)."""

MAX_REPLANS = 1
"""Replans allowed after failed steps; the next failure fails the run."""


def build_plan_and_execute(build: Build) -> None:
    """Add the plan-and-execute nodes and edges to ``build.graph``."""
    team = build.team
    schema = plan_model(team.names, build.max_rounds)
    limit = build.max_rounds

    def prompt(state: GraphState) -> str:
        return plan_prompt(task_of(state), team.roster, limit)

    def replan_text(state: GraphState) -> str:
        steps = steps_of(state)
        failure = next((s for s in reversed(steps) if s.error), None)
        what = (
            f"step {failure.number} ({failure.agent}: {failure.instruction!r}) raised "
            f"{failure.error}"
            if failure is not None
            else "a step failed"
        )
        left = max(1, limit - int(state.data.get("rounds", 0)))
        return replan_prompt(task_of(state), team.roster, plan_of(state), steps, what, left)

    def on_plan(answer: Any, state: GraphState, context: NodeContext) -> Directive:
        return _next(_steps(answer), 0, state, limit)

    def on_replan(answer: Any, state: GraphState, context: NodeContext) -> Directive:
        replans = int(state.data.get("replans", 0)) + 1
        steps = _steps(answer)
        announce_replan(context, 0, plan_text(steps), "step_failed")
        return _next(steps, 0, state, limit, replans=replans)

    def no_plan(reason: str, state: GraphState, context: NodeContext) -> Directive:
        # Every member in order, each told the task: a plan any team can follow.
        steps = [PlanStep(agent=name, instruction=task_of(state)) for name in team.names]
        action = "fell back to a plan of every member in order"
        return _next(steps[:limit], 0, state, limit, fallbacks=fell_back(reason, action))

    def no_replan(reason: str, state: GraphState, context: NodeContext) -> Directive:
        # Go on with the rest of the current plan (the failed step is behind us).
        replans = int(state.data.get("replans", 0)) + 1
        index = int(state.data.get("next_step", 0))
        action = "went on with the rest of the plan"
        return _next(
            plan_of(state),
            index,
            state,
            limit,
            replans=replans,
            fallbacks=fell_back(reason, action),
        )

    build.add_call(
        "plan",
        schema,
        "Plan the work.",
        prompt,
        on_plan,
        no_plan,
        destinations=build.targets(),
    )
    build.add_call(
        "replan",
        schema,
        "A step failed; plan the rest of the work.",
        replan_text,
        on_replan,
        no_replan,
        destinations=build.targets(),
    )

    def then(member: str, record: StepRecord, state: GraphState) -> Directive:
        index = int(state.data.get("next_step", 0))
        return _next(plan_of(state), index, state, limit, record=record)

    build.add_members(then, build.targets("replan"), on_failure=_after_failure)
    build.add_finish()
    build.graph.set_entry("plan")


def plan_text(steps: list[PlanStep]) -> str:
    """A plan as numbered lines."""
    return "\n".join(f"{i}. {s.agent}: {s.instruction}" for i, s in enumerate(steps, start=1))


def _steps(answer: Any) -> list[PlanStep]:
    plan = as_model(answer, Plan)
    return [PlanStep(agent=step.agent, instruction=step.instruction) for step in plan.steps]


def _next(
    plan: list[PlanStep],
    index: int,
    state: GraphState,
    limit: int,
    *,
    record: StepRecord | None = None,
    **update: Any,
) -> Directive:
    """Go to step ``index`` of ``plan``, or finish when the plan (or the step limit) is done."""
    recorded = {"steps": [record]} if record is not None else {}
    rounds = int(state.data.get("rounds", 0))
    if index >= len(plan):
        return to_finish(
            plan=plan, next_step=index, done=True, verdict="the plan is done", **recorded, **update
        )
    if rounds >= limit:
        return to_finish(
            plan=plan,
            next_step=index,
            verdict=f"stopped after max_rounds={limit} steps with the plan unfinished",
            **recorded,
            **update,
        )
    step = plan[index]
    values = {"plan": plan, "next_step": index + 1, "rounds": rounds + 1, **recorded, **update}
    return start_turn(step.agent, step.instruction, values)


def _after_failure(member: str) -> Callable[[GraphState], Directive]:
    def after_failure(state: GraphState) -> Directive:
        record = failed_turn(state, member)
        replans = int(state.data.get("replans", 0))
        if replans >= MAX_REPLANS:
            raise SupervisorError(
                f"step {record.number} ({member}: {record.instruction!r}) failed after the "
                f"plan was already remade {replans} time(s): {record.error}"
            )
        return Directive(target="replan", values={"steps": [record]})

    after_failure.__name__ = f"on_{member}_failure"
    return after_failure
