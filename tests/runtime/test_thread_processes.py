"""Double-texting across processes: a run on a thread in one process, the next input
in another, through the file, SQLite and PostgreSQL stores.

Nothing depends on timing: the first run holds in its ``wait`` node until the
test has sent the second input (and, with "enqueue", seen it join the queue).
"""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from selectgraph import GraphResult, ThreadBusy
from tests.persistence.conftest import Harness, close_all, make_harness
from tests.runtime._thread_process import WAIT, chat_graph, run_held

CONTEXT = multiprocessing.get_context("spawn")


@pytest.fixture(params=["file", "sqlite", "postgres"])
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    closing: list[Any] = []
    try:
        yield make_harness(request.param, tmp_path, closing)
    finally:
        close_all(closing)


class HeldRun:
    """The first run on thread "t", in a child process, held in its ``wait`` node."""

    def __init__(self, harness: Harness, text: str) -> None:
        self.entered = CONTEXT.Event()
        self.release = CONTEXT.Event()
        self.results = CONTEXT.Queue()
        self.process = CONTEXT.Process(
            target=run_held,
            args=(harness.spec, "t", text, self.entered, self.release, self.results),
        )
        self.process.start()
        assert self.entered.wait(WAIT), "the child never reached its wait node"

    def finish(self) -> tuple[str, str, dict[str, Any]]:
        """Let the run go; its run id, stop reason and data."""
        self.release.set()
        outcome = self.results.get(timeout=WAIT)
        self.process.join(WAIT)
        assert outcome[0] == "done", outcome[1]
        assert self.process.exitcode == 0
        return outcome[1], outcome[2], outcome[3]


def test_reject_refuses_an_input_while_another_process_runs(harness: Harness) -> None:
    held = HeldRun(harness, "one")
    with pytest.raises(ThreadBusy, match="thread 't' is busy"):
        chat_graph().run("two", thread_id="t", checkpoint_store=harness.store)
    run_id, reason, data = held.finish()
    assert (reason, data) == ("end", {"turns": 1, "heard": ["one"]})
    after = chat_graph().run("three", thread_id="t", checkpoint_store=harness.store)
    assert after.state.data == {"turns": 2, "heard": ["one", "three"]}
    assert [r.run_id for r in harness.store.thread_runs("t")] == [run_id, after.run_id]  # type: ignore[attr-defined]


def test_enqueue_waits_for_the_other_process_and_goes_on_from_its_end(harness: Harness) -> None:
    held = HeldRun(harness, "one")
    store: Any = harness.store
    queued = threading.Event()
    enqueue = store.enqueue

    def spy(*args: Any, **kwargs: Any) -> int:
        position: int = enqueue(*args, **kwargs)
        queued.set()
        return position

    store.enqueue = spy
    second: list[GraphResult | BaseException] = []

    def send() -> None:
        try:
            second.append(
                chat_graph().run(
                    "two", thread_id="t", checkpoint_store=store, multitask_strategy="enqueue"
                )
            )
        except BaseException as error:  # reported below
            second.append(error)

    sender = threading.Thread(target=send)
    sender.start()
    assert queued.wait(WAIT)
    _, reason, data = held.finish()
    sender.join(WAIT)
    assert (reason, data) == ("end", {"turns": 1, "heard": ["one"]})
    result = second[0]
    assert isinstance(result, GraphResult), result
    assert result.state.data == {"turns": 2, "heard": ["one", "two"]}


def test_interrupt_takes_over_from_the_other_process(harness: Harness) -> None:
    held = HeldRun(harness, "one")
    store: Any = harness.store
    newer = chat_graph().run(
        "two", thread_id="t", checkpoint_store=store, multitask_strategy="interrupt"
    )
    # From the held run's last checkpoint: its "first" had counted the turn.
    assert newer.state.data == {"turns": 2, "heard": ["two"]}
    run_id, reason, _ = held.finish()
    assert reason == "superseded"
    assert store.head(run_id).step == 1  # nothing saved after the takeover
    last = store.read_events(run_id)[-1].event
    assert (last["event"], last["reason"]) == ("RunCancelled", "superseded")
    runs = store.thread_runs("t")
    assert [(r.run_id, r.superseded) for r in runs] == [(run_id, None), (newer.run_id, run_id)]
    thread = store.get_thread("t")
    assert (thread.owner, thread.last_run) == (None, newer.run_id)


def test_rollback_discards_the_other_process_run(harness: Harness) -> None:
    store: Any = harness.store
    before = chat_graph().run("zero", thread_id="t", checkpoint_store=store)
    held = HeldRun(harness, "one")
    newer = chat_graph().run(
        "two", thread_id="t", checkpoint_store=store, multitask_strategy="rollback"
    )
    # From where the rolled-back run started: as if "one" was never sent.
    assert newer.state.data == {"turns": 2, "heard": ["zero", "two"]}
    run_id, reason, _ = held.finish()
    assert reason == "superseded"
    assert store.head(run_id) is None  # its checkpoints and events went with it
    assert store.read_events(run_id) == []
    assert [r.run_id for r in store.thread_runs("t")] == [before.run_id, newer.run_id]
