"""Experiments: a graph over a dataset, scored, kept in the store, compared."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic_evals import Case, Dataset

from selectgraph import END, AgentGraph, InMemoryCheckpointStore, SQLiteCheckpointStore
from selectgraph.agents import LLMJudge
from selectgraph.evals import (
    ContainsExpected,
    DatasetError,
    ExactMatch,
    ExperimentError,
    FunctionScorer,
    JudgeScorer,
    compare_experiments,
    dataset_from_file,
    dataset_of,
    evaluate_graph,
    read_experiment,
)
from selectgraph.testing import ScriptedProvider


def _upper(prefix: str = "") -> AgentGraph:
    def up(state: Any) -> dict[str, str]:
        text = state.messages[-1].text
        if text == "boom":
            raise RuntimeError("kaboom")
        return {"answer": prefix + text.upper()}

    graph = AgentGraph("upper")
    graph.add_node("up", up, next_node=END)
    return graph


CASES = [
    {"name": "abc", "input": "abc", "expected": {"answer": "ABC"}},
    {"name": "q", "input": "q", "expected": {"answer": "no"}},
    {"name": "boom", "input": "boom"},
]


async def test_each_case_runs_on_its_own_thread_and_is_scored() -> None:
    store = InMemoryCheckpointStore()

    found = await evaluate_graph(_upper(), dataset_of(CASES), experiment="v1", store=store)

    by_name = {case.case: case for case in found.cases}
    assert [case.case for case in found.cases] == ["abc", "q", "boom"]
    assert by_name["abc"].scores == {"exact": True}
    assert by_name["abc"].passed
    assert by_name["q"].scores == {"exact": False}
    assert "kaboom" in str(by_name["boom"].error)
    assert found.pass_rate == pytest.approx(1 / 3)
    thread = store.get_thread(by_name["abc"].thread_id)
    assert thread is not None
    assert thread.metadata["experiment"] == "v1"
    assert thread.metadata["case"] == "abc"
    assert found.report is not None  # pydantic-evals' own report, printable


async def test_an_experiment_is_read_back_from_another_store_object(tmp_path: Path) -> None:
    path = str(tmp_path / "evals.db")
    store = SQLiteCheckpointStore(path)
    await evaluate_graph(_upper(), dataset_of(CASES), experiment="v1", store=store)
    store.close()

    reopened = SQLiteCheckpointStore(path)
    found = read_experiment(reopened, "v1")

    assert {case.case: case.passed for case in found.cases} == {
        "abc": True,
        "boom": False,
        "q": False,
    }
    boom = found.case("boom")
    assert boom is not None
    assert "kaboom" in str(boom.error)
    assert boom.run_id is not None  # the failed run is there to open
    with pytest.raises(ExperimentError, match="no experiment 'v9'"):
        read_experiment(reopened, "v9")
    reopened.close()


async def test_two_experiments_compare_case_by_case() -> None:
    store = InMemoryCheckpointStore()
    cases = [*CASES, {"name": "x", "input": "x", "expected": {"answer": "X"}}]
    before = await evaluate_graph(_upper(), dataset_of(cases[:3]), experiment="v1", store=store)
    after = await evaluate_graph(
        _upper(prefix="A"), dataset_of(cases[1:]), experiment="v2", store=store
    )

    changes = {row.case: row.change for row in compare_experiments(before, after)}

    # q fails in both with another output; boom fails the same way in both.
    assert changes == {"abc": "removed", "q": "changed", "boom": "same", "x": "added"}
    fixed = await evaluate_graph(
        _upper(),
        dataset_of([{"name": "q", "input": "q", "expected": {"answer": "Q"}}]),
        experiment="v3",
        store=store,
    )
    assert compare_experiments(before, fixed)[1].change == "fixed"
    assert compare_experiments(fixed, before)[0].change == "broke"


async def test_scorers_expected_text_a_function_and_the_judge() -> None:
    def shout(state: Any) -> dict[str, str]:
        return {"said": "The answer is " + state.messages[-1].text.upper()}

    graph = AgentGraph("say")
    graph.add_node("say", shout, next_node=END)
    judge_model = ScriptedProvider(
        ['{"decision": "accept", "feedback": "fine"}', '{"decision": "retry", "feedback": "no"}']
    )

    def long_enough(output: Any, expected: Any) -> float:
        return len(output["said"]) / 20

    found = await evaluate_graph(
        graph,
        dataset_of([{"name": "a", "input": "yes", "expected": "answer is yes"}, {"input": "n"}]),
        scorers=[
            ContainsExpected(),
            FunctionScorer(long_enough),
            JudgeScorer("It answers.", judge=LLMJudge("It answers.", provider=judge_model)),
        ],
        experiment="scored",
    )

    first, second = found.cases
    assert first.scores["contains"] is True
    assert first.scores["long_enough"] == pytest.approx(len("The answer is YES") / 20)
    assert {first.scores["judge"], second.scores["judge"]} == {True, False}
    assert "contains" not in second.scores  # no expected output: not scored by it
    assert len(judge_model.requests) == 2


async def test_the_default_scorer_and_a_dataset_with_its_own_evaluators() -> None:
    own = Dataset(
        name="own",
        cases=[Case(name="a", inputs="a", expected_output={"answer": "A"})],
        evaluators=[ContainsExpected()],
    )

    found = await evaluate_graph(_upper(), own, experiment="own")

    assert found.cases[0].scores == {"contains": True}
    assert found.dataset == "own"
    assert ExactMatch().get_default_evaluation_name() == "exact"


async def test_names_in_use_and_stores_without_threads_are_refused() -> None:
    store = InMemoryCheckpointStore()
    await evaluate_graph(_upper(), dataset_of(CASES[:1]), experiment="v1", store=store)

    with pytest.raises(ExperimentError, match="already has runs"):
        await evaluate_graph(_upper(), dataset_of(CASES[:1]), experiment="v1", store=store)
    with pytest.raises(ExperimentError, match="printable"):
        await evaluate_graph(_upper(), dataset_of(CASES[:1]), experiment="a|b")
    with pytest.raises(ExperimentError, match="keeps no threads"):
        await evaluate_graph(_upper(), dataset_of(CASES[:1]), store=object())  # type: ignore[arg-type]


def test_jsonl_datasets_say_which_line_is_wrong(tmp_path: Path) -> None:
    path = tmp_path / "cases.jsonl"
    path.write_text('{"input": "a", "expected": "A"}\n\n{"input": "b", "name": "two"}\n')
    found = dataset_from_file(path)
    assert [case.name for case in found.cases] == ["case-1", "two"]
    assert found.cases[0].expected_output == "A"

    bad = {
        "not json\n": "cases.jsonl:1: not JSON",
        '{"input": "a"}\n[1]\n': "cases.jsonl:2: a case is a JSON object",
        '{"expected": "a"}\n': "needs an 'input'",
        '{"input": 3}\n': "'input' is text or an object, got int",
        '{"input": "a", "color": 1}\n': "unknown field(s) color",
        '{"input": "a", "name": "x"}\n{"input": "b", "name": "x"}\n': "'x' is used twice",
        '{"input": "a", "name": "a|b"}\n': "without '|'",
        '{"input": "a", "metadata": 3}\n': "'metadata' is an object",
        "": "has no cases",
    }
    for text, message in bad.items():
        path.write_text(text)
        with pytest.raises(DatasetError, match=message.replace("(", r"\(").replace(")", r"\)")):
            dataset_from_file(path)
    with pytest.raises(DatasetError, match="cannot be read"):
        dataset_from_file(tmp_path / "missing.jsonl")
    with pytest.raises(DatasetError, match="a list of cases"):
        dataset_of({"input": "a"})


def test_function_scorers_must_return_a_score() -> None:
    with pytest.raises(TypeError, match="callable"):
        FunctionScorer(3)  # type: ignore[arg-type]
