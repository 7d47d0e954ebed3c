"""Research quality: what a section's report must admit, so a weak report never looks clean.

A section is degraded when no search was made (a budget smaller than one
iteration, a deadline), when searches failed or were cut, when they found
nothing, when a token or time budget stopped the research, or when the writer
failed. Each reason is a sentence; the report prints them under the section and
the result lists them (``ResearchResult.degraded_reasons``), its quality then
``"degraded"``.
"""

from __future__ import annotations

from collections.abc import Sequence

from selectgraph.research._state import Evidence, Finding, SectionReport

__all__ = ["BUDGET_STOPS", "report_warnings", "section_warnings"]

BUDGET_STOPS = {
    "token_budget": "the token budget",
    "time_budget": "the time budget",
    "deadline": "the run's time limit",
}
"""Stop reasons that cut research short, and how a report names them."""


def section_warnings(
    *,
    findings: Sequence[Finding],
    evidence: Sequence[Evidence],
    stop_reason: str,
    iterations: int,
    cut: Sequence[str] = (),
    failed_steps: Sequence[tuple[str, str]] = (),
    writer_error: str | None = None,
) -> list[str]:
    """Why one research loop's section is weaker than a clean run's (empty when it is not).

    Args:
        findings: What each search did.
        evidence: What was found.
        stop_reason: Why the loop stopped researching.
        iterations: Research iterations run.
        cut: Errors of model calls cut or skipped at the deadline.
        failed_steps: ``(node, error)`` of the other steps that failed and were gone
            on without (a model's answer that never fit its schema, say).
        writer_error: Why the writer failed, when it did.
    """
    warnings: list[str] = []
    budget = BUDGET_STOPS.get(stop_reason)
    if not findings:
        why = budget or ("max_iterations=0" if stop_reason == "max_iterations" else "")
        warnings.append(
            f"No search was made: {why} allowed none." if why else "No search was made."
        )
    else:
        failed = [f for f in findings if f.error]
        if len(findings) == 1 and failed:
            warnings.append(f"The search failed ({failed[0].error}).")
        elif failed:
            share = "All" if len(failed) == len(findings) else f"{len(failed)} of"
            warnings.append(f"{share} {len(findings)} searches failed (first: {failed[0].error}).")
        if not evidence and len(failed) < len(findings):
            warnings.append("The searches found no evidence.")
        if budget is not None:
            plural = "s" if iterations != 1 else ""
            warnings.append(
                f"Research was cut short by {budget} after {iterations} iteration{plural}."
            )
    if cut:
        warnings.append(f"The time limit cut {len(cut)} model call(s) (first: {cut[0]}).")
    by_node: dict[str, list[str]] = {}
    for node, error in failed_steps:
        by_node.setdefault(node, []).append(error)
    for node, errors in by_node.items():
        times = f" {len(errors)} times" if len(errors) > 1 else ""
        warnings.append(f"The {node!r} step failed{times} and was gone on without ({errors[0]}).")
    if writer_error:
        warnings.append(f"The writer failed ({writer_error}); the evidence found follows.")
    return warnings


def report_warnings(sections: Sequence[SectionReport], *, single: bool) -> list[str]:
    """Every section's warnings, each named by its section unless the report has only one."""
    found: list[str] = []
    for section in sections:
        for warning in section.warnings:
            found.append(warning if single else f"Section {section.title!r}: {warning}")
    return found
