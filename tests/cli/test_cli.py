"""The ``selectgraph`` command as a user runs it: the installed entry point, in a subprocess."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STUDIO_EXAMPLE = "examples/12_studio.py:graph"

pytestmark = pytest.mark.slow


def selectgraph(
    *args: str, stdin: str = "", cwd: Path = ROOT, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run the console script (falling back to ``python -m`` when it is not on PATH)."""
    found = shutil.which("selectgraph", path=str(Path(sys.executable).parent))
    command = [found] if found else [sys.executable, "-m", "selectgraph.cli"]
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(SELECTGRAPH_PROVIDER="local", SELECTGRAPH_STUDIO_FAST="1", COLUMNS="200")
    return subprocess.run(
        [*command, *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
        check=False,
    )


def test_help_lists_the_commands() -> None:
    done = selectgraph("--help")
    assert done.returncode == 0, done.stderr
    for command in ("run", "graph", "studio", "runs", "threads"):
        assert command in done.stdout


def test_graph_prints_the_diagram() -> None:
    mermaid = selectgraph("graph", STUDIO_EXAMPLE, "--format", "mermaid")
    assert mermaid.returncode == 0, mermaid.stderr
    assert mermaid.stdout.startswith("flowchart TD")
    assert '["editor"]' in mermaid.stdout
    ascii_art = selectgraph("graph", STUDIO_EXAMPLE)
    assert "intake --> science & market" in ascii_art.stdout


def test_an_interrupt_is_asked_at_the_terminal_and_the_run_resumes() -> None:
    done = selectgraph("run", STUDIO_EXAMPLE, "--input", '{"topic": "owls"}', stdin="publish\n")
    assert done.returncode == 0, done.stderr
    assert "editor asks" in done.stderr
    assert "Publish this draft? (publish / revise)" in done.stderr
    assert done.stdout.startswith("PUBLISHED: [local] reply to:")


def test_answers_are_read_as_json_when_they_are_json() -> None:
    done = selectgraph("run", "tests.cli.graphs:approval", "--json", stdin='{"ok": true}\n')
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["stop_reason"] == "end"
    assert outcome["content"] == "answered {'ok': True}"


def test_no_input_leaves_the_run_paused_and_says_how_to_resume(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    paused = selectgraph(
        "run", "tests.cli.graphs:approval", "--store", store, "--run-id", "rel-1", "--no-input"
    )
    assert paused.returncode == 3, paused.stderr
    assert "run rel-1 waits for an answer" in paused.stderr
    assert "ask asks: Ship it?" in paused.stderr
    hint = f"selectgraph runs resume tests.cli.graphs:approval rel-1 --store {store} --answer"
    assert hint in paused.stderr

    listed = selectgraph("runs", "list", "--store", store)
    assert listed.returncode == 0, listed.stderr
    assert "rel-1" in listed.stdout
    assert "interrupted" in listed.stdout

    shown = selectgraph(
        "runs", "show", "rel-1", "--store", store, "--graph", "tests.cli.graphs:approval"
    )
    assert shown.returncode == 0, shown.stderr
    assert "rel-1" in shown.stdout
    assert "Ship it?" in shown.stdout
    assert '"version": 2' in shown.stdout

    resumed = selectgraph(
        "runs", "resume", "tests.cli.graphs:approval", "rel-1", "--store", store, "--answer", "yes"
    )
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == "answered 'yes'"

    again = selectgraph(
        "runs", "resume", "tests.cli.graphs:approval", "rel-1", "--store", store, "--answer", "no"
    )
    assert again.returncode == 2
    assert "answers for 0 pending question(s)" in again.stderr


def test_a_run_forks_from_an_earlier_checkpoint(tmp_path: Path) -> None:
    from selectgraph import SQLiteCheckpointStore

    db = tmp_path / "runs.db"
    store = f"sqlite:///{db}"
    first = selectgraph(
        "run", "tests.cli.graphs:approval", "--store", store, "--run-id", "a", stdin="yes\n"
    )
    assert first.returncode == 0, first.stderr
    with SQLiteCheckpointStore(db) as opened:
        interrupt = next(cp for cp in opened.list("a") if cp.metadata.get("trigger") == "interrupt")
    forked = selectgraph(
        "runs", "fork", "tests.cli.graphs:approval", "a",
        "--checkpoint", interrupt.checkpoint_id, "--store", store, "--run-id", "b",
        stdin="no\n",
    )  # fmt: skip
    assert forked.returncode == 0, forked.stderr
    assert forked.stdout.strip() == "answered 'no'"
    listed = selectgraph("runs", "list", "--store", store)
    assert " a " in listed.stdout.replace("│", " ")
    assert " b " in listed.stdout.replace("│", " ")


def test_a_failing_run_exits_1_with_a_readable_error(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    done = selectgraph("run", "tests.cli.graphs:failing", "--store", store, "--run-id", "f1")
    assert done.returncode == 1
    assert "run failed at node 'second' (node_exception)" in done.stderr
    assert "ConnectionError: the backend is down" in done.stderr
    assert f"its state is saved: selectgraph runs show f1 --store {store}" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("run", "tests.cli.graphs:nope"),
            "has no attribute 'nope'; graphs there: approval, asker, chat, failing, vote",
        ),
        (("run", "tests.cli.graphs:not_a_graph"), "not_a_graph is a int, not an AgentGraph"),
        (("run", "no_such_module_xyz:graph"), "cannot import 'no_such_module_xyz'"),
        (("run", "graph.yaml"), "graph.yaml: no such spec file"),
        (("run", "just-a-word"), "is neither a spec file"),
        (("run", "tests.cli.graphs:approval", "--store", "mysql://x"), "is not a store"),
        (("run", "tests.cli.graphs:approval", "--input", "@missing.json"), "--input @missing.json"),
        (("run", "tests/cli/greet.yaml"), "--allow MODULE"),
        (("graph", "tests.cli.graphs:approval", "--format", "png"), "--format must be ascii or"),
        (("runs", "list"), "needs --store"),
    ],
)
def test_bad_commands_exit_2_naming_what_is_wrong(args: tuple[str, ...], message: str) -> None:
    done = selectgraph(*args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_a_spec_file_runs_with_its_modules_allowed() -> None:
    done = selectgraph(
        "run", "tests/cli/greet.yaml", "--allow", "tests.cli.graphs", "--input", '{"text": "hi"}'
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "HI"


def test_a_supervisor_runs_from_the_command_line(tmp_path: Path) -> None:
    module = tmp_path / "team.py"
    module.write_text(
        "from selectgraph import Agent, AgentConfig, SupervisorAgent\n"
        "from selectgraph.providers import LocalProvider\n"
        "team = SupervisorAgent(\n"
        "    agents={'a': Agent(AgentConfig(name='a'), provider=LocalProvider())},\n"
        "    provider=LocalProvider(), strategy='round_robin', max_rounds=1)\n"
    )
    done = selectgraph("run", f"{module}:team", "--input", "Explain tides", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Explain tides" in done.stdout  # the task reached the member
