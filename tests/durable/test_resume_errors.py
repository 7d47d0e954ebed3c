"""Resuming with a wrong interrupt id fails clearly and writes nothing."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from selectgraph import (
    END,
    AgentGraph,
    CheckpointStore,
    GraphState,
    InterruptRequest,
    ResumeError,
)
from tests.durable._support import Calls, pending, stored


def _graph(calls: Calls) -> AgentGraph:
    def ask(state: GraphState) -> Generator[Any, Any, Any]:
        calls.hit("ask")
        first = yield InterruptRequest("one?")
        second = yield InterruptRequest("two?")
        calls.hit("answered")
        state.data["answers"] = [first, second]

    graph = AgentGraph("errors")
    graph.add_node("start", lambda s: {"n": 1})
    graph.add_node("ask", ask)
    graph.add_edge("start", "ask")
    graph.add_edge("ask", END)
    return graph


@pytest.fixture
def paused(store: CheckpointStore) -> tuple[AgentGraph, Calls, str]:
    """A run "r" paused at its second question, the first one answered."""
    calls = Calls()
    graph = _graph(calls)
    result = graph.run({}, checkpoint_store=store, run_id="r")
    graph.resume(pending(result), "a", checkpoint_store=store)
    return graph, calls, "r|2:ask|0"


@pytest.mark.parametrize("live", [True, False], ids=["live", "replay"])
@pytest.mark.parametrize(
    "bad_id",
    ["r|2:ask|7", "r|9:ask|0", "r|2:other|0"],
    ids=["index", "step", "node"],
)
def test_an_unknown_interrupt_id_is_refused_and_nothing_is_written(
    store: CheckpointStore,
    paused: tuple[AgentGraph, Calls, str],
    bad_id: str,
    live: bool,
) -> None:
    graph, calls, _ = paused
    if not live:
        graph = _graph(calls)  # another graph object: the run is loaded from the store
    before = stored(store, "r")
    with pytest.raises(ResumeError) as caught:
        graph.resume(bad_id, "x", checkpoint_store=store)
    message = str(caught.value)
    assert repr(bad_id) in message
    assert "'r|2:ask|1'" in message  # names what is pending
    assert isinstance(caught.value, ValueError)
    assert stored(store, "r") == before
    assert calls["ask"] == 1  # refusing ran nothing
    # The run is still answerable afterwards.
    final = graph.resume("r|2:ask|1", "b", checkpoint_store=store)
    assert final.state.data["answers"] == ["a", "b"]


@pytest.mark.parametrize("live", [True, False], ids=["live", "replay"])
def test_an_already_answered_id_is_refused(
    store: CheckpointStore, paused: tuple[AgentGraph, Calls, str], live: bool
) -> None:
    graph, calls, answered = paused
    if not live:
        graph = _graph(calls)
    before = stored(store, "r")
    with pytest.raises(ResumeError, match="already answered or never raised"):
        graph.resume(answered, "again", checkpoint_store=store)
    assert stored(store, "r") == before
    assert calls["answered"] == 0


def test_an_answered_id_of_a_finished_run_is_refused(store: CheckpointStore) -> None:
    calls = Calls()
    graph = _graph(calls)
    first = graph.run({}, checkpoint_store=store, run_id="done")
    second = graph.resume(pending(first), "a", checkpoint_store=store)
    graph.resume(pending(second), "b", checkpoint_store=store)
    before = stored(store, "done")
    for interrupt_id in (first.interrupt_id, second.interrupt_id):
        assert interrupt_id is not None
        with pytest.raises(ResumeError):
            graph.resume(interrupt_id, "again", checkpoint_store=store)
        with pytest.raises(ResumeError):
            _graph(calls).resume(interrupt_id, "again", checkpoint_store=store)
    assert stored(store, "done") == before
    assert calls["answered"] == 1


def test_the_id_of_another_run_is_refused(
    store: CheckpointStore, paused: tuple[AgentGraph, Calls, str]
) -> None:
    graph, _, _ = paused
    other = graph.run({}, checkpoint_store=store, run_id="other")
    before_r, before_other = stored(store, "r"), stored(store, "other")
    # An id shaped like run r's pending one, but naming a run the store does not have.
    with pytest.raises(ResumeError, match="'ghost'"):
        graph.resume("ghost|2:ask|1", "x", checkpoint_store=store)
    # Ids of two different runs at once.
    with pytest.raises(ValueError, match="different runs"):
        graph.resume({"r|2:ask|1": "x", pending(other): "y"}, checkpoint_store=store)
    # The pending id of run "other", changed to claim run "r".
    assert other.interrupt_id == "other|2:ask|0"
    with pytest.raises(ResumeError, match="not pending in run 'r'"):
        graph.resume("r|2:ask|0", "x", checkpoint_store=store)
    assert stored(store, "r") == before_r
    assert stored(store, "other") == before_other


@pytest.mark.parametrize("bad_id", ["", "r", "r|2:ask", "nonsense id", 42, None], ids=repr)
def test_a_malformed_id_is_a_value_error_naming_it(
    store: CheckpointStore, paused: tuple[AgentGraph, Calls, str], bad_id: Any
) -> None:
    graph, _, _ = paused
    before = stored(store, "r")
    with pytest.raises((ValueError, TypeError)) as caught:
        graph.resume(bad_id, "x", checkpoint_store=store)
    assert "interrupt id" in str(caught.value)
    assert stored(store, "r") == before


def test_resume_needs_an_answer_and_at_least_one_id(
    store: CheckpointStore, paused: tuple[AgentGraph, Calls, str]
) -> None:
    graph, _, _ = paused
    before = stored(store, "r")
    with pytest.raises(TypeError, match="needs the answer"):
        graph.resume("r|2:ask|1", checkpoint_store=store)
    with pytest.raises(ValueError, match="at least one"):
        graph.resume({}, checkpoint_store=store)
    assert stored(store, "r") == before


def test_continuing_a_run_that_waits_for_answers_is_refused(
    store: CheckpointStore, paused: tuple[AgentGraph, Calls, str]
) -> None:
    graph, calls, _ = paused
    before = stored(store, "r")
    with pytest.raises(ResumeError, match=r"waiting for answers to 'r\|2:ask\|1'"):
        graph.run(None, checkpoint_store=store, run_id="r")
    with pytest.raises(ResumeError, match="already has checkpoints"):
        graph.run({"n": 5}, checkpoint_store=store, run_id="r")
    assert stored(store, "r") == before
    assert calls["answered"] == 0


def test_resume_without_a_store_of_a_run_not_in_memory(
    store: CheckpointStore, paused: tuple[AgentGraph, Calls, str]
) -> None:
    _, calls, _ = paused
    with pytest.raises(ResumeError, match="no checkpoint_store was given"):
        _graph(calls).resume("r|2:ask|1", "b")


def test_a_run_id_with_a_bar_is_refused(store: CheckpointStore) -> None:
    graph = _graph(Calls())
    with pytest.raises(ValueError, match=r"must not contain '\|'"):
        graph.run({}, checkpoint_store=store, run_id="a|b")
    assert store.list("a|b") == []
