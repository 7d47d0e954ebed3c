"""The checkpoint store contract, run against every store (memory, file, SQLite, PostgreSQL)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import math
import signal
import subprocess
import sys
import uuid
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from pydantic import BaseModel

from selectgraph import GraphState, Message, NodeResult, ToolCall
from selectgraph.core._errors import StateSerializationError
from selectgraph.core._serialization import StateSerializer
from selectgraph.persistence import (
    Checkpoint,
    CheckpointChain,
    CheckpointConflict,
    CheckpointDecodeError,
    CheckpointNotFound,
    CheckpointStore,
    new_checkpoint_id,
)
from tests.persistence.conftest import Harness

ROOT = Path(__file__).resolve().parents[2]


class Mood(Enum):
    """An enum stored in the state."""

    CALM = "calm"
    BUSY = "busy"


class Address(BaseModel):
    """A nested Pydantic model."""

    city: str
    lines: tuple[str, ...] = ()


class Customer(BaseModel):
    """A model holding another model, an enum and a datetime."""

    name: str
    address: Address
    mood: Mood
    since: dt.datetime


@dataclass(frozen=True)
class Point:
    """A frozen dataclass (usable in sets)."""

    x: int
    y: int


SERIALIZER = StateSerializer(allowed_types=[Mood, Address, Customer, Point])


def rich_state() -> GraphState:
    """A state holding every kind of value the serializer supports."""
    when = dt.datetime(2026, 11, 23, 2, 30, 15, 123456, tzinfo=dt.UTC)
    return GraphState(
        messages=[
            Message.user("Plan a trip"),
            Message.assistant(
                "calling a tool",
                tool_calls=(ToolCall(id="c1", name="search", arguments={"q": "Lisbon"}),),
            ),
            Message.tool("c1", "sunny"),
        ],
        data={
            "customer": Customer(
                name="Ana",
                address=Address(city="Lisbon", lines=("Rua 1", "2º")),
                mood=Mood.BUSY,
                since=when,
            ),
            "mood": Mood.CALM,
            "raw": b"\x00\xffbytes",
            "when": when,
            "day": dt.date(2026, 11, 23),
            "at": dt.time(2, 30),
            "took": dt.timedelta(days=1, seconds=5, microseconds=7),
            "price": Decimal("19.99"),
            "id": uuid.UUID("12345678-1234-5678-1234-567812345678"),
            "path": PurePosixPath("/tmp/x"),
            "pair": (1, "two"),
            "tags": {"a", "b"},
            "frozen": frozenset({Point(1, 2)}),
            "by_int": {1: "one", (2, 3): "tuple key"},
            "huge": 10**5000,
            "inf": math.inf,
            "unicode": "ação ✓ 🚀",
            "nested": {"list": [1, 2.5, None, True, {"deep": ["x"]}]},
        },
        current_node="plan",
        history=[
            (
                "plan",
                NodeResult(
                    node="plan", step=1, visit=1, outcome="success", output={"mood": Mood.CALM}
                ),
            ),
        ],
        metadata={"request_id": "req-1", "started": when},
        errors=[{"node": "x", "message": "boom"}],
    )


def checkpoint(
    run_id: str, version: int, values: dict[str, Any] | None = None, **fields: Any
) -> Checkpoint:
    """A snapshot checkpoint of ``run_id`` at ``version``."""
    return Checkpoint(
        run_id=run_id,
        checkpoint_id=fields.pop("checkpoint_id", new_checkpoint_id()),
        version=version,
        step=version,
        values=values if values is not None else {"data": {"v": version}},
        **fields,
    )


def save_run(store: CheckpointStore, run_id: str, count: int) -> list[Checkpoint]:
    """Save ``count`` snapshots of ``run_id`` in order and return them."""
    saved: list[Checkpoint] = []
    for version in range(1, count + 1):
        parent = saved[-1].checkpoint_id if saved else None
        saved.append(checkpoint(run_id, version, parent_id=parent))
        store.save(saved[-1], expected_version=version - 1)
    return saved


def ids(checkpoints: list[Checkpoint]) -> list[str]:
    return [c.checkpoint_id for c in checkpoints]


# ----------------------------------------------------------------- round trips


def test_every_store_implements_the_protocol(harness: Harness) -> None:
    assert isinstance(harness.store, CheckpointStore)


def test_every_value_type_round_trips(harness: Harness) -> None:
    state = rich_state()
    saved = checkpoint(
        "r1",
        1,
        state.to_dict(serializer=SERIALIZER),
        next=[{"node": "review", "task_id": "t-1"}],
        pending_writes={"t-0": [{"key": "draft", "value": "hello"}]},
        interrupts={"t-0:0": {"prompt": "ok?", "payload": {"n": 1}, "answer": None}},
        metadata={"node": "plan", "usage": {"tokens": 12}},
    )
    harness.store.save(saved, expected_version=0)
    loaded = harness.store.load(saved.checkpoint_id)
    assert loaded == saved
    restored = GraphState.from_dict(loaded.values, serializer=SERIALIZER)
    assert restored == state
    assert restored.data["customer"].address.lines == ("Rua 1", "2º")
    assert type(restored.data["pair"]) is tuple
    assert harness.store.load_state(saved.checkpoint_id) == saved.values


async def test_async_methods_round_trip(harness: Harness) -> None:
    store = harness.store
    first = checkpoint("ra", 1)
    await store.asave(first, expected_version=0)
    assert await store.aload(first.checkpoint_id) == first
    assert await store.aload_state(first.checkpoint_id) == first.values
    assert ids(await store.alist("ra")) == [first.checkpoint_id]
    assert await store.ahead("ra") == first
    await store.aput_writes("ra", first.checkpoint_id, "t", [1])
    assert (await store.aload(first.checkpoint_id)).pending_writes == {"t": [1]}
    assert await store.adelete(first.checkpoint_id) is True
    assert await store.adelete_run("ra") == 0


async def test_stores_are_context_managers(durable: Harness) -> None:
    saved = checkpoint("ctx", 1)
    with durable.reopen() as store:
        store.save(saved, expected_version=0)
    async with durable.reopen() as store:
        assert await store.aload(saved.checkpoint_id) == saved


async def test_sync_twins_work_inside_a_running_loop(harness: Harness) -> None:
    asyncio.get_running_loop()  # this test runs in one
    saved = checkpoint("loop", 1)
    harness.store.save(saved, expected_version=0)
    assert harness.store.load(saved.checkpoint_id) == saved


def test_deltas_rebuild_every_state(harness: Harness) -> None:
    chain = CheckpointChain("d", max_deltas=3)
    states = []
    for step in range(8):
        state = GraphState(
            messages=[Message.user(f"m{i}") for i in range(step + 1)],
            data={"n": step, "fixed": "x" * 5000, **({"gone": 1} if step < 4 else {})},
            history=[
                ("n", NodeResult(node="n", step=i, visit=i, outcome="success"))
                for i in range(1, step + 1)
            ],
        ).to_dict()
        made = chain.next(step=step, state=state)
        harness.store.save(made, expected_version=made.version - 1)
        states.append((made, state))
    kinds = [made.kind for made, _ in states]
    assert kinds == ["snapshot", "delta", "delta", "delta", "snapshot", "delta", "delta", "delta"]
    for made, state in states:
        assert harness.store.load(made.checkpoint_id) == made  # stored as the delta it is
        assert harness.store.load_state(made.checkpoint_id) == state


# ------------------------------------------------------------------- listing


def test_list_is_in_creation_order_with_limit_and_cursors(harness: Harness) -> None:
    store = harness.store
    saved = save_run(store, "run", 6)
    every = ids(saved)
    assert ids(store.list("run")) == every
    assert store.list("run") == saved
    assert ids(store.list("run", limit=2)) == every[:2]
    assert ids(store.list("run", limit=0)) == []
    assert ids(store.list("run", before=every[3], limit=0)) == []
    assert ids(store.list("run", after=every[1])) == every[2:]
    assert ids(store.list("run", after=every[1], limit=2)) == every[2:4]
    assert ids(store.list("run", before=every[4])) == every[:4]
    # before pages back in time: the newest `limit` before the cursor, oldest first.
    page = store.list("run", before=every[5], limit=2)
    assert ids(page) == every[3:5]
    assert ids(store.list("run", before=page[0].checkpoint_id, limit=2)) == every[1:3]
    assert ids(store.list("run", after=every[0], before=every[4])) == every[1:4]
    assert store.list("unknown run") == []


def test_list_cursor_must_belong_to_the_run(harness: Harness) -> None:
    save_run(harness.store, "a", 1)
    other = save_run(harness.store, "b", 1)
    with pytest.raises(CheckpointNotFound):
        harness.store.list("a", before=other[0].checkpoint_id)
    with pytest.raises(CheckpointNotFound):
        harness.store.list("a", after="no such id")
    with pytest.raises(ValueError, match="limit"):
        harness.store.list("a", limit=-1)


def test_runs_are_isolated(harness: Harness) -> None:
    store = harness.store
    a = save_run(store, "a", 3)
    b = save_run(store, "b", 2)
    assert ids(store.list("a")) == ids(a)
    assert ids(store.list("b")) == ids(b)
    assert store.head("a") == a[-1]
    assert store.head("b") == b[-1]
    assert store.head("c") is None
    # Each run has its own head version.
    store.save(checkpoint("b", 3), expected_version=2)
    with pytest.raises(CheckpointConflict):
        store.save(checkpoint("a", 3), expected_version=2)
    assert store.delete_run("b") == 3
    assert ids(store.list("a")) == ids(a)


def at(minute: int) -> dt.datetime:
    """A fixed time, ``minute`` minutes into the test day."""
    return dt.datetime(2026, 11, 23, tzinfo=dt.UTC) + dt.timedelta(minutes=minute)


def write(store: CheckpointStore, run_id: str, minute: int) -> Checkpoint:
    """Save the next checkpoint of ``run_id``, made at ``at(minute)``."""
    head = store.head(run_id)
    version = head.version + 1 if head is not None else 1
    made = checkpoint(run_id, version, created_at=at(minute))
    store.save(made, expected_version=version - 1)
    return made


def test_runs_lists_runs_by_their_newest_checkpoint(harness: Harness) -> None:
    store = harness.store
    assert store.runs() == []
    assert store.runs(limit=3) == []
    write(store, "a", 1)
    write(store, "b", 2)
    write(store, "a", 3)
    write(store, "c", 4)
    assert store.runs() == ["c", "a", "b"]
    write(store, "b", 5)  # written again: to the front
    assert store.runs() == ["b", "c", "a"]
    assert store.runs(limit=2) == ["b", "c"]
    assert store.runs(limit=3) == ["b", "c", "a"]
    assert store.runs(limit=10) == ["b", "c", "a"]
    assert store.runs(limit=None) == ["b", "c", "a"]
    assert store.runs(limit=0) == []
    # Another handle on the same storage sees the same.
    assert harness.reopen().runs() == ["b", "c", "a"]


def test_runs_made_at_the_same_time_are_in_run_id_order(harness: Harness) -> None:
    store = harness.store
    for run_id in ("b", "é", "B", "a", "A", "a b", "Z"):
        write(store, run_id, 7)
    write(store, "older", 1)
    write(store, "newer", 9)
    # Code point order, whatever the database's collation: "B" before "a", "é" last.
    assert store.runs() == ["newer", "A", "B", "Z", "a", "a b", "b", "é", "older"]
    assert store.runs(limit=3) == ["newer", "A", "B"]


def test_runs_ordered_by_checkpoint_time_not_id(harness: Harness) -> None:
    store = harness.store
    # Ids that sort against the times they were made: the time decides.
    for run_id, checkpoint_id, minute in (("x", "zzz", 1), ("y", "aaa", 2)):
        made = checkpoint(run_id, 1, checkpoint_id=checkpoint_id, created_at=at(minute))
        store.save(made, expected_version=0)
    # Ids made by new_checkpoint_id, whose time is the checkpoint's (SQLite stores it once).
    chain = CheckpointChain("z")
    made = chain.next(step=1, state={"data": {}})
    assert made.created_at > at(2)
    store.save(made, expected_version=0)
    assert store.runs() == ["z", "y", "x"]


@pytest.mark.parametrize("limit", [-1, 1.5, True, "2"])
async def test_runs_refuses_a_bad_limit(harness: Harness, limit: Any) -> None:
    write(harness.store, "a", 1)
    with pytest.raises(ValueError, match="limit"):
        harness.store.runs(limit=limit)
    with pytest.raises(ValueError, match="limit"):
        await harness.store.aruns(limit=limit)


def test_runs_leaves_out_deleted_runs_and_checkpoints(harness: Harness) -> None:
    store = harness.store
    a = [write(store, "a", 1), write(store, "a", 5)]
    write(store, "b", 3)
    write(store, "c", 4)
    write(store, "gone", 6)
    assert store.runs() == ["gone", "a", "c", "b"]
    assert store.delete_run("gone") == 1
    assert store.runs() == ["a", "c", "b"]
    # Deleting a run's head: its place is now that of its newest remaining checkpoint.
    assert store.delete(a[1].checkpoint_id) is True
    assert store.runs() == ["c", "b", "a"]
    # A run whose checkpoints were all deleted one by one is not listed either.
    assert store.delete(a[0].checkpoint_id) is True
    assert store.runs() == ["c", "b"]
    assert store.delete_run("b") == 1
    assert store.delete_run("c") == 1
    assert store.runs() == []
    # A deleted run written again is listed again.
    write(store, "gone", 7)
    assert store.runs() == ["gone"]


async def test_aruns_agrees_with_runs(harness: Harness) -> None:
    store = harness.store
    assert await store.aruns() == []
    for run_id, minute in (("p", 1), ("q", 2), ("r", 3), ("p", 4)):
        write(store, run_id, minute)
    assert await store.aruns() == store.runs() == ["p", "r", "q"]
    for limit in (0, 1, 2, 5, None):
        assert await store.aruns(limit=limit) == store.runs(limit=limit)
    await store.adelete_run("r")
    assert await store.aruns() == store.runs() == ["p", "q"]


# ------------------------------------------------------------------- delete


def test_delete_one_keeps_every_other_checkpoint_loadable(harness: Harness) -> None:
    store = harness.store
    chain = CheckpointChain("run", max_deltas=2)
    expected: dict[str, dict[str, Any]] = {}
    made = []
    for step in range(7):
        state = {"data": {"n": step, "pad": "p" * 300}, "messages": list(range(step))}
        cp = chain.next(step=step, state=state)
        store.save(cp, expected_version=cp.version - 1)
        expected[cp.checkpoint_id] = state
        made.append(cp)
    assert [c.kind for c in made] == [
        "snapshot",
        "delta",
        "delta",
        "snapshot",
        "delta",
        "delta",
        "snapshot",
    ]
    # A delta in the middle, a snapshot, then the head.
    for victim in (made[1], made[3], made[6]):
        assert store.delete(victim.checkpoint_id) is True
        del expected[victim.checkpoint_id]
        with pytest.raises(CheckpointNotFound):
            store.load(victim.checkpoint_id)
        assert ids(store.list("run")) == list(expected)
        for checkpoint_id, state in expected.items():
            assert store.load_state(checkpoint_id) == state
    assert store.delete(made[1].checkpoint_id) is False
    assert store.head("run") == store.load(made[5].checkpoint_id)
    # The head version does not go back: a writer based on version 6 still conflicts.
    with pytest.raises(CheckpointConflict) as caught:
        store.save(checkpoint("run", 7), expected_version=6)
    assert caught.value.actual_version == 7
    store.save(checkpoint("run", 8), expected_version=7)


def test_a_rewritten_delta_keeps_its_writes_and_interrupts(harness: Harness) -> None:
    store = harness.store
    first = checkpoint("run", 1)
    middle = Checkpoint(
        run_id="run",
        checkpoint_id="mid",
        parent_id=first.checkpoint_id,
        version=2,
        step=2,
        kind="delta",
        values={"set": [["/data/m", 1]]},
    )
    last = Checkpoint(
        run_id="run",
        checkpoint_id="last",
        parent_id="mid",
        version=3,
        step=3,
        kind="delta",
        values={"set": [["/data/l", 2]]},
        pending_writes={"inline": [1]},
        interrupts={"i": {"answer": "yes"}},
    )
    for saved in (first, middle, last):
        store.save(saved, expected_version=saved.version - 1)
    store.put_writes("run", "last", "later", [2])
    assert store.delete("mid") is True
    rewritten = store.load("last")
    assert rewritten.pending_writes == {"inline": [1], "later": [2]}
    assert rewritten.interrupts == {"i": {"answer": "yes"}}
    assert rewritten.parent_id == first.checkpoint_id
    assert store.load_state("last") == {"data": {"v": 1, "m": 1, "l": 2}}


def test_delete_run(harness: Harness) -> None:
    store = harness.store
    saved = save_run(store, "gone", 3)
    store.put_writes("gone", saved[-1].checkpoint_id, "t", [1])
    kept = save_run(store, "kept", 1)
    assert store.delete_run("gone") == 3
    assert store.list("gone") == []
    assert store.head("gone") is None
    for cp in saved:
        with pytest.raises(CheckpointNotFound):
            store.load(cp.checkpoint_id)
    assert store.delete_run("gone") == 0
    # A stale writer of the deleted run conflicts; a fresh start works.
    with pytest.raises(CheckpointConflict):
        store.save(checkpoint("gone", 4), expected_version=3)
    store.save(checkpoint("gone", 1), expected_version=0)
    assert store.list("kept") == kept


# ------------------------------------------------------------- bad requests


def test_unknown_id_raises_not_found(harness: Harness) -> None:
    for call in (harness.store.load, harness.store.load_state):
        with pytest.raises(CheckpointNotFound) as caught:
            call("missing")
        assert caught.value.checkpoint_id == "missing"
        assert isinstance(caught.value, ValueError)  # seed 004's load raises ValueError
    assert harness.store.delete("missing") is False


def test_save_refuses_inconsistent_arguments(harness: Harness) -> None:
    store = harness.store
    first = checkpoint("r", 1)
    store.save(first, expected_version=0)
    with pytest.raises(ValueError, match="version 3"):
        store.save(checkpoint("r", 3), expected_version=1)
    with pytest.raises(ValueError, match="expected_version"):
        store.save(checkpoint("r", 1), expected_version=-1)
    with pytest.raises(ValueError, match="already stored"):
        store.save(checkpoint("r", 2, checkpoint_id=first.checkpoint_id), expected_version=1)
    assert store.list("r") == [first]
    assert store.head("r") == first


def test_a_value_that_is_not_json_fails_at_save_naming_its_path(harness: Harness) -> None:
    bad = checkpoint("r", 1, {"data": {"ok": [1, {"when": dt.date(2026, 1, 1)}]}})
    with pytest.raises(StateSerializationError, match=r"values\.data\.ok\[1\]\.when"):
        harness.store.save(bad, expected_version=0)
    assert harness.store.list("r") == []
    assert harness.store.head("r") is None
    harness.store.save(checkpoint("r", 1), expected_version=0)


# ------------------------------------------------------------ single writer


def test_a_stale_write_conflicts_and_writes_nothing(harness: Harness) -> None:
    store = harness.store
    saved = save_run(store, "r", 2)
    with pytest.raises(CheckpointConflict) as caught:
        store.save(checkpoint("r", 2, {"data": {"stale": True}}), expected_version=1)
    assert (caught.value.run_id, caught.value.expected_version, caught.value.actual_version) == (
        "r",
        1,
        2,
    )
    assert store.list("r") == saved


def test_a_retried_save_that_already_committed_succeeds(harness: Harness) -> None:
    store = harness.store
    first, second = save_run(store, "r", 2)
    store.save(second, expected_version=1)  # the reply was lost; the step runs again
    store.save(first, expected_version=0)
    assert store.list("r") == [first, second]
    # Another checkpoint at that version is a conflict, as is the same id elsewhere.
    with pytest.raises(CheckpointConflict):
        store.save(checkpoint("r", 2), expected_version=1)
    with pytest.raises(CheckpointConflict):
        store.save(second.replace(run_id="other", version=2), expected_version=1)
    with pytest.raises(ValueError, match="already stored"):
        store.save(second.replace(version=3), expected_version=2)


async def test_two_concurrent_saves_exactly_one_wins(harness: Harness) -> None:
    store = harness.store
    first = checkpoint("race", 1)
    await store.asave(first, expected_version=0)
    rivals = [
        checkpoint("race", 2, {"data": {"who": who}}, parent_id=first.checkpoint_id)
        for who in ("a", "b")
    ]
    outcomes = await asyncio.gather(
        *(store.asave(rival, expected_version=1) for rival in rivals), return_exceptions=True
    )
    conflicts = [o for o in outcomes if isinstance(o, CheckpointConflict)]
    assert len(conflicts) == 1
    assert outcomes.count(None) == 1
    winner = rivals[outcomes.index(None)]
    assert await store.ahead("race") == winner
    assert ids(await store.alist("race")) == [first.checkpoint_id, winner.checkpoint_id]


async def test_two_first_saves_of_a_new_run_exactly_one_wins(harness: Harness) -> None:
    rivals = [checkpoint("fresh", 1), checkpoint("fresh", 1)]
    outcomes = await asyncio.gather(
        *(harness.store.asave(r, expected_version=0) for r in rivals), return_exceptions=True
    )
    assert sorted(type(o).__name__ for o in outcomes) == ["CheckpointConflict", "NoneType"]
    assert len(await harness.store.alist("fresh")) == 1


def test_two_processes_racing_exactly_one_wins(durable: Harness, tmp_path: Path) -> None:
    durable.store.save(checkpoint("race", 1, checkpoint_id="first"), expected_version=0)
    go = tmp_path / "go"
    racers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.persistence._worker",
                "race",
                json.dumps(durable.spec),
                str(go),
                name,
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    go.touch()
    results = [racer.communicate(timeout=60)[0].strip() for racer in racers]
    assert all(racer.returncode == 0 for racer in racers)
    assert sorted(results) == ["conflict", "won"]
    winner = "ab"[results.index("won")]
    store = durable.reopen()
    head = store.head("race")
    assert head is not None
    assert head.checkpoint_id == f"racer-{winner}"
    assert head.values == {"data": {"winner": winner}}
    assert ids(store.list("race")) == ["first", f"racer-{winner}"]


def test_a_writer_killed_mid_save_leaves_every_committed_checkpoint(durable: Harness) -> None:
    writer = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.persistence._worker",
            "save_forever",
            json.dumps(durable.spec),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout is not None
    committed = [int(writer.stdout.readline()) for _ in range(5)]
    writer.send_signal(signal.SIGKILL)  # wherever it is: most likely inside a save
    writer.communicate(timeout=30)
    store = durable.reopen()
    listed = store.list("crash")
    assert len(listed) >= committed[-1]  # everything reported as saved is there
    assert [c.version for c in listed] == list(range(1, len(listed) + 1))
    for saved in listed:
        assert store.load(saved.checkpoint_id) == saved
        assert store.load_state(saved.checkpoint_id) == saved.values
    head = store.head("crash")
    assert head == listed[-1]
    # The run goes on from its last committed version, and only from there.
    with pytest.raises(CheckpointConflict):
        store.save(checkpoint("crash", head.version), expected_version=head.version - 1)
    store.save(checkpoint("crash", head.version + 1), expected_version=head.version)


# ------------------------------------------------------------ pending writes


def test_pending_writes_of_finished_tasks(harness: Harness) -> None:
    store = harness.store
    first, head = save_run(store, "r", 2)
    store.put_writes("r", head.checkpoint_id, "task-a", [{"k": "v"}, ["any", 1]])
    store.put_writes("r", head.checkpoint_id, "task-b", [])
    loaded = store.load(head.checkpoint_id)
    assert loaded.pending_writes == {"task-a": [{"k": "v"}, ["any", 1]], "task-b": []}
    assert store.head("r") == loaded
    assert store.list("r")[1] == loaded
    # The same task again replaces its record (a re-run task is idempotent).
    store.put_writes("r", head.checkpoint_id, "task-a", [2])
    assert store.load(head.checkpoint_id).pending_writes["task-a"] == [2]
    # Writes only go to the head: a stale worker's writes are refused.
    with pytest.raises(CheckpointConflict):
        store.put_writes("r", first.checkpoint_id, "task-c", [3])
    with pytest.raises(CheckpointNotFound):
        store.put_writes("other run", head.checkpoint_id, "task-c", [3])
    with pytest.raises(CheckpointNotFound):
        store.put_writes("r", "missing", "task-c", [3])
    with pytest.raises(StateSerializationError, match="task-c"):
        store.put_writes("r", head.checkpoint_id, "task-c", [{1, 2}])
    with pytest.raises(ValueError, match="task_id"):
        store.put_writes("r", head.checkpoint_id, "", [])
    assert store.load(first.checkpoint_id).pending_writes == {}
    assert set(store.load(head.checkpoint_id).pending_writes) == {"task-a", "task-b"}


# ------------------------------------------------------------ corrupt records


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        (b"{not json", "<record>"),
        (b"\xff\xfe", "<record>"),
        (b"[1, 2]", "<record>"),
    ],
)
def test_a_corrupt_record_raises_decode_error_naming_the_checkpoint(
    harness: Harness, raw: bytes, path: str
) -> None:
    saved = save_run(harness.store, "r", 2)
    victim = saved[0].checkpoint_id
    harness.corrupt(victim, raw)
    with pytest.raises(CheckpointDecodeError) as caught:
        harness.store.load(victim)
    assert caught.value.checkpoint_id == victim
    # The SQL stores know each row they wrote has a checksum: bytes without one fail it.
    assert caught.value.path == ("<checksum>" if harness.kind in ("sqlite", "postgres") else path)
    assert victim in str(caught.value)
    with pytest.raises(CheckpointDecodeError):
        harness.store.list("r")
    assert harness.store.load(saved[1].checkpoint_id) == saved[1]  # the others still load


def test_a_malformed_delta_raises_decode_error_naming_the_part(harness: Harness) -> None:
    first = checkpoint("r", 1)
    harness.store.save(first, expected_version=0)
    bad = Checkpoint(
        run_id="r",
        checkpoint_id="bad-delta",
        parent_id=first.checkpoint_id,
        version=2,
        step=2,
        kind="delta",
        values={"set": [["data/v", 1]]},
    )
    harness.store.save(bad, expected_version=1)
    with pytest.raises(CheckpointDecodeError) as caught:
        harness.store.load_state("bad-delta")
    assert caught.value.checkpoint_id == "bad-delta"
    assert caught.value.path == "values.set[0]"


def test_a_parent_loop_raises_decode_error(harness: Harness) -> None:
    for version, (me, parent) in enumerate([("x", "y"), ("y", "x")], start=1):
        looped = Checkpoint(
            run_id="r",
            checkpoint_id=me,
            parent_id=parent,
            version=version,
            step=version,
            kind="delta",
            values={},
        )
        harness.store.save(looped, expected_version=version - 1)
    with pytest.raises(CheckpointDecodeError):
        harness.store.load_state("y")


def test_save_wants_a_checkpoint(harness: Harness) -> None:
    with pytest.raises(TypeError, match="expected a Checkpoint"):
        harness.store.save({"run_id": "r"}, expected_version=0)  # type: ignore[arg-type]


def test_a_delta_whose_parent_is_missing_raises_decode_error(harness: Harness) -> None:
    orphan = Checkpoint(
        run_id="r",
        checkpoint_id="orphan",
        parent_id="never-saved",
        version=1,
        step=1,
        kind="delta",
        values={},
    )
    harness.store.save(orphan, expected_version=0)
    with pytest.raises(CheckpointDecodeError, match="never-saved") as caught:
        harness.store.load_state("orphan")
    assert caught.value.checkpoint_id == "orphan"
