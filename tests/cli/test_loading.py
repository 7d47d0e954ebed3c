"""What GRAPH may name and what a run starts from: bare example files, specs importing
from the working directory, and text or JSON input (one convention with the studio)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from selectgraph import GraphState
from selectgraph.build._input import input_field_of
from selectgraph.cli._load import load_target
from selectgraph.research import DeepResearch, IterativeResearch, LocalCorpusSearch
from tests.cli.test_cli import ROOT, selectgraph

EXAMPLES = ROOT / "examples"


@pytest.mark.slow
def test_a_bare_example_file_loads_its_graph() -> None:
    done = selectgraph("graph", "examples/16_subgraph.py")

    assert done.returncode == 0, done.stderr
    assert "planner" in done.stdout


@pytest.mark.slow
@pytest.mark.parametrize("example", ["10_supervisor.py", "11_deep_research.py"])
def test_a_supervisor_or_research_app_loads_like_a_graph(example: str) -> None:
    done = selectgraph("graph", f"examples/{example}", "--format", "mermaid")

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("flowchart TD")


@pytest.mark.slow
def test_a_spec_imports_an_allowed_module_from_the_working_directory(tmp_path: Path) -> None:
    (tmp_path / "mynodes.py").write_text(
        "def shout(state):\n    return {'__last_output__': state['text'].upper()}\n"
    )
    (tmp_path / "spec.yaml").write_text(
        "name: loud\nentry: shout\nnodes:\n  shout: {call: 'mynodes:shout', next: END}\n"
    )

    done = selectgraph(
        "run", "spec.yaml", "--allow", "mynodes", "--input", '{"text": "hi"}', cwd=tmp_path
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "HI"


@pytest.mark.slow
def test_a_spec_without_allow_still_refuses_the_working_directory_module(tmp_path: Path) -> None:
    (tmp_path / "mynodes.py").write_text("def shout(state):\n    return {}\n")
    (tmp_path / "spec.yaml").write_text(
        "name: loud\nentry: shout\nnodes:\n  shout: {call: 'mynodes:shout', next: END}\n"
    )

    done = selectgraph("run", "spec.yaml", cwd=tmp_path)

    assert done.returncode == 2
    assert "--allow" in done.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    "given",
    [["why?"], ["--input", "why?"], ["--input", '{"question": "why?"}']],
    ids=["text", "input-text", "input-json"],
)
def test_text_goes_to_the_input_field_and_json_is_the_state(given: list[str]) -> None:
    done = selectgraph("run", "tests.cli.graphs:asker", *given, "--json")

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["content"] == "you asked: why?"


@pytest.mark.slow
def test_text_and_input_together_is_a_usage_error() -> None:
    done = selectgraph("run", "tests.cli.graphs:asker", "why?", "--input", "{}")

    assert done.returncode == 2
    assert "TEXT or --input" in done.stderr


def test_text_fills_a_declared_input_field_and_is_the_user_message() -> None:
    target = load_target("tests.cli.graphs:asker")

    start = target.input("why?")

    assert isinstance(start, GraphState)
    assert start.data == {"question": "why?"}
    assert [m.text for m in start.messages] == ["why?"]
    assert target.input({"question": "why?"}) == {"question": "why?"}


def test_text_without_an_input_field_is_a_prompt() -> None:
    assert load_target("tests.cli.graphs:approval").input("hello") == "hello"


def test_the_research_app_takes_its_question_as_text_or_json(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SELECTGRAPH_PROVIDER", "local")
    target = load_target(str(EXAMPLES / "11_deep_research.py"))

    assert target.input("why?")["question"] == "why?"
    assert target.input({"question": "why?"})["question"] == "why?"
    with pytest.raises(ValueError, match="question"):
        target.input({"topic": "why?"})


def test_the_research_graph_declares_question_as_its_input_field(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SELECTGRAPH_PROVIDER", "local")
    tools = [LocalCorpusSearch(EXAMPLES / "research_corpus")]

    for app in (DeepResearch(tools=tools), IterativeResearch(tools=tools)):
        assert input_field_of(app.graph) == "question"
