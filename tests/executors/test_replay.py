"""Replay without a database: the DBOS task runner given recorded steps rebuilds the same run.

A stand-in for DBOS numbers each step as DBOS does (at the call, or when a
branch's step is reserved), records its JSON record the first time, and
hands it back on a replay without awaiting anything, so replayed steps
return in another order than they first ran. A replay of every step, or of
the first k steps followed by live execution, must end in the same state,
with the same steps, errors, events and checkpoints as seen on the stream,
and run no recorded node again.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import random
from pathlib import Path
from typing import Any

import pytest

from selectgraph import END, AgentGraph, GraphResult, NodeContext, Scatter, append
from selectgraph.core._run_errors import BranchError
from selectgraph.executors.dbos import _runner
from selectgraph.executors.dbos._runner import DBOSTaskRunner, Publisher, PublishingStore
from selectgraph.persistence._checkpoint import checkpoint_ids_from, replayable_ids
from selectgraph.runtime._tasks import running_tasks_with
from tests.executors import graphs
from tests.executors.graphs import record, work


class FakeReservation:
    def __init__(self, fake: FakeDBOS, index: int) -> None:
        self.fake, self.index = fake, index

    async def run_async(self, options: dict[str, Any], func: Any) -> Any:
        return await self.fake.at(self.index, options, func)


class FakeDBOS:
    """Steps recorded as JSON the first time, returned from the record on replay."""

    def __init__(
        self,
        recorded: dict[int, tuple[str, Any]] | None = None,
        replay: int = 0,
        effects: Path | None = None,
    ) -> None:
        self.recorded = dict(recorded or {})
        self.replay = replay  # steps numbered below this return their record, if they have one
        self.calls = 0
        self.stream: list[dict[str, Any]] = []
        self.effects = effects
        self.marks: dict[int, int] = {}
        """For each step that ran: how many node starts the effects file held after it."""
        self.stream_marks: dict[int, int] = {}
        """For each step that ran: how many stream items were written when it ended."""
        self.jitter = random.Random(len(self.recorded) * 7919 + replay)

    def reserve_step(self) -> FakeReservation:
        self.calls += 1
        return FakeReservation(self, self.calls - 1)

    async def run_step_async(self, options: dict[str, Any], func: Any) -> Any:
        self.calls += 1
        return await self.at(self.calls - 1, options, func)

    async def at(self, index: int, options: dict[str, Any], func: Any) -> Any:
        if index < self.replay and index in self.recorded:
            name, found = self.recorded[index]
            assert name == options["name"], "a replay must meet each step under its own id"
            # DBOS reads a record on a thread: replayed steps come back in any order.
            await asyncio.sleep(self.jitter.uniform(0, 0.004))
            return json.loads(json.dumps(found))
        result = await func()
        self.recorded[index] = (options["name"], json.loads(json.dumps(result)))
        if self.effects is not None:
            self.marks[index] = len(_starts(self.effects))
        self.stream_marks[index] = len(self.stream)
        return result

    async def write_stream_async(self, key: str, value: Any) -> None:
        self.stream.append(json.loads(json.dumps(value)))


@pytest.fixture
def effects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "effects.jsonl"
    monkeypatch.setenv("SG_EFFECTS", str(path))
    return path


def _step_of(task: str) -> str:
    """The step an execution ran in: ``/2:b`` in node:b, ``plan:1/2:x`` in branch:plan:1."""
    if task.startswith("/"):
        return "node:" + task.split(":", 1)[1]
    return "branch:" + task.split("/", 1)[0]


def _starts(path: Path) -> list[str]:
    if not path.exists():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [line["task"] for line in lines if line["what"] != "done"]


async def _run(
    graph: AgentGraph,
    given: Any,
    answers: list[Any] = (),  # type: ignore[assignment]
) -> GraphResult | BaseException:
    """The run as the workflow makes it: the runner installed, a publishing store."""
    compiled = graph.compile()
    publisher = Publisher()
    store = PublishingStore(publisher)
    runner = DBOSTaskRunner(compiled.serializer, publisher)
    ids = replayable_ids(dt.datetime(2026, 11, 25, tzinfo=dt.UTC), "replayed")
    with running_tasks_with(runner), checkpoint_ids_from(ids):
        try:
            result = await compiled.arun(
                given, run_id="replayed", checkpoint_store=store, observers=[publisher]
            )
            for answer in answers:
                assert result.interrupt_id is not None
                result = await compiled.aresume(
                    result.interrupt_id, answer, checkpoint_store=store, observers=[publisher]
                )
        except Exception as error:
            await publisher.flush()
            return error
    await publisher.flush()
    return result


def _timeless(value: Any) -> Any:
    """``value`` with every float (durations, in these graphs) set to 0."""
    if isinstance(value, float):
        return 0.0
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    return value


def _view(items: list[dict[str, Any]]) -> tuple[list[str], dict[str, Any]]:
    """What a reader of the stream sees: events by number (once each), checkpoints by id."""
    events: dict[int, str] = {}
    checkpoints: dict[str, Any] = {}
    for item in items:
        for offset, event in enumerate(item["events"]):
            events.setdefault(item["from"] + offset, f"{event['event']} {event.get('node', '')}")
        for raw in item["checkpoints"]:
            # Times differ between executions (the history holds each node's duration),
            # and so does the checksum over them.
            kept = _timeless({k: v for k, v in raw.items() if k not in ("created_at", "crc")})
            assert checkpoints.setdefault(raw["checkpoint_id"], kept) == kept
    assert sorted(events) == list(range(len(events))), "a gap in the event numbers"
    return [events[n] for n in sorted(events)], checkpoints


def _same(a: GraphResult | BaseException, b: GraphResult | BaseException) -> None:
    if isinstance(a, BaseException) or isinstance(b, BaseException):
        assert type(a) is type(b)
        assert str(a) == str(b)
        return
    assert dict(a.state.data) == dict(b.state.data)
    assert (a.steps, a.stop_reason, a.quality) == (b.steps, b.stop_reason, b.quality)
    assert a.state.errors == b.state.errors
    assert len(a.state.history) == len(b.state.history)
    assert a.total_usage == b.total_usage
    assert a.checkpoint_id == b.checkpoint_id


# ------------------------------------------------- a fan-out that fails in part
async def _spread(state: Any, context: NodeContext) -> dict[str, Any]:
    await work(context, 0.0)
    return {}


def _targets(state: Any) -> list[Scatter]:
    return [Scatter("item", {"i": i}) for i in range(4)]


async def _item(state: Any, context: NodeContext) -> dict[str, Any]:
    record(context)
    i = state.data["i"]
    await asyncio.sleep((0.001, 0.01, 0.03, 0.03)[i])  # 0 frees its slot first; 1 fails next
    if i == 1:
        raise ValueError("item 1 is broken")
    return {"done": [i]}


def _partial(failure_mode: str) -> AgentGraph:
    graph = AgentGraph(f"partial_{failure_mode}", reducers={"done": append})
    graph.add_node("spread", _spread)
    graph.add_conditional_edge(
        "spread",
        _targets,
        max_concurrency=2,
        failure_mode=failure_mode,  # type: ignore[arg-type]
    )
    graph.add_node("item", _item, next_node="after")
    graph.add_node("after", _spread, next_node=END)
    graph.add_edge("spread", "after", on="failure")
    return graph


CASES = {
    "three": (graphs.three, {"trail": []}, []),
    "fanout": (graphs.fanout, {}, []),
    "agents": (graphs.agents, "tides", []),  # an llm_decide edge: a decision step
    "nested": (graphs.nested, {"trail": []}, []),
    "skipping": (graphs.skipping, {"trail": []}, []),  # a failure absorbed by SKIP
    "failing": (graphs.failing, {"trail": []}, []),  # a failure that ends the run
    "approval": (graphs.approval, {"topic": "tides"}, ["yes"]),  # an interrupt
    "continue_others": (_partial("continue_others"), {}, []),
    "fail_all": (_partial("fail_all"), {}, []),  # branches cancelled mid-flight
}
SEQUENTIAL = {"three", "skipping", "failing", "approval", "agents", "nested"}
"""Graphs whose tasks run one at a time, so the executions after a cut are known exactly."""


@pytest.mark.parametrize("name", sorted(CASES))
async def test_a_full_replay_runs_nothing_and_ends_the_same(
    name: str, effects: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph, given, answers = CASES[name]
    first = FakeDBOS()
    monkeypatch.setattr(_runner, "DBOS", first)
    original = await _run(graph, given, answers)
    ran = _starts(effects)
    again = FakeDBOS(first.recorded, replay=first.calls)
    monkeypatch.setattr(_runner, "DBOS", again)
    replayed = await _run(graph, given, answers)
    _same(replayed, original)
    recorded = {step for step, _ in first.recorded.values()}
    rerun = _starts(effects)[len(ran) :]
    # Only a task the first execution never completed (a branch fail_all cancelled) may run.
    assert [task for task in rerun if _step_of(task) in recorded] == []
    assert again.calls == first.calls
    # The replay writes only what its first execution left for the end.
    assert _view(first.stream) == _view(first.stream + again.stream)


@pytest.mark.parametrize("name", sorted(CASES))
async def test_a_replay_cut_short_goes_on_live_and_ends_the_same(
    name: str, effects: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph, given, answers = CASES[name]
    first = FakeDBOS(effects=effects)
    monkeypatch.setattr(_runner, "DBOS", first)
    original = await _run(graph, given, answers)
    ran = _starts(effects)
    whole = _view(first.stream)
    for cut in sorted(first.recorded)[1:]:
        before = len(_starts(effects))
        partial = FakeDBOS(first.recorded, replay=cut)
        monkeypatch.setattr(_runner, "DBOS", partial)
        replayed = await _run(graph, given, answers)
        _same(replayed, original)
        rerun = _starts(effects)[before:]
        last = max(index for index in first.recorded if index < cut)
        if name in SEQUENTIAL:
            # Exactly what ran after the cut runs again; a generator node that asked
            # starts over when answered, as it does when resumed in another process.
            expected = ran[first.marks[last] :]
            assert [t for t in rerun if not t.endswith(":ask")] == [
                t for t in expected if not t.endswith(":ask")
            ], (cut, rerun, expected)
        else:
            replayed_steps = {step for i, (step, _) in first.recorded.items() if i < cut}
            again = [task for task in rerun if _step_of(task) in replayed_steps]
            assert again == [], f"recorded tasks ran again after a cut at {cut}"
        # What a reader sees: the first execution's items up to the cut, then the replay's.
        seen = _view(first.stream[: first.stream_marks[last]] + partial.stream)
        if name in SEQUENTIAL:
            assert seen == whole, cut
        else:  # concurrent branches' events may come in another order; none lost or doubled
            assert sorted(seen[0]) == sorted(whole[0]), cut
            assert seen[1] == whole[1], cut


async def test_the_stream_numbers_every_event_once(monkeypatch: pytest.MonkeyPatch) -> None:
    first = FakeDBOS()
    monkeypatch.setattr(_runner, "DBOS", first)
    await _run(graphs.three, {"trail": []})
    events, checkpoints = _view(first.stream)
    assert events[0] == "RunStarted "
    assert [e for e in events if e.startswith("NodeStarted")] == [
        "NodeStarted a",
        "NodeStarted b",
        "NodeStarted c",
    ]
    assert events[-1] == "RunFinished "
    assert len(checkpoints) == 5  # input, after a, b, c, end


def test_a_replayed_fan_out_raises_what_the_first_did(effects: Path) -> None:
    assert isinstance(BranchError("x", branch="b", node="n"), Exception)
