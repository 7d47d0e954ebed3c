"""Seed 004's human-in-the-loop and checkpointing examples, executed from the seed's own text.

Only ``selectools`` becomes ``selectgraph``; the agents the snippets leave
undefined (``writer_agent``, ``publisher_agent``) are offline agents.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from selectgraph import Agent, AgentConfig
from selectgraph.providers import LocalProvider

SEEDS = Path(__file__).resolve().parents[2] / "shared" / "seeds"


def _seed_text() -> str:
    seed = next(iter(sorted(SEEDS.glob("004_*.txt"))), None)
    if seed is None:
        pytest.skip("../shared/seeds is not beside this checkout")
    return seed.read_text().replace("selectools", "selectgraph")


def _between(text: str, start: str, end: str) -> str:
    match = re.search(re.escape(start) + r".*?(?=" + re.escape(end) + ")", text, re.S)
    assert match is not None, f"seed 004 no longer has the block starting {start!r}"
    return match.group(0)


def _agents() -> dict[str, Any]:
    return {
        "writer_agent": Agent(AgentConfig(name="writer"), provider=LocalProvider()),
        "publisher_agent": Agent(AgentConfig(name="publisher"), provider=LocalProvider()),
    }


def test_the_hitl_example_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # it writes ./checkpoints
    code = _between(
        _seed_text(),
        "from selectgraph.orchestration import (\n    AgentGraph, GraphState, InterruptRequest,",
        "Key Points",
    )
    namespace = _agents()
    exec(compile(code, "seed-004-hitl", "exec"), namespace)
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == namespace["result"].interrupt_id
    assert namespace["final"].state.data["approved"] is True
    assert namespace["final"].stop_reason == "end"
    assert (tmp_path / "checkpoints").is_dir()


def test_the_checkpointing_usage_example_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    code = _between(
        _seed_text(),
        "from selectgraph.orchestration import (\n    AgentGraph, InMemoryCheckpointStore",
        "When a checkpoint_store is provided",
    )
    # The snippet uses a `graph` and a `checkpoint_id` it does not define.
    graph_code = (
        "from selectgraph import AgentGraph\n"
        "graph = AgentGraph()\n"
        "graph.add_node('writer', writer_agent)\n"
        "graph.add_node('publisher', publisher_agent)\n"
        "graph.add_edge('writer', 'publisher')\n"
        "graph.add_edge('publisher', AgentGraph.END)\n"
    )
    code = code.replace(
        "store.delete(checkpoint_id)",
        "checkpoint_id = store.list(result.trace.run_id)[0].checkpoint_id\n"
        "store.delete(checkpoint_id)",
    )
    namespace = _agents()
    exec(compile(graph_code + code, "seed-004-checkpointing", "exec"), namespace)
    printed = capsys.readouterr().out.splitlines()
    # The input checkpoint comes before any node ran; each later one names its node.
    assert printed[:3] == [
        "Step 0: node=None, interrupted=False",
        "Step 1: node=writer, interrupted=False",
        "Step 2: node=publisher, interrupted=False",
    ]


def test_the_supervisor_example_runs_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    code = _between(
        _seed_text(),
        "from selectgraph.orchestration import SupervisorAgent, SupervisorStrategy, ModelSplit",
        "Examples\n",
    )
    namespace: dict[str, Any] = {
        "provider": LocalProvider(),
        **{
            name: Agent(AgentConfig(name=name), provider=LocalProvider())
            for name in ("researcher", "writer", "reviewer")
        },
    }
    exec(compile(code, "seed-004-supervisor", "exec"), namespace)
    printed = capsys.readouterr().out.splitlines()
    result = namespace["result"]
    assert printed[-1] == "Total cost: $0.0000"
    assert result.stop_reason == "end"
    assert result.content  # the plan's last step answered
    # ModelSplit is really used: the supervisor asked gpt-4o, the team gpt-4o-mini.
    boss = namespace["provider"]
    assert {request.model for request in boss.requests} == {"gpt-4o"}
    team_models = {
        request.model
        for name in ("researcher", "writer", "reviewer")
        for request in namespace[name].provider.requests
    }
    assert team_models == {"gpt-4o-mini"}
