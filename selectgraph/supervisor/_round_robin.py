"""ROUND_ROBIN: members take turns in order; after each full round the supervisor judges.

a -> b -> c -> review -> a -> b -> c -> review -> ... -> finish

A verdict that cannot be used (invalid even after repair and a re-ask, a failed or
timed-out call) counts as "not complete": the next round starts, or the run
finishes at ``max_rounds``; the run records why in ``fallbacks`` ("degraded").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from selectgraph.core._models import as_model
from selectgraph.core._state import GraphState
from selectgraph.nodes._spec import NodeContext
from selectgraph.routing._directives import Directive
from selectgraph.supervisor._build import Build, fell_back, start_turn, to_finish
from selectgraph.supervisor._calls import steps_of
from selectgraph.supervisor._prompts import task_of, verdict_prompt
from selectgraph.supervisor._schemas import RoundVerdict, StepRecord

__all__ = ["NODES", "build_round_robin"]

NODES = frozenset({"start", "review", "finish"})
"""The strategy's own node names (members may not use them)."""


def _instruction(round_number: int) -> str:
    return (
        f"It is your turn in round {round_number}. Build on the team's work so far and add "
        "what the task still needs."
    )


def build_round_robin(build: Build) -> None:
    """Add the round-robin nodes and edges to ``build.graph``."""
    team = build.team
    names = team.names
    limit = build.max_rounds

    def prompt(state: GraphState) -> str:
        return verdict_prompt(task_of(state), team.roster, steps_of(state))

    def on_verdict(answer: Any, state: GraphState, context: NodeContext) -> Directive:
        verdict = as_model(answer, RoundVerdict)
        rounds = int(state.data.get("rounds", 1))
        if verdict.complete:
            return to_finish(done=True, verdict=verdict.reason)
        if rounds >= limit:
            return to_finish(
                verdict=f"stopped after max_rounds={limit} rounds: {verdict.reason}",
            )
        update = {"rounds": rounds + 1, "verdict": verdict.reason}
        return start_turn(names[0], _instruction(rounds + 1), update)

    def on_no_verdict(reason: str, state: GraphState, context: NodeContext) -> Directive:
        rounds = int(state.data.get("rounds", 1))
        if rounds >= limit:
            return to_finish(
                verdict=f"stopped after max_rounds={limit} rounds",
                fallbacks=fell_back(reason, "finished with the best answer so far"),
            )
        update = {
            "rounds": rounds + 1,
            "verdict": reason,
            "fallbacks": fell_back(reason, "went on with the next round"),
        }
        return start_turn(names[0], _instruction(rounds + 1), update)

    def then(member: str, record: StepRecord, state: GraphState) -> Directive:
        position = names.index(member)
        if position + 1 < len(names):
            rounds = int(state.data.get("rounds", 1))
            return start_turn(names[position + 1], _instruction(rounds), {"steps": [record]})
        return Directive(target="review", values={"steps": [record]})

    # The first member's turn is the entry: the round counter and instruction start here.
    build.graph.add_node("start", _start(names[0]), destinations=[names[0]])
    build.add_members(then, [*names, "review"])
    build.add_call(
        "review",
        RoundVerdict,
        "Judge whether the task is complete after this round.",
        prompt,
        on_verdict,
        on_no_verdict,
        destinations=[names[0], "finish"],
    )
    build.add_finish()
    build.graph.set_entry("start")


def _start(first: str) -> Callable[[GraphState], Directive]:
    def start(state: GraphState) -> Directive:
        return start_turn(first, _instruction(1), {"rounds": 1})

    return start
