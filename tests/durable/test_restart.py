"""Exact-yield resume in process versus replay after a restart (a new process on SQLite)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Generator
from pathlib import Path
from typing import Any

from selectgraph import (
    END,
    AgentGraph,
    GraphState,
    InMemoryCheckpointStore,
    InterruptRequest,
    SQLiteCheckpointStore,
)
from selectgraph.runtime import _book
from tests.durable import _restart
from tests.durable._support import pending, triggers

ROOT = Path(__file__).resolve().parents[2]


def in_new_process(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``python -m tests.durable._restart ARGS`` and return its JSON report."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.durable._restart", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def test_in_process_resume_continues_at_the_yield(tmp_path: Path) -> None:
    log = tmp_path / "log"
    graph = _restart.build(log)
    with SQLiteCheckpointStore(tmp_path / "x.db") as store:
        first = graph.run({}, checkpoint_store=store, run_id="live")
        second = graph.resume(pending(first), "yes", checkpoint_store=store)
        assert second.interrupts[0].prompt == "sure?"
        final = graph.resume(pending(second), "very", checkpoint_store=store)
    assert final.state.data["published"] == "draft on checkpoints (yes/very)"
    assert _restart.counts(log) == {
        "prepare": 1,
        "review_pre": 1,  # never re-run: the live generator was sent each answer
        "once": 1,
        "review_mid": 1,
        "review_post": 1,
        "publish": 1,
    }


def test_after_a_restart_only_the_paused_generator_replays(tmp_path: Path) -> None:
    db, log = tmp_path / "x.db", tmp_path / "log"

    started = in_new_process("start", str(db), str(log), "r1")
    assert started["stop_reason"] == "interrupted"
    assert started["interrupts"] == ["r1|2:review|0"]
    assert _restart.counts(log) == {"prepare": 1, "review_pre": 1, "once": 1}

    # A new process answers the first question: prepare does not run again; the
    # generator starts over (its pre-yield code runs again) but once() is not redone.
    second = in_new_process("resume", str(db), str(log), "r1|2:review|0", "yes")
    assert second["stop_reason"] == "interrupted"
    assert second["interrupts"] == ["r1|2:review|1"]
    assert _restart.counts(log) == {"prepare": 1, "review_pre": 2, "once": 1, "review_mid": 1}

    # A third process answers the second: the first answer is fed back from the store.
    final = in_new_process("resume", str(db), str(log), "r1|2:review|1", "very")
    assert final["stop_reason"] == "end"
    assert final["data"]["published"] == "draft on checkpoints (yes/very)"
    assert final["steps"] == 3
    assert _restart.counts(log) == {
        "prepare": 1,
        "review_pre": 3,
        "once": 1,
        "review_mid": 2,
        "review_post": 1,
        "publish": 1,
    }
    with SQLiteCheckpointStore(db) as store:
        assert triggers(store, "r1") == [
            "input",
            "node_complete",
            "interrupt",
            "answer",
            "interrupt",
            "answer",
            "node_complete",
            "node_complete",
            "end",
        ]
        head = store.head("r1")
        assert head is not None
        assert head.interrupts == {}  # spent answers are not carried past the node
        assert "memo" not in head.metadata


def test_replay_in_the_same_process_once_the_live_run_is_forgotten(tmp_path: Path) -> None:
    log = tmp_path / "log"
    graph = _restart.build(log)
    with SQLiteCheckpointStore(tmp_path / "x.db") as store:
        first = graph.run({}, checkpoint_store=store, run_id="fg")
        paused = _book.paused_run(pending(first))
        assert paused is not None
        _book.forget_paused(paused)
        paused.drop_live()
        second = graph.resume(pending(first), "yes", checkpoint_store=store)
        assert second.interrupt_id == "fg|2:review|1"
        assert _restart.counts(log)["review_pre"] == 2
        # This second pause is live again: answering it continues in memory.
        final = graph.resume(pending(second), "ok", checkpoint_store=store)
    assert final.state.data["answers"] == ["yes", "ok"]
    assert _restart.counts(log) == {
        "prepare": 1,
        "review_pre": 2,
        "once": 1,
        "review_mid": 1,
        "review_post": 1,
        "publish": 1,
    }


def test_a_started_run_resumes_in_another_process(tmp_path: Path) -> None:
    """Paused here, answered in a new process: the answers and memo are all in the store."""
    db, log = tmp_path / "x.db", tmp_path / "log"
    graph = _restart.build(log)
    with SQLiteCheckpointStore(db) as store:
        first = graph.run({}, checkpoint_store=store, run_id="here")
        second = graph.resume(pending(first), "yes", checkpoint_store=store)
    final = in_new_process("resume", str(db), str(log), second.interrupt_id or "", "fine")
    assert final["data"]["answers"] == ["yes", "fine"]
    counted = _restart.counts(log)
    assert counted["once"] == 1
    assert counted["prepare"] == 1
    assert counted["review_pre"] == 2
    assert counted["publish"] == 1


def test_a_paused_run_pushed_out_of_memory_resumes_by_replay(tmp_path: Path) -> None:
    """Only the latest paused runs stay in memory; an older one resumes from the store."""
    log = tmp_path / "log"
    graph = _restart.build(log)
    with SQLiteCheckpointStore(tmp_path / "x.db") as store:
        first = graph.run({}, checkpoint_store=store, run_id="old")
        others = _book._MAX_PAUSED + 5
        plain = AgentGraph("many")
        plain.add_node("ask", _ask_once, next_node=END)
        memory = InMemoryCheckpointStore()
        for index in range(others):
            plain.run({}, checkpoint_store=memory, run_id=f"r{index}")
        assert _book.paused_run(pending(first)) is None
        second = graph.resume(pending(first), "yes", checkpoint_store=store)
    assert second.interrupt_id == "old|2:review|1"
    assert _restart.counts(log)["review_pre"] == 2  # replayed, not continued in memory
    assert _restart.counts(log)["once"] == 1


def _ask_once(state: GraphState) -> Generator[Any, Any, Any]:
    state.data["answer"] = yield InterruptRequest("q")
