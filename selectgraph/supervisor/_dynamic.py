"""DYNAMIC: before each turn the supervisor picks the member and its instruction.

    route -> member -> route -> member -> ... -> finish

A name the model made up is mapped to the closest member, or else to the
member whose turn is longest ago; the turn's record says so.
"""

from __future__ import annotations

from typing import Any

from selectgraph.core._models import as_model
from selectgraph.core._state import GraphState
from selectgraph.nodes._spec import NodeContext
from selectgraph.routing._directives import Directive, goto
from selectgraph.supervisor._build import Build, start_turn, to_finish
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

    def on_route(answer: Any, state: GraphState, context: NodeContext) -> Directive:
        decision = as_model(answer, RouteDecision)
        if decision.done:
            return to_finish(done=True, verdict=decision.reason or "the supervisor said done")
        member, note = team.resolve(decision.next_agent, least_recent(team, steps_of(state)))
        rounds = int(state.data.get("rounds", 0)) + 1
        update = {"rounds": rounds, "verdict": decision.reason}
        return start_turn(member, decision.instruction, update, note)

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
        destinations=build.targets(),
    )
    build.add_members(then, ["route", "finish"])
    build.add_finish()
    build.graph.set_entry("route")
