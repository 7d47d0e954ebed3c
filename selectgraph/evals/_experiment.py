"""Experiments: a graph run over a dataset, each case scored, every run kept in the store.

pydantic-evals runs the cases (concurrently up to a limit) and applies the scorers.
Each case runs on a thread of its own, tagged with the experiment's name in the
thread's metadata, with its output and scores written there when it is scored, so
an experiment can be read back and compared with another by any process that opens
the store (``selectgraph eval --compare``, :func:`read_experiment`).
"""

from __future__ import annotations

import contextvars
import datetime as dt
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_evals import Dataset, increment_eval_metric, set_eval_attribute
from pydantic_evals.evaluators import Evaluator
from pydantic_evals.lifecycle import CaseLifecycle
from pydantic_evals.reporting import EvaluationReport

from selectgraph.build._builder import AgentGraph
from selectgraph.build._input import graph_input
from selectgraph.build._output import final_output
from selectgraph.core._errors import SelectGraphError
from selectgraph.evals._scorers import ExactMatch
from selectgraph.observe._codec import json_value
from selectgraph.persistence._memory import InMemoryCheckpointStore
from selectgraph.persistence._protocol import CheckpointStore
from selectgraph.persistence._threads import Thread, ThreadStore

__all__ = [
    "CaseOutcome",
    "Experiment",
    "ExperimentError",
    "ExperimentSummary",
    "evaluate_graph",
    "list_experiments",
    "read_experiment",
]

_CASE: contextvars.ContextVar[str] = contextvars.ContextVar("selectgraph_eval_case")
_MAX_CASES = 100_000


class ExperimentError(SelectGraphError):
    """An experiment cannot run or be read: a name in use, a store without threads, none found."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CaseOutcome:
    """One case of an experiment: what the graph answered and how it scored."""

    case: str
    """The case's name."""
    thread_id: str
    """The thread its run is on (open it in the studio, or ``selectgraph threads show``)."""
    run_id: str | None
    """Its run; None when the run could not start."""
    output: Any
    """What the graph answered (JSON data); None when it failed."""
    expected: Any
    """What the dataset expected, or None."""
    scores: dict[str, Any]
    """Each scorer's result: True/False, a number or a label."""
    error: str | None
    """Why the run failed, or None."""
    seconds: float
    """How long the run took."""
    tokens: int
    """Model tokens it used (input and output)."""
    inputs: Any = None
    """What the case gave the graph (JSON data); None when an older experiment kept none."""
    cost_usd: float = 0.0
    """What its model calls cost, in US dollars, where their price is known."""

    @property
    def passed(self) -> bool:
        """No error, and every True/False score True."""
        return self.error is None and all(
            value for value in self.scores.values() if isinstance(value, bool)
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Experiment:
    """A graph's outcomes over a dataset."""

    name: str
    """The experiment's name (its runs' threads carry it as metadata ``experiment``)."""
    graph: str
    """The graph's name."""
    dataset: str
    """The dataset's name."""
    cases: tuple[CaseOutcome, ...]
    """Its cases, in the dataset's order."""
    report: EvaluationReport[Any, Any, Any] | None = None
    """pydantic-evals' report (``report.print()``); None when read back from a store."""

    @property
    def pass_rate(self) -> float:
        """The share of cases that passed."""
        return sum(case.passed for case in self.cases) / len(self.cases) if self.cases else 0.0

    def case(self, name: str) -> CaseOutcome | None:
        """The case named ``name``, or None."""
        return next((case for case in self.cases if case.case == name), None)


@dataclass(frozen=True, slots=True, kw_only=True)
class ExperimentSummary:
    """An experiment kept in a store, in brief: what :func:`list_experiments` returns."""

    name: str
    """The experiment's name."""
    dataset: str
    """The dataset's name."""
    cases: int
    """How many cases it ran."""
    passed: int
    """How many of them passed."""
    tokens: int
    """Model tokens its runs used."""
    cost_usd: float
    """What its model calls cost (US dollars, where their price is known)."""
    started: dt.datetime
    """When its first case's thread was made."""
    updated: dt.datetime
    """When a case's thread last changed (the experiment's end, once scored)."""

    @property
    def pass_rate(self) -> float:
        """The share of cases that passed."""
        return self.passed / self.cases if self.cases else 0.0


class _TagCase(CaseLifecycle[Any, Any, Any]):
    """Tells the task which case it runs (pydantic-evals hands it only the inputs)."""

    async def setup(self) -> None:
        _CASE.set(self.case.name or "case")


async def evaluate_graph(
    graph: AgentGraph,
    dataset: Dataset[Any, Any, Any],
    *,
    scorers: Sequence[Evaluator[Any, Any, Any]] = (),
    experiment: str | None = None,
    store: CheckpointStore | None = None,
    source: Any = None,
    max_concurrency: int = 1,
) -> Experiment:
    """Run ``graph`` on every case of ``dataset``, score each output, keep the runs.

    Args:
        graph: The graph to evaluate.
        dataset: The cases (see :func:`dataset_from_file` and :func:`dataset_of`).
        scorers: pydantic-evals evaluators (default: :class:`ExactMatch`).
        experiment: Its name (default: the graph's name and the time); must be new in
            ``store``.
        store: Where the runs are kept (in memory by default).
        source: What the graph came from (a SupervisorAgent...), which shapes text input.
        max_concurrency: Cases run at once.

    Raises:
        ExperimentError: the name is already used in the store, or it keeps no threads.
    """
    store = InMemoryCheckpointStore() if store is None else store
    threads = _threads(store)
    name = experiment or f"{graph.name}-{dt.datetime.now(dt.UTC):%Y%m%d-%H%M%S}"
    if not name or "|" in name or not name.isprintable() or len(name) > 200:
        raise ExperimentError(
            f"an experiment name is 1 to 200 printable characters without '|', got {name!r}"
        )
    if threads.list_threads(metadata={"experiment": name}, limit=1):
        raise ExperimentError(
            f"experiment {name!r} already has runs in this store; give the new one another name"
        )
    dataset_name = dataset.name or "dataset"
    source = graph if source is None else source

    async def task(inputs: Any) -> Any:
        case = _CASE.get()
        thread_id = _thread_id(name, case)
        set_eval_attribute("thread_id", thread_id)
        threads_meta = {"experiment": name, "case": case, "dataset": dataset_name}
        result = await graph.arun(
            graph_input(graph, source, inputs),
            thread_id=thread_id,
            thread_metadata=threads_meta,
            checkpoint_store=store,
        )
        set_eval_attribute("run_id", result.run_id)
        usage = result.total_usage
        increment_eval_metric("tokens", usage.input_tokens + usage.output_tokens)
        increment_eval_metric("cost_usd", usage.cost_usd)
        if result.stop_reason != "end":
            raise RuntimeError(f"the run stopped before its end ({result.stop_reason})")
        return json_value(final_output(result))

    # A dataset's own evaluators apply too; the default scorer only when none is given.
    chosen = list(scorers) or ([] if dataset.evaluators else [ExactMatch()])
    scored = Dataset(
        name=dataset_name, cases=dataset.cases, evaluators=[*dataset.evaluators, *chosen]
    )
    report = await scored.evaluate(
        task, name=name, max_concurrency=max_concurrency, progress=False, lifecycle=_TagCase
    )
    outcomes = _outcomes(report, name)
    for outcome in outcomes:
        _record(threads, outcome)
    order = {case.name: index for index, case in enumerate(dataset.cases)}
    outcomes.sort(key=lambda outcome: order.get(outcome.case, len(order)))
    return Experiment(
        name=name, graph=graph.name, dataset=dataset_name, cases=tuple(outcomes), report=report
    )


def _outcomes(report: EvaluationReport[Any, Any, Any], name: str) -> list[CaseOutcome]:
    outcomes = []
    for case in report.cases:
        scores: dict[str, Any] = {}
        for results in (case.assertions, case.scores, case.labels):
            scores.update({key: result.value for key, result in results.items()})
        outcomes.append(
            CaseOutcome(
                case=case.name,
                thread_id=str(case.attributes.get("thread_id", _thread_id(name, case.name))),
                run_id=case.attributes.get("run_id"),
                output=case.output,
                expected=json_value(case.expected_output),
                scores=scores,
                error=None,
                seconds=case.task_duration,
                tokens=int(case.metrics.get("tokens", 0)),
                inputs=json_value(case.inputs),
                cost_usd=float(case.metrics.get("cost_usd", 0.0)),
            )
        )
    for failure in report.failures:
        outcomes.append(
            CaseOutcome(
                case=failure.name,
                thread_id=_thread_id(name, failure.name),
                run_id=None,
                output=None,
                expected=json_value(failure.expected_output),
                scores={},
                error=failure.error_message,
                seconds=0.0,
                tokens=0,
                inputs=json_value(failure.inputs),
            )
        )
    return outcomes


def _record(threads: ThreadStore, outcome: CaseOutcome) -> None:
    """Write the outcome into its thread's metadata, where :func:`read_experiment` finds it."""
    if threads.get_thread(outcome.thread_id) is None:
        return  # the run never started: nothing in the store to tag
    threads.update_thread(
        outcome.thread_id,
        metadata={
            "eval": {
                "output": outcome.output,
                "expected": outcome.expected,
                "scores": json_value(outcome.scores),
                "error": outcome.error,
                "seconds": round(outcome.seconds, 6),
                "tokens": outcome.tokens,
                "cost_usd": outcome.cost_usd,
                "inputs": outcome.inputs,
                "run_id": outcome.run_id,
                "at": time.time(),
            }
        },
    )


def read_experiment(store: CheckpointStore, name: str) -> Experiment:
    """The experiment ``name`` as kept in ``store``, its cases in name order.

    Raises:
        ExperimentError: the store keeps no threads, or has no runs of that experiment.
    """
    found = _threads(store).list_threads(metadata={"experiment": name}, limit=_MAX_CASES)
    if not found:
        raise ExperimentError(f"no experiment {name!r} in this store")
    cases = sorted((_stored_outcome(thread) for thread in found), key=lambda c: c.case)
    first = found[0].metadata
    return Experiment(
        name=name, graph="", dataset=str(first.get("dataset", "")), cases=tuple(cases)
    )


def list_experiments(store: CheckpointStore, *, limit: int = 100) -> list[ExperimentSummary]:
    """The experiments kept in ``store``, the most recently run first (blocking).

    Every thread of the store is read once (threads carry their experiment's name in
    their metadata; stores have no index of experiments), so this costs a read of the
    store's threads, not of their runs.

    Raises:
        ExperimentError: the store keeps no threads.
    """
    grouped: dict[str, list[Thread]] = {}
    for thread in _threads(store).list_threads(limit=None):
        name = thread.metadata.get("experiment")
        if isinstance(name, str):
            grouped.setdefault(name, []).append(thread)
    summaries = [_summary(name, threads) for name, threads in grouped.items()]
    summaries.sort(key=lambda summary: (summary.updated, summary.name), reverse=True)
    return summaries[:limit]


def _summary(name: str, threads: Sequence[Thread]) -> ExperimentSummary:
    outcomes = [_stored_outcome(thread) for thread in threads]
    return ExperimentSummary(
        name=name,
        dataset=str(threads[0].metadata.get("dataset", "")),
        cases=len(outcomes),
        passed=sum(outcome.passed for outcome in outcomes),
        tokens=sum(outcome.tokens for outcome in outcomes),
        cost_usd=sum(outcome.cost_usd for outcome in outcomes),
        started=min(thread.created_at for thread in threads),
        updated=max(thread.updated_at for thread in threads),
    )


def _stored_outcome(thread: Thread) -> CaseOutcome:
    meta = thread.metadata
    stored = meta.get("eval")
    kept: Mapping[str, Any] = stored if isinstance(stored, Mapping) else {}
    scores = kept.get("scores")
    error = kept.get("error")
    if not kept:
        error = "not scored (the experiment stopped before this case was scored)"
    return CaseOutcome(
        case=str(meta.get("case", thread.thread_id)),
        thread_id=thread.thread_id,
        run_id=kept.get("run_id") or thread.last_run,
        output=kept.get("output"),
        expected=kept.get("expected"),
        scores=dict(scores) if isinstance(scores, Mapping) else {},
        error=None if error is None else str(error),
        seconds=float(kept.get("seconds", 0.0) or 0.0),
        tokens=int(kept.get("tokens", 0) or 0),
        inputs=kept.get("inputs"),
        cost_usd=float(kept.get("cost_usd", 0.0) or 0.0),
    )


def _threads(store: CheckpointStore) -> ThreadStore:
    if not isinstance(store, ThreadStore):
        raise ExperimentError(
            f"{type(store).__name__} keeps no threads, so it cannot keep experiments; "
            "use one of the stores selectgraph ships"
        )
    return store


def _thread_id(experiment: str, case: str) -> str:
    return f"eval:{experiment}:{case}"[:256]
