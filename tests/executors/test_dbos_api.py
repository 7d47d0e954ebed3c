"""The DBOS executor's API against a real PostgreSQL and a real worker process."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from selectgraph import ResumeError
from selectgraph.executors import (
    AnswerConflictError,
    DatabaseUnavailableError,
    DBOSExecutor,
    RunCancelledError,
    RunFailedError,
    UnknownGraphError,
    UnknownRunError,
)
from selectgraph.observe import NodeStarted
from tests.executors import graphs
from tests.executors.conftest import Workers

pytestmark = pytest.mark.slow

NAMES = ("three", "approval", "fanout", "agents", "nested", "failing", "skipping")


@pytest.fixture(scope="module")
def worker(database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workers]:
    """One worker serving every test of this module."""
    where = tmp_path_factory.mktemp("api-worker")
    (where / "logs").mkdir()
    pool = Workers(database, where / "effects.jsonl", where / "logs")
    try:
        pool.start("api-1")
        yield pool
    finally:
        pool.stop_all()


@pytest.fixture
def executor(database: str, worker: Workers) -> Iterator[DBOSExecutor]:
    chosen = DBOSExecutor(
        database, graphs={name: getattr(graphs, name) for name in NAMES}, poll_interval=0.05
    )
    try:
        yield chosen
    finally:
        chosen.close()


def _run_id(tag: str) -> str:
    return f"{tag}-{time.monotonic_ns()}"


def test_a_run_goes_from_queue_to_done_and_its_events_are_readable_anywhere(
    executor: DBOSExecutor, worker: Workers, database: str
) -> None:
    handle = executor.start("three", {"trail": []}, run_id=_run_id("three"))
    result = handle.result(timeout=30)
    assert result.state.data["trail"] == ["a", "b", "c"]
    assert result.stop_reason == "end"
    assert result.run_id == handle.run_id
    assert handle.status() == "done"
    assert result.node_order == ["a", "b", "c"]
    # Another process's view: a new executor object, the handle found by run id.
    other = DBOSExecutor(database, graphs={"three": graphs.three})
    try:
        again = other.handle(handle.run_id)
        assert again.graph_name == "three"
        names = [e.node for e in again.events(follow=False) if isinstance(e, NodeStarted)]
        assert names == ["a", "b", "c"]
        assert [type(e).__name__ for e in again.events(start=1, follow=False)][-1] == "RunFinished"
        assert again.result(timeout=5).state.data == result.state.data
    finally:
        other.close()


def test_starting_the_same_run_id_twice_starts_it_once(
    executor: DBOSExecutor, worker: Workers
) -> None:
    run_id = _run_id("twice")
    first = executor.start("three", {"trail": []}, run_id=run_id)
    second = executor.start("three", {"trail": ["ignored"]}, run_id=run_id)
    assert first.result(timeout=30).state.data["trail"] == ["a", "b", "c"]
    assert second.result(timeout=5).state.data["trail"] == ["a", "b", "c"]
    assert sorted(worker.counts(run_id).values()) == [1, 1, 1]


@pytest.mark.parametrize("name", sorted(graphs.EQUIVALENT))
def test_the_same_graph_ends_in_the_same_state_in_process_and_on_dbos(
    name: str, executor: DBOSExecutor
) -> None:
    graph, given = graphs.EQUIVALENT[name]
    here = asyncio.run(graph.compile().arun(given))
    there = executor.start(name, given, run_id=_run_id(name)).result(timeout=60)
    assert dict(there.state.data) == dict(here.state.data)
    assert there.stop_reason == here.stop_reason
    assert there.steps == here.steps
    assert there.state.errors == here.state.errors
    assert [m.to_dict() for m in there.state.messages] == [m.to_dict() for m in here.state.messages]


def test_an_interrupt_is_answered_from_another_process_and_the_run_finishes(
    executor: DBOSExecutor, worker: Workers, database: str
) -> None:
    handle = executor.start("approval", {"topic": "tides"}, run_id=_run_id("approval"))
    paused = handle.result(timeout=30)
    assert paused.interrupted
    assert handle.status() == "interrupted"
    (question,) = handle.interrupts()
    assert question.prompt == "Publish this draft?"
    assert question.payload == {"title": "On tides"}
    assert question.id == question.interrupt_id == paused.interrupt_id
    assert isinstance(paused.state.data["draft"], graphs.Draft)

    answering = DBOSExecutor(database, graphs={"approval": graphs.approval})
    try:
        answering.resume(handle.run_id, question.id, "yes")
        answering.resume(handle.run_id, question.id, "yes")  # the same answer again: a no-op
    finally:
        answering.close()
    done = handle.result(timeout=30)
    assert done.state.data["published"] is True
    assert handle.status() == "done"
    assert handle.interrupts() == ()
    counts = worker.counts(handle.run_id)
    assert [n for (_, task), n in counts.items() if task.endswith(":draft")] == [1]
    assert [n for (_, task), n in counts.items() if task.endswith(":publish")] == [1]
    # The run's checkpoints travel with it: get_state and get_history work from here.
    history = handle.get_history()
    assert history[0].checkpoint_id == handle.get_state().checkpoint_id
    assert {"interrupt", "answer", "end"} <= {s.metadata.get("trigger") for s in history}
    with pytest.raises(ResumeError, match="has ended"):
        executor.resume(handle.run_id, question.id, "no")


def test_of_two_different_answers_exactly_one_is_applied(
    executor: DBOSExecutor, worker: Workers
) -> None:
    handle = executor.start("approval", {"topic": "winds"}, run_id=_run_id("race"))
    interrupt_id = handle.result(timeout=30).interrupt_id
    assert interrupt_id is not None
    outcomes: dict[str, Any] = {}
    barrier = threading.Barrier(2)

    def answer(value: str) -> None:
        racer = DBOSExecutor(executor.database_url, graphs={"approval": graphs.approval})
        try:
            barrier.wait()
            racer.resume(handle.run_id, interrupt_id, value)
            outcomes[value] = "applied"
        except AnswerConflictError as error:
            outcomes[value] = error
        finally:
            racer.close()

    threads = [threading.Thread(target=answer, args=(value,)) for value in ("yes", "no")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    applied = [value for value, outcome in outcomes.items() if outcome == "applied"]
    refused = [outcome for outcome in outcomes.values() if outcome != "applied"]
    assert len(applied) == 1
    assert len(refused) == 1
    assert "already answered" in str(refused[0])
    final = handle.result(timeout=30)
    assert final.state.data["verdict"] == applied[0]


def test_a_failed_run_reports_its_error_and_keeps_its_state(executor: DBOSExecutor) -> None:
    handle = executor.start("failing", {"trail": []}, run_id=_run_id("failing"))
    with pytest.raises(RunFailedError) as caught:
        handle.result(timeout=30)
    error = caught.value
    assert "the backend is down" in str(error)
    assert error.error_type == "NodeError"
    assert error.node == "second"
    assert error.state is not None
    assert error.state.data["trail"] == ["first"]
    assert handle.status() == "failed"


def test_cancelling_a_run_that_waits_for_an_answer_stops_it_at_once(
    executor: DBOSExecutor,
) -> None:
    handle = executor.start("approval", {}, run_id=_run_id("cancel"))
    interrupt_id = handle.result(timeout=30).interrupt_id
    assert interrupt_id is not None
    handle.cancel()
    deadline = time.monotonic() + 10
    while handle.status() != "cancelled" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert handle.status() == "cancelled"
    with pytest.raises(RunCancelledError):
        handle.result(timeout=5)
    with pytest.raises(ResumeError, match="has ended"):
        executor.resume(handle.run_id, interrupt_id, "yes")


def test_bad_input_gets_a_clear_error_never_a_hang(
    executor: DBOSExecutor, database: str, refusing_port: int, tmp_path: Path
) -> None:
    with pytest.raises(UnknownGraphError, match=r"no graph named 'nope'.*registered: agents"):
        executor.start("nope", {})
    with pytest.raises(UnknownRunError, match="no run 'no-such-run'"):
        executor.handle("no-such-run")
    with pytest.raises(UnknownRunError):
        executor.resume("no-such-run", "no-such-run|1:ask|0", "yes")
    with pytest.raises(UnknownRunError):
        executor.cancel("no-such-run")
    # A client that does not know the graphs: the worker refuses the unknown name.
    blind = DBOSExecutor(database)
    try:
        handle = blind.start("nope", {"x": 1}, run_id=_run_id("nope"))
        with pytest.raises(RunFailedError, match=r"names graph 'nope'.*it has: agents") as caught:
            handle.result(timeout=30)
        assert caught.value.error_type == "UnknownGraphError"
    finally:
        blind.close()
    done = executor.start("three", {"trail": []}, run_id=_run_id("done"))
    done.result(timeout=30)
    with pytest.raises(ResumeError, match="has ended"):
        executor.resume(done.run_id, f"{done.run_id}|1:a|0", "yes")
    with pytest.raises(ResumeError, match="not one of run"):
        executor.resume(done.run_id, "other-run|1:a|0", "yes")
    with pytest.raises(ResumeError, match="is not an interrupt id"):
        executor.resume(done.run_id, "garbage", "yes")
    started = time.monotonic()
    nowhere = DBOSExecutor(f"postgresql://postgres@127.0.0.1:{refusing_port}/test")
    with pytest.raises(DatabaseUnavailableError, match=f"127.0.0.1:{refusing_port}/test"):
        nowhere.start("three", {})
    assert time.monotonic() - started < 10
    with pytest.raises(DatabaseUnavailableError, match="does not exist"):
        DBOSExecutor(f"sqlite:///{tmp_path}/missing/dir/db.sqlite").handle("x")
    with pytest.raises(ValueError, match="not a database URL"):
        DBOSExecutor("not a url").handle("x")


def test_a_fork_continues_from_a_checkpoint_and_leaves_the_original(
    executor: DBOSExecutor, worker: Workers
) -> None:
    original = executor.start("three", {"trail": []}, run_id=_run_id("original"))
    original.result(timeout=30)
    after_a = next(
        snapshot for snapshot in original.get_history() if snapshot.state.data.get("trail") == ["a"]
    )
    fork = executor.fork(original.run_id, after_a.checkpoint_id, new_run_id=_run_id("fork"))
    result = fork.result(timeout=30)
    assert result.state.data["trail"] == ["a", "b", "c"]
    assert [task for (_, task) in worker.counts(fork.run_id)] == ["/2:b", "/3:c"]
    assert original.get_state().values["trail"] == ["a", "b", "c"]
    with pytest.raises(ResumeError, match="no checkpoint 'nope'"):
        executor.fork(original.run_id, "nope")


def test_every_row_the_executor_writes_is_json_never_pickle(
    executor: DBOSExecutor, database: str
) -> None:
    executor.start("approval", {}, run_id=_run_id("json")).result(timeout=30)
    with psycopg.connect(database) as connection:
        for table in ("operation_outputs", "workflow_status", "notifications", "streams"):
            kinds = {
                row[0]
                for row in connection.execute(f"select distinct serialization from dbos.{table}")
            }
            # DBOS writes its own bookkeeping as its portable JSON; never pickle.
            assert kinds <= {"selectgraph_json", "portable_json", None}, (table, kinds)
    from dbos import _serialization

    with pytest.raises(RuntimeError, match="does not unpickle"):
        _serialization.DBOSDefaultSerializer.deserialize("gASVAAAAAAAAAAA=")


async def test_the_async_api_does_the_same(executor: DBOSExecutor) -> None:
    handle = await executor.astart("approval", {"topic": "clouds"}, run_id=_run_id("async"))
    paused = await handle.aresult(timeout=30)
    (question,) = await handle.ainterrupts()
    assert question.id == paused.interrupt_id
    assert await handle.astatus() == "interrupted"
    await handle.aresume(question.id, "no")
    done = await handle.aresult(timeout=30)
    assert done.state.data["published"] is False
    seen = [type(event).__name__ async for event in handle.aevents(follow=False)]
    assert seen.count("RunResumed") == 1
    assert seen[-1] == "RunFinished"
    again = await executor.ahandle(handle.run_id)
    assert again.run_id == handle.run_id
    other = await executor.astart("approval", {}, run_id=_run_id("async-cancel"))
    await other.aresult(timeout=30)
    await other.acancel()
    for _ in range(200):
        if await other.astatus() == "cancelled":
            break
        await asyncio.sleep(0.05)
    assert await other.astatus() == "cancelled"
