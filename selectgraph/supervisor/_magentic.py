"""MAGENTIC: Magentic-One's orchestrator: a task ledger, and a progress ledger every round.

    ledger -> progress -> member -> progress -> member -> ... -> final (the answer)
                 |  (max_stalls rounds without progress)
                 v
               replan (a revised task ledger; SupervisorReplanned) -> progress

The progress ledger asks, before every turn, whether the request is satisfied,
whether the team is in a loop, whether progress is being made, who speaks next
and what they are told. A round that is in a loop or makes no progress counts
as a stall, a round that progresses takes one off (as Magentic-One counts), and
``max_stalls`` stalls remake the task ledger with a new plan.
"""

from __future__ import annotations

from typing import Any

from selectgraph.core._models import as_model
from selectgraph.core._sentinels import END
from selectgraph.core._state import LAST_OUTPUT, GraphState
from selectgraph.nodes._spec import NodeContext
from selectgraph.routing._directives import Directive, goto
from selectgraph.supervisor._build import Build, start_turn
from selectgraph.supervisor._calls import announce_replan, as_text, steps_of
from selectgraph.supervisor._dynamic import least_recent
from selectgraph.supervisor._prompts import (
    final_prompt,
    ledger_prompt,
    progress_prompt,
    task_of,
    update_ledger_prompt,
)
from selectgraph.supervisor._schemas import ProgressLedger, StepRecord, TaskLedger

__all__ = ["NODES", "build_magentic", "plan_text"]

NODES = frozenset({"ledger", "progress", "replan", "final"})
"""The strategy's own node names (members may not use them)."""


def plan_text(ledger: TaskLedger) -> str:
    """A task ledger's plan as numbered lines."""
    return "\n".join(f"{i}. {step}" for i, step in enumerate(ledger.plan, start=1))


def _ledger(state: GraphState) -> TaskLedger | None:
    value = state.data.get("ledger")
    return None if value is None else as_model(value, TaskLedger)


def build_magentic(build: Build) -> None:
    """Add the Magentic-One nodes and edges to ``build.graph``."""
    team = build.team
    limit = build.max_rounds
    max_stalls = build.max_stalls

    def on_ledger(answer: Any, state: GraphState, context: NodeContext) -> dict[str, Any]:
        return {"ledger": TaskLedger.model_validate(answer), LAST_OUTPUT: None}

    def on_progress(answer: Any, state: GraphState, context: NodeContext) -> Directive:
        ledger = ProgressLedger.model_validate(answer)
        rounds = int(state.data.get("rounds", 0)) + 1
        if ledger.is_request_satisfied.answer:
            return goto(
                "final",
                {"rounds": rounds, "done": True, "verdict": ledger.is_request_satisfied.reason},
            )
        if rounds > limit:
            return goto("final", {"verdict": f"stopped after max_rounds={limit} rounds"})
        stalls = int(state.data.get("stall_count", 0))
        stalled = ledger.is_in_loop.answer or not ledger.is_progress_being_made.answer
        stalls = stalls + 1 if stalled else max(0, stalls - 1)
        why = (
            ledger.is_in_loop.reason
            if ledger.is_in_loop.answer
            else ledger.is_progress_being_made.reason
        )
        if stalls >= max_stalls:
            return goto("replan", {"rounds": rounds, "stall_count": stalls, "verdict": why})
        member, note = team.resolve(ledger.next_speaker.answer, least_recent(team, steps_of(state)))
        update = {"rounds": rounds, "stall_count": stalls, "verdict": why}
        return start_turn(member, ledger.instruction_or_question.answer, update, note)

    def on_replan(answer: Any, state: GraphState, context: NodeContext) -> dict[str, Any]:
        ledger = TaskLedger.model_validate(answer)
        stalls = int(state.data.get("stall_count", 0))
        announce_replan(context, stalls, plan_text(ledger), "stalled")
        replans = int(state.data.get("replans", 0)) + 1
        return {"ledger": ledger, "stall_count": 0, "replans": replans, LAST_OUTPUT: None}

    def on_final(answer: Any, state: GraphState, context: NodeContext) -> dict[str, Any]:
        text = as_text(answer)
        return {"final_answer": text, LAST_OUTPUT: text}

    build.add_call(
        "ledger",
        TaskLedger,
        "Fill in the task ledger.",
        lambda state: ledger_prompt(task_of(state), team.roster),
        on_ledger,
        next_node="progress",
    )
    build.add_call(
        "progress",
        ProgressLedger,
        "Fill in the progress ledger for the next turn.",
        lambda state: progress_prompt(task_of(state), team.roster, _ledger(state), steps_of(state)),
        on_progress,
        destinations=[*team.names, "replan", "final"],
    )
    build.add_call(
        "replan",
        TaskLedger,
        "The team is stuck: revise the task ledger with a new plan.",
        lambda state: update_ledger_prompt(
            task_of(state),
            team.roster,
            _ledger(state),
            steps_of(state),
            int(state.data.get("stall_count", 0)),
        ),
        on_replan,
        next_node="progress",
    )
    build.add_call(
        "final",
        None,
        "Write the final answer.",
        lambda state: final_prompt(task_of(state), steps_of(state)),
        on_final,
        next_node=END,
    )
    build.add_members(_back_to_progress, ["progress"])
    build.graph.set_entry("ledger")


def _back_to_progress(member: str, record: StepRecord, state: GraphState) -> Directive:
    return goto("progress", {"steps": [record]})
