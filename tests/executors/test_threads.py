"""Threads on the DBOS executor: conversations that continue, and double-texting.

The turn-taking rules first, on the thread tables alone (SQLite, fast). Then
(slow) against a real PostgreSQL with two worker processes: a conversation
continued run after run, and the four strategies, with inputs raced from
separate client processes. A run of ``chat`` waits in ``hold`` until the test
opens its gate, so every test knows which run is busy without timing anything.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from selectgraph import ThreadBusy, ThreadIdError
from selectgraph.executors import DBOSExecutor, RunCancelledError
from selectgraph.executors.dbos._threads import ThreadBook, ThreadGraphMismatch
from tests.executors.conftest import ROOT, Workers
from tests.executors.thread_graphs import chat


# ------------------------------------------------------------- the turn rules
@pytest.fixture
def book(tmp_path: Path) -> Iterator[ThreadBook]:
    tables = ThreadBook(sa.create_engine(f"sqlite:///{tmp_path / 'threads.sqlite'}"))
    try:
        yield tables
    finally:
        tables.close()


def _state(tag: str) -> dict[str, Any]:
    return {"state": {"data": {"tag": tag}}, "checkpoint": {"checkpoint_id": tag}}


def test_a_new_thread_takes_its_first_run_at_once(book: ThreadBook) -> None:
    admitted = book.admit("t", "r1", "chat", "reject", metadata={"user": "ann"})
    assert (admitted.seq, admitted.superseded, admitted.existed) == (1, (), False)
    assert book.take_turn("r1") == {"state": None, "seq": 1}
    thread = book.get_thread("t")
    assert thread is not None
    assert (thread.owner, thread.runs, thread.metadata) == ("r1", 1, {"user": "ann"})
    assert book.finish("r1", "done", _state("one")) == []
    thread = book.get_thread("t")
    assert thread is not None
    assert (thread.owner, thread.last_run, thread.busy) == (None, "r1", False)
    assert book.thread_state("t") == _state("one")
    # Admitting the same run again changes nothing.
    assert book.admit("t", "r1", "chat", "reject").existed


def test_reject_refuses_a_busy_thread_and_changes_nothing(book: ThreadBook) -> None:
    book.admit("t", "r1", "chat", "reject")
    with pytest.raises(ThreadBusy) as busy:
        book.admit("t", "r2", "chat", "reject", metadata={"user": "bob"})
    assert (busy.value.thread_id, busy.value.owner) == ("t", "r1")
    thread = book.get_thread("t")
    assert thread is not None
    assert (thread.runs, thread.metadata) == (1, {})
    assert [run.run_id for run in book.thread_runs("t")] == ["r1"]


def test_enqueued_inputs_take_their_turns_in_arrival_order(book: ThreadBook) -> None:
    book.admit("t", "r1", "chat", "reject")
    book.admit("t", "r2", "chat", "enqueue")
    book.admit("t", "r3", "chat", "enqueue")
    assert book.take_turn("r3") == {"wait": True}
    assert book.take_turn("r1")["seq"] == 1
    assert book.take_turn("r2") == {"wait": True}
    assert book.finish("r1", "done", _state("one")) == ["r2", "r3"]
    assert book.take_turn("r3") == {"wait": True}  # r2 came first
    assert book.take_turn("r2") == {"state": _state("one"), "seq": 2}
    assert book.finish("r2", "done", _state("two")) == ["r3"]
    assert book.take_turn("r3")["state"] == _state("two")
    assert [run.strategy for run in book.thread_runs("t")] == ["new", "enqueue", "enqueue"]


def test_interrupt_stops_the_running_run_and_goes_on_from_where_it_stopped(
    book: ThreadBook,
) -> None:
    book.admit("t", "r1", "chat", "reject")
    book.take_turn("r1")
    book.admit("t", "queued", "chat", "enqueue")
    assert not book.stopping("r1")
    admitted = book.admit("t", "r2", "chat", "interrupt")
    assert admitted.superseded == ("r1",)
    assert book.stopping("r1")
    assert book.take_turn("r2") == {"wait": True}  # until r1 has stopped
    assert book.finish("r1", "superseded", _state("half")) == ["r2", "queued"]
    assert book.take_turn("queued") == {"wait": True}  # the interrupting input goes first
    assert book.take_turn("r2")["state"] == _state("half")
    assert book.run_status("r1") == "superseded"


def test_rollback_discards_the_running_run_and_starts_from_before_it(book: ThreadBook) -> None:
    book.admit("t", "r0", "chat", "reject")
    book.take_turn("r0")
    book.finish("r0", "done", _state("before"))
    book.admit("t", "r1", "chat", "reject")
    book.take_turn("r1")
    assert book.admit("t", "r2", "chat", "rollback").superseded == ("r1",)
    assert book.take_turn("r2")["state"] == _state("before")  # at once
    book.finish("r1", "done", _state("discarded"))  # the rolled-back run ends: nothing kept
    assert book.run_status("r1") == "rolled_back"
    assert book.thread_state("t") == _state("before")


def test_a_cancelled_run_hands_its_thread_on(book: ThreadBook) -> None:
    book.admit("t", "r1", "chat", "reject")
    book.take_turn("r1")
    book.admit("t", "r2", "chat", "enqueue")
    assert book.cancelled("r1") == ["r2"]
    assert book.take_turn("r2") == {"state": None, "seq": 2}
    assert book.cancelled("r1") == []  # once
    book.admit("t", "r3", "chat", "enqueue")
    book.cancelled("r3")
    assert book.take_turn("r3") == {"gone": "cancelled"}


def test_bad_input_is_refused_naming_what_was_wrong(book: ThreadBook) -> None:
    with pytest.raises(ThreadIdError, match="cannot be stored"):
        book.admit("a|b", "r1", "chat", "reject")
    with pytest.raises(ValueError, match="multitask_strategy must be one of"):
        book.admit("t", "r1", "chat", "later")
    book.admit("t", "r1", "chat", "reject")
    with pytest.raises(ThreadGraphMismatch, match="conversation with graph 'chat', not 'other'"):
        book.admit("t", "r2", "other", "enqueue")
    with pytest.raises(ValueError, match="exists on thread 't', not 'u'"):
        book.admit("u", "r1", "chat", "reject")
    assert book.get_thread("nope") is None
    assert book.thread_runs("nope") == []


def test_threads_are_listed_newest_first_and_filtered_by_metadata(book: ThreadBook) -> None:
    book.admit("a", "ra", "chat", "reject", metadata={"user": "ann"})
    book.admit("b", "rb", "chat", "reject", metadata={"user": "bob"})
    book.admit("c", "rc", "chat", "reject", metadata={"user": "ann"}, ttl=60)
    assert [t.thread_id for t in book.list_threads()] == ["c", "b", "a"]
    assert [t.thread_id for t in book.list_threads(metadata={"user": "ann"})] == ["c", "a"]
    assert [t.thread_id for t in book.list_threads(limit=1)] == ["c"]
    listed = book.list_threads(limit=1)[0]
    assert listed.ttl == 60
    assert listed.expires_at is not None


# --------------------------------------------------- real workers (slow, PostgreSQL)
@pytest.fixture(scope="module")
def gates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gates")


@pytest.fixture(scope="module")
def pool(database: str, gates: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workers]:
    """Two workers serving every slow test of this module; runs of chat wait at their gate."""
    where = tmp_path_factory.mktemp("thread-workers")
    (where / "logs").mkdir()
    workers = Workers(database, where / "effects.jsonl", where / "logs")
    try:
        workers.start("threads-1", SG_GATES=str(gates))
        workers.start("threads-2", SG_GATES=str(gates))
        yield workers
    finally:
        workers.stop_all()


@pytest.fixture
def executor(database: str, pool: Workers) -> Iterator[DBOSExecutor]:
    chosen = DBOSExecutor(database, graphs={"chat": chat}, poll_interval=0.05)
    try:
        yield chosen
    finally:
        chosen.close()


def _open(gates: Path, *run_ids: str) -> None:
    for run_id in run_ids:
        (gates / run_id).touch()


def _wait_until(check: Any, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(0.02)


def _holding(pool: Workers, run_id: str) -> bool:
    return any(line["node"] == "hold" for line in pool.executions(run_id))


def _tag(name: str) -> str:
    return f"{name}-{time.monotonic_ns()}"


slow = pytest.mark.slow


@slow
def test_a_conversation_continues_run_after_run(executor: DBOSExecutor, gates: Path) -> None:
    thread = _tag("chat")
    first, second = _tag("first"), _tag("second")
    _open(gates, first, second)
    executor.start("chat", "hello", thread_id=thread, run_id=first, thread_metadata={"u": 1})
    one = executor.handle(first).result(timeout=60)
    executor.start("chat", "and again", thread_id=thread, run_id=second)
    two = executor.handle(second).result(timeout=60)
    assert one.state.data["heard"] == ["hello"]
    assert two.state.data["heard"] == ["hello", "and again"]
    assert two.state.data["replies"] == ["after 1 heard", "after 2 heard"]
    assert [m.text for m in two.state.messages] == ["hello", "and again"]
    assert [name for name, *_ in two.state.history] == ["ask", "hold", "reply"]  # its own
    found = executor.get_thread(thread)
    assert found is not None
    assert (found.runs, found.last_run, found.owner, found.metadata) == (2, second, None, {"u": 1})
    assert [run.run_id for run in executor.thread_runs(thread)] == [first, second]
    kept = executor.thread_state(thread)
    assert kept is not None
    assert kept.data["turns"] == 2
    assert thread in [t.thread_id for t in executor.list_threads(metadata={"u": 1})]


_RACER = """
import json, sys, time
from pathlib import Path
from selectgraph import ThreadBusy
from selectgraph.executors import DBOSExecutor
from tests.executors.thread_graphs import chat

url, thread, run_id, go = sys.argv[1:5]
executor = DBOSExecutor(url, graphs={"chat": chat})
executor.threads.get_thread(thread)  # connected before the start signal
Path(go + "." + run_id).touch()
while not Path(go).exists():
    time.sleep(0.001)
try:
    executor.start("chat", run_id, thread_id=thread, run_id=run_id)
    print(json.dumps({"won": run_id}))
except ThreadBusy as busy:
    print(json.dumps({"busy": run_id, "owner": busy.owner}))
executor.close()
"""


@slow
def test_of_two_processes_racing_for_a_thread_exactly_one_wins(
    executor: DBOSExecutor, database: str, gates: Path, tmp_path: Path
) -> None:
    for round_ in range(3):
        thread = _tag(f"race{round_}")
        go = tmp_path / f"go{round_}"
        racers = [f"{thread}-a", f"{thread}-b"]
        processes = [
            subprocess.Popen(
                [sys.executable, "-c", _RACER, database, thread, run_id, str(go)],
                cwd=ROOT,
                stdout=subprocess.PIPE,
                env=dict(os.environ, PYTHONPATH=str(ROOT)),
            )
            for run_id in racers
        ]
        ready = [Path(f"{go}.{run_id}") for run_id in racers]
        _wait_until(lambda: all(p.exists() for p in ready), "both racers are ready")  # noqa: B023
        go.touch()
        outcomes = [json.loads(p.communicate(timeout=60)[0]) for p in processes]
        winners = [o["won"] for o in outcomes if "won" in o]
        losers = [o for o in outcomes if "busy" in o]
        assert (len(winners), len(losers)) == (1, 1), outcomes
        assert losers[0]["owner"] == winners[0]
        assert [run.run_id for run in executor.thread_runs(thread)] == winners
        _open(gates, *racers)
        assert executor.handle(winners[0]).result(timeout=60).state.data["heard"] == winners


@slow
def test_enqueued_inputs_run_after_the_busy_run_in_arrival_order(
    executor: DBOSExecutor, pool: Workers, gates: Path
) -> None:
    thread = _tag("queue")
    runs = [_tag(f"q{i}") for i in range(3)]
    _open(gates, *runs[1:])
    executor.start("chat", "one", thread_id=thread, run_id=runs[0])
    _wait_until(lambda: _holding(pool, runs[0]), "the first run holds the thread")
    with pytest.raises(ThreadBusy):
        executor.start("chat", "refused", thread_id=thread)
    executor.start("chat", "two", thread_id=thread, run_id=runs[1], multitask_strategy="enqueue")
    executor.start("chat", "three", thread_id=thread, run_id=runs[2], multitask_strategy="enqueue")
    _wait_until(lambda: executor.handle(runs[2]).status() == "queued", "the last waits its turn")
    assert pool.executions(runs[1]) == pool.executions(runs[2]) == []
    _open(gates, runs[0])
    last = executor.handle(runs[2]).result(timeout=60)
    assert last.state.data["heard"] == ["one", "two", "three"]
    assert last.state.data["replies"] == ["after 1 heard", "after 2 heard", "after 3 heard"]
    assert [run.strategy for run in executor.thread_runs(thread)] == ["new", "enqueue", "enqueue"]


@slow
def test_interrupt_stops_the_running_run_at_its_next_node_and_goes_on_from_there(
    executor: DBOSExecutor, pool: Workers, gates: Path
) -> None:
    thread = _tag("interrupt")
    first, second = _tag("busy"), _tag("newer")
    _open(gates, second)
    executor.start("chat", "one", thread_id=thread, run_id=first)
    _wait_until(lambda: _holding(pool, first), "the first run is in hold")
    executor.start("chat", "two", thread_id=thread, run_id=second, multitask_strategy="interrupt")
    _open(gates, first)  # hold completes; the run stops before reply
    stopped = executor.handle(first).result(timeout=60)
    assert stopped.stop_reason == "superseded"
    assert stopped.state.data["heard"] == ["one"]  # what it completed is kept
    assert stopped.state.data["replies"] == []
    assert not any(line["node"] == "reply" for line in pool.executions(first))
    newer = executor.handle(second).result(timeout=60)
    assert newer.state.data["heard"] == ["one", "two"]
    assert newer.state.data["replies"] == ["after 2 heard"]
    found = executor.thread_runs(thread)
    assert (found[1].strategy, found[1].superseded) == ("interrupt", first)


@slow
def test_interrupt_ends_a_run_paused_on_a_question(executor: DBOSExecutor, gates: Path) -> None:
    thread = _tag("paused")
    first, second, third = _tag("ask"), _tag("after"), _tag("later")
    _open(gates, second, third)
    handle = executor.start("chat", "ask", thread_id=thread, run_id=first)
    paused = handle.result(timeout=60)
    assert paused.interrupted
    assert handle.status() == "interrupted"
    with pytest.raises(ThreadBusy):  # a paused run holds its thread
        executor.start("chat", "no", thread_id=thread, run_id=third)
    executor.start("chat", "two", thread_id=thread, run_id=second, multitask_strategy="interrupt")
    newer = executor.handle(second).result(timeout=60)
    assert newer.state.data["heard"] == ["two"]
    assert [m.text for m in newer.state.messages] == ["ask", "two"]
    ended = handle.result(timeout=60)
    assert (ended.stop_reason, ended.interrupts, handle.status()) == ("superseded", (), "done")


@slow
def test_rollback_cancels_the_running_run_and_starts_from_the_state_before_it(
    executor: DBOSExecutor, pool: Workers, gates: Path
) -> None:
    thread = _tag("rollback")
    base, doomed, fresh = _tag("base"), _tag("doomed"), _tag("fresh")
    _open(gates, base, fresh)
    executor.start("chat", "kept", thread_id=thread, run_id=base)
    executor.handle(base).result(timeout=60)
    executor.start("chat", "dropped", thread_id=thread, run_id=doomed)
    _wait_until(lambda: _holding(pool, doomed), "the doomed run is in hold")
    executor.start("chat", "instead", thread_id=thread, run_id=fresh, multitask_strategy="rollback")
    newer = executor.handle(fresh).result(timeout=60)
    assert newer.state.data["heard"] == ["kept", "instead"]
    assert [m.text for m in newer.state.messages] == ["kept", "instead"]
    _open(gates, doomed)
    with pytest.raises(RunCancelledError):
        executor.handle(doomed).result(timeout=60)
    kept = executor.thread_state(thread)
    assert kept is not None
    assert kept.data["heard"] == ["kept", "instead"]
    assert executor.threads.run_status(doomed) == "rolled_back"


@slow
def test_a_conversation_goes_on_when_the_worker_running_it_dies(
    executor: DBOSExecutor, pool: Workers, gates: Path
) -> None:
    thread = _tag("takeover")
    first, second = _tag("dies"), _tag("waits")
    _open(gates, second)
    executor.start("chat", "one", thread_id=thread, run_id=first)
    _wait_until(lambda: _holding(pool, first), "the first run is in hold")
    executor.start("chat", "two", thread_id=thread, run_id=second, multitask_strategy="enqueue")
    pid = pool.executions(first)[0]["pid"]
    victim = next(name for name in pool.started if pool.pid_of(name) == pid)
    pool.kill(victim)
    try:
        _open(gates, first)  # the other worker replays the run (its turn is recorded)
        one = executor.handle(first).result(timeout=90)
        two = executor.handle(second).result(timeout=90)
    finally:
        pool.start(victim, SG_GATES=str(gates))
    assert one.state.data["heard"] == ["one"]
    assert two.state.data["heard"] == ["one", "two"]
    assert [line["node"] for line in pool.executions(second)].count("reply") == 1
