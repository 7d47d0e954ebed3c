"""Comparing two experiments case by case: what changed in scores, outputs, time and tokens."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from selectgraph.evals._experiment import CaseOutcome, Experiment

__all__ = ["CaseComparison", "Change", "compare_experiments"]

Change = Literal["fixed", "broke", "same", "changed", "added", "removed"]
"""What happened to a case from the baseline to the candidate.

- ``"fixed"``: it failed in the baseline and passes now; ``"broke"``: the reverse.
- ``"same"``: same pass/fail and same output; ``"changed"``: same pass/fail, other output.
- ``"added"`` / ``"removed"``: only the candidate / only the baseline has it.
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class CaseComparison:
    """One case in two experiments."""

    case: str
    """The case's name."""
    baseline: CaseOutcome | None
    """Its outcome in the baseline, or None."""
    candidate: CaseOutcome | None
    """Its outcome in the candidate, or None."""
    change: Change
    """What happened to it."""


def compare_experiments(baseline: Experiment, candidate: Experiment) -> list[CaseComparison]:
    """Each case of either experiment, baseline order first, then the candidate's new ones."""
    names = [case.case for case in baseline.cases]
    names += [case.case for case in candidate.cases if baseline.case(case.case) is None]
    return [
        CaseComparison(
            case=name,
            baseline=(old := baseline.case(name)),
            candidate=(new := candidate.case(name)),
            change=_change(old, new),
        )
        for name in names
    ]


def _change(old: CaseOutcome | None, new: CaseOutcome | None) -> Change:
    if old is None:
        return "added"
    if new is None:
        return "removed"
    if old.passed != new.passed:
        return "fixed" if new.passed else "broke"
    return "same" if _same(old.output, new.output) else "changed"


def _same(a: Any, b: Any) -> bool:
    return bool(a == b)
