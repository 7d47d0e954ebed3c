"""DeepResearch and IterativeResearch: the research graphs, ready to run, and their results."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Unpack

from selectgraph.agents._defaults import DEFAULT_MAX_TOKENS
from selectgraph.build._builder import AgentGraph
from selectgraph.compile._graph_tool import GraphTool
from selectgraph.compile._options import RunOptions, StreamOptions
from selectgraph.core._models import as_models
from selectgraph.core._result import GraphResult
from selectgraph.providers._base import Provider
from selectgraph.research._budget import ResearchBudget
from selectgraph.research._deadline import start_deadline
from selectgraph.research._deep import build_deep_graph
from selectgraph.research._iterative import LoopSettings, build_iterative_graph
from selectgraph.research._search import SearchTool
from selectgraph.research._state import Evidence, SectionReport

__all__ = ["DeepResearch", "IterativeResearch", "ResearchResult"]

_FIELDS = tuple(f.name for f in fields(GraphResult))


@dataclass(slots=True, kw_only=True)
class ResearchResult(GraphResult):
    """A research run's result: the report, its sources and sections, and the run itself."""

    @property
    def markdown(self) -> str:
        """The report as Markdown (also ``content``)."""
        return str(self.state.data.get("markdown", ""))

    @property
    def sections(self) -> list[SectionReport]:
        """Each section as its loop wrote it, in outline order."""
        raw = self.state.data.get("sections")
        if raw is None:  # a single loop
            report = self.state.data.get("report")
            raw = [] if report is None else [report]
        return sorted(as_models(raw, SectionReport), key=lambda s: s.index)

    @property
    def sources(self) -> list[Evidence]:
        """The sources the report cites: ``sources[n - 1]`` is ``[n]``."""
        return as_models(self.state.data.get("sources"), Evidence)

    @property
    def degraded_reasons(self) -> list[str]:
        """Why the report is weaker than a clean one (empty when it is not).

        No search made (a budget smaller than one iteration), searches failed, cut or
        empty, research stopped by a budget or cut at the time limit, a writer, the
        outline or the synthesis failed, sections left out. The report prints each.
        """
        return [str(reason) for reason in self.state.data.get("warnings") or ()]

    @classmethod
    def wrap(cls, result: GraphResult) -> ResearchResult:
        """The research view of a research graph's result.

        A run that ended but whose report admits weaknesses (``degraded_reasons``) is
        ``"degraded"``, not ``"clean"``.
        """
        values: dict[str, Any] = {name: getattr(result, name) for name in _FIELDS}
        if values["quality"] == "clean" and result.state.data.get("warnings"):
            values["quality"] = "degraded"
        return cls(**values)


def _settings(
    tools: Sequence[SearchTool],
    provider: Provider | None,
    model: str | None,
    budget: ResearchBudget | None,
    results_per_search: int,
    max_evidence: int,
    max_output_tokens: int | None,
) -> LoopSettings:
    return LoopSettings(
        tools=tuple(tools),
        provider=provider,
        model=model,
        budget=budget or ResearchBudget(),
        results_per_search=results_per_search,
        max_evidence=max_evidence,
        max_output_tokens=max_output_tokens,
    )


class _Research:
    graph: AgentGraph
    settings: LoopSettings

    def graph_input(
        self, question: str | Mapping[str, Any] | None, options: Mapping[str, Any] | None = None
    ) -> Any:
        """The graph input a run of ``question`` starts from.

        ``question`` is the question's text, or a mapping holding it under
        ``"question"`` (the state, as the command line's and the studio's JSON input).

        Raises:
            ValueError: no question, and no checkpointed run to continue.
        """
        if isinstance(question, Mapping):  # the state: its question is required all the same
            return {**question, **self.graph_input(question.get("question"))}
        if question is None:
            if options is not None and options.get("checkpoint_store") is not None:
                return None  # continue a checkpointed run
            raise ValueError(
                "research needs a question (or, to continue a checkpointed run, "
                "checkpoint_store= and run_id=)"
            )
        if not isinstance(question, str) or not question.strip():
            raise ValueError(f"the research question must be non-empty text, got {question!r}")
        start: dict[str, Any] = {"question": question.strip()}
        deadline = start_deadline(self.settings.budget)
        if deadline is not None:
            start["deadline"] = deadline  # max_seconds from now: a deadline every call keeps
        return start

    def as_tool(
        self,
        name: str = "research",
        description: str = "Research a question in the sources and write a cited report",
    ) -> GraphTool:
        """This research app as a tool an agent calls with a question; the report comes back.

        Inside a graph run its usage counts in the run's budget and its events nest
        under the calling node (see ``AgentGraph.as_tool``).

        Raises:
            ValueError: the name is not 1-64 letters, digits, '_' or '-'.
        """
        return GraphTool(
            self.graph, name=name, description=description, text_input=self.graph_input
        )

    def run(self, question: str | None = None, **options: Unpack[RunOptions]) -> ResearchResult:
        """Research ``question`` and return the report (blocking)."""
        start = self.graph_input(question, options)
        return ResearchResult.wrap(self.graph.run(start, **options))

    async def arun(
        self, question: str | None = None, **options: Unpack[RunOptions]
    ) -> ResearchResult:
        """Research ``question`` and return the report."""
        start = self.graph_input(question, options)
        return ResearchResult.wrap(await self.graph.arun(start, **options))

    async def astream(
        self, question: str | None = None, **options: Unpack[StreamOptions]
    ) -> AsyncIterator[Any]:
        """Research ``question``, yielding the run's events (see ``AgentGraph.astream``).

        Research progress arrives as CustomEvents whose ``data["research"]`` is
        ``"decision"`` (an iteration's verdict) or ``"search"`` (its queries).
        """
        async for item in self.graph.astream(self.graph_input(question, options), **options):
            yield item


class IterativeResearch(_Research):
    r"""One research loop: think, find gaps, search, until done or out of budget; then write.

    Example:
        >>> import pathlib, tempfile
        >>> from selectgraph.providers import LocalProvider
        >>> from selectgraph.research import IterativeResearch, LocalCorpusSearch
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (folder / "tides.md").write_text("# Tides\nThe moon pulls the oceans.")
        >>> tools = [LocalCorpusSearch(folder)]
        >>> research = IterativeResearch(tools=tools, provider=LocalProvider())
        >>> result = research.run("What causes tides?")
        >>> [source.source_id for source in result.sources]
        ['tides.md']
    """

    def __init__(
        self,
        *,
        tools: Sequence[SearchTool],
        provider: Provider | None = None,
        model: str | None = None,
        budget: ResearchBudget | None = None,
        results_per_search: int = 5,
        max_evidence: int = 15,
        max_output_tokens: int | None = DEFAULT_MAX_TOKENS,
        name: str = "research",
    ) -> None:
        """Build the loop.

        Args:
            tools: The search tools the loop may use (at least one).
            provider: Who answers the agents (default: the offline-aware default provider).
            model: The model every agent asks (default: the provider's).
            budget: Iterations, tokens and time; the writer always gets to write.
            results_per_search: Hits each search returns.
            max_evidence: Passages the writer is shown.
            max_output_tokens: Tokens each model answer may have, structured ones included
                (default 1024, lowered to what a token budget has left; None: no limit).
            name: The graph's name.
        """
        self.settings = _settings(
            tools, provider, model, budget, results_per_search, max_evidence, max_output_tokens
        )
        """The loops' settings: tools, provider, model, budget and limits, as given."""
        self.graph = build_iterative_graph(self.settings, name=name)
        """The loop's AgentGraph."""


class DeepResearch(_Research):
    """Deep research: an outline, one research loop per section in parallel, a synthesis."""

    def __init__(
        self,
        *,
        tools: Sequence[SearchTool],
        provider: Provider | None = None,
        model: str | None = None,
        budget: ResearchBudget | None = None,
        max_sections: int = 4,
        section_timeout: float | None = None,
        results_per_search: int = 5,
        max_evidence: int = 15,
        max_output_tokens: int | None = DEFAULT_MAX_TOKENS,
        name: str = "deep_research",
    ) -> None:
        """Build the graph.

        Args:
            tools: The search tools the loops may use (at least one).
            provider: Who answers the agents (default: the offline-aware default provider).
            model: The model every agent asks (default: the provider's).
            budget: Iterations per section; tokens and time for the whole run, the
                tokens shared equally among the sections after the synthesis reserve.
            max_sections: Sections the outline may have.
            section_timeout: Seconds a section may take; a slower one is left out of
                the report, which says so.
            results_per_search: Hits each search returns.
            max_evidence: Passages each section's writer is shown.
            max_output_tokens: Tokens each model answer may have, structured ones included
                (default 1024, lowered to what a token budget has left; None: no limit).
            name: The graph's name.
        """
        self.settings = _settings(
            tools, provider, model, budget, results_per_search, max_evidence, max_output_tokens
        )
        """The loops' settings: tools, provider, model, budget and limits, as given."""
        self.graph = build_deep_graph(
            self.settings, max_sections=max_sections, section_timeout=section_timeout, name=name
        )
        """The deep-research AgentGraph."""
