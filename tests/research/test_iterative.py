"""The iterative research loop: think, gaps, decide, search, back to think; write when done."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from selectgraph import SQLiteCheckpointStore
from selectgraph.observe import CustomEvent
from selectgraph.providers import LocalProvider
from selectgraph.research import (
    IterativeResearch,
    LocalCorpusSearch,
    ResearchBudget,
    SearchHit,
)
from tests.research._model import ResearchModel

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "research_corpus"
QUESTION = "How efficient is pumped hydro storage?"


class CountingSearch:
    """A search tool that records its queries (and can fail or be slow)."""

    description = "counts"

    def __init__(self, name: str = "search_corpus", *, fail: bool = False) -> None:
        self.name = name
        self.queries: list[str] = []
        self.fail = fail
        self.inner = LocalCorpusSearch(CORPUS)

    async def search(self, query: str, *, limit: int = 5) -> list[SearchHit]:
        self.queries.append(query)
        if self.fail:
            raise ConnectionError("the index is down")
        return await self.inner.search(query, limit=limit)


def test_the_loop_searches_until_complete_then_writes_a_cited_report() -> None:
    model = ResearchModel(write=lambda section: "Pumped hydro returns 70 to 85 percent [1].")
    tool = CountingSearch()
    events: list[Any] = []
    research = IterativeResearch(tools=[tool], provider=model.provider())

    result = research.run(QUESTION, observers=[events.append])

    assert result.node_order == [
        "think", "gap", "decide", "select", "search", "think", "gap", "decide", "write",
        "report",
    ]  # fmt: skip
    assert result.state["stop_reason"] == "complete"
    assert result.state["iteration"] == 1
    assert tool.queries == [QUESTION]  # the model's query: the section question
    md = result.content
    assert md == result.markdown
    assert md.startswith(f"# {QUESTION}\n\nPumped hydro returns 70 to 85 percent [1].")
    assert "## Sources\n\n[1] " in md
    cited = result.sources[0]
    assert (CORPUS / cited.source_id).is_file()
    assert cited.query == QUESTION
    [section] = result.sections
    assert section.stop_reason == "complete"
    assert section.tokens == result.state["spent_tokens"] > 0
    # The writer saw the evidence numbered, and the gap finder the evidence found.
    decisions = [e.data for e in events if isinstance(e, CustomEvent)]
    assert [d["research"] for d in decisions] == ["decision", "search", "decision"]
    assert decisions[0]["next"] == "search"
    assert decisions[-1]["next"] == "write"
    assert decisions[-1]["reason"] == "complete"
    assert decisions[1]["new_sources"] == 5


def test_research_is_not_complete_before_a_first_search() -> None:
    model = ResearchModel(gaps=lambda s, n: {"research_complete": True, "outstanding_gaps": []})
    tool = CountingSearch()
    result = IterativeResearch(tools=[tool], provider=model.provider()).run(QUESTION)
    assert len(tool.queries) == 1
    assert result.state["stop_reason"] == "complete"


def test_max_iterations_routes_to_the_writer() -> None:
    never = ResearchModel(
        gaps=lambda s, n: {"research_complete": False, "outstanding_gaps": [f"gap {n}"]},
        queries=lambda s, n: [f"storage {n}"],
    )
    tool = CountingSearch()
    research = IterativeResearch(
        tools=[tool], provider=never.provider(), budget=ResearchBudget(max_iterations=2)
    )
    result = research.run(QUESTION)
    assert tool.queries == ["storage 1", "storage 2"]
    assert result.state["stop_reason"] == "max_iterations"
    assert result.node_order[-2:] == ["write", "report"]
    assert result.markdown


def test_a_token_budget_stops_research_before_it_is_exceeded_and_still_writes() -> None:
    never = ResearchModel(
        gaps=lambda s, n: {"research_complete": False, "outstanding_gaps": ["more"]},
        queries=lambda s, n: [f"battery {n}"],
        tokens_per_call=1000,
    )
    budget = ResearchBudget(
        max_iterations=10, max_tokens=9000, reserve_tokens=1000, iteration_tokens=2000
    )
    research = IterativeResearch(tools=[CountingSearch()], provider=never.provider(), budget=budget)
    result = research.run(QUESTION)

    assert result.state["stop_reason"] == "token_budget"
    assert result.node_order[-2:] == ["write", "report"]
    # Measured at 1000 tokens a call: every iteration costs 4000 (select, think, gap + ...).
    assert result.total_usage.total_tokens <= 9000
    assert result.state["iteration"] >= 1
    assert "## Sources" in result.markdown


def test_a_time_budget_routes_to_the_writer() -> None:
    research = IterativeResearch(
        tools=[CountingSearch()],
        provider=ResearchModel().provider(),
        budget=ResearchBudget(max_seconds=5, reserve_seconds=5, iteration_seconds=1),
    )
    result = research.run(QUESTION)
    assert result.state["stop_reason"] == "time_budget"
    assert result.state["iteration"] == 0
    assert "_No evidence was found" in result.markdown


def test_a_failing_tool_is_recorded_and_the_other_searches_count() -> None:
    model = ResearchModel(queries=lambda s, n: ["hydro", "batteries"])
    model.task_tools = ["search_corpus", "broken"]
    broken = CountingSearch("broken", fail=True)
    research = IterativeResearch(tools=[CountingSearch(), broken], provider=model.provider())

    result = research.run(QUESTION)

    good, bad = result.state["findings"]
    assert (good.tool, good.error, len(good.found)) == ("search_corpus", None, 5)
    assert (bad.tool, bad.error) == ("broken", "ConnectionError: the index is down")
    assert broken.queries == ["batteries"]
    assert result.state["stop_reason"] == "complete"
    assert len(result.sources) >= 1


def test_an_empty_query_searches_the_gap_then_the_question() -> None:
    model = ResearchModel(queries=lambda s, n: [""])
    tool = CountingSearch()
    IterativeResearch(tools=[tool], provider=model.provider()).run(QUESTION)
    assert tool.queries == [QUESTION]  # the gap is the section here


def test_bad_tools_are_refused() -> None:
    with pytest.raises(ValueError, match="at least one search tool"):
        IterativeResearch(tools=[])
    with pytest.raises(TypeError, match="is not a search tool"):
        IterativeResearch(tools=[object()])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="two search tools are named 'search_corpus'"):
        IterativeResearch(tools=[CountingSearch(), CountingSearch()])
    with pytest.raises(ValueError, match="tool name 'web search' must be"):
        IterativeResearch(tools=[CountingSearch("web search")])
    with pytest.raises(ValueError, match="tool name 3 must be a string"):
        IterativeResearch(tools=[CountingSearch(3)])  # type: ignore[arg-type]


def test_offline_on_the_local_provider() -> None:
    research = IterativeResearch(tools=[LocalCorpusSearch(CORPUS)], provider=LocalProvider())
    result = research.run("What is the round-trip efficiency of pumped hydro?")
    assert result.stop_reason == "end"
    assert result.sources
    assert "## Sources\n\n[1] " in result.markdown
    assert all((CORPUS / s.source_id).is_file() for s in result.sources)


def test_a_checkpointed_loop_continues_without_searching_again(tmp_path: Path) -> None:
    store = SQLiteCheckpointStore(tmp_path / "research.db")
    tool = CountingSearch()
    first = IterativeResearch(tools=[tool], provider=ResearchModel().provider())
    paused = first.run(QUESTION, checkpoint_store=store, run_id="r1", pause_before=["write"])
    assert paused.stop_reason == "paused"
    assert len(tool.queries) == 1

    again = CountingSearch()
    second = IterativeResearch(tools=[again], provider=ResearchModel().provider())
    done = second.run(None, checkpoint_store=store, run_id="r1")
    assert done.stop_reason == "end"
    assert again.queries == []  # the evidence came back from the checkpoint
    assert {s.source_id for s in done.sources} <= {e.source_id for e in paused.state["evidence"]}
    store.close()


async def test_astream_reports_the_research_as_it_goes() -> None:
    research = IterativeResearch(tools=[CountingSearch()], provider=ResearchModel().provider())
    kinds = [item["research"] async for item in research.astream(QUESTION, stream_mode="custom")]
    assert kinds == ["decision", "search", "decision"]
    await asyncio.sleep(0)


def test_sources_are_numbered_as_the_report_cites_them() -> None:
    model = ResearchModel(write=lambda section: "Hydro is old [3]. Batteries are fast [1].")
    result = IterativeResearch(tools=[CountingSearch()], provider=model.provider()).run(QUESTION)
    shown = result.sections[0].sources
    # [3] came first in the text, so it is the report's [1].
    assert result.sources[0].source_id == shown[2].source_id
    assert result.sources[1].source_id == shown[0].source_id
    assert result.markdown.startswith(f"# {QUESTION}\n\nHydro is old [1]. Batteries are fast [2].")
    listed = result.markdown.split("## Sources\n\n")[1].splitlines()
    assert listed[0].endswith(result.sources[0].source_id)


def test_failed_and_reasked_calls_count_against_the_token_budget() -> None:
    from selectgraph import Usage
    from selectgraph.providers import CompletionRequest, LocalReply

    def always_bad(request: CompletionRequest) -> LocalReply:
        # 1000 tokens a call; the gap finder never answers in its schema (re-asked once).
        text = "not json" if request.response_format is not None else "thoughts"
        return LocalReply(text=text, usage=Usage(input_tokens=500, output_tokens=500, calls=1))

    from selectgraph.testing import ScriptedProvider

    budget = ResearchBudget(max_iterations=10, max_tokens=9000, reserve_tokens=1000)
    research = IterativeResearch(
        tools=[CountingSearch()], provider=ScriptedProvider([always_bad] * 100), budget=budget
    )
    result = research.run(QUESTION)
    assert result.state["stop_reason"] == "token_budget"
    assert result.total_usage.total_tokens <= 9000
    assert result.state["spent_tokens"] == result.total_usage.total_tokens


def test_a_failing_writer_still_gives_a_report_of_the_evidence() -> None:
    from selectgraph import ProviderRequestError

    model = ResearchModel(write=lambda s: ProviderRequestError("writer down", provider="s"))
    result = IterativeResearch(tools=[CountingSearch()], provider=model.provider()).run(QUESTION)
    assert result.stop_reason == "end"
    assert result.sections[0].error == "ProviderRequestError: writer down"
    assert "> The writer failed (ProviderRequestError: writer down)" in result.markdown
    assert "**Key evidence**" in result.markdown
    assert result.sources


@pytest.mark.parametrize("question", [None, "", "   "])
def test_a_run_needs_a_question(question: str | None) -> None:
    research = IterativeResearch(tools=[CountingSearch()], provider=ResearchModel().provider())
    with pytest.raises(ValueError, match=r"research needs a question|must be non-empty text"):
        research.run(question)


def test_research_is_a_tool_of_an_agent_and_a_member_of_a_team() -> None:
    from selectgraph import END, Agent, AgentGraph, Role, SupervisorAgent, SupervisorStrategy
    from selectgraph.providers import LocalReply
    from selectgraph.testing import ScriptedProvider

    model = ResearchModel(write=lambda section: "Pumped hydro returns 70 to 85 percent [1].")
    research = IterativeResearch(tools=[CountingSearch()], provider=model.provider())
    lead_model = ScriptedProvider(
        [LocalReply.tool_call("research", {"input": QUESTION}, call_id="r1"), "done"]
    )
    lead = AgentGraph(name="lead")
    lead.add_node("lead", Agent(provider=lead_model, tools=[research.as_tool()]), next_node=END)

    result = lead.run("Look it up")

    [report] = [m.text for m in lead_model.requests[1].messages if m.role is Role.TOOL]
    assert report.startswith(f"# {QUESTION}\n\nPumped hydro returns 70 to 85 percent [1].")
    assert result.total_usage.calls > 2  # the research's own calls are the run's

    team = SupervisorAgent(
        agents={"researcher": research},
        provider=ScriptedProvider(
            [LocalReply.json({"steps": [{"agent": "researcher", "instruction": QUESTION}]})]
        ),
        strategy=SupervisorStrategy.PLAN_AND_EXECUTE,
    )
    assert team.run(QUESTION).content.startswith("# Task:")
