"""Research deadlines: ``max_seconds`` is kept even when a model call or a search never returns.

The blocked calls wait on an ``asyncio.Event`` nobody sets, so only the deadline
ends them; the bounds checked are the issue's (the deadline plus 5 seconds), far
above what the runs take.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from selectgraph.providers._base import Completion, CompletionRequest
from selectgraph.research import (
    DeepResearch,
    IterativeResearch,
    LocalCorpusSearch,
    ResearchBudget,
    SearchHit,
)
from selectgraph.testing import ScriptedProvider
from tests.research._model import ResearchModel, role_of, section_of, sections_plan

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "research_corpus"
QUESTION = "How efficient is pumped hydro storage?"
OVERSHOOT = 5.0
"""Seconds past the deadline a run may take (the issue's bound)."""


class BlockingProvider(ScriptedProvider):
    """A research model whose calls for which ``blocks(request, n)`` holds never return.

    ``n`` counts the calls of the same role and section so far (1 for the first).
    """

    def __init__(
        self, model: ResearchModel, blocks: Callable[[CompletionRequest, int], bool]
    ) -> None:
        super().__init__([model] * 500)
        self.blocks = blocks
        self.seen: dict[tuple[str, str], int] = {}
        self.blocked: list[str] = []

    async def complete(self, request: CompletionRequest) -> Completion:
        key = (role_of(request), section_of(request))
        self.seen[key] = self.seen.get(key, 0) + 1
        if self.blocks(request, self.seen[key]):
            self.blocked.append(key[0])
            await asyncio.Event().wait()  # only a cancellation ends this
        return await super().complete(request)


class BlockingSearch:
    """A search tool whose searches never return."""

    name = "search_corpus"
    description = "a search that hangs"

    async def search(self, query: str, *, limit: int = 5) -> list[SearchHit]:
        await asyncio.Event().wait()
        return []


def never_done() -> ResearchModel:
    return ResearchModel(
        gaps=lambda section, n: {"research_complete": False, "outstanding_gaps": ["more"]}
    )


def test_the_default_research_time_budget_is_three_minutes() -> None:
    assert ResearchBudget().max_seconds == 180.0


def test_without_a_time_limit_searches_run_to_their_end() -> None:
    research = IterativeResearch(
        tools=[LocalCorpusSearch(CORPUS)],
        provider=ResearchModel().provider(),
        budget=ResearchBudget(max_seconds=None),
    )
    result = research.run(QUESTION)

    assert "deadline" not in result.state.data or result.state.data["deadline"] is None
    assert all(finding.error is None for finding in result.state["findings"])
    assert result.sources
    assert result.quality == "clean"


def test_a_model_call_in_flight_at_the_deadline_is_cancelled_and_a_report_written() -> None:
    # The second "think" never returns: the first iteration's evidence must be reported.
    provider = BlockingProvider(
        never_done(), lambda request, n: role_of(request) == "think" and n == 2
    )
    budget = ResearchBudget(
        max_iterations=5, max_seconds=3.0, reserve_seconds=1.0, iteration_seconds=0.01
    )
    research = IterativeResearch(
        tools=[LocalCorpusSearch(CORPUS)], provider=provider, budget=budget
    )

    started = time.perf_counter()
    result = research.run(QUESTION)
    elapsed = time.perf_counter() - started

    assert provider.blocked == ["think"]
    assert elapsed <= 3.0 + OVERSHOOT
    assert result.stop_reason == "end"
    assert result.state["stop_reason"] == "time_budget"
    assert result.sources  # the first iteration's evidence
    assert result.sections[0].text  # the writer wrote, in the time kept for it
    assert result.quality == "degraded"
    assert any(
        reason.startswith("The time limit cut 2 model call(s) (first: 'think' was cut")
        for reason in result.degraded_reasons
    ), result.degraded_reasons
    assert "Research was cut short by the time budget after 1 iteration." in (
        result.degraded_reasons
    )


def test_a_writer_in_flight_at_the_deadline_leaves_a_report_of_the_evidence() -> None:
    provider = BlockingProvider(ResearchModel(), lambda request, n: role_of(request) == "write")
    budget = ResearchBudget(max_seconds=2.0, reserve_seconds=1.0, iteration_seconds=0.01)
    research = IterativeResearch(
        tools=[LocalCorpusSearch(CORPUS)], provider=provider, budget=budget
    )

    started = time.perf_counter()
    result = research.run(QUESTION)
    elapsed = time.perf_counter() - started

    assert provider.blocked == ["write"]
    assert elapsed <= 2.0 + OVERSHOOT
    assert result.quality == "degraded"
    assert result.sources
    assert "**Key evidence**" in result.markdown
    [warning] = [w for w in result.degraded_reasons if w.startswith("The writer failed")]
    assert "DeadlineReached: 'write' was cut at the run's time limit" in warning
    assert f"> {warning}" in result.markdown


def test_a_search_that_never_returns_is_cut_at_the_deadline() -> None:
    budget = ResearchBudget(max_seconds=2.0, reserve_seconds=0.5, iteration_seconds=0.01)
    research = IterativeResearch(
        tools=[BlockingSearch()], provider=ResearchModel().provider(), budget=budget
    )
    started = time.perf_counter()
    result = research.run(QUESTION)
    elapsed = time.perf_counter() - started

    assert elapsed <= 2.0 + OVERSHOOT
    [finding] = result.state["findings"]
    assert finding.error == "DeadlineReached: the search was cut at the run's time limit"
    assert result.quality == "degraded"
    assert result.degraded_reasons[0].startswith("The search failed (DeadlineReached")


def test_a_time_budget_smaller_than_one_iteration_makes_no_call_before_the_writer() -> None:
    provider = ResearchModel().provider()
    research = IterativeResearch(
        tools=[LocalCorpusSearch(CORPUS)],
        provider=provider,
        budget=ResearchBudget(max_seconds=1.0),  # the writer's reserve alone is 20 s
    )
    result = research.run(QUESTION)

    assert [role_of(request) for request in provider.requests] == ["write"]
    assert result.state["findings"] == []
    assert result.quality == "degraded"
    assert result.degraded_reasons[0] == "No search was made: the time budget allowed none."
    assert result.degraded_reasons[1].startswith("The time limit cut 2 model call(s)")


@pytest.mark.parametrize("blocked_role", ["write", "think"])
def test_deep_research_keeps_its_deadline_when_a_section_hangs(blocked_role: str) -> None:
    questions = ("battery efficiency", "pumped hydro siting")
    model = ResearchModel(plan=sections_plan(*questions))
    provider = BlockingProvider(
        model,
        lambda request, n: (
            role_of(request) == blocked_role and section_of(request) == "pumped hydro siting"
        ),
    )
    budget = ResearchBudget(max_seconds=4.0, reserve_seconds=1.0, iteration_seconds=0.01)
    research = DeepResearch(tools=[LocalCorpusSearch(CORPUS)], provider=provider, budget=budget)

    started = time.perf_counter()
    result = research.run("Batteries or pumped hydro?")
    elapsed = time.perf_counter() - started

    assert provider.blocked
    assert elapsed <= 4.0 + OVERSHOOT
    assert result.stop_reason == "end"
    assert [s.title for s in result.sections] == [q.title() for q in questions]
    assert result.sections[0].warnings == []  # the other section finished cleanly
    assert result.quality == "degraded"
    assert result.degraded_reasons
    assert all(r.startswith("Section 'Pumped Hydro Siting': ") for r in result.degraded_reasons)
    assert "## Sources" in result.markdown
