"""The studio's experiments: those ``selectgraph eval`` kept, one's cases, two compared.

Read with :mod:`selectgraph.evals` (:func:`list_experiments`, :func:`read_experiment`,
:func:`compare_experiments`), the same functions ``selectgraph experiments show`` and
``compare`` print from, so the page and the command line agree case by case. The
evaluations need pydantic-evals (the ``eval`` extra): without it these routes answer
501 saying so, and the rest of the studio works.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from selectgraph.persistence._protocol import CheckpointStore
from selectgraph.studio._runs import StudioError

__all__ = ["CHANGES", "compared_experiments", "experiment_cases", "experiments_listing"]

CHANGES = ("fixed", "broke", "changed", "same", "added", "removed")
"""What can happen to a case from one experiment to the next, in the order counted."""


def experiments_listing(store: CheckpointStore, limit: int) -> list[dict[str, Any]]:
    """The store's experiments, most recent first (blocking).

    Raises:
        StudioError: 501 without pydantic-evals; 404 when the store keeps no threads.
    """
    evals = _evals()
    try:
        found = evals.list_experiments(store, limit=limit)
    except evals.ExperimentError as error:
        raise StudioError(404, str(error)) from None
    return [
        {
            "name": summary.name,
            "dataset": summary.dataset,
            "cases": summary.cases,
            "passed": summary.passed,
            "pass_rate": summary.pass_rate,
            "tokens": summary.tokens,
            "cost_usd": summary.cost_usd,
            "started": summary.started.isoformat(),
            "updated": summary.updated.isoformat(),
        }
        for summary in found
    ]


def experiment_cases(store: CheckpointStore, name: str) -> dict[str, Any]:
    """One experiment and its cases (blocking).

    Raises:
        StudioError: 404 naming the experiment when the store has none of that name.
    """
    found = _read(store, name)
    return {
        "name": found.name,
        "dataset": found.dataset,
        "pass_rate": found.pass_rate,
        "passed": sum(case.passed for case in found.cases),
        "tokens": sum(case.tokens for case in found.cases),
        "cost_usd": sum(case.cost_usd for case in found.cases),
        "cases": [_case(case) for case in found.cases],
    }


def compared_experiments(store: CheckpointStore, baseline: str, candidate: str) -> dict[str, Any]:
    """Two experiments case by case, as ``selectgraph experiments compare`` prints (blocking).

    Raises:
        StudioError: 404 naming whichever experiment the store does not have.
    """
    evals = _evals()
    before, after = _read(store, baseline), _read(store, candidate)
    rows = evals.compare_experiments(before, after)
    return {
        "baseline": {"name": before.name, "pass_rate": before.pass_rate},
        "candidate": {"name": after.name, "pass_rate": after.pass_rate},
        "counts": {change: sum(row.change == change for row in rows) for change in CHANGES},
        "cases": [
            {
                "case": row.case,
                "change": row.change,
                "baseline": None if row.baseline is None else _case(row.baseline),
                "candidate": None if row.candidate is None else _case(row.candidate),
            }
            for row in rows
        ],
    }


def _read(store: CheckpointStore, name: str) -> Any:
    evals = _evals()
    try:
        return evals.read_experiment(store, name)
    except evals.ExperimentError as error:
        raise StudioError(404, str(error)) from None


def _case(case: Any) -> dict[str, Any]:
    return {
        "case": case.case,
        "passed": case.passed,
        "inputs": case.inputs,
        "output": case.output,
        "expected": case.expected,
        "scores": case.scores,
        "error": case.error,
        "seconds": case.seconds,
        "tokens": case.tokens,
        "cost_usd": case.cost_usd,
        "thread_id": case.thread_id,
        "run_id": case.run_id,
    }


def _evals() -> ModuleType:
    """selectgraph.evals, which needs pydantic-evals (the ``eval`` extra)."""
    try:
        import selectgraph.evals as evals
    except ImportError as error:
        raise StudioError(
            501, f'experiments need the eval extra: pip install "selectgraph[eval]" ({error})'
        ) from None
    return evals
