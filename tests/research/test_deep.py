"""Deep research: an outline, one loop per section in parallel, a synthesized and cited report."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from selectgraph import ProviderRequestError
from selectgraph.observe import NodeFinished, ParallelStarted
from selectgraph.providers import LocalProvider
from selectgraph.research import (
    DeepResearch,
    LocalCorpusSearch,
    ResearchBudget,
    ResearchProgress,
    SearchHit,
)
from tests.research._model import ResearchModel, sections_plan

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "research_corpus"
QUESTION = "How do grid-scale batteries compare with pumped hydro?"
SECTIONS = ("battery round-trip efficiency", "pumped hydro siting", "long-duration economics")


class SlowSearch:
    """The corpus, with a delay, recording how many searches ran at once."""

    name = "search_corpus"
    description = "the corpus"

    def __init__(self, delay: float = 0.05) -> None:
        self.inner = LocalCorpusSearch(CORPUS)
        self.delay = delay
        self.running = 0
        self.most = 0
        self.queries: list[str] = []

    async def search(self, query: str, *, limit: int = 5) -> list[SearchHit]:
        self.queries.append(query)
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            await asyncio.sleep(self.delay)
            return await self.inner.search(query, limit=limit)
        finally:
            self.running -= 1


def model_for(*questions: str, **kwargs: Any) -> ResearchModel:
    return ResearchModel(plan=sections_plan(*questions), **kwargs)


def test_sections_are_researched_in_parallel_and_joined_in_outline_order() -> None:
    tool = SlowSearch()
    model = model_for(*SECTIONS)
    research = DeepResearch(tools=[tool], provider=model.provider())
    events: list[Any] = []

    result = research.run(QUESTION, observers=[events.append])

    assert result.node_order == [
        "plan", "research", "research", "research", "synthesize", "assemble",
    ]  # fmt: skip
    assert tool.most == 3  # the three sections searched at the same time
    assert sorted(tool.queries) == sorted(SECTIONS)
    assert [s.title for s in result.sections] == [q.title() for q in SECTIONS]
    assert [s.index for s in result.sections] == [0, 1, 2]
    assert all(s.stop_reason == "complete" for s in result.sections)
    # Each loop kept its own evidence: what a section cites is what it searched for.
    for section in result.sections:
        assert {e.query for e in section.sources} == {section.question}
    [started] = [e for e in events if isinstance(e, ParallelStarted)]
    assert len(started.branches) == 3
    # The report: title, intro, three sections, conclusion, one numbering of sources.
    md = result.markdown
    assert md.startswith("# Storage report\n\nIntro.\n\n## Battery Round-Trip Efficiency\n\n")
    assert md.index("## Battery") < md.index("## Pumped") < md.index("## Long-Duration")
    assert "## Conclusion\n\nConclusion." in md
    numbered = md.split("## Sources\n\n")[1].strip().splitlines()
    assert len(numbered) == len(result.sources)
    assert len({s.source_id for s in result.sources}) == len(result.sources)
    assert all((CORPUS / s.source_id).is_file() for s in result.sources)
    # The sections' own [1] and [2] became report-wide numbers.
    for section in result.sections:
        first = section.sources[0].source_id
        number = [s.source_id for s in result.sources].index(first) + 1
        assert f"About {section.question} [{number}]." in md
    assert result.content == md


def test_a_failing_writer_leaves_its_section_with_the_evidence() -> None:
    def write(section: str) -> Any:
        if section == "pumped hydro siting":
            return ProviderRequestError("the model refused", provider="scripted")
        return f"About {section} [1]."

    model = model_for(*SECTIONS, write=write)
    result = DeepResearch(tools=[SlowSearch(0)], provider=model.provider()).run(QUESTION)

    assert result.stop_reason == "end"
    assert [s.index for s in result.sections] == [0, 1, 2]
    failed = result.sections[1]
    assert failed.error == "ProviderRequestError: the model refused"
    assert failed.text == ""
    assert failed.sources  # the evidence it found is kept
    md = result.markdown
    section = md.split("## Pumped Hydro Siting")[1].split("## ")[0]
    assert "> The writer failed (ProviderRequestError: the model refused)" in section
    assert "**Key evidence**" in section


class StuckSearch(SlowSearch):
    """Hangs on one section's query, as a search behind a dead connection would."""

    def __init__(self, stuck_on: set[str]) -> None:
        super().__init__(0)
        self.stuck_on = stuck_on

    async def search(self, query: str, *, limit: int = 5) -> list[SearchHit]:
        if query in self.stuck_on:
            await asyncio.sleep(30)
        return await super().search(query, limit=limit)


def test_a_failing_section_is_left_out_and_the_report_says_so() -> None:
    events: list[Any] = []
    research = DeepResearch(
        tools=[StuckSearch({"pumped hydro siting"})],
        provider=model_for(*SECTIONS).provider(),
        section_timeout=1.0,
    )
    started = time.monotonic()
    result = research.run(QUESTION, observers=[events.append])

    assert time.monotonic() - started < 10
    assert result.stop_reason == "end"
    assert result.quality == "degraded"
    assert [s.index for s in result.sections] == [0, 2]
    assert "## Pumped Hydro Siting" not in result.markdown
    assert (
        "> The section 'Pumped Hydro Siting' could not be researched (ran past its timeout "
        "of 1 s)." in result.markdown
    )
    skipped = [e for e in events if isinstance(e, NodeFinished) and e.node == "research"]
    assert sorted(e.outcome for e in skipped) == ["skipped", "success", "success"]


def test_every_section_failing_still_gives_a_report() -> None:
    research = DeepResearch(
        tools=[StuckSearch(set(SECTIONS))],
        provider=model_for(*SECTIONS).provider(),
        section_timeout=0.5,
    )
    result = research.run(QUESTION)
    assert result.stop_reason == "end"
    assert result.sections == []
    assert result.markdown.count("could not be researched (ran past its timeout") == 3
    assert result.markdown.startswith("# Storage report\n\nIntro.")


def test_a_token_budget_is_shared_and_every_section_still_writes() -> None:
    never_done = model_for(
        *SECTIONS,
        gaps=lambda s, n: {"research_complete": False, "outstanding_gaps": ["more"]},
        queries=lambda s, n: [f"{s} {n}"],
        tokens_per_call=500,
    )
    budget = ResearchBudget(
        max_iterations=20, max_tokens=15_000, reserve_tokens=1000, iteration_tokens=1000
    )
    research = DeepResearch(tools=[SlowSearch(0)], provider=never_done.provider(), budget=budget)
    result = research.run(QUESTION)

    assert result.stop_reason == "end"
    assert [s.stop_reason for s in result.sections] == ["token_budget"] * 3
    share = budget.share(3)
    assert share == 4666
    assert all(s.tokens <= share for s in result.sections)
    assert result.total_usage.total_tokens <= 15_000
    assert all(s.iterations >= 1 for s in result.sections)
    assert "## Sources" in result.markdown


def test_a_time_budget_sends_every_section_to_its_writer() -> None:
    budget = ResearchBudget(max_seconds=30, reserve_seconds=29.9, iteration_seconds=0.5)
    research = DeepResearch(
        tools=[SlowSearch(0)], provider=model_for(*SECTIONS).provider(), budget=budget
    )
    started = time.monotonic()
    result = research.run(QUESTION)
    assert time.monotonic() - started < 10
    assert [s.stop_reason for s in result.sections] == ["time_budget"] * 3
    assert result.markdown.count("_No evidence was found for this section._") == 3


def test_offline_on_the_local_provider_gives_a_cited_report() -> None:
    research = DeepResearch(tools=[LocalCorpusSearch(CORPUS)], provider=LocalProvider())
    result = research.run(QUESTION)
    assert result.stop_reason == "end"
    assert result.sources
    assert "**Key evidence**" in result.markdown
    assert all((CORPUS / s.source_id).is_file() for s in result.sources)


def test_the_terminal_view_follows_the_run() -> None:
    console = Console(record=True, width=140, force_terminal=False)
    progress = ResearchProgress(console, title="Deep research")
    model = model_for(*SECTIONS, write=lambda s: f"About {s} [1].")
    research = DeepResearch(tools=[SlowSearch(0)], provider=model.provider())

    with progress:
        research.run(QUESTION, observers=[progress])

    text = console.export_text()
    for title in ("Battery Round-Trip Efficiency", "Pumped Hydro Siting"):
        assert title in text
    assert text.count("done") >= 3
    assert "model calls" in text
    assert [s.status for s in progress.sections.values()] == ["done"] * 3
    assert all(s.tokens > 0 and s.sources == 5 for s in progress.sections.values())
    assert progress.phase == "done (end)"
    assert progress.calls == model.calls.total()


async def test_streamed_custom_events_name_their_section() -> None:
    research = DeepResearch(tools=[SlowSearch(0)], provider=model_for(*SECTIONS).provider())
    seen = {
        (item["section_index"], item["research"])
        async for item in research.astream(QUESTION, stream_mode="custom")
    }
    assert seen == {(i, kind) for i in range(3) for kind in ("decision", "search")}


def test_a_model_that_cannot_answer_in_the_schemas_still_gets_a_report() -> None:
    """Planner, gap finder, selector and synthesizer fail; think and write still answer."""
    from selectgraph.providers import CompletionRequest, LocalReply

    def answer(request: CompletionRequest) -> LocalReply | str:
        if request.response_format is not None:
            return "I would rather not answer in JSON."
        if "You write clear, factual prose" in request.messages[0].text:
            return "What the corpus says [1]."
        raise ProviderRequestError("thinking is down", provider="scripted")

    from selectgraph.testing import ScriptedProvider

    tool = SlowSearch(0)
    research = DeepResearch(tools=[tool], provider=ScriptedProvider([answer] * 200))
    result = research.run(QUESTION)

    assert result.stop_reason == "end"
    assert result.quality == "degraded"
    assert result.node_order[:2] == ["plan", "fallback_plan"]
    [section] = result.sections
    assert section.question == QUESTION
    assert tool.queries == [QUESTION] * 3  # no gaps were named: the question, each iteration
    assert section.stop_reason == "max_iterations"
    assert result.markdown.startswith(f"# {QUESTION}\n\nThis report answers: {QUESTION}")
    assert "What the corpus says [1]." in result.markdown
    failed_nodes = {error["node"] for error in result.state.errors}
    assert failed_nodes == {"plan", "synthesize"}  # the loop's own are in its subgraph


def test_a_deep_run_continues_from_its_checkpoints(tmp_path: Path) -> None:
    from selectgraph import SQLiteCheckpointStore

    store = SQLiteCheckpointStore(tmp_path / "deep.db")
    first = DeepResearch(tools=[SlowSearch(0)], provider=model_for(*SECTIONS).provider())
    paused = first.run(QUESTION, checkpoint_store=store, run_id="d1", pause_after=["plan"])
    assert paused.stop_reason == "paused"

    tool = SlowSearch(0)
    second = DeepResearch(tools=[tool], provider=model_for(*SECTIONS).provider())
    again = second.run(None, checkpoint_store=store, run_id="d1", pause_before=["synthesize"])
    assert again.stop_reason == "paused"
    assert len(tool.queries) == 3

    third = DeepResearch(tools=[SlowSearch(0)], provider=model_for(*SECTIONS).provider())
    done = third.run(None, checkpoint_store=store, run_id="d1")
    assert done.stop_reason == "end"
    assert [s.index for s in done.sections] == [0, 1, 2]
    assert done.markdown.startswith("# Storage report")
    store.close()


def test_the_diagram_draws_the_fan_out_to_research_only() -> None:
    research = DeepResearch(tools=[SlowSearch()], provider=model_for("q").provider())

    diagram = research.graph.visualize("mermaid", show=False)

    research_id = next(
        line.split("[")[0].strip() for line in diagram.splitlines() if "research (subgraph)" in line
    )
    fan_outs = [line.strip() for line in diagram.splitlines() if '"fan_out"' in line]
    assert len(fan_outs) == 2, diagram  # from plan and from fallback_plan, nowhere else
    assert all(line.endswith(f"| {research_id}") for line in fan_outs), diagram
