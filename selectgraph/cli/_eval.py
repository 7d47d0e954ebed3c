"""``selectgraph eval``: run a graph over a dataset and score it; ``experiments`` compares runs.

The dataset is a JSONL file (one case per line: ``input``, ``expected``, ``name``,
``metadata``) or ``module:attribute`` naming a list of cases or a pydantic-evals
Dataset. Scorers are ``exact``, ``contains``, ``judge`` (selectgraph's LLM judge,
with ``--criteria``) or ``module:function``. The runs are kept in ``--store``,
tagged with the experiment's name, so ``--baseline`` and ``experiments compare``
can set one experiment beside another later, from any process.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from selectgraph.cli._common import (
    EXIT_FAILED,
    AllowOpt,
    GraphArg,
    JsonOpt,
    fail,
    load,
    open_checkpoints,
    out,
)
from selectgraph.cli._load import LoadError, load_attribute
from selectgraph.persistence._protocol import CheckpointStore

if TYPE_CHECKING:
    from types import ModuleType

    from selectgraph.evals import CaseComparison, Experiment

__all__ = ["eval_command", "experiments_app"]

_DATA_SUFFIXES = (".jsonl", ".ndjson")

EvalStoreOpt = Annotated[
    str,
    typer.Option(
        "--store",
        help="Where the runs are kept: sqlite:///evals.db, postgresql://..., file:///dir.",
    ),
]

experiments_app = typer.Typer(
    help="Read experiments kept by `selectgraph eval`: show one, compare two.",
    no_args_is_help=True,
)


def eval_command(
    graph: GraphArg,
    dataset: Annotated[
        str,
        typer.Argument(
            metavar="DATASET",
            help="A JSONL file of cases, or module:attribute naming a list of cases "
            "or a pydantic_evals.Dataset.",
        ),
    ],
    scorer: Annotated[
        list[str] | None,
        typer.Option(
            "--scorer",
            help="exact, contains, judge or module:function (repeat it); default exact.",
        ),
    ] = None,
    criteria: Annotated[
        str | None, typer.Option(help="What a good answer does, for the judge scorer.")
    ] = None,
    experiment: Annotated[
        str | None, typer.Option(help="The experiment's name (default: graph name and time).")
    ] = None,
    baseline: Annotated[
        str | None, typer.Option(help="An earlier experiment in the store to compare with.")
    ] = None,
    store: EvalStoreOpt = "sqlite:///evals.db",
    concurrency: Annotated[int, typer.Option(min=1, help="Cases run at once.")] = 1,
    fail_under: Annotated[
        float,
        typer.Option(min=0.0, max=1.0, help="Exit 1 when fewer cases than this share pass."),
    ] = 0.0,
    json_output: JsonOpt = False,
    allow: AllowOpt = None,
) -> None:
    """Run GRAPH on every case of DATASET, score the outputs, keep the runs as an experiment."""
    evals = _evals()
    target = load(graph, allow)
    cases = _dataset(dataset)
    scorers = [_scorer(name, criteria) for name in scorer or ()]
    checkpoints = _store(store)
    before = _experiment(checkpoints, baseline) if baseline else None
    try:
        result = asyncio.run(
            evals.evaluate_graph(
                target.graph,
                cases,
                scorers=scorers,
                experiment=experiment,
                store=checkpoints,
                source=target.source,
                max_concurrency=concurrency,
            )
        )
    except evals.ExperimentError as error:
        fail(str(error))
    if json_output:
        shown = _as_json(result)
        if before is not None:
            shown["compared_with"] = _comparison_json(evals.compare_experiments(before, result))
        out.print(json.dumps(shown), markup=False, highlight=False)
    else:
        _print_experiment(result)
        if before is not None:
            _print_comparison(before, result)
        out.print(f"runs kept in {store} as experiment {result.name!r}", markup=False)
    if result.pass_rate < fail_under:
        raise typer.Exit(EXIT_FAILED)


@experiments_app.command("show")
def show(
    name: Annotated[str, typer.Argument(help="The experiment's name.")],
    store: EvalStoreOpt = "sqlite:///evals.db",
    json_output: JsonOpt = False,
) -> None:
    """Show a kept experiment's cases: outputs, scores, time and tokens."""
    found = _experiment(_store(store), name)
    if json_output:
        out.print(json.dumps(_as_json(found)), markup=False, highlight=False)
    else:
        _print_experiment(found)


@experiments_app.command("compare")
def compare(
    baseline: Annotated[str, typer.Argument(help="The earlier experiment.")],
    candidate: Annotated[str, typer.Argument(help="The experiment to set beside it.")],
    store: EvalStoreOpt = "sqlite:///evals.db",
    json_output: JsonOpt = False,
) -> None:
    """Compare two kept experiments case by case: fixed, broke, changed, same."""
    evals = _evals()
    checkpoints = _store(store)
    before, after = _experiment(checkpoints, baseline), _experiment(checkpoints, candidate)
    if json_output:
        rows = _comparison_json(evals.compare_experiments(before, after))
        out.print(json.dumps(rows), markup=False, highlight=False)
    else:
        _print_comparison(before, after)


# ---------------------------------------------------------------- loading
def _evals() -> ModuleType:
    """selectgraph.evals, which needs pydantic-evals (the ``eval`` extra)."""
    try:
        import selectgraph.evals as evals
    except ImportError as error:
        fail(f'evaluations need their extra: pip install "selectgraph[eval]" ({error})')
    return evals


def _dataset(spec: str) -> Any:
    evals = _evals()
    path = Path(spec)
    try:
        if path.suffix.lower() in _DATA_SUFFIXES or (path.is_file() and ":" not in spec):
            return evals.dataset_from_file(path)
        return evals.dataset_of(load_attribute(spec), name=spec.rpartition(":")[2])
    except (evals.DatasetError, LoadError) as error:
        fail(f"dataset {spec}: {error}")


def _scorer(name: str, criteria: str | None) -> Any:
    evals = _evals()
    if name == "exact":
        return evals.ExactMatch()
    if name == "contains":
        return evals.ContainsExpected()
    if name == "judge":
        if not criteria:
            fail("--scorer judge needs --criteria: what a good answer does")
        return evals.JudgeScorer(criteria)
    if ":" not in name:
        fail(f"--scorer {name}: not exact, contains, judge nor module:function")
    try:
        return evals.FunctionScorer(load_attribute(name))
    except (LoadError, TypeError) as error:
        fail(f"--scorer {name}: {error}")


def _store(url: str) -> CheckpointStore:
    checkpoints = open_checkpoints(url, required=True)
    assert checkpoints is not None
    return checkpoints


def _experiment(store: CheckpointStore, name: str) -> Experiment:
    evals = _evals()
    try:
        found: Experiment = evals.read_experiment(store, name)
    except evals.ExperimentError as error:
        fail(str(error))
    return found


# ---------------------------------------------------------------- printing
def _short(value: Any, width: int = 60) -> str:
    from selectgraph.evals._scorers import as_text  # loaded already: experiments use it

    text = " ".join(as_text(value).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _score_text(scores: dict[str, Any]) -> str:
    shown = []
    for name, value in scores.items():
        mark = ("✔" if value else "✗") if isinstance(value, bool) else str(value)
        shown.append(f"{name} {mark}")
    return ", ".join(shown)


def _print_experiment(found: Experiment) -> None:
    table = Table(title=f"experiment {found.name}", title_justify="left")
    for column in ("case", "output", "expected", "scores", "seconds", "tokens"):
        table.add_column(column)
    for case in found.cases:
        output = f"error: {case.error}" if case.error else _short(case.output)
        expected = "" if case.expected is None else _short(case.expected)
        table.add_row(
            case.case,
            output,
            expected,
            _score_text(case.scores),
            f"{case.seconds:.2f}",
            str(case.tokens),
        )
    out.print(table)
    passed = sum(case.passed for case in found.cases)
    out.print(f"{passed} of {len(found.cases)} cases passed ({found.pass_rate:.0%})")


def _print_comparison(before: Experiment, after: Experiment) -> None:
    evals = _evals()
    rows = evals.compare_experiments(before, after)
    table = Table(title=f"{before.name} → {after.name}", title_justify="left")
    for column in ("case", "change", before.name, after.name):
        table.add_column(column)
    for row in rows:
        table.add_row(row.case, row.change, _cell(row.baseline), _cell(row.candidate))
    out.print(table)
    counts = {change: sum(row.change == change for row in rows) for change in ("fixed", "broke")}
    out.print(
        f"pass rate {before.pass_rate:.0%} → {after.pass_rate:.0%}; "
        f"{counts['fixed']} fixed, {counts['broke']} broke"
    )


def _cell(outcome: Any) -> str:
    if outcome is None:
        return "—"
    verdict = "pass" if outcome.passed else "fail"
    body = f"error: {outcome.error}" if outcome.error else _short(outcome.output, 40)
    return f"{verdict}: {body}"


def _as_json(found: Experiment) -> dict[str, Any]:
    return {
        "experiment": found.name,
        "dataset": found.dataset,
        "pass_rate": found.pass_rate,
        "cases": [_case_json(case) for case in found.cases],
    }


def _case_json(case: Any) -> dict[str, Any] | None:
    if case is None:
        return None
    return {
        "case": case.case,
        "passed": case.passed,
        "output": case.output,
        "expected": case.expected,
        "scores": case.scores,
        "error": case.error,
        "seconds": case.seconds,
        "tokens": case.tokens,
        "thread_id": case.thread_id,
        "run_id": case.run_id,
    }


def _comparison_json(rows: Sequence[CaseComparison]) -> list[dict[str, Any]]:
    return [
        {
            "case": row.case,
            "change": row.change,
            "baseline": _case_json(row.baseline),
            "candidate": _case_json(row.candidate),
        }
        for row in rows
    ]
