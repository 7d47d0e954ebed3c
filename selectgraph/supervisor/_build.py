"""What every strategy's graph shares: supervisor calls, member nodes, turn records, the finish.

A strategy (``_plan_execute.py``, ``_round_robin.py``, ``_dynamic.py``,
``_magentic.py``) adds its own supervisor calls and routers to the graph
through a :class:`Build`; members, their records and the final node are the
same for all four.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from selectgraph.agents._agent import Agent
from selectgraph.agents._config import AgentConfig
from selectgraph.build._builder import AgentGraph
from selectgraph.core._sentinels import END, EndType
from selectgraph.core._state import LAST_OUTPUT, GraphState
from selectgraph.providers._base import Provider
from selectgraph.routing._directives import Directive, goto
from selectgraph.supervisor._calls import (
    Answer,
    CallLimits,
    Fallback,
    Prompt,
    SupervisorCall,
    as_text,
    steps_of,
)
from selectgraph.supervisor._graph_member import GraphMember
from selectgraph.supervisor._prompts import SUPERVISOR_IDENTITY, member_prompt, task_of
from selectgraph.supervisor._schemas import StepRecord
from selectgraph.supervisor._team import Team

__all__ = [
    "FINISH",
    "Build",
    "Continue",
    "best_answer",
    "fell_back",
    "next_in_order",
]

Continue = Callable[[str, StepRecord, GraphState], Directive]
"""Where to go after ``member``'s turn, given the turn's record (which the route writes)."""

FINISH = "finish"
"""The node every strategy ends at: it writes the run's final answer."""


@dataclass(slots=True, kw_only=True)
class Build:
    """A supervised graph under construction."""

    graph: AgentGraph
    team: Team
    provider: Provider
    planner_model: str | None
    instructions: str
    call_max_tokens: int | None
    call_timeout: float | None
    call_retries: int
    max_rounds: int
    max_stalls: int
    member_history: int
    """Recent turns each member is shown (1: only the previous step's output)."""

    def supervisor_agent(self, name: str, schema: type[BaseModel] | None, focus: str) -> Agent:
        """An agent for one kind of supervisor call, asking the planner model."""
        config = AgentConfig(
            name=name,
            model=self.planner_model,
            identity=SUPERVISOR_IDENTITY,
            instructions="\n\n".join(part for part in (self.instructions, focus) if part),
            output_schema=schema,
            # One re-ask with the validation error, then the run fails clearly.
            max_output_retries=1,
            max_tokens=self.call_max_tokens,
        )
        return Agent(config, provider=self.provider)

    def add_call(
        self,
        name: str,
        schema: type[BaseModel] | None,
        focus: str,
        prompt: Prompt,
        answer: Answer,
        fallback: Fallback,
        *,
        destinations: list[str] | None = None,
        next_node: str | EndType | None = None,
    ) -> None:
        """Add a supervisor call: a node that asks the planner model and acts on its answer.

        ``fallback`` decides when no usable answer comes (see :class:`SupervisorCall`).
        """
        call = SupervisorCall(
            self.supervisor_agent(name, schema, focus),
            prompt,
            answer,
            fallback,
            CallLimits(timeout=self.call_timeout, retries=self.call_retries),
        )
        if next_node is not None:
            self.graph.add_node(name, call, next_node=next_node)
        else:
            self.graph.add_node(name, call, destinations=destinations)

    def add_members(
        self,
        then: Continue,
        targets: list[str],
        *,
        on_failure: Callable[[str], Callable[[GraphState], Any]] | None = None,
    ) -> None:
        """Add every member's node and the routers after its turn.

        After a turn, the turn is recorded and ``then(member, record, state)`` routes on.
        A failed turn is recorded with its error and routed the same way (the next
        supervisor call sees the failure), unless ``on_failure(member)`` gives a router
        of its own.
        """
        for name, member in self.team.members.items():
            if isinstance(member.node, Agent):
                self.graph.add_node(name, member.node, input_transform=self._member_prompt(name))
            elif isinstance(member.node, GraphMember):
                self.graph.add_node(name, member.node.node(name, self._member_prompt(name)))
            else:
                self.graph.add_node(name, member.node)
            self.graph.add_conditional_edge(name, _router(name, then, turn), targets)
            failure = on_failure(name) if on_failure else _router(name, then, failed_turn)
            self.graph.add_conditional_edge(name, failure, targets, on="failure")

    def targets(self, *extra: str) -> list[str]:
        """Every member and the finish node (a router's possible targets), plus ``extra``."""
        return [*self.team.names, FINISH, *extra]

    def _member_prompt(self, name: str) -> Callable[[GraphState], str]:
        history = self.member_history

        def prompt(state: GraphState) -> str:
            return member_prompt(
                task_of(state),
                state.data.get("instruction", ""),
                steps_of(state),
                history=history,
                role=f"you are {name}",
            )

        return prompt

    def add_finish(self) -> None:
        """Add the node that writes the final answer and ends the run."""
        self.graph.add_node(FINISH, finish, next_node=END)


def _router(
    member: str, then: Continue, record: Callable[[GraphState, str], StepRecord]
) -> Callable[[GraphState], Directive]:
    def after(state: GraphState) -> Directive:
        return then(member, record(state, member), state)

    after.__name__ = f"after_{member}" if record is turn else f"after_{member}_failed"
    return after


def turn(state: GraphState, member: str) -> StepRecord:
    """The record of the turn ``member`` just finished."""
    return StepRecord(
        number=len(state.data.get("steps") or ()) + 1,
        agent=member,
        instruction=state.data.get("instruction", ""),
        output=as_text(state.data.get(LAST_OUTPUT)),
        note=state.data.get("turn_note", ""),
    )


def failed_turn(state: GraphState, member: str) -> StepRecord:
    """The record of the turn ``member`` just failed (the engine recorded the error)."""
    errors = list(state.errors)
    last = errors[-1] if errors else {}
    return StepRecord(
        number=len(state.data.get("steps") or ()) + 1,
        agent=member,
        instruction=state.data.get("instruction", ""),
        error=f"{last.get('type', 'Error')}: {last.get('error', 'unknown error')}",
        note=state.data.get("turn_note", ""),
    )


def start_turn(
    member: str, instruction: str, update: Mapping[str, Any], note: str = ""
) -> Directive:
    """Route to ``member``'s turn, telling it ``instruction``, writing ``update`` too."""
    values: dict[str, Any] = {
        "current_agent": member,
        "instruction": instruction,
        "turn_note": note,
        LAST_OUTPUT: None,  # so a member that writes nothing does not repeat another's output
    }
    values.update(update)
    return goto(member, values)


def to_finish(**update: Any) -> Directive:
    """Route to the finish node."""
    return goto(FINISH, update)


def finish(state: GraphState) -> Mapping[str, Any]:
    """Write the run's final answer: the supervisor's, else the last successful turn's output."""
    answer = state.data.get("final_answer") or best_answer(state)
    return {"final_answer": answer, LAST_OUTPUT: answer}


def best_answer(state: GraphState) -> str:
    """The best answer so far: the last turn that succeeded with some output ("" if none)."""
    done = [step for step in steps_of(state) if step.error is None and step.output.strip()]
    return done[-1].output if done else ""


def next_in_order(team: Team, steps: list[StepRecord]) -> str:
    """The member after the one who worked last, in declaration order (the first to start)."""
    names = team.names
    if not steps or steps[-1].agent not in names:
        return names[0]
    return names[(names.index(steps[-1].agent) + 1) % len(names)]


def fell_back(reason: str, action: str) -> list[str]:
    """The ``fallbacks`` entry for an unusable supervisor answer: why, and what was done."""
    return [f"{reason}; {action}"]
