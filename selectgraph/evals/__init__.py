"""Evaluations: run a graph over a dataset, score its outputs, compare experiments.

Built on pydantic-evals: datasets are its ``Dataset``/``Case``, scorers are its
evaluators, and its report prints the table. selectgraph adds the graph runs (each
case a thread of the store, tagged with the experiment), scorers for expected
outputs, a Python function or the LLM judge, and comparison across experiments.
"""

from __future__ import annotations

from selectgraph.evals._compare import CaseComparison, Change, compare_experiments
from selectgraph.evals._dataset import DatasetError, dataset_from_file, dataset_of
from selectgraph.evals._experiment import (
    CaseOutcome,
    Experiment,
    ExperimentError,
    ExperimentSummary,
    evaluate_graph,
    list_experiments,
    read_experiment,
)
from selectgraph.evals._scorers import ContainsExpected, ExactMatch, FunctionScorer, JudgeScorer

__all__ = [
    "CaseComparison",
    "CaseOutcome",
    "Change",
    "ContainsExpected",
    "DatasetError",
    "ExactMatch",
    "Experiment",
    "ExperimentError",
    "ExperimentSummary",
    "FunctionScorer",
    "JudgeScorer",
    "compare_experiments",
    "dataset_from_file",
    "dataset_of",
    "evaluate_graph",
    "list_experiments",
    "read_experiment",
]
