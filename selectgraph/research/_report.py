"""Reports: citations in written text, section assembly, and one numbering of sources for a report.

A writer is shown its evidence numbered ``[1]``, ``[2]``... and cites those numbers.
Each section keeps the evidence it was shown; the report renumbers every section's
citations to one list of sources (the same source keeps one number across
sections), drops citations of numbers that were never shown, and lists each
section's strongest passages under it, cited, so a report points at its sources
even when the model wrote no citation.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from selectgraph.research._state import Evidence, SectionReport

__all__ = ["Rendered", "cited_numbers", "render_report", "renumber", "section_report"]

_CITATION = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")

KEY_EVIDENCE = 3
"""Passages quoted under each section."""


def cited_numbers(text: str) -> list[int]:
    """The citation numbers in ``text`` (``[2]``, ``[1, 3]``), in order of first use."""
    found: list[int] = []
    for group in _CITATION.findall(text):
        for part in group.split(","):
            number = int(part)
            if number < _NOT_A_CITATION and number not in found:
                found.append(number)
    return found


_NOT_A_CITATION = 1000
"""Bracketed numbers from here up (``[2019]``) are left as written, not taken for citations."""


def renumber(text: str, mapping: dict[int, int]) -> str:
    """``text`` with each citation number mapped.

    A citation of a number the writer was never shown is dropped; a bracketed
    number of four digits or more (a year) is not a citation and stays.
    """

    def replace(match: re.Match[str]) -> str:
        parts = [int(p) for p in match.group(1).split(",")]
        if any(p >= _NOT_A_CITATION for p in parts):
            return match.group(0)
        numbers = [mapping[p] for p in parts if p in mapping]
        return f"[{', '.join(str(n) for n in numbers)}]" if numbers else ""

    return _CITATION.sub(replace, text)


def section_report(
    *,
    title: str,
    question: str,
    text: str,
    shown: Sequence[Evidence],
    index: int = 0,
    iterations: int = 0,
    stop_reason: str = "",
    tokens: int = 0,
    error: str | None = None,
    warnings: Sequence[str] = (),
) -> SectionReport:
    """A section from the writer's ``text`` and the evidence it was ``shown`` (numbered from 1)."""
    ranked = sorted(range(len(shown)), key=lambda i: -shown[i].score)
    return SectionReport(
        index=index,
        title=title,
        question=question,
        text=text.strip(),
        sources=list(shown),
        key_evidence=[i + 1 for i in ranked[:KEY_EVIDENCE]],
        iterations=iterations,
        stop_reason=stop_reason,
        tokens=tokens,
        error=error,
        warnings=list(warnings),
    )


@dataclass(slots=True)
class Rendered:
    """A report as Markdown, and its numbered sources."""

    markdown: str
    """The whole report: title, sections with their citations, and the source list."""
    sources: list[Evidence] = field(default_factory=list)
    """``sources[n - 1]`` is the source ``[n]`` cites."""


def render_report(
    *,
    title: str,
    sections: Sequence[SectionReport],
    introduction: str = "",
    conclusion: str = "",
    missing: Sequence[str] = (),
    single: bool = False,
) -> Rendered:
    """The report: title, introduction, sections with their key evidence, conclusion, sources.

    Args:
        title: The report's title.
        sections: The sections in order.
        introduction: Text before the sections.
        conclusion: Text after them.
        missing: Notes on sections that could not be researched.
        single: A one-section report (no section headings).
    """
    numbers: dict[str, int] = {}
    sources: list[Evidence] = []

    def number_of(evidence: Evidence) -> int:
        if evidence.source_id not in numbers:
            sources.append(evidence)
            numbers[evidence.source_id] = len(sources)
        return numbers[evidence.source_id]

    parts = [f"# {title.strip() or 'Research report'}"]
    if introduction.strip():
        parts.append(introduction.strip())
    for section in sections:
        local = {
            n: number_of(section.sources[n - 1])
            for n in cited_numbers(section.text)
            if 1 <= n <= len(section.sources)
        }
        for n in section.key_evidence:
            if 1 <= n <= len(section.sources):
                local.setdefault(n, number_of(section.sources[n - 1]))
        if not single:
            parts.append(f"## {section.title}")
        if section.warnings:
            parts.append("\n>\n".join(f"> {warning}" for warning in section.warnings))
        if section.text:
            parts.append(renumber(section.text, local))
        quotes = [
            f'- "{section.sources[n - 1].snippet}" [{local[n]}]'
            for n in section.key_evidence
            if 1 <= n <= len(section.sources)
        ]
        if quotes:
            parts.append("**Key evidence**\n\n" + "\n".join(quotes))
        elif not section.sources:
            parts.append("_No evidence was found for this section._")
    for note in missing:
        parts.append(f"> {note}")
    if conclusion.strip():
        parts.append("## Conclusion\n\n" + conclusion.strip())
    if sources:
        listing = "\n".join(
            f"[{i}] {s.title}, {s.url or s.source_id}" for i, s in enumerate(sources, start=1)
        )
        parts.append("## Sources\n\n" + listing)
    return Rendered("\n\n".join(parts) + "\n", sources)
