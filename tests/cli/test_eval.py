"""`selectgraph eval` and `selectgraph experiments`: experiments from the command line."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner

from selectgraph.cli import EXIT_FAILED, EXIT_USAGE, app

if TYPE_CHECKING:
    from pathlib import Path

GRAPH = """
from selectgraph import END, AgentGraph

def up(state):
    text = state.messages[-1].text
    if text == "boom":
        raise RuntimeError("kaboom")
    return {"answer": PREFIX + text.upper()}

PREFIX = ""
graph = AgentGraph("upper")
graph.add_node("up", up, next_node=END)

def starts_with_a(output, expected):
    return output["answer"].startswith("A")

cases = [{"name": "a", "input": "a", "expected": {"answer": "A"}}]
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "upper.py").write_text(GRAPH)
    (tmp_path / "prefixed.py").write_text(GRAPH.replace('PREFIX = ""', 'PREFIX = "A"'))
    (tmp_path / "cases.jsonl").write_text(
        '{"name": "abc", "input": "abc", "expected": {"answer": "ABC"}}\n'
        '{"name": "q", "input": "q", "expected": {"answer": "no"}}\n'
        '{"name": "boom", "input": "boom"}\n'
    )
    return tmp_path


def _eval(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["eval", *args])
    return result.exit_code, result.output


def test_eval_prints_a_table_and_keeps_the_experiment(project: Path) -> None:
    code, output = _eval(
        "upper.py", "cases.jsonl", "--scorer", "contains", "--scorer", "upper:starts_with_a"
    )

    assert code == 0, output
    assert "1 of 3 cases passed" in output
    assert "kaboom" in output
    assert "starts_with_a" in output
    assert (project / "evals.db").exists()


def test_json_output_baseline_and_compare(project: Path) -> None:
    store = f"sqlite:///{project / 'runs.db'}"
    code, first = _eval("upper.py", "cases.jsonl", "--experiment", "v1", "--store", store, "--json")
    assert code == 0, first
    shown = json.loads(first)
    assert shown["experiment"] == "v1"
    assert [case["passed"] for case in shown["cases"]] == [True, False, False]
    assert shown["cases"][0]["thread_id"] == "eval:v1:abc"

    code, second = _eval(
        "prefixed.py", "cases.jsonl", "--experiment", "v2", "--baseline", "v1", "--store", store
    )
    assert code == 0, second
    assert "pass rate 33% → 0%; 0 fixed, 1 broke" in second

    listing = CliRunner().invoke(app, ["experiments", "compare", "v1", "v2", "--store", store])
    assert listing.exit_code == 0, listing.output
    assert "broke" in listing.output
    rows = json.loads(
        CliRunner()
        .invoke(app, ["experiments", "compare", "v1", "v2", "--store", store, "--json"])
        .output
    )
    assert {row["case"]: row["change"] for row in rows} == {
        "abc": "broke",
        "boom": "same",
        "q": "changed",
    }
    shown_again = CliRunner().invoke(app, ["experiments", "show", "v1", "--store", store])
    assert "1 of 3 cases passed" in shown_again.output


def test_fail_under_makes_a_gate(project: Path) -> None:
    code, _ = _eval("upper.py", "cases.jsonl", "--fail-under", "0.5")
    assert code == EXIT_FAILED
    code, _ = _eval("upper.py", "upper:cases", "--experiment", "py", "--fail-under", "1")
    assert code == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["upper.py", "missing.jsonl"], "cannot be read"),
        (["upper.py", "upper:nothing"], "has no attribute 'nothing'"),
        (["upper.py", "cases.jsonl", "--scorer", "fuzzy"], "not exact, contains, judge"),
        (["upper.py", "cases.jsonl", "--scorer", "judge"], "needs --criteria"),
        (["upper.py", "cases.jsonl", "--scorer", "upper:nope"], "has no attribute 'nope'"),
        (["upper.py", "cases.jsonl", "--baseline", "v0"], "no experiment 'v0'"),
        (["upper.py", "cases.jsonl", "--experiment", "a|b"], "without '|'"),
    ],
)
def test_bad_invocations_say_what_is_wrong(project: Path, args: list[str], message: str) -> None:
    code, output = _eval(*args)

    assert code == EXIT_USAGE
    assert message in " ".join(output.split())


def test_an_experiment_name_in_use_is_refused(project: Path) -> None:
    assert _eval("upper.py", "cases.jsonl", "--experiment", "v1")[0] == 0
    code, output = _eval("upper.py", "cases.jsonl", "--experiment", "v1")
    assert code == EXIT_USAGE
    assert "already has runs" in output
