"""DYNAMIC: before each turn the supervisor picks the member and its instruction.

    route -> member -> route -> member -> ... -> finish

A name the model got slightly wrong is mapped to the closest member (the turn's
note says so). A decision that cannot be used (invalid even after repair and a
re-ask, a failed or timed-out call, a name close to no member, "done" before
any member answered) gives the turn to the next member in order, on the task
itself, and is recorded in ``fallbacks`` (the run is then "degraded").
"""

from __future__ import annotations

from typing import Any

from selectgraph.core._models import as_model
from selectgraph.core._state import GraphState
from selectgraph.nodes._spec import NodeContext
from selectgraph.routing._directives import Directive, goto
from selectgraph.supervisor._build import (
    Build,
    best_answer,
    fell_back,
    next_in_order,
    start_turn,
    to_finish,
)
from selectgraph.supervisor._calls import steps_of
from selectgraph.supervisor._prompts import route_prompt, task_of
from selectgraph.supervisor._schemas import RouteDecision, StepRecord
from selectgraph.supervisor._team import Team

__all__ = ["NODES", "build_dynamic", "least_recent"]

NODES = frozenset({"route", "finish"})
"""The strategy's own node names (members may not use them)."""


def least_recent(team: Team, steps: list[StepRecord]) -> str:
    """The member whose last turn is longest ago (one who never worked first)."""
    last_turn = dict.fromkeys(team.names, 0)
    for step in steps:
        if step.agent in last_turn:
            last_turn[step.agent] = step.number
    return min(team.names, key=lambda name: last_turn[name])


def build_dynamic(build: Build) -> None:
    """Add the dynamic-routing nodes and edges to ``build.graph``."""
    team = build.team
    limit = build.max_rounds

    def prompt(state: GraphState) -> str:
        rounds = int(state.data.get("rounds", 0))
        return route_prompt(task_of(state), team.roster, steps_of(state), limit - rounds)

    def in_order(reason: str, state: GraphState, instruction: str = "") -> Directive:
        """No usable decision: the next member in order works on the task, or the run ends."""
        rounds = int(state.data.get("rounds", 0))
        if rounds >= limit:
            return to_finish(
                verdict=f"stopped after max_rounds={limit} turns",
                fallbacks=fell_back(reason, "finished with the best answer so far"),
            )
        member = next_in_order(team, steps_of(state))
        update = {
            "rounds": rounds + 1,
            "verdict": reason,
            "fallbacks": fell_back(reason, f"gave the turn to {member!r}, next in order"),
        }
        note = f"{reason}; fell back to {member!r}, next in order"
        return start_turn(member, instruction.strip() or task_of(state), update, note)

    def on_route(answer: Any, state: GraphState, context: NodeContext) -> Directive:
        decision = as_model(answer, RouteDecision)
        if decision.done:
            if best_answer(state):
                return to_finish(done=True, verdict=decision.reason or "the supervisor said done")
            return in_order(
                "the supervisor's 'route' call said the task is done before any member answered",
                state,
            )
        member, note = team.match(decision.next_agent)
        if member is None:
            return in_order(
                f"the supervisor's 'route' call named {decision.next_agent!r}, not a team member",
                state,
                decision.instruction,
            )
        rounds = int(state.data.get("rounds", 0)) + 1
        update = {"rounds": rounds, "verdict": decision.reason}
        return start_turn(member, decision.instruction.strip() or task_of(state), update, note)

    def then(member: str, record: StepRecord, state: GraphState) -> Directive:
        if int(state.data.get("rounds", 0)) >= limit:
            return to_finish(steps=[record], verdict=f"stopped after max_rounds={limit} turns")
        return goto("route", {"steps": [record]})

    build.add_call(
        "route",
        RouteDecision,
        "Choose who works next, or say the task is done.",
        prompt,
        on_route,
        lambda reason, state, context: in_order(reason, state),
        destinations=build.targets(),
    )
    build.add_members(then, ["route", "finish"])
    build.add_finish()
    build.graph.set_entry("route")
