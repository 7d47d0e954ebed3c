"""Typed answers on the DBOS executor: ``resume`` checks an answer before claiming or sending it.

The schema travels in the run's published checkpoints (a replayed run's too),
so a client that only reads the run's stream checks answers the same way a
worker does. Without a database: the task runner under a stand-in for DBOS,
and ``executor.resume`` over a stand-in client. With one (slow): a real worker.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from selectgraph import AnswerInvalid, GraphResult
from selectgraph.executors import DBOSExecutor
from selectgraph.executors.dbos import _runner
from selectgraph.executors.dbos._answers import checked_answer, stored_schema
from selectgraph.executors.dbos._records import decode_interrupt, encode_interrupt
from selectgraph.executors.dbos._workflow import ANSWERS, WORKFLOW
from tests.executors import conftest, typed_graphs
from tests.executors.conftest import Workers
from tests.executors.test_replay import FakeDBOS, _run
from tests.executors.typed_graphs import Verdict

SCHEMA = Verdict.model_json_schema()


def _checkpoints(fake: FakeDBOS) -> list[dict[str, Any]]:
    return [raw for item in fake.stream for raw in item["checkpoints"]]


async def _paused(monkeypatch: pytest.MonkeyPatch) -> tuple[GraphResult, FakeDBOS]:
    fake = FakeDBOS()
    monkeypatch.setattr(_runner, "DBOS", fake)
    paused = await _run(typed_graphs.typed, {"topic": "tides"})
    assert isinstance(paused, GraphResult)
    assert paused.interrupted
    return paused, fake


async def test_the_schema_is_published_with_the_checkpoints_and_survives_a_replay(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    paused, first = await _paused(monkeypatch)
    interrupt_id = paused.interrupt_id
    assert interrupt_id is not None
    assert paused.interrupts[0].response_schema == SCHEMA
    assert stored_schema(interrupt_id, [], lambda: _checkpoints(first)) == SCHEMA
    # A worker that takes the run over replays its recorded steps: same questions, same schema.
    again = FakeDBOS(first.recorded, replay=first.calls)
    monkeypatch.setattr(_runner, "DBOS", again)
    replayed = await _run(typed_graphs.typed, {"topic": "tides"})
    assert isinstance(replayed, GraphResult)
    assert replayed.interrupts[0].response_schema == SCHEMA
    assert stored_schema(interrupt_id, [], lambda: _checkpoints(again)) == SCHEMA


async def test_the_worker_gives_the_node_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_runner, "DBOS", FakeDBOS())
    done = await _run(typed_graphs.typed, {"topic": "tides"}, [{"approved": True, "score": 4}])
    assert isinstance(done, GraphResult)
    assert done.state.data["answer_type"] == "Verdict"
    assert (done.state.data["score"], done.state.data["published"]) == (4, True)


async def test_a_question_record_carries_its_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    paused, _ = await _paused(monkeypatch)
    serializer = typed_graphs.typed.compile().serializer
    record = encode_interrupt(paused.interrupts[0], serializer)
    assert record["response_schema"] == SCHEMA
    assert decode_interrupt(record, serializer) == paused.interrupts[0]
    untyped = {key: value for key, value in record.items() if key != "response_schema"}
    assert decode_interrupt(untyped, serializer).response_schema is None


def test_a_schema_listed_with_the_pending_question_settles_it() -> None:
    listed = [{"id": "r|2:review|0", "response_schema": {"type": "integer"}}]

    def unread() -> list[dict[str, Any]]:
        raise AssertionError("the checkpoints need not be read")

    assert stored_schema("r|2:review|0", listed, unread) == {"type": "integer"}
    assert stored_schema("r|2:other|0", [], list) is None  # nothing stored: any answer
    with pytest.raises(AnswerInvalid) as caught:
        checked_answer("r", "r|2:review|0", "two", listed, unread)
    assert caught.value.errors == {"": "'two' is not of type 'integer'"}


class _Client:
    """DBOS's client as ``resume`` uses it, over a paused run's stream and questions."""

    def __init__(self, stream: list[dict[str, Any]], paused: GraphResult) -> None:
        self.stream = stream
        self.pending = [
            encode_interrupt(i, typed_graphs.typed.compile().serializer) for i in paused.interrupts
        ]
        self.sent: list[Any] = []

    def list_workflows(self, workflow_ids: list[str], **options: Any) -> list[Any]:
        return [
            SimpleNamespace(
                name=WORKFLOW,
                input={"args": ["typed"]},
                status="PENDING",
                attributes={"selectgraph": "interrupted"},
            )
        ]

    def get_event(self, run_id: str, key: str, timeout_seconds: float) -> Any:
        return {"pending": self.pending, "result": None}

    def read_stream(self, run_id: str, key: str, **options: Any) -> Iterator[dict[str, Any]]:
        yield from self.stream[options.get("offset", 0) :]

    def send(self, run_id: str, message: Any, topic: str, **options: Any) -> None:
        self.sent.append(message)


class _Claims:
    def __init__(self) -> None:
        self.won: dict[str, Any] = {}

    def answered(self, interrupt_id: str) -> Any:
        return self.won.get(interrupt_id)

    def claim(self, run_id: str, interrupt_id: str, answer: Any) -> bool:
        self.won[interrupt_id] = answer
        return True


async def test_resume_refuses_an_answer_that_does_not_fit_before_claiming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    paused, fake = await _paused(monkeypatch)
    interrupt_id = paused.interrupt_id
    assert interrupt_id is not None
    executor = DBOSExecutor("sqlite:///unused.sqlite", graphs={"typed": typed_graphs.typed})
    client, claims = _Client(fake.stream, paused), _Claims()
    executor._client = client
    executor._claims = claims  # type: ignore[assignment]
    with pytest.raises(AnswerInvalid) as caught:
        executor.resume("replayed", interrupt_id, {"approved": True, "score": -3})
    assert caught.value.interrupt_id == interrupt_id
    assert caught.value.errors == {"score": "-3 is less than the minimum of 0"}
    assert (claims.won, client.sent) == ({}, [])  # neither recorded nor sent
    executor.resume("replayed", interrupt_id, Verdict(approved=True, score=3))
    answer = {"approved": True, "score": 3}  # sent as the JSON data it was checked as
    assert claims.won == {interrupt_id: answer}
    assert client.sent == [{"answers": {interrupt_id: answer}}]


# ------------------------------------------------------------ a real worker (slow)
@pytest.mark.slow
def test_a_worker_run_refuses_a_bad_answer_and_takes_a_good_one(
    workers: Workers, own_database: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(conftest, "GRAPHS", "tests.executors.typed_graphs:typed")
    workers.start("typed-1")
    executor = DBOSExecutor(own_database, graphs={"typed": typed_graphs.typed}, poll_interval=0.05)
    try:
        handle = executor.start("typed", {"topic": "tides"}, run_id=f"typed-{time.monotonic_ns()}")
        paused = handle.result(timeout=60)
        interrupt_id = paused.interrupt_id
        assert interrupt_id is not None
        with pytest.raises(AnswerInvalid) as caught:
            executor.resume(handle.run_id, interrupt_id, {"approved": "yes", "score": 1})
        assert caught.value.errors == {"approved": "'yes' is not of type 'boolean'"}
        assert executor.claims.answered(interrupt_id) is None
        assert handle.status() == "interrupted"
        executor.resume(handle.run_id, interrupt_id, {"approved": True, "score": 9})
        done = handle.result(timeout=60)
        assert done.state.data["answer_type"] == "Verdict"
        assert (done.state.data["score"], done.state.data["published"]) == (9, True)
        asked = [e for e in workers.executions(handle.run_id) if e["what"] == "asked"]
        assert len(asked) == 1  # the worker continued its live generator
    finally:
        executor.close()


@pytest.mark.slow
def test_a_bad_answer_sent_past_resume_is_refused_and_the_run_keeps_waiting(
    workers: Workers, own_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(conftest, "GRAPHS", "tests.executors.typed_graphs:typed")
    workers.start("typed-2")
    executor = DBOSExecutor(own_database, graphs={"typed": typed_graphs.typed}, poll_interval=0.05)
    try:
        handle = executor.start("typed", {"topic": "tides"}, run_id=f"typed-{time.monotonic_ns()}")
        paused = handle.result(timeout=60)
        interrupt_id = paused.interrupt_id
        assert interrupt_id is not None
        # Straight to the workflow's mailbox, around resume's check: the workflow
        # refuses it (AnswerInvalid) and waits on; the good answer after it is taken.
        bad = {"answers": {interrupt_id: {"approved": "yes", "score": -1}}}
        executor.client.send(handle.run_id, bad, ANSWERS, idempotency_key=f"bad:{interrupt_id}")
        executor.resume(handle.run_id, interrupt_id, {"approved": True, "score": 5})
        done = handle.result(timeout=60)
        assert not done.interrupted
        assert (done.state.data["score"], done.state.data["published"]) == (5, True)
    finally:
        executor.close()
