"""Prompts of the research agents: thinking, knowledge gaps, tool selection, writing, planning."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from selectgraph.research._state import Evidence, Finding, SectionReport

__all__ = [
    "INSTRUCTIONS",
    "evidence_list",
    "gap_prompt",
    "plan_prompt",
    "select_prompt",
    "synthesis_prompt",
    "think_prompt",
    "write_prompt",
]

INSTRUCTIONS = {
    "think": "You are a research lead. Reflect briefly on what is known and what to look "
    "for next. Two to four sentences.",
    "gap": "You judge whether the evidence gathered answers the research question, and "
    "name what is still missing.",
    "select": "You choose searches that close knowledge gaps: the tool, and a short "
    "keyword query for it.",
    "write": "You write clear, factual prose from the numbered evidence only, citing it "
    "as [n] after each claim it supports. Do not invent sources.",
    "plan": "You plan research reports: a title and a few sections, each answering one question.",
    "synthesize": "You write the introduction and conclusion of a research report from "
    "its sections.",
}

_SNIPPET = 400
"""Characters of a passage shown to a model."""


def _topic(question: str, section: str, background: str) -> str:
    if section:
        return (
            f"Overall question: {background or question}\n"
            f"This section: {section}\nSection question: {question}"
        )
    return f"Research question: {question}"


def evidence_list(evidence: Sequence[Evidence]) -> str:
    """Evidence numbered from 1, as the writer cites it."""
    if not evidence:
        return "(no evidence was found)"
    return "\n".join(
        f"[{i}] {e.title} ({e.source_id}): {e.snippet[:_SNIPPET]}"
        for i, e in enumerate(evidence, start=1)
    )


_GAP_EVIDENCE = 8
"""Passages the gap judge is shown (the newest): every passage would outgrow a small
model's context after a few searches."""


def _recent_evidence(evidence: Sequence[Evidence]) -> str:
    shown = list(evidence)[-_GAP_EVIDENCE:]
    earlier = len(evidence) - len(shown)
    listed = evidence_list(shown)
    return f"({earlier} earlier passages not shown)\n{listed}" if earlier else listed


def _findings(findings: Sequence[Finding], last: int = 6) -> str:
    if not findings:
        return "(no searches yet)"
    lines = []
    for f in list(findings)[-last:]:
        result = f"failed: {f.error}" if f.error else f"{len(f.found)} hit(s)"
        lines.append(f"- iteration {f.iteration}: {f.tool}({f.query!r}) for {f.gap!r}: {result}")
    return "\n".join(lines)


def think_prompt(
    question: str,
    section: str,
    background: str,
    gaps: Sequence[str],
    findings: Sequence[Finding],
    evidence: Sequence[Evidence],
) -> str:
    """Ask the lead to reflect before the next gap analysis."""
    open_gaps = "\n".join(f"- {g}" for g in gaps) or "(none named yet)"
    return (
        f"{_topic(question, section, background)}\n\nSearches so far:\n{_findings(findings)}\n\n"
        f"Sources found: {len(evidence)}\nOpen gaps:\n{open_gaps}\n\n"
        "What do we know, and what should we look for next?"
    )


def gap_prompt(
    question: str,
    section: str,
    background: str,
    evidence: Sequence[Evidence],
    thoughts: Sequence[str],
) -> str:
    """Ask whether the research is complete, and what is missing."""
    thought = thoughts[-1] if thoughts else ""
    return (
        f"{_topic(question, section, background)}\n\n"
        f"Evidence so far:\n{_recent_evidence(evidence)}\n\n"
        f"Latest reflection: {thought or '(none)'}\n\nIs the research complete? If not, list "
        "the outstanding gaps (at most 3), most important first."
    )


def select_prompt(
    question: str,
    section: str,
    background: str,
    gaps: Sequence[str],
    tools: Mapping[str, str],
    findings: Sequence[Finding],
) -> str:
    """Ask for the searches of this iteration."""
    listing = "\n".join(f"- {name}: {about}" for name, about in tools.items())
    open_gaps = "\n".join(f"- {g}" for g in gaps) or f"- {question}"
    return (
        f"{_topic(question, section, background)}\n\nGaps to close:\n{open_gaps}\n\n"
        f"Tools:\n{listing}\n\nSearches already run:\n{_findings(findings)}\n\n"
        "Choose one to three searches: for each, the gap, the tool (exactly as named) and a "
        "short keyword query that is not a repeat of an earlier one."
    )


def write_prompt(question: str, section: str, background: str, evidence: Sequence[Evidence]) -> str:
    """Ask for the text, citing the numbered evidence."""
    what = f"the section {section!r}" if section else "a short report"
    return (
        f"{_topic(question, section, background)}\n\nEvidence:\n{evidence_list(evidence)}\n\n"
        f"Write {what} answering the question in two to four paragraphs, using only this "
        "evidence and citing it as [n] after each claim. If the evidence does not answer "
        "part of the question, say so."
    )


def plan_prompt(question: str, max_sections: int) -> str:
    """Ask for a report outline."""
    return (
        f"Research question: {question}\n\nPlan a report answering it: a title, a sentence of "
        f"background, and at most {max_sections} sections, each with the question it answers. "
        "Sections should not overlap."
    )


def synthesis_prompt(title: str, question: str, sections: Sequence[SectionReport]) -> str:
    """Ask for the introduction and conclusion around the sections."""
    body = "\n\n".join(f"## {s.title}\n{s.text[:2000]}" for s in sections)
    return (
        f"Report: {title}\nQuestion: {question}\n\nSections:\n{body or '(no section was written)'}"
        "\n\nWrite a one-paragraph introduction and a one-paragraph conclusion that answers "
        "the question from these sections. Do not add facts the sections do not contain."
    )
