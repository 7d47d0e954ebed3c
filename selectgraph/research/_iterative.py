r"""The iterative research graph (seed 003): think, find the gaps, decide, search, and write.

    think -> gap -> decide --(complete, or a budget says write)--> write -> report -> END
                       \--(another iteration)--> select -> search -> think
    (a failed tool selection: default_tasks -> search; a failed gap analysis: decide;
     a failed writer: report, with the evidence and the error)

``decide`` is the decision node of seed 003: it ends the research when the gap
analysis says it is complete (after at least one search), or when the iteration,
token or time budget would not allow another iteration and the writing after
it (see ``_budget.py``); the writer then writes from what was found, so a
report is always produced.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from selectgraph.agents._agent import Agent
from selectgraph.agents._config import AgentConfig
from selectgraph.agents._defaults import DEFAULT_MAX_TOKENS
from selectgraph.agents._result import AgentResult
from selectgraph.build._builder import AgentGraph
from selectgraph.core._models import as_models
from selectgraph.core._policies import ErrorPolicy
from selectgraph.core._sentinels import END
from selectgraph.core._state import LAST_OUTPUT, GraphState
from selectgraph.nodes._spec import NodeContext
from selectgraph.providers._base import Provider
from selectgraph.research._budget import ResearchBudget, budget_stop
from selectgraph.research._deadline import Bounded, DeadlineReached, seconds_left
from selectgraph.research._prompts import (
    INSTRUCTIONS,
    gap_prompt,
    select_prompt,
    think_prompt,
    write_prompt,
)
from selectgraph.research._quality import section_warnings
from selectgraph.research._report import render_report, section_report
from selectgraph.research._search import SearchHit, SearchTool
from selectgraph.research._state import (
    Evidence,
    Finding,
    IterativeState,
    KnowledgeGap,
    Mark,
    ToolSelection,
    ToolTask,
    tool_selection_model,
)
from selectgraph.routing._directives import Directive, goto

__all__ = [
    "LoopSettings",
    "bounded",
    "build_iterative_graph",
    "elapsed_of",
    "research_agent",
    "research_reserve",
    "shown_evidence",
    "write_reserve",
]

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]+$")


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopSettings:
    """What an iterative research loop is built from."""

    tools: Sequence[SearchTool]
    provider: Provider | None = None
    model: str | None = None
    budget: ResearchBudget = field(default_factory=ResearchBudget)
    results_per_search: int = 5
    max_evidence: int = 15
    """Passages the writer is shown (the first found)."""
    max_output_tokens: int | None = DEFAULT_MAX_TOKENS
    """Tokens each model answer (prose and structured) may have; None: no limit."""


def research_agent(
    settings: LoopSettings, role: str, schema: type[BaseModel] | None = None
) -> Agent:
    """The agent of one research role, its answer re-asked once when it misses ``schema``."""
    config = AgentConfig(
        name=role,
        model=settings.model,
        instructions=INSTRUCTIONS[role],
        output_schema=schema,
        max_output_retries=1,
        # Every call bounded: a structured answer cut short is repaired (json-repair),
        # and a grammar-held one bounds its strings (LlamaCppProvider).
        max_tokens=settings.max_output_tokens,
    )
    return Agent(config, provider=settings.provider)


def research_reserve(budget: ResearchBudget) -> Callable[[Mapping[str, Any]], float]:
    """Seconds a research step (think, gap, select, search) leaves before the deadline."""

    def reserve(data: Mapping[str, Any]) -> float:
        kept = data.get("time_reserve")
        return budget.reserve_seconds if kept is None else float(kept)

    return reserve


def write_reserve(budget: ResearchBudget) -> Callable[[Mapping[str, Any]], float]:
    """Seconds the writer leaves before the deadline (a deep run's synthesis; else none)."""

    def reserve(data: Mapping[str, Any]) -> float:
        kept = data.get("time_reserve")
        return 0.0 if kept is None else max(0.0, float(kept) - budget.reserve_seconds)

    return reserve


def bounded(
    settings: LoopSettings,
    role: str,
    schema: type[BaseModel] | None = None,
    reserve: Callable[[Mapping[str, Any]], float] | None = None,
) -> Bounded:
    """:func:`research_agent` for ``role``, its calls ending at the deadline less ``reserve``."""
    budget = settings.budget
    return Bounded(
        research_agent(settings, role, schema), budget, reserve or research_reserve(budget)
    )


def elapsed_of(data: Mapping[str, Any], budget: ResearchBudget, context: NodeContext) -> float:
    """Seconds of the run's time budget spent: measured from its deadline when it has one."""
    deadline = data.get("deadline")
    if deadline is None or budget.max_seconds is None:
        return context.elapsed
    return budget.max_seconds - (float(deadline) - time.time())


def shown_evidence(state: GraphState, limit: int) -> list[Evidence]:
    """The evidence the writer is shown, numbered from 1 in this order."""
    return as_models(state.data.get("evidence"), Evidence)[:limit]


def _topic(state: GraphState) -> tuple[str, str, str]:
    data = state.data
    return (
        str(data.get("question", "")),
        str(data.get("section", "")),
        str(data.get("background", "")),
    )


def _check_tools(tools: Sequence[SearchTool]) -> dict[str, SearchTool]:
    if not tools:
        raise ValueError("research needs at least one search tool (e.g. LocalCorpusSearch(folder))")
    by_name: dict[str, SearchTool] = {}
    for tool in tools:
        if not isinstance(tool, SearchTool):
            raise TypeError(
                f"{tool!r} is not a search tool: it needs a name, a description and "
                "async search(query, *, limit)"
            )
        name = tool.name
        if not isinstance(name, str) or not _TOOL_NAME.match(name):
            raise ValueError(f"tool name {name!r} must be a string of letters, digits, '_' or '-'")
        if name in by_name:
            raise ValueError(f"two search tools are named {name!r}")
        by_name[name] = tool
    return by_name


def build_iterative_graph(settings: LoopSettings, *, name: str = "research") -> AgentGraph:
    """The iterative research loop as an AgentGraph over :class:`IterativeState`.

    Raises:
        ValueError: no tools, or tool names that are not plain names or repeat.
        TypeError: a tool lacks the SearchTool shape.
    """
    tools = _check_tools(settings.tools)
    budget = settings.budget
    graph = AgentGraph(
        name,
        state_schema=IterativeState,
        # An iteration is at most six nodes; the budget's iteration limit ends the loop.
        max_steps=6 * (budget.max_iterations + 2),
        description="iterative research: think, find gaps, search, write",
    )
    # A model that fails to think or to answer in the schema costs the loop that
    # step, not the report: thinking is skipped, a failed gap analysis leaves the
    # gaps as they were, a failed tool selection searches the gaps as written, and
    # a failed writer leaves a section of evidence with the error.
    _add_think_and_gap(graph, settings)
    graph.add_node("decide", _decide_node(budget), destinations=["select", "write"])
    _add_select_and_search(graph, settings, tools)
    _add_write_and_report(graph, settings)
    graph.set_entry("think")
    return graph


def _add_think_and_gap(graph: AgentGraph, settings: LoopSettings) -> None:
    """Add ``think`` (notes on what is known) and ``gap`` (what is still missing)."""
    limit = settings.max_evidence

    def think_input(state: GraphState) -> str:
        question, section, background = _topic(state)
        return think_prompt(
            question,
            section,
            background,
            state.data.get("gaps") or [],
            as_models(state.data.get("findings"), Finding),
            shown_evidence(state, 10_000),
        )

    def think_output(result: AgentResult, state: GraphState) -> dict[str, Any]:
        return {"thoughts": [result.content]}

    def gap_input(state: GraphState) -> str:
        question, section, background = _topic(state)
        return gap_prompt(
            question, section, background, shown_evidence(state, limit), state.data["thoughts"]
        )

    def gap_output(result: AgentResult, state: GraphState) -> dict[str, Any]:
        answer = KnowledgeGap.model_validate(result.output)
        gaps = [gap.strip() for gap in answer.outstanding_gaps if gap.strip()][:3]
        # Nothing left to look for is complete too: a contradiction models make.
        return {"gaps": gaps, "complete": answer.research_complete or not gaps}

    graph.add_node(
        "think",
        bounded(settings, "think"),
        input_transform=think_input,
        output_transform=think_output,
        next_node="gap",
        error_policy=ErrorPolicy.SKIP,
    )
    graph.add_node(
        "gap",
        bounded(settings, "gap", KnowledgeGap),
        input_transform=gap_input,
        output_transform=gap_output,
        next_node="decide",
    )
    graph.add_edge("gap", "decide", on="failure")


def _decide_node(budget: ResearchBudget) -> Callable[[GraphState, NodeContext], Directive]:
    """The ``decide`` node: write when the research is complete or a budget says so, else search."""

    def decide(state: GraphState, context: NodeContext) -> Directive:
        iteration = int(state.data.get("iteration", 0))
        # This loop's own calls, failed and re-asked ones included (a branch's own run).
        tokens = context.run_usage.total_tokens
        searched = bool(state.data.get("findings"))
        elapsed = elapsed_of(state.data, budget, context)
        mark = Mark(tokens=tokens, seconds=round(elapsed, 3))
        reason: str | None
        if state.data.get("complete") and searched:
            reason = "complete"
        else:
            own_limit = state.data.get("token_budget")
            reserve = state.data.get("time_reserve")
            reason = budget_stop(
                budget,
                iteration=iteration,
                spent_tokens=tokens,
                token_limit=budget.max_tokens if own_limit is None else int(own_limit),
                elapsed=elapsed,
                marks=[*as_models(state.data.get("marks"), Mark), mark],
                reserve_seconds=None if reserve is None else float(reserve),
            )
        context.emit_custom(
            {
                "research": "decision",
                "section": state.data.get("section", ""),
                "section_index": state.data.get("section_index", 0),
                "iteration": iteration,
                "gaps": list(state.data.get("gaps") or []),
                "sources": len(state.data.get("evidence") or ()),
                "tokens": tokens,
                "next": "write" if reason else "search",
                "reason": reason or "",
            }
        )
        update = {"marks": [mark], "spent_tokens": tokens}
        if reason is not None:
            return goto("write", {**update, "stop_reason": reason})
        return goto("select", {**update, "iteration": iteration + 1})

    return decide


def _add_select_and_search(
    graph: AgentGraph, settings: LoopSettings, tools: Mapping[str, SearchTool]
) -> None:
    """Add ``select`` (the searches to make), its fallback ``default_tasks``, and ``search``."""
    selection = tool_selection_model(list(tools))
    about = {tool_name: tool.description for tool_name, tool in tools.items()}

    def select_input(state: GraphState) -> str:
        question, section, background = _topic(state)
        return select_prompt(
            question,
            section,
            background,
            state.data.get("gaps") or [],
            about,
            as_models(state.data.get("findings"), Finding),
        )

    def select_output(result: AgentResult, state: GraphState) -> dict[str, Any]:
        chosen = ToolSelection.model_validate(result.output.model_dump())
        return {"tasks": [ToolTask(gap=t.gap, tool=t.tool, query=t.query) for t in chosen.tasks]}

    def default_tasks(state: GraphState) -> dict[str, Any]:
        """The selector failed: search each open gap (else the question) with the first tool."""
        first = next(iter(tools))
        gaps = list(state.data.get("gaps") or []) or [str(state.data.get("question", ""))]
        return {"tasks": [ToolTask(gap=gap, tool=first, query=gap) for gap in gaps[:3]]}

    graph.add_node(
        "select",
        bounded(settings, "select", selection),
        input_transform=select_input,
        output_transform=select_output,
        next_node="search",
    )
    graph.add_edge("select", "default_tasks", on="failure")
    graph.add_node("default_tasks", default_tasks, next_node="search")
    graph.add_node("search", _search_node(tools, settings), next_node="think")


def _search_node(
    tools: Mapping[str, SearchTool], settings: LoopSettings
) -> Callable[[GraphState, NodeContext], Awaitable[dict[str, Any]]]:
    """The ``search`` node: run the selected searches at once, keep the findings and evidence.

    Searches still running at the deadline (less the writer's reserve) are cancelled
    and recorded as failed.
    """
    budget = settings.budget
    reserve = research_reserve(budget)

    async def search(state: GraphState, context: NodeContext) -> dict[str, Any]:
        iteration = int(state.data.get("iteration", 0))
        question = str(state.data.get("question", ""))
        tasks = as_models(state.data.get("tasks"), ToolTask)
        left = seconds_left(state.data, budget, context.elapsed, reserve(state.data))
        outcomes = await _run_tasks(tools, tasks, question, settings.results_per_search, left)
        findings: list[Finding] = []
        evidence: list[Evidence] = []
        for task, (query, hits, error) in zip(tasks, outcomes, strict=True):
            findings.append(
                Finding(
                    iteration=iteration,
                    gap=task.gap,
                    tool=task.tool,
                    query=query,
                    found=[hit.source_id for hit in hits],
                    error=error,
                )
            )
            evidence.extend(
                Evidence(
                    source_id=hit.source_id,
                    title=hit.title,
                    snippet=hit.snippet,
                    url=hit.url,
                    query=query,
                    tool=task.tool,
                    score=hit.score,
                )
                for hit in hits
            )
        known = {e.source_id for e in as_models(state.data.get("evidence"), Evidence)}
        context.emit_custom(
            {
                "research": "search",
                "section": state.data.get("section", ""),
                "section_index": state.data.get("section_index", 0),
                "iteration": iteration,
                "queries": [f.query for f in findings],
                "new_sources": len({e.source_id for e in evidence} - known),
                "errors": [f.error for f in findings if f.error],
            }
        )
        return {"findings": findings, "evidence": evidence}

    return search


def _add_write_and_report(graph: AgentGraph, settings: LoopSettings) -> None:
    """Add ``write`` (the section's draft) and ``report`` (the section, rendered)."""
    limit = settings.max_evidence

    def write_input(state: GraphState) -> str:
        question, section, background = _topic(state)
        return write_prompt(question, section, background, shown_evidence(state, limit))

    def write_output(result: AgentResult, state: GraphState) -> dict[str, Any]:
        return {"draft": result.content}

    def report(state: GraphState, context: NodeContext) -> dict[str, Any]:
        """The section (and a one-section report) from the draft, or from the evidence alone."""
        question, section, _ = _topic(state)
        error = None
        if not state.data.get("draft"):
            failed = [e for e in state.errors if e.get("node") == "write"]
            if failed:
                error = f"{failed[-1].get('type')}: {failed[-1].get('error')}"
        shown = shown_evidence(state, limit)
        warnings = section_warnings(
            findings=as_models(state.data.get("findings"), Finding),
            evidence=shown,
            stop_reason=str(state.data.get("stop_reason", "")),
            iterations=int(state.data.get("iteration", 0)),
            cut=[
                str(e.get("error"))
                for e in state.errors
                if e.get("type") == DeadlineReached.__name__ and e.get("node") != "write"
            ],
            failed_steps=[
                (str(e.get("node")), f"{e.get('type')}: {e.get('error')}")
                for e in state.errors
                if e.get("type") != DeadlineReached.__name__ and e.get("node") != "write"
            ],
            writer_error=error,
        )
        written = section_report(
            title=section or question,
            question=question,
            text=str(state.data.get("draft") or ""),
            shown=shown,
            index=int(state.data.get("section_index", 0)),
            iterations=int(state.data.get("iteration", 0)),
            stop_reason=str(state.data.get("stop_reason", "")),
            tokens=context.run_usage.total_tokens,
            error=error,
            warnings=warnings,
        )
        rendered = render_report(title=question, sections=[written], single=True)
        return {
            "warnings": warnings,
            "report": written,
            "sections_out": [written],
            "markdown": rendered.markdown,
            "sources": rendered.sources,
            "spent_tokens": written.tokens,
            LAST_OUTPUT: rendered.markdown,
        }

    graph.add_node(
        "write",
        bounded(settings, "write", reserve=write_reserve(settings.budget)),
        input_transform=write_input,
        output_transform=write_output,
        next_node="report",
    )
    graph.add_edge("write", "report", on="failure")
    graph.add_node("report", report, next_node=END)


async def _run_tasks(
    tools: Mapping[str, SearchTool],
    tasks: Sequence[ToolTask],
    question: str,
    limit: int,
    seconds: float | None,
) -> list[tuple[str, list[SearchHit], str | None]]:
    """Run the searches at once; those unfinished after ``seconds`` are cancelled."""
    runs = [asyncio.ensure_future(_run_task(tools, task, question, limit)) for task in tasks]
    try:
        if runs:
            await asyncio.wait(runs, timeout=None if seconds is None else max(0.0, seconds))
    except BaseException:
        # The node itself was cancelled: its searches stop with it, none left behind.
        await _cancel_all(runs)
        raise
    late = [run for run in runs if not run.done()]
    await _cancel_all(late)  # cut at the deadline, and awaited so nothing outlives the node
    outcomes: list[tuple[str, list[SearchHit], str | None]] = []
    for task, run in zip(tasks, runs, strict=True):
        if run in late:
            query = task.query.strip() or task.gap.strip() or question
            cut = "DeadlineReached: the search was cut at the run's time limit"
            outcomes.append((query, [], cut))
        else:
            outcomes.append(run.result())
    return outcomes


async def _cancel_all(runs: Sequence[asyncio.Future[Any]]) -> None:
    """Cancel ``runs`` and wait until each has stopped."""
    for run in runs:
        run.cancel()
    if runs:
        await asyncio.gather(*runs, return_exceptions=True)


async def _run_task(
    tools: Mapping[str, SearchTool], task: ToolTask, question: str, limit: int
) -> tuple[str, list[SearchHit], str | None]:
    """Run one search; a failure is returned, not raised, so the other searches count."""
    query = task.query.strip() or task.gap.strip() or question
    tool = tools.get(task.tool)
    if tool is None:
        return query, [], f"no tool named {task.tool!r}; tools: {', '.join(tools)}"
    try:
        hits = await tool.search(query, limit=limit)
    except Exception as error:  # a tool's failure is evidence of nothing, not a crash
        return query, [], f"{type(error).__name__}: {error}"
    return query, list(hits), None
