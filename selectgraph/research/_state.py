"""Research state: evidence, findings and reports as typed records, and the two graphs' states.

Everything a research loop knows lives in its graph state, merged through
reducers: a loop running as one branch of a deep-research fan-out has its own
subgraph state, and what it hands back (its section) is appended at the join.
No module-level or context-variable state is shared between loops.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from selectgraph.state._reducers import append, dedupe_append

__all__ = [
    "Evidence",
    "Finding",
    "IterativeState",
    "DeepState",
    "KnowledgeGap",
    "Mark",
    "ReportPlan",
    "SectionPlan",
    "SectionReport",
    "Synthesis",
    "ToolSelection",
    "ToolTask",
    "tool_selection_model",
]


class Evidence(BaseModel):
    """A passage a search found, with where it came from."""

    source_id: str
    """The source's identity (a corpus path or a URL)."""
    title: str
    """The source's title."""
    snippet: str
    """The passage, as the search returned it."""
    url: str = ""
    """Where the source can be read, when it has an address."""
    query: str = ""
    """The query that found it."""
    tool: str = ""
    """The tool that found it."""
    score: float = 0.0
    """The search's relevance score (higher is better; 0.0 when the tool gives none)."""


class Finding(BaseModel):
    """What one tool task of one iteration did."""

    iteration: int
    """The loop's iteration (0-based) that ran the task."""
    gap: str
    """The knowledge gap the search addressed."""
    tool: str
    """The search tool it used."""
    query: str
    """The query it ran."""
    found: list[str] = []
    """Source ids of the hits (new or already known)."""
    error: str | None = None
    """Why the search failed, when it did (``Type: message``)."""


class Mark(BaseModel):
    """Tokens spent and seconds elapsed when an iteration's decision was taken."""

    tokens: int
    """Tokens the loop had spent."""
    seconds: float
    """Seconds since the loop started."""


class KnowledgeGap(BaseModel):
    """Is the research complete, and what is still missing?"""

    research_complete: bool = Field(
        description="True when the evidence gathered answers the question."
    )
    outstanding_gaps: list[str] = Field(
        description="What is still unknown, most important first (at most 3)."
    )


class ToolTask(BaseModel):
    """One search to run: which tool, with what query, for which gap."""

    gap: str = Field(description="The knowledge gap this search addresses.")
    tool: str = Field(description="The tool to use (one of the names given).")
    query: str = Field(description="A short keyword query for the tool.")


class ToolSelection(BaseModel):
    """The searches to run this iteration."""

    tasks: list[ToolTask] = Field(min_length=1, description="One to three searches.")


def tool_selection_model(tools: Sequence[str]) -> type[ToolSelection]:
    """A :class:`ToolSelection` whose tasks may only name ``tools`` (a JSON-schema enum)."""
    names: Any = Literal.__getitem__(tuple(tools))
    task = create_model("ToolTask", __base__=ToolTask, tool=(names, Field(description="The tool.")))
    selection: type[ToolSelection] = create_model(
        "ToolSelection",
        __base__=ToolSelection,
        tasks=(list[task], Field(min_length=1, max_length=3, description="One to three searches.")),
    )
    return selection


class SectionPlan(BaseModel):
    """One section of a report outline."""

    title: str = Field(description="The section's heading.")
    key_question: str = Field(description="The question the section answers.")


class ReportPlan(BaseModel):
    """A report outline: a title and its sections."""

    title: str = Field(description="The report's title.")
    background: str = Field(default="", description="What the reader needs to know first.")
    sections: list[SectionPlan] = Field(min_length=1, description="The sections, in order.")


class Synthesis(BaseModel):
    """The parts of a report written around its sections."""

    introduction: str = Field(description="One paragraph introducing the report.")
    conclusion: str = Field(description="One paragraph answering the question from the sections.")


class SectionReport(BaseModel):
    """What one research loop produced."""

    index: int = 0
    """Position in the outline (0 for a report of one loop)."""
    title: str
    """The section's heading (the question, for a report of one loop)."""
    question: str
    """The question the section answers."""
    text: str
    """The written text; ``[n]`` cites ``sources[n-1]``."""
    sources: list[Evidence] = []
    """The evidence the text may cite, in citation order."""
    key_evidence: list[int] = []
    """Numbers (1-based, into ``sources``) of the passages quoted under the text."""
    iterations: int = 0
    """Research iterations the loop ran before writing."""
    stop_reason: str = ""
    """Why the loop stopped researching: complete, max_iterations, token_budget, time_budget."""
    tokens: int = 0
    """Tokens the loop spent."""
    error: str | None = None
    """Why the writer failed, when it did (the section then has its evidence only)."""
    warnings: list[str] = []
    """Why the section is weaker than a clean one: no search made, searches failed, cut
    or empty, research stopped by a budget or the time limit, the writer failed."""


class IterativeState(BaseModel):
    """The state of one iterative research loop."""

    model_config = ConfigDict(extra="allow")
    input_field: ClassVar[str] = "question"
    """Where text given to a run goes (``selectgraph run``, the studio)."""

    question: str = ""
    """What this loop researches."""
    background: str = ""
    """Context: the report's overall question, when this loop writes one section."""
    section: str = ""
    """The section's title (empty for a standalone loop)."""
    section_index: int = 0
    """The section's position in the outline (0 for a standalone loop)."""
    token_budget: int | None = None
    """Tokens this loop may spend (its share of a deep-research budget); None: the
    ResearchBudget's own."""
    time_reserve: float | None = None
    """Seconds kept for writing after this loop (a deep run adds the synthesis);
    None: the ResearchBudget's ``reserve_seconds``."""
    deadline: float | None = None
    """When the run must end (seconds since the epoch; None: no time limit)."""
    iteration: int = 0
    """The current iteration (0-based)."""
    thoughts: Annotated[list[str], append] = []
    """The thinker's notes, one per iteration."""
    gaps: list[str] = []
    """What is still unknown, most important first (the last gap check's answer)."""
    complete: bool = False
    """Whether the last gap check judged the research complete."""
    tasks: list[ToolTask] = []
    """The searches chosen for this iteration."""
    evidence: Annotated[list[Evidence], dedupe_append("source_id")] = []
    """Every passage found so far, once per source."""
    findings: Annotated[list[Finding], append] = []
    """What each search of each iteration did."""
    marks: Annotated[list[Mark], append] = []
    """Tokens and seconds at each iteration's decision, to forecast the next one."""
    spent_tokens: int = 0
    """Tokens this loop's own model calls used (as of its last decision, then its end)."""
    stop_reason: str = ""
    """Why the loop stopped researching: complete, max_iterations, token_budget, time_budget."""
    draft: str = ""
    """What the writer wrote."""
    report: SectionReport | None = None
    """What the writer produced."""
    sections_out: list[SectionReport] = []
    """``[report]``: what a deep-research branch hands back to the outline."""
    markdown: str = ""
    """The rendered report (a standalone loop)."""
    sources: list[Evidence] = []
    """The rendered report's sources: ``sources[n - 1]`` is what ``[n]`` cites."""
    warnings: list[str] = []
    """Why the report is degraded (empty when it is not)."""


class DeepState(BaseModel):
    """The state of a deep-research run: outline, sections from the parallel loops, report."""

    model_config = ConfigDict(extra="allow")
    input_field: ClassVar[str] = "question"
    """Where text given to a run goes (``selectgraph run``, the studio)."""

    question: str = ""
    """What the report answers (the run's input)."""
    deadline: float | None = None
    """When the run must end (seconds since the epoch; None: no time limit)."""
    plan: ReportPlan | None = None
    """The outline, once made."""
    sections: Annotated[list[SectionReport], append] = []
    """Each section's report, in outline order (appended at the join)."""
    section_tokens: int | None = None
    """Each section's token share, fixed when the outline is made."""
    synthesis: Synthesis | None = None
    """The introduction and conclusion, once written."""
    markdown: str = ""
    """The final report."""
    sources: list[Evidence] = []
    """The report's numbered sources, [1] first."""
    warnings: list[str] = []
    """Why the report is degraded, each section's reasons named by its title."""
