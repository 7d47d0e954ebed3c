"""Replay without a database: the DBOS task runner given recorded steps rebuilds the same run.

A stand-in for DBOS records each step's JSON record the first time and hands
it back on a replay, as DBOS does for a workflow another worker takes over.
A replay of every step, or of the first k steps followed by live execution,
must end in the same state, with the same steps and errors, and run no
recorded node again.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from selectgraph import AgentGraph, GraphResult
from selectgraph.executors.dbos import _runner
from selectgraph.executors.dbos._runner import DBOSTaskRunner, Publisher, PublishingStore
from selectgraph.runtime._tasks import running_tasks_with
from tests.executors import graphs


class FakeDBOS:
    """Steps recorded as JSON the first time, returned from the record on replay."""

    def __init__(
        self,
        recorded: list[tuple[str, Any]] | None = None,
        replay: int = 0,
        effects: Path | None = None,
    ) -> None:
        self.recorded = list(recorded or [])
        self.replay = replay  # how many recorded steps are returned, not run
        self.calls = 0
        self.stream: list[dict[str, Any]] = []
        self.effects = effects
        self.marks: list[int] = []
        """After each step that ran: how many node starts the effects file holds."""

    async def run_step_async(self, options: dict[str, Any], func: Any) -> Any:
        index = self.calls
        self.calls += 1
        if index < self.replay:
            name, record = self.recorded[index]
            assert name == options["name"], "a replay must meet its steps in the same order"
            return json.loads(json.dumps(record))
        record = await func()
        del self.recorded[index:]
        self.recorded.append((options["name"], json.loads(json.dumps(record))))
        if self.effects is not None:
            self.marks.append(len(_starts(self.effects)))
        return record

    async def write_stream_async(self, key: str, value: Any) -> None:
        self.stream.append(json.loads(json.dumps(value)))


@pytest.fixture
def effects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "effects.jsonl"
    monkeypatch.setenv("SG_EFFECTS", str(path))
    return path


def _starts(path: Path) -> list[str]:
    if not path.exists():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [line["task"] for line in lines if line["what"] != "done"]


async def _run(
    graph: AgentGraph,
    given: Any,
    answers: list[Any] = (),  # type: ignore[assignment]
) -> tuple[GraphResult, Publisher]:
    """The run as the workflow makes it: the runner installed, a publishing store."""
    compiled = graph.compile()
    publisher = Publisher()
    store = PublishingStore(publisher)
    runner = DBOSTaskRunner(compiled.serializer, publisher)
    with running_tasks_with(runner):
        result = await compiled.arun(
            given, run_id="replayed", checkpoint_store=store, observers=[publisher]
        )
        for answer in answers:
            assert result.interrupt_id is not None
            result = await compiled.aresume(
                result.interrupt_id, answer, checkpoint_store=store, observers=[publisher]
            )
    await publisher.flush()
    return result, publisher


def _same(a: GraphResult, b: GraphResult) -> None:
    assert dict(a.state.data) == dict(b.state.data)
    assert (a.steps, a.stop_reason, a.quality) == (b.steps, b.stop_reason, b.quality)
    assert a.state.errors == b.state.errors
    assert len(a.state.history) == len(b.state.history)
    assert a.total_usage == b.total_usage


CASES = {
    "three": (graphs.three, {"trail": []}, []),
    "fanout": (graphs.fanout, {}, []),
    "agents": (graphs.agents, "tides", []),  # an llm_decide edge: a decision step
    "nested": (graphs.nested, {"trail": []}, []),
    "skipping": (graphs.skipping, {"trail": []}, []),  # a failure absorbed by SKIP
    "approval": (graphs.approval, {"topic": "tides"}, ["yes"]),  # an interrupt
}


@pytest.mark.parametrize("name", sorted(CASES))
async def test_a_full_replay_runs_nothing_and_ends_the_same(
    name: str, effects: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph, given, answers = CASES[name]
    first = FakeDBOS()
    monkeypatch.setattr(_runner, "DBOS", first)
    original, _ = await _run(graph, given, answers)
    ran = _starts(effects)
    again = FakeDBOS(first.recorded, replay=len(first.recorded))
    monkeypatch.setattr(_runner, "DBOS", again)
    replayed, _ = await _run(graph, given, answers)
    _same(replayed, original)
    assert _starts(effects) == ran, "a replayed step ran its node again"
    assert again.calls == first.calls


@pytest.mark.parametrize("name", ["three", "fanout", "approval", "skipping", "agents"])
async def test_a_replay_cut_short_goes_on_live_and_ends_the_same(
    name: str, effects: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph, given, answers = CASES[name]
    first = FakeDBOS(effects=effects)
    monkeypatch.setattr(_runner, "DBOS", first)
    original, _ = await _run(graph, given, answers)
    ran = _starts(effects)
    sequential = name != "fanout"  # branches' executions interleave across steps
    for cut in range(1, len(first.recorded)):
        before = len(_starts(effects))
        partial = FakeDBOS(first.recorded, replay=cut)
        monkeypatch.setattr(_runner, "DBOS", partial)
        replayed, _ = await _run(graph, given, answers)
        _same(replayed, original)
        rerun = _starts(effects)[before:]
        if sequential:
            # Exactly what ran after the cut runs again; a generator node that asked
            # starts over when answered, as it does when resumed in another process.
            expected = ran[first.marks[cut - 1] :]
            assert [t for t in rerun if not t.endswith(":ask")] == [
                t for t in expected if not t.endswith(":ask")
            ], (cut, rerun, expected)
        else:
            assert not Counter(rerun) - Counter(ran), "a task ran that the first run did not"
            assert len(rerun) < len(ran)


async def test_events_written_twice_are_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    first = FakeDBOS()
    monkeypatch.setattr(_runner, "DBOS", first)
    await _run(graphs.three, {"trail": []})
    items = first.stream
    numbers = [item["from"] + i for item in items for i in range(len(item["events"]))]
    assert numbers == list(range(len(numbers)))  # numbered in order, no gap
    kinds = [event["event"] for item in items for event in item["events"]]
    assert kinds[0] == "RunStarted"
    assert kinds.count("NodeStarted") == 3
