from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from selectgraph.core._branch import BranchRef
from selectgraph.routing._parallel import FailureMode
from selectgraph.runtime._branches import (
    CANCELLED,
    BranchTask,
    run_blocking,
    run_concurrently,
    run_on_threads,
)


def _tasks(n: int) -> list[BranchTask]:
    return [BranchTask(BranchRef("fan", i, f"b{i}"), f"b{i}") for i in range(n)]


def test_branch_identity_chain_and_task_id() -> None:
    outer = BranchRef("outer", 1, None)
    inner = BranchRef("inner", 0, "x", outer)
    assert inner.chain == (outer, inner)
    assert inner.label == "x"
    assert outer.label == "outer[1]"
    assert inner.task_id == "outer:1/inner:0"


async def test_outcomes_come_back_in_task_order_whatever_finishes_first() -> None:
    async def call(task: BranchTask) -> int:
        await asyncio.sleep(0.01 * (3 - task.ref.index))
        return task.ref.index

    outcomes = await run_concurrently(_tasks(3), call, failure_mode="wait_all", limit=None)
    assert outcomes == [0, 1, 2]


async def test_fail_all_really_cancels_running_siblings(tmp_path: Path) -> None:
    marker = tmp_path / "late-write"

    async def call(task: BranchTask) -> int:
        if task.ref.index == 0:
            await asyncio.sleep(0.01)
            raise ValueError("boom")
        await asyncio.sleep(0.2)
        marker.write_text("a cancelled branch wrote this")
        return task.ref.index

    outcomes = await run_concurrently(_tasks(3), call, failure_mode="fail_all", limit=None)
    assert isinstance(outcomes[0], ValueError)
    assert outcomes[1] is CANCELLED
    assert outcomes[2] is CANCELLED
    await asyncio.sleep(0.3)
    assert not marker.exists()


async def test_continue_modes_let_siblings_finish() -> None:
    async def call(task: BranchTask) -> int:
        if task.ref.index == 1:
            raise KeyError("bad")
        await asyncio.sleep(0.01)
        return task.ref.index

    modes: list[FailureMode] = ["continue_others", "wait_all"]
    for mode in modes:
        outcomes = await run_concurrently(_tasks(3), call, failure_mode=mode, limit=None)
        assert outcomes[0] == 0
        assert outcomes[2] == 2
        assert isinstance(outcomes[1], KeyError)


async def test_limit_bounds_how_many_run_at_once() -> None:
    running = 0
    peak = 0

    async def call(task: BranchTask) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.005)
        running -= 1

    await run_concurrently(_tasks(10), call, failure_mode="fail_all", limit=3)
    assert peak == 3


async def test_cancelling_the_caller_cancels_every_branch() -> None:
    finished: list[int] = []

    async def call(task: BranchTask) -> None:
        await asyncio.sleep(1)
        finished.append(task.ref.index)

    fan = asyncio.ensure_future(
        run_concurrently(_tasks(4), call, failure_mode="wait_all", limit=None)
    )
    await asyncio.sleep(0.01)
    fan.cancel()
    with pytest.raises(asyncio.CancelledError):
        await fan
    await asyncio.sleep(0.05)
    assert finished == []


async def test_blocking_work_overlaps_on_worker_threads() -> None:
    async def blocking() -> str:
        time.sleep(0.1)
        return threading.current_thread().name

    started = time.perf_counter()
    names = await asyncio.gather(*(run_blocking(blocking()) for _ in range(8)))
    assert time.perf_counter() - started < 0.45  # one after another: 0.8 s
    assert all(name.startswith("selectgraph-branch") for name in names)


def test_threads_run_branches_without_an_event_loop() -> None:
    async def call(task: BranchTask) -> int:
        time.sleep(0.1)
        if task.ref.index == 2:
            raise RuntimeError("third")
        return task.ref.index

    started = time.perf_counter()
    outcomes = run_on_threads(_tasks(6), call, failure_mode="wait_all", limit=None)
    assert time.perf_counter() - started < 0.35  # one after another: 0.6 s
    assert outcomes[:2] == [0, 1]
    assert isinstance(outcomes[2], RuntimeError)


def test_threads_under_fail_all_skip_branches_not_yet_started() -> None:
    async def call(task: BranchTask) -> int:
        if task.ref.index == 0:
            raise RuntimeError("first")
        time.sleep(0.05)
        return task.ref.index

    outcomes = run_on_threads(_tasks(6), call, failure_mode="fail_all", limit=1)
    assert isinstance(outcomes[0], RuntimeError)
    assert CANCELLED in outcomes
