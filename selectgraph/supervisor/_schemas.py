"""Schemas: what the supervisor asks its model for, and the state a supervised run keeps.

The structured answers (plan, verdict, routing decision, ledgers) are Pydantic
models, so every supervisor call is validated and re-asked once with the
validation error when it does not fit. Where the answer must name a team member,
the model is built per supervisor with the members' names as a JSON-schema enum
(:func:`plan_model`), which a json_schema-capable server enforces and every other
server is told about.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from selectgraph.state._reducers import append
from selectgraph.supervisor._lenient import LenientModel

__all__ = [
    "BoolAnswer",
    "Plan",
    "PlanStep",
    "ProgressLedger",
    "RouteDecision",
    "RoundVerdict",
    "StepRecord",
    "SupervisorState",
    "TaskLedger",
    "TextAnswer",
    "plan_model",
]


class PlanStep(BaseModel):
    """One step of a plan: who does it, and what they are told."""

    agent: str = Field(description="The team member who does this step (one of the names given).")
    instruction: str = Field(description="What that member should do in this step.")


class Plan(LenientModel):
    """An ordered plan; each step's output is handed to the next step."""

    steps: list[PlanStep] = Field(min_length=1, description="The steps, in order.")


def plan_model(agents: Sequence[str], max_steps: int) -> type[Plan]:
    """A :class:`Plan` whose steps may only name ``agents``, at most ``max_steps`` of them."""
    names: Any = Literal.__getitem__(tuple(agents))  # Literal["a", "b", ...] built at run time
    step = create_model(
        "PlanStep",
        __base__=PlanStep,
        agent=(names, Field(description="The team member who does this step.")),
    )
    plan: type[Plan] = create_model(
        "Plan",
        __base__=Plan,
        steps=(
            list[step],
            Field(min_length=1, max_length=max_steps, description="The steps, in order."),
        ),
    )
    return plan


class RoundVerdict(LenientModel):
    """The supervisor's verdict after a full round of turns."""

    complete: bool = Field(description="True when the task is done and needs no more turns.")
    reason: str = Field(description="Why, in a sentence.")


class RouteDecision(LenientModel):
    """Who works next, and on what; or that the task is done."""

    done: bool = Field(description="True when the task is complete and nobody needs to work.")
    next_agent: str = Field(description="The team member who works next (one of the names given).")
    instruction: str = Field(description="What that member should do now.")
    reason: str = Field(default="", description="Why this member, in a sentence.")


class TaskLedger(LenientModel):
    """Magentic-One's task ledger: what is known, what is guessed, and the plan."""

    facts: list[str] = Field(description="Facts given in the task or established so far.")
    guesses: list[str] = Field(description="Educated guesses still to be checked.")
    plan: list[str] = Field(description="The plan: short steps, each naming who does it.")


class BoolAnswer(BaseModel):
    """A yes/no answer with its reason."""

    reason: str
    """Why, in a sentence."""
    answer: bool
    """The answer."""


class TextAnswer(BaseModel):
    """A short answer with its reason."""

    reason: str
    """Why, in a sentence."""
    answer: str
    """The answer."""


class ProgressLedger(LenientModel):
    """Magentic-One's progress ledger, filled in before every turn."""

    is_request_satisfied: BoolAnswer = Field(description="Is the original request fully satisfied?")
    is_in_loop: BoolAnswer = Field(
        description="Is the team repeating the same requests or answers?"
    )
    is_progress_being_made: BoolAnswer = Field(
        description="Is the last turn adding value (False when stuck or in a loop)?"
    )
    next_speaker: TextAnswer = Field(description="Who speaks next (one of the names given).")
    instruction_or_question: TextAnswer = Field(
        description="The instruction or question for the next speaker."
    )


class StepRecord(BaseModel):
    """One turn of one team member, as the supervisor recorded it."""

    number: int
    """1-based position among the run's turns."""
    agent: str
    """The member who worked."""
    instruction: str = ""
    """What they were told."""
    output: str = ""
    """What they answered (text; a structured answer as its JSON)."""
    error: str | None = None
    """Why the turn failed, when it did."""
    note: str = ""
    """How the member was chosen when the model's choice had to be corrected."""


class SupervisorState(BaseModel):
    """The data of a supervised run (``result.state.data``).

    Extra keys are allowed, so a supervisor can run as a node of a larger graph
    whose state it receives whole.
    """

    model_config = ConfigDict(extra="allow")

    task: str = ""
    """What the team was asked (the run's input)."""
    steps: Annotated[list[StepRecord], append] = []
    """Every turn taken, in order."""
    plan: list[PlanStep] = []
    """PLAN_AND_EXECUTE: the current plan."""
    next_step: int = 0
    """PLAN_AND_EXECUTE: index in ``plan`` of the step to run next."""
    rounds: int = 0
    """Rounds started: plan steps, full rounds, routing decisions or progress ledgers."""
    replans: int = 0
    """Times the plan was made again (after a failed step, or a stall)."""
    current_agent: str = ""
    """The member working now."""
    instruction: str = ""
    """What the member working now was told."""
    turn_note: str = ""
    """How the member working now was chosen, when the model's choice was corrected."""
    verdict: str = ""
    """The supervisor's last judgement of the run, in words."""
    done: bool = False
    """Whether the supervisor judged the task complete."""
    ledger: TaskLedger | None = None
    """MAGENTIC: the task ledger."""
    stall_count: int = 0
    """MAGENTIC: rounds in a row without progress."""
    final_answer: str = ""
    """The run's answer (also ``result.content``)."""
    fallbacks: Annotated[list[str], append] = []
    """Each time a supervisor answer could not be used (invalid even after repair and a
    re-ask, a model error, a timeout): what was wrong and what was done instead."""
