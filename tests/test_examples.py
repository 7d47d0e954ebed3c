"""Every example runs offline, as a user would run it, and prints what it claims."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest

from selectgraph import AgentGraph
from selectgraph.build._input import graph_input
from selectgraph.cli._load import load_target

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

EXPECTED = {
    "01_quickstart.py": "Graph engines: draft 3",
    "02_agent_chain.py": "nodes: planner -> writer -> reviewer",
    "03_tool_agent.py": "tool call: compare",
    "04_writer_critic.py": "writer visit 1: 2 attempt(s)",
    "05_llm_router.py": "-> technical",
    "06_tool_router.py": "analyze -> search -> analyze -> calculator -> analyze",
    "07_declarative.py": "classify -> billing",
    "08_streaming.py": "done: 2 steps",
    "09_approval_workflow.py": "fact-check ran 1 time(s), in process 1: context.once kept it",
    "10_supervisor.py": "== MAGENTIC: end, 3 round(s)",
    "11_deep_research.py": "## Sources\n\n[1] ",
    "12_studio.py": "Watch it run:  selectgraph studio examples/12_studio.py:graph",
    "13_ticket_triage.py": "ticket-4: refund declined; ran on worker-",
    "14_parallel_merge.py": "last_wins: verdict=reject\nfirst_wins: verdict=approve",
    "15_checkpoint_backends.py": "sqlite: paused on 'Publish?' after 3 checkpoints\n"
    "sqlite: published=True (end)",
    "16_subgraph.py": "On tide pools: tide pools basics; tide pools history",
}


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(EXPECTED))
def test_example_runs_offline(script: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["SELECTGRAPH_PROVIDER"] = "local"
    # Each run has its own files and its own database: two test runs at once (a
    # checkout and CI's clone) must not share the DBOS example's workflows or a
    # temporary SQLite file.
    env["TMPDIR"] = str(tmp_path)
    database = f"sg_example_{uuid.uuid4().hex[:12]}"
    env["SELECTGRAPH_DATABASE_URL"] = f"postgresql://postgres@127.0.0.1:5432/{database}"
    # Output goes to files, not pipes: a worker the example started and failed to stop
    # would hold a pipe open and hang the test instead of failing it.
    stdout, stderr = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    with stdout.open("w") as out, stderr.open("w") as err:
        process = subprocess.Popen(
            [sys.executable, str(EXAMPLES / script)],
            stdout=out,
            stderr=err,
            env=env,
            start_new_session=True,  # its workers too can be stopped as one group
        )
    try:
        returncode: int | None = process.wait(timeout=100)  # under pytest-timeout's 120 s
    except subprocess.TimeoutExpired:
        returncode = None
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # the example, or what it left behind
        process.wait()
        _drop_database(database)

    said = f"stdout:\n{stdout.read_text()}\nstderr:\n{stderr.read_text()[-4000:]}"
    assert returncode is not None, f"{script} ran past 100 s\n{said}"
    assert returncode == 0, said
    assert EXPECTED[script] in stdout.read_text(), said


def _drop_database(name: str) -> None:
    """Drop the example's database if it made one (only the DBOS example does)."""
    with psycopg.connect(
        "postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True
    ) as connection:
        made = connection.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (name,)
        ).fetchone()
        if made:
            connection.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def test_every_example_is_checked() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(EXPECTED)


@pytest.mark.parametrize("script", sorted(EXPECTED))
def test_example_exposes_a_loadable_graph(script: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # What `selectgraph run/studio examples/NN_x.py` load: importing only, no model call.
    monkeypatch.setenv("SELECTGRAPH_PROVIDER", "local")
    target = load_target(str(EXAMPLES / script))

    assert isinstance(target.graph, AgentGraph)
    target.graph.compile()  # a graph that could run


@pytest.mark.parametrize("script", sorted(EXPECTED))
def test_example_graph_takes_text_as_the_cli_and_studio_give_it(
    script: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `selectgraph run examples/NN_x.py "some text"` and the studio's text box: the text
    # goes to the graph's input field, and the run gets past its first node.
    monkeypatch.setenv("SELECTGRAPH_PROVIDER", "local")
    target = load_target(str(EXAMPLES / script))

    result = target.graph.run(graph_input(target.graph, target.source, "sodium batteries"))

    assert result.stop_reason in ("end", "interrupted")
    assert result.steps >= 1


def test_readme_names_what_every_example_exposes() -> None:
    readme = (EXAMPLES.parent / "README.md").read_text(encoding="utf-8")

    assert [name for name in sorted(EXPECTED) if f"| `{name}` |" not in readme] == []
