"""When workers die or lose their database: real processes, SIGKILL and PostgreSQL.

Each test has a database of its own. Node executions are counted in an
effects file: a start line when a node begins, a ``done`` line when its work
finished. A task the killed worker finished must never start again; a task
it had in flight may start once more (at-least-once for the node in flight).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from selectgraph.executors import DBOSExecutor
from tests.executors import graphs
from tests.executors.conftest import ADMIN, Workers

pytestmark = pytest.mark.slow

TAKEOVER_LIMIT = 30.0
"""Seconds within which a dead worker's runs must finish elsewhere (the issue's bound)."""


@pytest.fixture
def executor(own_database: str) -> Iterator[DBOSExecutor]:
    chosen = DBOSExecutor(
        own_database,
        graphs={"three": graphs.three, "approval": graphs.approval, "fanout": graphs.fanout},
        poll_interval=0.05,
    )
    try:
        yield chosen
    finally:
        chosen.close()


def _wait_for(condition: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def _kill(workers: Workers, executor_id: str) -> tuple[float, set[tuple[str, str]]]:
    """SIGKILL a worker; then when it was, and the steps recorded by then (it writes no more)."""
    workers.kill(executor_id)
    return time.time(), workers.recorded()


def _check_once(workers: Workers, killed_at: float, recorded: set[tuple[str, str]]) -> None:
    """No step recorded before the kill started again after it; no task ran three times."""
    again = recorded & workers.started_after(killed_at)
    assert again == set(), f"recorded steps ran again after the kill: {sorted(again)}"
    counts = workers.counts()
    assert counts, "nothing ran"
    assert max(counts.values()) <= 2, counts


def test_a_worker_killed_inside_a_node_has_its_runs_finished_elsewhere(
    workers: Workers, executor: DBOSExecutor
) -> None:
    workers.seconds = 1.0
    workers.start("w1")
    workers.start("w2")
    handles = [executor.start("three", {"trail": []}, run_id=f"kill-{i}") for i in range(6)]
    _wait_for(
        lambda: (
            len(workers.finished(workers.pid_of("w1")))
            + len(workers.finished(workers.pid_of("w2")))
            >= 1
        ),
        30,
        "a first node to finish",
    )
    busy = {line["pid"] for line in workers.executions() if line["what"] == ""}
    victim = "w1" if workers.pid_of("w1") in busy else "w2"
    victim_pid = workers.pid_of(victim)
    _wait_for(
        lambda: any(
            line["pid"] == victim_pid and line["what"] == "" for line in workers.executions()[-3:]
        ),
        10,
        "the victim to be inside a node",
    )
    time.sleep(0.3)  # well inside the node's second of work
    killed_at, recorded = _kill(workers, victim)
    killed = time.monotonic()
    for handle in handles:
        result = handle.result(timeout=TAKEOVER_LIMIT + 15)
        assert result.state.data["trail"] == ["a", "b", "c"]
    assert time.monotonic() - killed < TAKEOVER_LIMIT
    _check_once(workers, killed_at, recorded)
    assert any(run.startswith("kill-") for run, _ in recorded), "the kill came too early"
    survivor = "w2" if victim == "w1" else "w1"
    assert "took over" in workers.log(survivor)


def test_branches_that_finished_before_the_kill_are_not_run_again(
    workers: Workers, executor: DBOSExecutor
) -> None:
    workers.seconds = 0.2
    workers.start("f1", SG_SLOW_TOPIC="clouds")
    handle = executor.start("fanout", {}, run_id="fan-kill")
    # The fast branches finish and are recorded; the slow one (3 s) is in flight when
    # its worker dies.
    _wait_for(
        lambda: sum(1 for _, step in workers.recorded() if step.startswith("branch:plan")) == 2,
        30,
        "two research branches to be recorded",
    )
    killed_at, recorded = _kill(workers, "f1")
    workers.start("f2")
    result = handle.result(timeout=TAKEOVER_LIMIT + 15)
    assert result.state.data["summary"] == (
        "check by fact_check; check by style_check; note on clouds; note on tides; note on winds"
    )
    _check_once(workers, killed_at, recorded)
    assert sum(1 for _, step in recorded if step.startswith("branch:plan")) == 2
    research = {
        task: n for (_, task), n in workers.counts("fan-kill").items() if "research" in task
    }
    assert sorted(research.values()) == [1, 1, 2]  # only the slow branch ran again
    assert workers.counts("fan-kill")[("fan-kill", "/1:plan")] == 1


def test_a_run_waiting_for_an_answer_survives_the_death_of_every_worker(
    workers: Workers, executor: DBOSExecutor
) -> None:
    workers.start("first")
    handle = executor.start("approval", {"topic": "tides"}, run_id="orphan")
    question = handle.result(timeout=30).interrupts[0]
    workers.kill("first")
    time.sleep(1.0)  # nobody serves the queue now
    assert handle.status() == "interrupted"
    workers.start("later")  # a new worker, under a new id
    answered = time.monotonic()
    executor.resume(handle.run_id, question.id, "yes")  # from a third process: this one
    result = handle.result(timeout=TAKEOVER_LIMIT + 15)
    assert result.state.data["published"] is True
    assert time.monotonic() - answered < TAKEOVER_LIMIT
    counts = workers.counts("orphan")
    assert counts[("orphan", "/1:draft")] == 1
    assert counts[("orphan", "/3:publish")] == 1


def test_a_worker_that_loses_its_connections_reconnects_and_finishes(
    workers: Workers, executor: DBOSExecutor, own_database: str
) -> None:
    workers.seconds = 0.4
    workers.start("steady")
    handles = [executor.start("three", {"trail": []}, run_id=f"cut-{i}") for i in range(4)]
    _wait_for(lambda: bool(workers.executions()), 30, "the runs to start")
    name = own_database.rsplit("/", 1)[1]
    with psycopg.connect(ADMIN, autocommit=True) as admin:
        for _ in range(3):
            admin.execute(
                "select pg_terminate_backend(pid) from pg_stat_activity "
                "where datname = %s and pid <> pg_backend_pid()",
                (name,),
            )
            time.sleep(0.4)
    for handle in handles:
        assert handle.result(timeout=60).state.data["trail"] == ["a", "b", "c"]
    counts = workers.counts()
    assert len(counts) == 12
    assert set(counts.values()) == {1}, counts


def test_on_sqlite_a_restarted_worker_finishes_its_own_runs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/runs.sqlite"
    logs = tmp_path / "logs"
    logs.mkdir()
    pool = Workers(url, tmp_path / "effects.jsonl", logs, seconds=1.0)
    executor = DBOSExecutor(url, graphs={"three": graphs.three}, poll_interval=0.05)
    try:
        pool.start("solo")
        handle = executor.start("three", {"trail": []}, run_id="solo-run")
        pid = pool.pid_of("solo")
        _wait_for(lambda: len(pool.finished(pid)) == 1, 30, "node a to finish")
        time.sleep(0.3)
        pool.kill("solo")
        killed_at = time.time()
        pool.start("solo")  # the same worker slot comes back and recovers its runs
        assert handle.result(timeout=45).state.data["trail"] == ["a", "b", "c"]
        assert pool.counts("solo-run")[("solo-run", "/1:a")] == 1
        assert ("solo-run", "node:a") not in pool.started_after(killed_at)
        assert pool.counts("solo-run")[("solo-run", "/2:b")] == 2  # in flight: ran again
    finally:
        executor.close()
        pool.stop_all()
