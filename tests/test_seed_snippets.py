"""Every code snippet of seed 004 runs as written (with ``selectgraph`` for ``selectools``).

The seed is prose with code in it, not fenced: a snippet is a run of paragraphs
that compile as Python. Each runs in a fresh namespace and a fresh working
folder, after a prelude that stands for what the seed leaves to the reader
(agents such as ``writer_agent``, a ``graph`` built of them, ``provider``); a
snippet that continues another (``parent.add_node("research", research_graph)``
after the subgraph is built) runs after it. Some snippets also get a check that
they do what the seed says. The HITL,
checkpointing and supervisor snippets are checked in detail by
``tests/test_seed_examples.py``.
"""

from __future__ import annotations

import ast
import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

SEEDS = Path(__file__).resolve().parents[2] / "shared" / "seeds"

PRELUDE = """
from typing import Any, List, Protocol, Tuple
from selectgraph import *
from selectgraph.orchestration import *
from selectgraph import Agent, AgentConfig
from selectgraph.providers import LocalProvider

def _agent(name):
    return Agent(AgentConfig(name=name), provider=LocalProvider())

for _name in ("planner", "writer", "reviewer", "editor", "researcher", "analyst",
              "summarizer", "publisher", "agent", "agent_a", "agent_b", "agent_c",
              "search", "analyze", "api", "critical"):
    globals()[_name] = globals()[_name + "_agent"] = _agent(_name)
provider = LocalProvider()

async def external_api_call(query):
    return [f"result for {query}"]

graph = AgentGraph.chain(planner, writer, reviewer, names=["planner", "writer", "reviewer"])
state = GraphState.from_prompt("hello")
"""

CONTINUES = {
    # snippet (its start) -> the snippet it goes on from
    "# This works because AgentGraph.__call__ exists": "# Build a research subgraph",
}

SETUP = {
    # snippets that use a name no earlier snippet defines
    "# Async version": (
        "store = FileCheckpointStore('./checkpoints')\n"
        "def _ask(state):\n"
        "    answer = yield InterruptRequest('Approve?', {})\n"
        "    return {'approved': answer == 'yes'}\n"
        "graph = AgentGraph()\n"
        "graph.add_node('review', _ask)\n"
        "graph.add_edge('review', AgentGraph.END)\n"
        "result = graph.run('draft', checkpoint_store=store)\n"
    ),
    "from selectgraph.orchestration import (\n    AgentGraph, InMemoryCheckpointStore": (
        "checkpoint_id = 'not-a-checkpoint'\n"
    ),
}


def _seed_text() -> str:
    seed = next(iter(sorted(SEEDS.glob("004_*.txt"))), None)
    if seed is None:
        pytest.skip("../shared/seeds is not beside this checkout")
    return seed.read_text().replace("selectools", "selectgraph")


def _compiles(source: str) -> bool:
    try:
        compile(source, "snippet", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    except SyntaxError:
        return False
    return True


def _is_code(lines: list[str]) -> bool:
    if len(lines) == 1:
        line = lines[0].strip()
        if re.fullmatch(r"[\w.]+\(\)", line):
            return False  # a heading naming a method: "astream()"
        if not re.match(r"(from |import |[A-Za-z_][\w.]*\s*[=(]|@|def |class |print)", line):
            return False  # a one-word paragraph of prose compiles too
    return _compiles("\n".join(lines))


def snippets() -> list[str]:
    """The seed's code, as runs of consecutive paragraphs that compile."""
    paragraphs: list[list[str]] = []
    current: list[str] = []
    for line in _seed_text().splitlines():
        if line.strip():
            current.append(line)
        elif current:
            paragraphs.append(current)
            current = []
    if current:
        paragraphs.append(current)
    found: list[str] = []
    run: list[str] = []
    for paragraph in paragraphs:
        text = "\n".join(paragraph)
        indented = paragraph[0][:1] in (" ", "\t")  # a function body split by a blank line
        if run and (indented or _is_code(paragraph)) and _compiles("\n\n".join([*run, text])):
            run.append(text)
            continue
        if run:
            found.append("\n\n".join(run))
            run = []
        if _is_code(paragraph):
            run = [text]
    if run:
        found.append("\n\n".join(run))
    return found


def _find(start: str) -> str:
    matches = [s for s in snippets() if s.startswith(start)]
    assert len(matches) == 1, f"seed 004 no longer has one snippet starting {start!r}"
    return matches[0]


def _run(code: str, namespace: dict[str, Any], name: str) -> None:
    compiled = compile(code, name, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    outcome = eval(compiled, namespace)  # top-level await makes it a coroutine
    if asyncio.iscoroutine(outcome):
        asyncio.run(outcome)


SNIPPETS = snippets() if SEEDS.is_dir() else []


def test_the_seed_s_snippets_are_all_found() -> None:
    if not SEEDS.is_dir():
        pytest.skip("../shared/seeds is not beside this checkout")
    assert len(SNIPPETS) == 39  # the seed is fixed: a change here means the extraction broke


@pytest.mark.parametrize(
    "snippet", SNIPPETS, ids=[f"{i:02d}-{s.splitlines()[0][:40]}" for i, s in enumerate(SNIPPETS)]
)
def test_a_seed_snippet_runs_as_written(
    snippet: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # snippets write ./checkpoints, state.json...
    namespace: dict[str, Any] = {}
    _run(PRELUDE, namespace, "prelude")
    for start, before in CONTINUES.items():
        if snippet.startswith(start):
            _run(_find(before), namespace, "the snippet before")
    for start, setup in SETUP.items():
        if snippet.startswith(start):
            _run(setup, namespace, "setup")
    _run(snippet, namespace, "seed-004-snippet")


def test_the_router_that_writes_and_updates_does_both() -> None:
    namespace: dict[str, Any] = {}
    _run(PRELUDE, namespace, "prelude")
    _run(_find("from selectgraph.orchestration import update"), namespace, "snippet")
    _run(
        "g = AgentGraph()\n"
        "g.add_node('n', lambda state: {'seen': True})\n"
        "g.add_conditional_edge('n', enrich_and_route)\n"
        "result = g.run({})\n",
        namespace,
        "check",
    )
    assert namespace["result"].state.data == {"seen": True, "enriched": True, "revision_count": 1}


def test_the_seed_s_store_protocol_is_one_a_graph_can_use() -> None:
    namespace: dict[str, Any] = {}
    _run(PRELUDE, namespace, "prelude")
    _run(_find("class CheckpointStore(Protocol):"), namespace, "snippet")
    from selectgraph.persistence._seed_store import is_seed_store

    store = type("WrittenToTheSeed", (namespace["CheckpointStore"],), {})()
    assert is_seed_store(store)  # the seed's own signatures are the ones recognised
