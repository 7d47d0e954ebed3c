"""Research that tells the truth: a report whose research failed, was cut or found nothing is
"degraded", and says why in the result and in the report (issue 22)."""

from __future__ import annotations

from pathlib import Path

from selectgraph.research import (
    DeepResearch,
    IterativeResearch,
    LocalCorpusSearch,
    ResearchBudget,
    SearchHit,
)
from tests.research._model import ResearchModel, sections_plan

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "research_corpus"
QUESTION = "How efficient is pumped hydro storage?"


class BrokenSearch:
    """A search tool whose every search fails."""

    name = "search_corpus"
    description = "a search that is down"

    def __init__(self) -> None:
        self.queries: list[str] = []

    async def search(self, query: str, *, limit: int = 5) -> list[SearchHit]:
        self.queries.append(query)
        raise ConnectionError("the index is down")


class EmptySearch:
    """A search tool that finds nothing."""

    name = "search_corpus"
    description = "an empty index"

    async def search(self, query: str, *, limit: int = 5) -> list[SearchHit]:
        return []


def test_a_clean_run_stays_clean() -> None:
    research = IterativeResearch(
        tools=[LocalCorpusSearch(CORPUS)], provider=ResearchModel().provider()
    )
    result = research.run(QUESTION)

    assert result.quality == "clean"
    assert result.degraded_reasons == []
    assert result.sections[0].warnings == []
    assert "> " not in result.markdown.split("## Sources")[0]


def test_a_section_whose_searches_all_failed_is_degraded_and_says_why() -> None:
    tool = BrokenSearch()
    research = IterativeResearch(tools=[tool], provider=ResearchModel().provider())
    result = research.run(QUESTION)

    assert tool.queries  # it searched
    assert result.stop_reason == "end"
    assert result.quality == "degraded"
    reason = "The search failed (ConnectionError: the index is down)."
    assert result.degraded_reasons == [reason]
    assert result.sections[0].warnings == [reason]
    assert "_No evidence was found for this section._" in result.markdown
    assert f"> {reason}" in result.markdown


def test_searches_that_found_nothing_are_degraded() -> None:
    research = IterativeResearch(tools=[EmptySearch()], provider=ResearchModel().provider())
    result = research.run(QUESTION)

    assert result.quality == "degraded"
    assert result.degraded_reasons == ["The searches found no evidence."]
    assert "> The searches found no evidence." in result.markdown


def test_a_token_budget_smaller_than_one_iteration_makes_no_search_and_says_so() -> None:
    tool = BrokenSearch()
    research = IterativeResearch(
        tools=[tool],
        provider=ResearchModel().provider(),
        budget=ResearchBudget(max_tokens=100, reserve_tokens=50, iteration_tokens=4000),
    )
    result = research.run(QUESTION)

    assert tool.queries == []
    assert result.state["stop_reason"] == "token_budget"
    assert result.quality == "degraded"
    assert result.degraded_reasons == ["No search was made: the token budget allowed none."]
    assert "> No search was made: the token budget allowed none." in result.markdown


def test_max_iterations_zero_makes_no_search_and_says_so() -> None:
    research = IterativeResearch(
        tools=[LocalCorpusSearch(CORPUS)],
        provider=ResearchModel().provider(),
        budget=ResearchBudget(max_iterations=0),
    )
    result = research.run(QUESTION)

    assert result.quality == "degraded"
    assert result.degraded_reasons == ["No search was made: max_iterations=0 allowed none."]


def test_research_cut_by_the_token_budget_after_searching_is_degraded() -> None:
    never_done = ResearchModel(
        gaps=lambda section, n: {"research_complete": False, "outstanding_gaps": ["more"]},
        tokens_per_call=1000,
    )
    research = IterativeResearch(
        tools=[LocalCorpusSearch(CORPUS)],
        provider=never_done.provider(),
        budget=ResearchBudget(
            max_iterations=10, max_tokens=9000, reserve_tokens=1000, iteration_tokens=1000
        ),
    )
    result = research.run(QUESTION)

    assert result.state["stop_reason"] == "token_budget"
    iterations = result.state["iteration"]
    assert iterations >= 1
    assert result.quality == "degraded"
    plural = "s" if iterations != 1 else ""
    assert result.degraded_reasons == [
        f"Research was cut short by the token budget after {iterations} iteration{plural}."
    ]


def test_a_deep_report_names_each_degraded_section() -> None:
    questions = ("battery efficiency", "pumped hydro siting")
    model = ResearchModel(plan=sections_plan(*questions))
    research = DeepResearch(tools=[BrokenSearch()], provider=model.provider())
    result = research.run("Batteries or pumped hydro?")

    assert result.stop_reason == "end"
    assert result.quality == "degraded"
    assert result.degraded_reasons == [
        f"Section {q.title()!r}: The search failed (ConnectionError: the index is down)."
        for q in questions
    ]
    for section in result.sections:
        heading = f"## {section.title}\n\n> The search failed"
        assert heading in result.markdown


def test_a_step_that_failed_and_was_gone_on_without_is_named() -> None:
    model = ResearchModel(gaps=lambda section, n: {"not": "a gap analysis"})
    research = IterativeResearch(
        tools=[LocalCorpusSearch(CORPUS)],
        provider=model.provider(),
        budget=ResearchBudget(max_iterations=1),
    )
    result = research.run(QUESTION)

    assert result.sources
    assert result.quality == "degraded"
    [reason] = result.degraded_reasons
    assert reason.startswith("The 'gap' step failed 2 times and was gone on without (Agent")
    assert f"> {reason}" in result.markdown
