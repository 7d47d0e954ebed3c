"""SupervisorResult: a GraphResult that also reads the supervisor's record of the run."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from selectgraph.core._models import as_model, as_models
from selectgraph.core._result import GraphResult
from selectgraph.supervisor._config import SupervisorStrategy
from selectgraph.supervisor._schemas import PlanStep, StepRecord, TaskLedger

__all__ = ["SupervisorResult"]

_GRAPH_RESULT_FIELDS = tuple(f.name for f in fields(GraphResult))


@dataclass(slots=True, kw_only=True)
class SupervisorResult(GraphResult):
    """What a supervised run returns: everything a GraphResult has, and the team's record.

    ``content`` is the final answer and ``total_usage`` the tokens and cost of every
    call, the supervisor's and the members'.
    """

    strategy: SupervisorStrategy
    """The strategy that ran."""
    members: tuple[str, ...] = ()
    """The team members' names (also their node names)."""

    @classmethod
    def wrap(
        cls, result: GraphResult, strategy: SupervisorStrategy, members: tuple[str, ...]
    ) -> SupervisorResult:
        """The supervisor's view of a graph run's ``result``.

        A run that finished but had to fall back on an unusable supervisor answer is
        ``"degraded"``, not ``"clean"``.
        """
        values: dict[str, Any] = {name: getattr(result, name) for name in _GRAPH_RESULT_FIELDS}
        if values["quality"] == "clean" and result.state.data.get("fallbacks"):
            values["quality"] = "degraded"
        return cls(**values, strategy=strategy, members=members)

    @property
    def content(self) -> Any:
        """The final answer.

        A run stopped early (a budget, a cancellation) before the supervisor wrote
        one keeps the last member answer (the best answer so far); ``None`` only when
        no member answered.
        """
        last = self.state.last_output
        if last is not None and last != "":
            return last
        answer = str(self.state.data.get("final_answer") or "")
        if not answer:
            done = [s for s in self.turns if s.error is None and s.output.strip()]
            answer = done[-1].output if done else ""
        return answer or last

    @property
    def fallbacks(self) -> list[str]:
        """Each time a supervisor answer could not be used: why, and what was done instead."""
        return [str(entry) for entry in self.state.data.get("fallbacks") or ()]

    @property
    def degraded_reasons(self) -> list[str]:
        """Why the run is ``"degraded"``: its fallbacks, failed turns, and an early stop."""
        reasons = list(self.fallbacks)
        reasons += [
            f"turn {step.number} ({step.agent}) failed: {step.error}"
            for step in self.turns
            if step.error is not None
        ]
        if self.stop_reason not in ("end", "paused", "interrupted"):
            reasons.append(f"the run stopped early: {self.stop_reason}")
        return reasons if self.quality != "clean" else []

    @property
    def agent_results(self) -> dict[str, list[Any]]:
        """Each member's AgentResults, in turn order (function members have none)."""
        found: dict[str, list[Any]] = {}
        for name, results in self.node_results.items():
            agent_results = [r.agent_result for r in results if r.agent_result is not None]
            if name in self.members and agent_results:
                found[name] = agent_results
        return found

    @property
    def turns(self) -> list[StepRecord]:
        """Every member's turn, as the supervisor recorded it.

        Each says who worked, what they were told, and what they answered (or why
        they failed).
        """
        return as_models(self.state.data.get("steps"), StepRecord)

    @property
    def plan(self) -> list[PlanStep]:
        """PLAN_AND_EXECUTE: the last plan made."""
        return as_models(self.state.data.get("plan"), PlanStep)

    @property
    def ledger(self) -> TaskLedger | None:
        """MAGENTIC: the last task ledger."""
        value = self.state.data.get("ledger")
        return None if value is None else as_model(value, TaskLedger)

    @property
    def rounds(self) -> int:
        """Rounds started: plan steps, full rounds, routing decisions or progress ledgers."""
        return int(self.state.data.get("rounds", 0))

    @property
    def replans(self) -> int:
        """Times the supervisor remade its plan."""
        return int(self.state.data.get("replans", 0))

    @property
    def completed(self) -> bool:
        """Whether the supervisor judged the task complete (not stopped by ``max_rounds``).

        PLAN_AND_EXECUTE counts a plan run to its end as complete.
        """
        return bool(self.state.data.get("done"))

    @property
    def verdict(self) -> str:
        """The supervisor's last judgement of the run, in words."""
        return str(self.state.data.get("verdict", ""))
