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

An answer that cannot be used (invalid even after repair and a re-ask, a failed
or timed-out call, a speaker who is no member, "satisfied" before any member
answered) falls back: a task ledger of every member in order, the next member
in order on the task, the old ledger kept, or the best member answer as the
final one. Each is recorded in ``fallbacks`` (the run is then "degraded").
"""

from __future__ import annotations

from typing import Any

from selectgraph.core._models import as_model
from selectgraph.core._sentinels import END
from selectgraph.core._state import LAST_OUTPUT, GraphState
from selectgraph.nodes._spec import NodeContext
from selectgraph.routing._directives import Directive, goto
from selectgraph.supervisor._build import (
    Build,
    best_answer,
    fell_back,
    next_in_order,
    start_turn,
)
from selectgraph.supervisor._calls import announce_replan, as_text, steps_of
from selectgraph.supervisor._prompts import (
    final_prompt,
    ledger_prompt,
    progress_prompt,
    task_of,
    update_ledger_prompt,
)
from selectgraph.supervisor._schemas import ProgressLedger, StepRecord, TaskLedger
from selectgraph.supervisor._team import Team

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
    calls = _Orchestrator(team, build.max_rounds, build.max_stalls)
    build.add_call(
        "ledger",
        TaskLedger,
        "Fill in the task ledger.",
        lambda state: ledger_prompt(task_of(state), team.roster),
        calls.on_ledger,
        calls.no_ledger,
        next_node="progress",
    )
    build.add_call(
        "progress",
        ProgressLedger,
        "Fill in the progress ledger for the next turn.",
        lambda state: progress_prompt(task_of(state), team.roster, _ledger(state), steps_of(state)),
        calls.on_progress,
        lambda reason, state, context: calls.in_order(reason, state),
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
        calls.on_replan,
        calls.no_replan,
        next_node="progress",
    )
    build.add_call(
        "final",
        None,
        "Write the final answer.",
        lambda state: final_prompt(task_of(state), steps_of(state)),
        calls.on_final,
        calls.no_final,
        next_node=END,
    )
    build.add_members(_back_to_progress, ["progress"])
    build.graph.set_entry("ledger")


class _Orchestrator:
    """What the orchestrator does with each answer of its model, or without one."""

    def __init__(self, team: Team, limit: int, max_stalls: int) -> None:
        self.team = team
        self.limit = limit
        self.max_stalls = max_stalls

    def on_ledger(self, answer: Any, state: GraphState, context: NodeContext) -> dict[str, Any]:
        return {"ledger": TaskLedger.model_validate(answer), LAST_OUTPUT: None}

    def no_ledger(self, reason: str, state: GraphState, context: NodeContext) -> dict[str, Any]:
        action = "fell back to a plan of every member in order"
        return {
            "ledger": _default_ledger(self.team, task_of(state)),
            LAST_OUTPUT: None,
            "fallbacks": fell_back(reason, action),
        }

    def in_order(
        self, reason: str, state: GraphState, instruction: str = "", stalls: int | None = None
    ) -> Directive:
        """No usable progress ledger: the next member in order works on the task."""
        rounds = int(state.data.get("rounds", 0)) + 1
        if rounds > self.limit:
            return goto(
                "final",
                {
                    "verdict": f"stopped after max_rounds={self.limit} rounds",
                    "fallbacks": fell_back(reason, "finished with the best answer so far"),
                },
            )
        member = next_in_order(self.team, steps_of(state))
        update: dict[str, Any] = {
            "rounds": rounds,
            "verdict": reason,
            "fallbacks": fell_back(reason, f"gave the turn to {member!r}, next in order"),
        }
        if stalls is not None:
            update["stall_count"] = stalls
        note = f"{reason}; fell back to {member!r}, next in order"
        return start_turn(member, instruction.strip() or task_of(state), update, note)

    def on_progress(self, answer: Any, state: GraphState, context: NodeContext) -> Directive:
        ledger = ProgressLedger.model_validate(answer)
        rounds = int(state.data.get("rounds", 0)) + 1
        satisfied = ledger.is_request_satisfied
        if satisfied.answer and best_answer(state):
            return goto("final", {"rounds": rounds, "done": True, "verdict": satisfied.reason})
        if rounds > self.limit:
            return goto("final", {"verdict": f"stopped after max_rounds={self.limit} rounds"})
        if satisfied.answer:
            return self.in_order(
                "the supervisor's 'progress' call said the request is satisfied before any "
                "member answered",
                state,
            )
        stalls = int(state.data.get("stall_count", 0))
        stalled = ledger.is_in_loop.answer or not ledger.is_progress_being_made.answer
        stalls = stalls + 1 if stalled else max(0, stalls - 1)
        why = (
            ledger.is_in_loop.reason
            if ledger.is_in_loop.answer
            else ledger.is_progress_being_made.reason
        )
        if stalls >= self.max_stalls:
            return goto("replan", {"rounds": rounds, "stall_count": stalls, "verdict": why})
        instruction = ledger.instruction_or_question.answer
        member, note = self.team.match(ledger.next_speaker.answer)
        if member is None:
            return self.in_order(
                f"the supervisor's 'progress' call named {ledger.next_speaker.answer!r} to "
                "speak next, not a team member",
                state,
                instruction,
                stalls,
            )
        update = {"rounds": rounds, "stall_count": stalls, "verdict": why}
        return start_turn(member, instruction.strip() or task_of(state), update, note)

    def on_replan(self, answer: Any, state: GraphState, context: NodeContext) -> dict[str, Any]:
        ledger = TaskLedger.model_validate(answer)
        stalls = int(state.data.get("stall_count", 0))
        announce_replan(context, stalls, plan_text(ledger), "stalled")
        replans = int(state.data.get("replans", 0)) + 1
        return {"ledger": ledger, "stall_count": 0, "replans": replans, LAST_OUTPUT: None}

    def no_replan(self, reason: str, state: GraphState, context: NodeContext) -> dict[str, Any]:
        return {
            "stall_count": 0,
            "replans": int(state.data.get("replans", 0)) + 1,
            LAST_OUTPUT: None,
            "fallbacks": fell_back(reason, "kept the task ledger as it was"),
        }

    def on_final(self, answer: Any, state: GraphState, context: NodeContext) -> dict[str, Any]:
        text = as_text(answer).strip()
        if not text:
            return self.no_final("the supervisor's 'final' call answered nothing", state, context)
        return {"final_answer": text, LAST_OUTPUT: text}

    def no_final(self, reason: str, state: GraphState, context: NodeContext) -> dict[str, Any]:
        text = best_answer(state)
        action = "answered with the best member answer so far"
        return {"final_answer": text, LAST_OUTPUT: text, "fallbacks": fell_back(reason, action)}


def _default_ledger(team: Team, task: str) -> TaskLedger:
    """The task ledger used when the model's cannot be: the task, and every member in order."""
    plan = [f"{name}: {about or 'work on the task'}" for name, about in team.roster.items()]
    return TaskLedger(facts=[f"The task: {task}"], guesses=[], plan=plan)


def _back_to_progress(member: str, record: StepRecord, state: GraphState) -> Directive:
    return goto("progress", {"steps": [record]})
