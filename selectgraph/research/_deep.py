"""The deep research graph (seed 003): outline, a research loop per section in parallel, synthesis.

    plan --Scatter, one branch per section--> research (the iterative loop, a subgraph)
                                                 ... joined in outline order ...
                                              synthesize -> assemble -> END
    (a failed outline: fallback_plan, one section; a failed synthesis: assemble without it)

Each branch runs the iterative graph on its own subgraph state: its evidence,
findings and conversation never meet another branch's. What a branch hands back
is its section, appended to ``sections`` at the join in outline order. A section
that fails is left out (``continue_others``) and the report says so; the
synthesizer numbers every section's sources into one list.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pydantic import Field, create_model

from selectgraph.agents._result import AgentResult
from selectgraph.build._builder import AgentGraph
from selectgraph.core._models import as_models
from selectgraph.core._policies import ErrorPolicy
from selectgraph.core._sentinels import END
from selectgraph.core._state import LAST_OUTPUT, GraphState
from selectgraph.nodes._spec import NodeContext
from selectgraph.research._budget import ResearchBudget
from selectgraph.research._iterative import LoopSettings, bounded, build_iterative_graph
from selectgraph.research._prompts import plan_prompt, synthesis_prompt
from selectgraph.research._quality import report_warnings
from selectgraph.research._report import render_report
from selectgraph.research._state import (
    DeepState,
    ReportPlan,
    SectionPlan,
    SectionReport,
    Synthesis,
)
from selectgraph.routing._parallel import Scatter

__all__ = ["build_deep_graph", "plan_of", "sections_of"]

_BRANCH_INDEX = re.compile(r"\[(\d+)\]$")


def plan_of(state: GraphState) -> ReportPlan | None:
    """The outline, if the planner has written it."""
    value = state.data.get("plan")
    return None if value is None else as_models([value], ReportPlan)[0]


def sections_of(state: GraphState) -> list[SectionReport]:
    """The sections written so far, in outline order."""
    return as_models(state.data.get("sections"), SectionReport)


def _plan_model(max_sections: int) -> type[ReportPlan]:
    plan: type[ReportPlan] = create_model(
        "ReportPlan",
        __base__=ReportPlan,
        __module__=ReportPlan.__module__,  # stored under ReportPlan's name, restored as it
        sections=(
            list[SectionPlan],
            Field(min_length=1, max_length=max_sections, description="The sections, in order."),
        ),
    )
    return plan


def build_deep_graph(
    settings: LoopSettings,
    *,
    max_sections: int = 4,
    section_timeout: float | None = None,
    name: str = "deep_research",
) -> AgentGraph:
    """The deep research graph as an AgentGraph over :class:`DeepState`.

    Args:
        settings: The loops' tools, model and budget.
        max_sections: Sections the outline may have.
        section_timeout: Seconds a section may take; a slower one is left out.
        name: The graph's name.
    """
    if max_sections < 1:
        raise ValueError(f"max_sections must be >= 1, got {max_sections}")
    loop = build_iterative_graph(settings, name="section_research")
    graph = AgentGraph(
        name,
        state_schema=DeepState,
        description="deep research: outline, parallel section research, synthesis",
    )
    _add_plan(graph, settings, max_sections)
    # A section that fails anyway (a timeout, a bug) is skipped: the others are kept,
    # and the report names it, so even a run where every section failed has a report.
    graph.add_subgraph(
        "research",
        loop,
        input_map={
            "section_question": "question",
            "section_title": "section",
            "section_index": "section_index",
            "section_tokens": "token_budget",
            "time_reserve": "time_reserve",
            "question": "background",
            "deadline": "deadline",
        },
        output_map={"sections_out": "sections"},
        next_node="synthesize",
        description="one section's iterative research loop",
        error_policy=ErrorPolicy.SKIP,
        timeout=section_timeout,
    )
    _add_synthesis(graph, settings)
    graph.set_entry("plan")
    return graph


def _add_plan(graph: AgentGraph, settings: LoopSettings, max_sections: int) -> None:
    """Add ``plan`` (the outline), its fallback ``fallback_plan``, and the fan-out to sections."""
    budget = settings.budget

    def plan_input(state: GraphState) -> str:
        return plan_prompt(str(state.data.get("question", "")), max_sections)

    def plan_output(result: AgentResult, state: GraphState) -> dict[str, Any]:
        plan = ReportPlan.model_validate(result.output.model_dump())
        # Each section's share of what is left after the outline (re-asks included).
        return {
            "plan": plan,
            "section_tokens": budget.share(len(plan.sections), result.usage.total_tokens),
        }

    def fallback_plan(state: GraphState, context: NodeContext) -> dict[str, Any]:
        """The planner failed: one section, the question itself."""
        question = str(state.data.get("question", ""))
        section = SectionPlan(title=question, key_question=question)
        return {
            "plan": ReportPlan(title=question, sections=[section]),
            "section_tokens": budget.share(1, context.run_usage.total_tokens),
        }

    # The outline leaves the sections' writers and the synthesis their time (at most
    # half the run's: a budget smaller than the reserves still gets an outline).
    plan_reserve = 2 * budget.reserve_seconds
    if budget.max_seconds is not None:
        plan_reserve = min(plan_reserve, budget.max_seconds / 2)
    graph.add_node(
        "plan",
        bounded(settings, "plan", _plan_model(max_sections), reserve=lambda data: plan_reserve),
        input_transform=plan_input,
        output_transform=plan_output,
    )
    # A planner that fails to outline still gets a report: one section, the question.
    graph.add_edge("plan", "fallback_plan", on="failure")
    graph.add_node("fallback_plan", fallback_plan)
    fan_out = _fan_out_router(budget)
    for source in ("plan", "fallback_plan"):
        graph.add_conditional_edge(source, fan_out, ["research"], failure_mode="continue_others")


def _fan_out_router(budget: ResearchBudget) -> Callable[[GraphState], list[Scatter]]:
    """The router after the outline: one ``research`` branch per section, with its share."""

    def fan_out(state: GraphState) -> list[Scatter]:
        plan = plan_of(state)
        if plan is None:  # cannot happen: both ways here write one
            raise RuntimeError("no outline to research")
        share = state.data.get("section_tokens")
        question = str(state.data.get("question", ""))
        # The loops keep time for their writer and for the synthesis after them.
        time_reserve = 2 * budget.reserve_seconds
        return [
            Scatter(
                "research",
                {
                    "section_title": _title(section, index),
                    # A section without a question (a model's slip) researches the report's.
                    "section_question": section.key_question.strip()
                    or section.title.strip()
                    or question,
                    "section_index": index,
                    "section_tokens": share,
                    "time_reserve": time_reserve,
                },
            )
            for index, section in enumerate(plan.sections)
        ]

    return fan_out


def _add_synthesis(graph: AgentGraph, settings: LoopSettings) -> None:
    """Add ``synthesize`` (the report's frame) and ``assemble`` (the report)."""

    def synthesize_input(state: GraphState) -> str:
        plan = plan_of(state)
        title = plan.title if plan else ""
        return synthesis_prompt(title, str(state.data.get("question", "")), sections_of(state))

    def synthesize_output(result: AgentResult, state: GraphState) -> dict[str, Any]:
        return {"synthesis": Synthesis.model_validate(result.output.model_dump())}

    def assemble(state: GraphState) -> dict[str, Any]:
        """The report from the sections and the synthesis (or without one, if it failed)."""
        plan = plan_of(state)
        question = str(state.data.get("question", ""))
        raw = state.data.get("synthesis")
        synthesis = None if raw is None else as_models([raw], Synthesis)[0]
        sections = sorted(sections_of(state), key=lambda s: s.index)
        introduction = synthesis.introduction.strip() if synthesis else ""
        missing = _missing(state, plan, sections)
        rendered = render_report(
            title=plan.title if plan and plan.title.strip() else question,
            sections=sections,
            introduction=introduction or _default_introduction(question, plan),
            conclusion=synthesis.conclusion if synthesis else "",
            missing=missing,
        )
        warnings = [*_frame_warnings(state), *report_warnings(sections, single=False), *missing]
        return {
            "warnings": warnings,
            "markdown": rendered.markdown,
            "sources": rendered.sources,
            LAST_OUTPUT: rendered.markdown,
        }

    graph.add_node(
        "synthesize",
        bounded(settings, "synthesize", Synthesis, reserve=lambda data: 0.0),
        input_transform=synthesize_input,
        output_transform=synthesize_output,
        next_node="assemble",
    )
    graph.add_edge("synthesize", "assemble", on="failure")  # a report without its frame
    graph.add_node("assemble", assemble, next_node=END)


def _frame_warnings(state: GraphState) -> list[str]:
    """Why the outline or the synthesis is not the model's (each failure's error)."""
    failed = {str(e.get("node")): e for e in state.errors}
    warnings = []
    if "plan" in failed:
        error = failed["plan"]
        warnings.append(
            f"The outline could not be made ({error.get('type')}: {error.get('error')}); "
            "the question was researched as one section."
        )
    if "synthesize" in failed:
        error = failed["synthesize"]
        warnings.append(
            "The introduction and conclusion could not be written "
            f"({error.get('type')}: {error.get('error')})."
        )
    return warnings


def _title(section: SectionPlan, index: int) -> str:
    return section.title.strip() or f"Part {index + 1}"


def _default_introduction(question: str, plan: ReportPlan | None) -> str:
    if plan is None:
        return ""
    titles = ", ".join(_title(section, i) for i, section in enumerate(plan.sections))
    return f"This report answers: {question} It covers {titles}."


def _missing(
    state: GraphState, plan: ReportPlan | None, sections: list[SectionReport]
) -> list[str]:
    """A note for each planned section no loop delivered, with its error when one is known.

    A failed section's loop is skipped in its branch; its error record (node
    ``research``) names the branch, ``plan[i]`` for section ``i``.
    """
    if plan is None:
        return []
    done = {section.index for section in sections}
    errors: dict[int, str] = {}
    for record in state.errors:
        found = _BRANCH_INDEX.search(str(record.get("branch", "")))
        if record.get("node") == "research" and found:
            text = str(record.get("error", ""))
            # "node 'research' ran past its timeout" reads better without the node.
            text = text.removeprefix("node 'research' ")
            errors[int(found.group(1))] = (
                text if text != record.get("error") else f"{record.get('type')}: {text}"
            )
    return [
        f"The section {_title(section, index)!r} could not be researched"
        + (f" ({errors[index]})." if index in errors else ".")
        for index, section in enumerate(plan.sections)
        if index not in done
    ]
