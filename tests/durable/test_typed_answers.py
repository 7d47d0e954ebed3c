"""Typed answers: ``InterruptRequest(..., response_schema=...)`` and how ``resume`` checks answers.

An answer that does not fit is refused with ``AnswerInvalid`` naming the field,
before anything runs: no checkpoint is written, the run stays paused on the
same question, and the live generator (in the process that paused) can still
be answered. Each test proves "nothing ran" with node counters and the store's
head, on the live path and on the path that rebuilds the run from the store.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Generator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field, field_validator

from selectgraph import (
    END,
    AgentGraph,
    AnswerInvalid,
    CheckpointStore,
    Command,
    GraphState,
    InMemoryCheckpointStore,
    InterruptRequest,
    NodeError,
    ResumeError,
    SQLiteCheckpointStore,
)
from tests.durable import _typed_process
from tests.durable._support import Calls, pending, stored

ROOT = Path(__file__).resolve().parents[2]


class Review(BaseModel):
    approved: bool
    score: int = Field(ge=0)
    note: str = ""


CHOICE: dict[str, Any] = {
    "type": "object",
    "properties": {"choice": {"enum": ["publish", "reject"]}, "reason": {"type": "string"}},
    "required": ["choice"],
    "additionalProperties": False,
}


def _graph(calls: Calls, received: list[Any], schema: Any = Review) -> AgentGraph:
    """draft -> review (asks with ``schema``) -> publish, counting each node's runs."""

    def draft(state: GraphState) -> dict[str, Any]:
        calls.hit("draft")
        return {"draft": "Owls can turn their heads 270 degrees."}

    def review(state: GraphState) -> Generator[Any, Any, Any]:
        calls.hit("review")  # before the yield: counts the generator's starts
        answer = yield InterruptRequest("Review", {"draft": state.data["draft"]}, schema)
        calls.hit("answered")
        received.append(answer)
        if isinstance(answer, BaseModel):
            return {"verdict": answer.model_dump()}
        return {"verdict": answer}

    def publish(state: GraphState) -> dict[str, Any]:
        calls.hit("publish")
        return {"published": True}

    graph = AgentGraph("typed")
    graph.add_node("draft", draft, next_node="review")
    graph.add_node("review", review, next_node="publish")
    graph.add_node("publish", publish, next_node=END)
    return graph


def _paused(
    store: CheckpointStore, schema: Any = Review, run_id: str = "r"
) -> tuple[AgentGraph, Calls, list[Any], str]:
    calls: Calls = Calls()
    received: list[Any] = []
    graph = _graph(calls, received, schema)
    result = graph.run({}, checkpoint_store=store, run_id=run_id)
    return graph, calls, received, pending(result)


def _head(store: CheckpointStore, run_id: str = "r") -> str:
    head = store.head(run_id)
    assert head is not None
    return head.checkpoint_id


# ------------------------------------------------------------------ the valid path
@pytest.mark.parametrize("live", [True, False], ids=["live", "replay"])
def test_a_valid_answer_reaches_the_node_as_the_model_and_the_run_goes_on(
    store: CheckpointStore, live: bool
) -> None:
    graph, calls, received, interrupt_id = _paused(store)
    if not live:
        graph = _graph(calls, received)  # another graph object: rebuilt from the store
    final = graph.resume(interrupt_id, {"approved": True, "score": 7}, checkpoint_store=store)
    assert final.stop_reason == "end"
    assert received == [Review(approved=True, score=7)]
    assert type(received[0]) is Review
    assert final.state.data["verdict"] == {"approved": True, "score": 7, "note": ""}
    assert calls["publish"] == 1
    assert calls["review"] == (1 if live else 2)  # live: continued at its yield


def test_a_model_instance_as_the_answer_is_recorded_as_json_data(store: CheckpointStore) -> None:
    graph, _, received, interrupt_id = _paused(store)
    answer = Review(approved=False, score=0, note="too short")
    graph.resume(interrupt_id, answer, checkpoint_store=store)
    assert received == [answer]
    answered = [c for c in store.list("r") if c.metadata.get("trigger") == "answer"]
    assert answered[0].interrupts[interrupt_id]["answer"] == {
        "approved": False,
        "score": 0,
        "note": "too short",
    }


# --------------------------------------------------------------- refused answers
@pytest.mark.parametrize("live", [True, False], ids=["live", "replay"])
@pytest.mark.parametrize(
    ("answer", "errors"),
    [
        ({"approved": "maybe", "score": 3}, {"approved": "'maybe' is not of type 'boolean'"}),
        ({"approved": True}, {"score": "is required"}),
        ({"approved": True, "score": -1}, {"score": "-1 is less than the minimum of 0"}),
        ({"approved": True, "score": "3"}, {"score": "'3' is not of type 'integer'"}),
        ("yes", {"": "'yes' is not of type 'object'"}),
    ],
    ids=["wrong-type", "missing", "constraint", "no-coercion", "not-an-object"],
)
def test_an_answer_that_does_not_fit_is_refused_before_anything_runs(
    store: CheckpointStore, live: bool, answer: Any, errors: dict[str, str]
) -> None:
    graph, calls, received, interrupt_id = _paused(store)
    if not live:
        graph = _graph(calls, received)
    before, head = stored(store, "r"), _head(store)
    with pytest.raises(AnswerInvalid) as caught:
        graph.resume(interrupt_id, answer, checkpoint_store=store)
    error = caught.value
    assert error.errors == errors
    assert error.interrupt_id == interrupt_id
    assert error.run_id == "r"
    assert isinstance(error, ResumeError)
    assert repr(interrupt_id) in str(error)
    for field in errors:
        assert (field or "the answer") in str(error)
    # Nothing ran, nothing was written, the same question is still pending.
    assert stored(store, "r") == before
    assert _head(store) == head
    assert (calls["review"], calls["answered"], calls["publish"]) == (1, 0, 0)
    assert [i.id for i in graph.get_state("r", checkpoint_store=store).interrupts] == [interrupt_id]
    # A corrected answer goes through; live, the paused generator itself takes it.
    final = graph.resume(interrupt_id, {"approved": True, "score": 1}, checkpoint_store=store)
    assert final.state.data["published"] is True
    assert received == [Review(approved=True, score=1)]
    assert calls["review"] == (1 if live else 2)
    assert calls["publish"] == 1


def test_without_a_store_a_refused_answer_leaves_the_paused_run_answerable() -> None:
    calls: Calls = Calls()
    received: list[Any] = []
    graph = _graph(calls, received)
    interrupt_id = pending(graph.run({}))
    with pytest.raises(AnswerInvalid, match="score"):
        graph.resume(interrupt_id, {"approved": True, "score": -5})
    final = graph.resume(interrupt_id, {"approved": True, "score": 5})
    assert received == [Review(approved=True, score=5)]
    assert (calls["review"], calls["publish"]) == (1, 1)
    assert final.stop_reason == "end"


def test_an_answer_that_is_not_json_data_is_refused(store: CheckpointStore) -> None:
    graph, calls, _, interrupt_id = _paused(store)
    with pytest.raises(AnswerInvalid) as caught:
        graph.resume(interrupt_id, object(), checkpoint_store=store)
    assert list(caught.value.errors) == [""]
    assert "not JSON data" in caught.value.errors[""]
    assert calls["answered"] == 0


# ------------------------------------------------------------ a JSON schema dict
@pytest.mark.parametrize("live", [True, False], ids=["live", "replay"])
def test_a_json_schema_dict_checks_the_answer_and_the_node_gets_the_json_value(
    store: CheckpointStore, live: bool
) -> None:
    graph, calls, received, interrupt_id = _paused(store, CHOICE)
    if not live:
        graph = _graph(calls, received, CHOICE)
    head = _head(store)
    with pytest.raises(AnswerInvalid) as caught:
        graph.resume(interrupt_id, {"choice": "maybe", "extra": 1}, checkpoint_store=store)
    assert caught.value.errors == {
        "choice": "'maybe' is not one of ['publish', 'reject']",
        "extra": "is not a field of the answer",
    }
    assert _head(store) == head
    assert calls["answered"] == 0
    final = graph.resume(
        interrupt_id, {"choice": "reject", "reason": "dull"}, checkpoint_store=store
    )
    assert received == [{"choice": "reject", "reason": "dull"}]
    assert final.state.data["verdict"] == {"choice": "reject", "reason": "dull"}


def test_a_schema_for_a_plain_value() -> None:
    calls: Calls = Calls()
    received: list[Any] = []
    graph = _graph(calls, received, {"type": "integer", "minimum": 1, "maximum": 5})
    interrupt_id = pending(graph.run({}))
    with pytest.raises(AnswerInvalid) as caught:
        graph.resume(interrupt_id, 9)
    assert caught.value.errors == {"": "9 is greater than the maximum of 5"}
    graph.resume(interrupt_id, 4)
    assert received == [4]


def test_nested_fields_are_named_by_their_path() -> None:
    class Line(BaseModel):
        sku: str
        qty: int = Field(gt=0)

    class Order(BaseModel):
        lines: list[Line]

    calls: Calls = Calls()
    received: list[Any] = []
    graph = _graph(calls, received, Order)
    interrupt_id = pending(graph.run({}))
    with pytest.raises(AnswerInvalid) as caught:
        graph.resume(interrupt_id, {"lines": [{"sku": "a", "qty": 1}, {"qty": 0}]})
    assert caught.value.errors == {
        "lines[1].sku": "is required",
        "lines[1].qty": "0 is less than or equal to the minimum of 0",
    }
    graph.resume(interrupt_id, {"lines": [{"sku": "a", "qty": 2}]})
    assert received == [Order(lines=[Line(sku="a", qty=2)])]


# ---------------------------------------------------------- the schema, exposed
def test_the_interrupt_exposes_the_schema_as_json_schema(store: CheckpointStore) -> None:
    calls: Calls = Calls()
    graph = _graph(calls, [])
    result = graph.run({}, checkpoint_store=store, run_id="r")
    (question,) = result.interrupts
    assert question.response_schema == Review.model_json_schema()
    assert question.response_model is Review  # in the process that asked
    # Stored with the question, for any process that only has the checkpoint.
    head = store.head("r")
    assert head is not None
    assert head.interrupts[question.id]["response_schema"] == Review.model_json_schema()
    (read_back,) = _graph(calls, []).get_state("r", checkpoint_store=store).interrupts
    assert read_back.response_schema == Review.model_json_schema()
    assert read_back.response_model is None
    assert read_back == question  # the model class is not part of equality
    # Changing what a caller got changes nothing stored.
    assert question.response_schema is not None
    question.response_schema["title"] = "changed"
    head = store.head("r")
    assert head is not None
    assert head.interrupts[question.id]["response_schema"]["title"] == "Review"


def test_questions_without_a_schema_are_unchanged(store: CheckpointStore) -> None:
    graph, _, received, interrupt_id = _paused(store, None)
    (question,) = graph.get_state("r", checkpoint_store=store).interrupts
    assert question.response_schema is None
    head = store.head("r")
    assert head is not None
    assert "response_schema" not in head.interrupts[interrupt_id]
    graph.resume(interrupt_id, "anything at all", checkpoint_store=store)
    assert received == ["anything at all"]


def test_a_bad_schema_fails_at_the_yield() -> None:
    with pytest.raises(TypeError, match="Pydantic model class or a JSON schema"):
        InterruptRequest("x", response_schema=42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not a valid JSON schema"):
        InterruptRequest("x", response_schema={"type": "no such type"})
    with pytest.raises(ValueError, match="not JSON data"):
        InterruptRequest("x", response_schema={"enum": [{1, 2}]})


# ------------------------------------------------------- several answers at once
def _fan_out(calls: Calls) -> AgentGraph:
    def ask(role: str) -> Any:
        def sign_off(state: GraphState) -> Generator[Any, Any, Any]:
            calls.hit(role)
            answer = yield InterruptRequest(f"{role}?", response_schema=Review)
            assert isinstance(answer, Review)
            return {role: answer.score}

        return sign_off

    def join(state: GraphState) -> dict[str, Any]:
        calls.hit("join")
        return {"total": state.data["legal"] + state.data["security"]}

    graph = AgentGraph("sign-off")
    graph.add_node("start", lambda state: {})
    graph.add_node("legal", ask("legal"), next_node="join")
    graph.add_node("security", ask("security"), next_node="join")
    graph.add_node("join", join, next_node=END)
    graph.add_edge("start", ["legal", "security"])
    return graph


@pytest.mark.parametrize("live", [True, False], ids=["live", "replay"])
def test_one_bad_answer_among_several_changes_nothing(store: CheckpointStore, live: bool) -> None:
    calls: Calls = Calls()
    graph = _fan_out(calls)
    paused = graph.run({}, checkpoint_store=store, run_id="r")
    legal, security = (q.id for q in paused.interrupts)
    if not live:
        graph = _fan_out(calls)
    before = stored(store, "r")
    good, bad = {"approved": True, "score": 2}, {"approved": True, "score": -2}
    with pytest.raises(AnswerInvalid) as caught:
        graph.resume({legal: good, security: bad}, checkpoint_store=store)
    assert caught.value.interrupt_id == security
    assert caught.value.errors == {"score": "-2 is less than the minimum of 0"}
    assert stored(store, "r") == before
    assert calls["join"] == 0
    assert {q.id for q in graph.get_state("r", checkpoint_store=store).interrupts} == {
        legal,
        security,
    }
    # Nothing was recorded: the good answer must be given again.
    done = graph.resume(
        {legal: good, security: {"approved": True, "score": 3}}, checkpoint_store=store
    )
    assert done.state.data["total"] == 5
    assert calls["join"] == 1
    assert (calls["legal"], calls["security"]) == ((1, 1) if live else (2, 2))


# ---------------------------------------------------------- LangGraph's spelling
def test_command_resume_is_checked_the_same_way() -> None:
    calls: Calls = Calls()
    received: list[Any] = []
    graph = _graph(calls, received).compile(checkpointer=InMemoryCheckpointStore())
    config = {"configurable": {"thread_id": "t"}}
    waiting = graph.invoke({}, config)
    [question] = waiting["__interrupt__"]
    assert question.response_schema == Review.model_json_schema()
    with pytest.raises(AnswerInvalid) as caught:
        graph.invoke(Command(resume={"approved": True, "score": -1}), config)
    assert caught.value.errors == {"score": "-1 is less than the minimum of 0"}
    assert caught.value.interrupt_id == question.id
    assert calls["answered"] == 0
    done = graph.invoke(Command(resume={"approved": False, "score": 0}), config)
    assert done["published"] is True
    assert received == [Review(approved=False, score=0)]


# ------------------------------------------------- async nodes and several yields
async def test_an_async_generator_node_gets_the_model() -> None:
    received: list[Any] = []

    async def review(state: GraphState) -> AsyncIterator[Any]:
        first = yield InterruptRequest("first", response_schema=Review)
        second = yield InterruptRequest("second", response_schema=CHOICE)
        received.extend([first, second])

    graph = AgentGraph("async-typed")
    graph.add_node("review", review, next_node=END)
    store = InMemoryCheckpointStore()
    paused = await graph.arun({}, checkpoint_store=store, run_id="a")
    paused = await graph.aresume(
        pending(paused), {"approved": True, "score": 1}, checkpoint_store=store
    )
    assert paused.interrupts[0].response_schema == CHOICE
    with pytest.raises(AnswerInvalid, match="choice"):
        await graph.aresume(pending(paused), {}, checkpoint_store=store)
    # Another graph object replays: the first answer is converted again from its record.
    again = AgentGraph("async-typed")
    again.add_node("review", review, next_node=END)
    await again.aresume(pending(paused), {"choice": "publish"}, checkpoint_store=store)
    assert received == [Review(approved=True, score=1), {"choice": "publish"}]


# ------------------------------------------------ what only the model can check
class Signed(BaseModel):
    name: str

    @field_validator("name")
    @classmethod
    def _capitalised(cls, value: str) -> str:
        if not value[:1].isupper():
            raise ValueError("must start with a capital letter")
        return value


def test_the_models_own_validators_check_where_the_model_is_at_hand(
    store: CheckpointStore,
) -> None:
    graph, _, received, interrupt_id = _paused(store, Signed)
    head = _head(store)
    with pytest.raises(AnswerInvalid) as caught:
        graph.resume(interrupt_id, {"name": "ann"}, checkpoint_store=store)  # live: model at hand
    assert caught.value.errors == {"name": "Value error, must start with a capital letter"}
    assert _head(store) == head
    graph.resume(interrupt_id, {"name": "Ann"}, checkpoint_store=store)
    assert received == [Signed(name="Ann")]


def test_only_the_json_schema_is_checked_where_only_the_checkpoint_is(
    store: CheckpointStore,
) -> None:
    _, calls, received, interrupt_id = _paused(store, Signed)
    fresh = _graph(calls, received, Signed)
    # The JSON schema cannot say "capitalised": the answer is recorded, and the node,
    # converting it to the model, fails naming the answer.
    with pytest.raises(NodeError) as caught:
        fresh.resume(interrupt_id, {"name": "ann"}, checkpoint_store=store)
    cause = caught.value.__cause__
    assert isinstance(cause, AnswerInvalid)
    assert cause.interrupt_id == interrupt_id
    assert cause.errors == {"name": "Value error, must start with a capital letter"}
    assert calls["answered"] == 0


# ---------------------------------------------- a process with only the checkpoint
def test_a_process_with_only_the_checkpoint_checks_against_the_stored_schema(
    tmp_path: Path,
) -> None:
    database, log = tmp_path / "runs.db", tmp_path / "ran.log"
    with SQLiteCheckpointStore(database) as first:
        paused = _typed_process.build(log).run({}, checkpoint_store=first, run_id="p")
        interrupt_id = pending(paused)
        head = _head(first, "p")
    assert paused.interrupts[0].response_schema == _typed_process.Verdict.model_json_schema()

    def answer(value: Any) -> dict[str, Any]:
        command = [sys.executable, "-m", "tests.durable._typed_process", "resume"]
        done = subprocess.run(
            [*command, str(database), str(log), interrupt_id, json.dumps(value)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]

    refused = answer({"approved": True, "score": 11})
    assert refused == {
        "outcome": "invalid",
        "interrupt_id": interrupt_id,
        "errors": {"score": "11 is greater than the maximum of 10"},
    }
    with SQLiteCheckpointStore(database) as check:
        assert _head(check, "p") == head  # nothing written
    assert _typed_process.counts(log) == {"draft": 1, "review": 1}  # nothing ran there
    done = answer({"approved": True, "score": 10})
    assert done["outcome"] == "done"
    assert done["data"]["published"] is True
    assert _typed_process.counts(log) == {
        "draft": 1,
        "review": 2,  # started over in the second process
        "answered": 1,
        "publish": 1,
    }


# --------------------------------------------------------------- in a subgraph
def _nested(calls: Calls, received: list[Any]) -> AgentGraph:
    def ask(state: GraphState) -> Generator[Any, Any, Any]:
        calls.hit("ask")
        answer = yield InterruptRequest("inner?", response_schema=Review)
        received.append(answer)
        return {"score": answer.score}

    child = AgentGraph("child")
    child.add_node("ask", ask, next_node=END)

    def after(state: GraphState) -> dict[str, Any]:
        calls.hit("after")
        return {"done": True}

    parent = AgentGraph("parent")
    parent.add_node("inner", child, next_node="after")
    parent.add_node("after", after, next_node=END)
    return parent


@pytest.mark.parametrize("live", [True, False], ids=["live", "replay"])
def test_a_question_asked_inside_a_subgraph_is_checked_too(
    store: CheckpointStore, live: bool
) -> None:
    calls: Calls = Calls()
    received: list[Any] = []
    graph = _nested(calls, received)
    paused = graph.run({}, checkpoint_store=store, run_id="r")
    (question,) = paused.interrupts
    assert question.response_schema == Review.model_json_schema()
    if not live:
        graph = _nested(calls, received)
    head = _head(store)
    with pytest.raises(AnswerInvalid, match="score"):
        graph.resume(question.id, {"approved": True, "score": -1}, checkpoint_store=store)
    assert _head(store) == head
    assert calls["after"] == 0
    done = graph.resume(question.id, {"approved": True, "score": 6}, checkpoint_store=store)
    assert done.state.data["score"] == 6
    assert received == [Review(approved=True, score=6)]
    assert calls["ask"] == (1 if live else 2)
