"""A store written to seed 004's CheckpointStore protocol, passed as ``checkpoint_store=``.

The store below is what a user following the seed would write: JSON files, one
per checkpoint, behind ``save(graph_id, state, step)``, ``load(id) -> (state,
step)``, ``list(graph_id)`` and ``delete(id)``. A second instance over the same
folder stands for another process.
"""

from __future__ import annotations

import json
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from selectgraph import (
    END,
    AgentGraph,
    CheckpointDecodeError,
    GraphState,
    InMemoryCheckpointStore,
    InterruptRequest,
)
from selectgraph.persistence._seed_store import (
    SeedStoreAdapter,
    as_checkpoint_store,
    is_seed_store,
)


@dataclass
class CheckpointMetadata:
    """Seed 004's listing entry."""

    checkpoint_id: str
    step: int


class JsonSeedStore:
    """Seed 004's protocol over a folder of JSON files."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(exist_ok=True)

    def save(self, graph_id: str, state: GraphState, step: int) -> str:
        number = len(list(self.folder.glob("*.json")))
        checkpoint_id = f"{graph_id}-{number:04d}"
        body = {"graph_id": graph_id, "step": step, "state": state.to_dict()}
        (self.folder / f"{checkpoint_id}.json").write_text(json.dumps(body))
        return checkpoint_id

    def load(self, checkpoint_id: str) -> tuple[GraphState, int]:
        path = self.folder / f"{checkpoint_id}.json"
        if not path.exists():
            raise ValueError(f"no checkpoint {checkpoint_id}")
        body = json.loads(path.read_text())
        return GraphState.from_dict(body["state"]), body["step"]

    def list(self, graph_id: str) -> list[CheckpointMetadata]:
        found = []
        for path in sorted(self.folder.glob("*.json")):
            body = json.loads(path.read_text())
            if body["graph_id"] == graph_id:
                found.append(CheckpointMetadata(path.stem, body["step"]))
        return found

    def delete(self, checkpoint_id: str) -> bool:
        path = self.folder / f"{checkpoint_id}.json"
        if not path.exists():
            return False
        path.unlink()
        return True


def _approve(state: Any) -> Generator[InterruptRequest, Any, dict[str, Any]]:
    verdict = yield InterruptRequest("Ship it?", {"draft": state["draft"]})
    return {"shipped": verdict == "yes"}


def _graph() -> AgentGraph:
    graph = AgentGraph("release")
    graph.add_node("draft", lambda state: {"draft": "v2"}, next_node="approve")
    graph.add_node("approve", _approve, next_node="publish")
    graph.add_node("publish", lambda state: {"published": state["shipped"]}, next_node=END)
    return graph


def test_only_a_store_with_the_seed_s_signatures_is_wrapped() -> None:
    memory = InMemoryCheckpointStore()
    assert as_checkpoint_store(memory) is memory  # already a CheckpointStore
    assert not is_seed_store(memory)
    other = object()
    assert as_checkpoint_store(other) is other  # refused later, where a store is needed


def test_a_paused_run_continues_from_another_instance_of_the_seed_store(
    tmp_path: Path,
) -> None:
    first = JsonSeedStore(tmp_path / "cp")
    assert is_seed_store(first)
    adapter = as_checkpoint_store(first)
    assert isinstance(adapter, SeedStoreAdapter)
    assert as_checkpoint_store(first) is adapter  # one adapter per store object

    paused = _graph().run({}, checkpoint_store=first)
    assert paused.interrupted
    saved = first.list(paused.run_id)
    assert [entry.step for entry in saved] == [0, 1, 1]
    state, step = first.load(saved[-1].checkpoint_id)
    assert (state.data, step) == ({"draft": "v2"}, 1)  # the user's store sees the data

    again = JsonSeedStore(tmp_path / "cp")  # "another process": nothing in memory
    interrupt_id = paused.interrupt_id
    assert interrupt_id is not None
    done = _graph().resume(interrupt_id, "yes", checkpoint_store=again)
    assert done.state.data == {"draft": "v2", "shipped": True, "published": True}
    reader = JsonSeedStore(tmp_path / "cp")
    history = _graph().get_history(run_id=paused.run_id, checkpoint_store=reader)
    assert len(history) == len(again.list(paused.run_id))


def test_deleting_through_the_adapter_deletes_in_the_seed_store(tmp_path: Path) -> None:
    seed = JsonSeedStore(tmp_path / "cp")
    result = _graph().run({}, checkpoint_store=seed)
    adapter = as_checkpoint_store(seed)

    assert adapter.delete_run(result.run_id) == 3
    assert seed.list(result.run_id) == []


def test_a_checkpoint_not_written_by_selectgraph_is_a_typed_error(tmp_path: Path) -> None:
    seed = JsonSeedStore(tmp_path / "cp")
    seed.save("foreign", GraphState(data={"x": 1}), 0)

    with pytest.raises(CheckpointDecodeError, match="not saved by selectgraph"):
        _graph().run(None, run_id="foreign", checkpoint_store=seed)


def test_anything_else_is_refused_naming_both_protocols() -> None:
    with pytest.raises(TypeError, match="seed 004's save\\(graph_id, state, step\\)"):
        _graph().run({}, checkpoint_store=object())  # type: ignore[arg-type]
