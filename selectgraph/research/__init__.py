"""Research: the iterative and deep research graphs of seed 003, search tools, reports.

``IterativeResearch`` runs one loop (think, find gaps, search, until complete or out
of budget, then write); ``DeepResearch`` outlines a report, runs one loop per section
in parallel and writes the report around them, every source numbered and cited.
``LocalCorpusSearch`` searches a local folder of documents offline; any object with
``name``, ``description`` and ``async search(query, *, limit)`` is a search tool.
"""

from __future__ import annotations

from selectgraph.research._budget import ResearchBudget
from selectgraph.research._progress import ResearchProgress, SectionStatus
from selectgraph.research._report import Rendered, cited_numbers, render_report, renumber
from selectgraph.research._researcher import DeepResearch, IterativeResearch, ResearchResult
from selectgraph.research._search import LocalCorpusSearch, SearchHit, SearchTool, fts_query
from selectgraph.research._state import (
    DeepState,
    Evidence,
    Finding,
    IterativeState,
    KnowledgeGap,
    Mark,
    ReportPlan,
    SectionPlan,
    SectionReport,
    Synthesis,
    ToolSelection,
    ToolTask,
)

__all__ = [
    "DeepResearch",
    "DeepState",
    "Evidence",
    "Finding",
    "IterativeResearch",
    "IterativeState",
    "KnowledgeGap",
    "LocalCorpusSearch",
    "Mark",
    "Rendered",
    "ReportPlan",
    "ResearchBudget",
    "ResearchProgress",
    "ResearchResult",
    "SearchHit",
    "SearchTool",
    "SectionPlan",
    "SectionReport",
    "SectionStatus",
    "Synthesis",
    "ToolSelection",
    "ToolTask",
    "cited_numbers",
    "fts_query",
    "render_report",
    "renumber",
]
