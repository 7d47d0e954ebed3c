"""Prompts: what the supervisor's model and each team member are told.

Every function here is pure: it turns the run's state (read through the node's
view) into text. Nothing is sent from here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from selectgraph.core._messages import Role
from selectgraph.supervisor._schemas import PlanStep, StepRecord, TaskLedger

__all__ = [
    "SUPERVISOR_IDENTITY",
    "final_prompt",
    "ledger_prompt",
    "member_prompt",
    "plan_prompt",
    "progress_prompt",
    "replan_prompt",
    "route_prompt",
    "task_of",
    "update_ledger_prompt",
    "verdict_prompt",
]

SUPERVISOR_IDENTITY = (
    "You are the supervisor of a team. You do not do the work yourself: you decide who "
    "works, on what, and when the task is done. Answer only in the JSON format asked for."
)

# A turn's output is cut to this many characters when it is quoted back to a model;
# the full text stays in the state.
_QUOTE_LIMIT = 4000


def task_of(state: Any) -> str:
    """The task the team was given: ``data["task"]``, else the first user message."""
    task = state.data.get("task") if hasattr(state, "data") else None
    if task:
        return str(task)
    for message in state.messages:
        if message.role is Role.USER:
            return str(message.text)
    return ""


def _quote(text: str) -> str:
    text = text.strip()
    if len(text) <= _QUOTE_LIMIT:
        return text
    return text[:_QUOTE_LIMIT] + f"\n[... {len(text) - _QUOTE_LIMIT} more characters]"


def _roster(team: Mapping[str, str]) -> str:
    return "\n".join(f"- {name}: {about or 'a team member'}" for name, about in team.items())


def _turns(steps: Sequence[StepRecord], last: int | None = None) -> str:
    shown = list(steps) if last is None else list(steps)[-last:]
    if not shown:
        return "(nobody has worked on it yet)"
    lines = []
    for step in shown:
        head = f"Turn {step.number}, {step.agent}"
        if step.instruction:
            head += f" (asked: {step.instruction})"
        body = f"FAILED: {step.error}" if step.error else _quote(step.output)
        lines.append(f"{head}:\n{body}")
    return "\n\n".join(lines)


def plan_prompt(task: str, team: Mapping[str, str], max_steps: int) -> str:
    """Ask for a plan: ordered steps, each naming a member and an instruction."""
    return (
        f"Task:\n{task}\n\nYour team:\n{_roster(team)}\n\n"
        f"Write a plan of at most {max_steps} steps. Each step names one team member "
        "(exactly as listed) and the instruction for it. The steps run in order, and each "
        "step is given the output of the step before it. Use as few steps as the task needs."
    )


def replan_prompt(
    task: str,
    team: Mapping[str, str],
    plan: Sequence[PlanStep],
    steps: Sequence[StepRecord],
    failure: str,
    max_steps: int,
) -> str:
    """Ask for a new plan for the rest of the task after a step failed."""
    old = "\n".join(f"{i}. {s.agent}: {s.instruction}" for i, s in enumerate(plan, start=1))
    return (
        f"Task:\n{task}\n\nYour team:\n{_roster(team)}\n\nThe plan was:\n{old or '(empty)'}\n\n"
        f"What happened so far:\n{_turns(steps)}\n\nA step failed: {failure}\n\n"
        f"Write a new plan of at most {max_steps} steps for the rest of the task, avoiding "
        "what failed. Each step names one team member (exactly as listed) and its "
        "instruction; the first new step is given the output of the last step that succeeded."
    )


def member_prompt(
    task: str,
    instruction: str,
    steps: Sequence[StepRecord],
    *,
    history: int,
    role: str,
) -> str:
    """What a member is told for its turn: the task, its instruction, and recent turns."""
    done = [step for step in steps if step.error is None]
    parts = [f"Task:\n{task}"]
    if done and history == 1:
        last = done[-1]
        parts.append(f"Output of the previous step ({last.agent}):\n{_quote(last.output)}")
    elif done:
        parts.append(f"The team's work so far:\n{_turns(done, history)}")
    parts.append(f"Your instruction ({role}):\n{instruction or 'Do your part of the task.'}")
    return "\n\n".join(parts)


def verdict_prompt(task: str, team: Mapping[str, str], steps: Sequence[StepRecord]) -> str:
    """Ask, after a full round, whether the task is complete."""
    return (
        f"Task:\n{task}\n\nYour team:\n{_roster(team)}\n\nThe latest round of turns:\n"
        f"{_turns(steps, len(team))}\n\nIs the task complete? Say complete=true only when "
        "the work answers the task in full; otherwise the team takes another round."
    )


def route_prompt(
    task: str, team: Mapping[str, str], steps: Sequence[StepRecord], rounds_left: int
) -> str:
    """Ask who works next, with what instruction, or whether the task is done."""
    return (
        f"Task:\n{task}\n\nYour team:\n{_roster(team)}\n\nThe work so far:\n"
        f"{_turns(steps, 2 * len(team))}\n\nTurns left: {rounds_left}. If the work so far "
        "completes the task, answer done=true. Otherwise choose next_agent (exactly one of "
        f"the names: {', '.join(team)}) and write its instruction."
    )


def ledger_prompt(task: str, team: Mapping[str, str]) -> str:
    """Ask for Magentic-One's task ledger: facts, guesses and a plan."""
    return (
        f"Task:\n{task}\n\nYour team:\n{_roster(team)}\n\nBefore the team starts, fill in "
        "the task ledger: the facts given in the task (or that must be looked up), the "
        "educated guesses worth checking, and a short plan naming which member does each step."
    )


def _ledger(ledger: TaskLedger | None) -> str:
    if ledger is None:
        return "(no ledger yet)"
    return json.dumps(ledger.model_dump(), indent=1, ensure_ascii=False)


def progress_prompt(
    task: str, team: Mapping[str, str], ledger: TaskLedger | None, steps: Sequence[StepRecord]
) -> str:
    """Ask for Magentic-One's progress ledger for the coming turn."""
    return (
        f"Task:\n{task}\n\nYour team:\n{_roster(team)}\n\nTask ledger:\n{_ledger(ledger)}\n\n"
        f"The work so far:\n{_turns(steps, 2 * len(team))}\n\nFill in the progress ledger: "
        "is the request fully satisfied; is the team in a loop (repeating itself); is "
        "progress being made; who speaks next (exactly one of the names: "
        f"{', '.join(team)}); and the instruction or question for them."
    )


def update_ledger_prompt(
    task: str,
    team: Mapping[str, str],
    ledger: TaskLedger | None,
    steps: Sequence[StepRecord],
    stalls: int,
) -> str:
    """Ask for a revised task ledger after the team stalled."""
    return (
        f"Task:\n{task}\n\nYour team:\n{_roster(team)}\n\nThe task ledger so far:\n"
        f"{_ledger(ledger)}\n\nThe work so far:\n{_turns(steps, 2 * len(team))}\n\n"
        f"The team has made no progress for {stalls} rounds. Revise the ledger: update the "
        "facts with what was learned, revise the guesses, and write a new plan that takes "
        "a different approach."
    )


def final_prompt(task: str, steps: Sequence[StepRecord]) -> str:
    """Ask for the final answer to the task from the team's work."""
    return (
        f"Task:\n{task}\n\nThe team's work:\n{_turns(steps)}\n\nWrite the final answer to "
        "the task from this work. Answer the task directly; do not describe the process."
    )
