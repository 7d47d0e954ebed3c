"""Paused runs across deploys: a run paused under one version of a graph, continued under the next.

A change the run does not need (a node or an edge added elsewhere, an optional
field) does not stop it; a change it needs (the paused node renamed, an edge it
routes over removed, a field's type changed) is a GraphChanged naming it, and
``migrate=`` or a state version with migrations lets it go on.

``python -m tests.durable.test_graph_changes pause DB RUN_ID`` pauses a run of
the first version in a SQLite file, from another process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Generator, Mapping
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from selectgraph import (
    END,
    AgentGraph,
    CheckpointStore,
    GraphChanged,
    GraphState,
    InMemoryCheckpointStore,
    InterruptRequest,
    NodeContext,
    ResumeError,
    SQLiteCheckpointStore,
    StateMigrationError,
    append,
)
from tests.durable._support import Calls, pending, stored

ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------ the graph's versions
class PostV1(BaseModel):
    """The first version's state."""

    topic: str = ""
    draft: str = ""
    priority: str = "normal"
    approved: bool = False
    status: str = ""


class PostTagged(PostV1):
    """An optional field added."""

    tags: list[str] = []


class PostV2(BaseModel):
    """``priority`` is now a number."""

    topic: str = ""
    draft: str = ""
    priority: int = 1
    approved: bool = False
    status: str = ""


def upgrade_priority(data: dict[str, Any]) -> dict[str, Any]:
    """Version 1 -> 2: ``priority`` from a word to a number."""
    return {**data, "priority": {"low": 0, "normal": 1, "high": 2}[data["priority"]]}


CALLS = Calls()


def draft(state: GraphState) -> dict[str, Any]:
    CALLS.hit("draft")
    return {"draft": f"A post about {state['topic']}."}


def polish(text: str) -> str:
    CALLS.hit("polish")
    return text.upper()


def review(state: GraphState, context: NodeContext) -> Generator[Any, Any, Any]:
    CALLS.hit("review")
    polished = context.once("polish", polish, state["draft"])
    answer = yield InterruptRequest("Publish?", {"draft": polished})
    return {"approved": answer == "yes", "draft": polished}


def publish(state: GraphState) -> dict[str, Any]:
    CALLS.hit("publish")
    return {"status": "published" if state["approved"] else "dropped"}


def audit(state: GraphState) -> dict[str, Any]:
    return {"status": state["status"] + " (audited)"}


def check(state: GraphState) -> dict[str, Any]:
    CALLS.hit("check")
    return {}


def build(
    *,
    names: Mapping[str, str] | None = None,
    schema: type[BaseModel] = PostV1,
    state_version: int = 1,
    migrations: Mapping[int, Callable[[dict[str, Any]], dict[str, Any]]] | None = None,
    audited: bool = False,
    checked: bool = False,
) -> AgentGraph:
    """draft -> review (asks) -> publish; ``names`` renames nodes of that first version.

    ``audited`` adds a node after publish and a conditional edge from draft to it;
    ``checked`` puts a node between draft and review (the edge draft -> review goes).
    """
    renamed = dict(names or {})

    def n(name: str) -> str:
        return renamed.get(name, name)

    graph = AgentGraph(
        "post", state_schema=schema, state_version=state_version, state_migrations=migrations
    )
    graph.add_node(n("draft"), draft)
    graph.add_node(n("review"), review)
    graph.add_node(n("publish"), publish)
    graph.set_entry(n("draft"))
    if audited:
        graph.add_node("audit", audit, next_node=END)
        graph.add_edge(n("draft"), "audit", condition="topic == 'skip'")
    if checked:
        graph.add_node("check", check, next_node=n("review"))
        graph.add_edge(n("draft"), "check")
    else:
        graph.add_edge(n("draft"), n("review"))
    graph.add_edge(n("review"), n("publish"))
    graph.add_edge(n("publish"), "audit" if audited else END)
    return graph


def pause(store: CheckpointStore, how: str, run_id: str, **input: Any) -> str:
    """Run the first version until it stops ``how``; returns what continues it.

    ``"interrupt"``: at review's question (the interrupt id); ``"pause_before"``:
    before publish, review answered (the run id); ``"pause_after"``: after draft.
    """
    graph = build()
    data = {"topic": "owls", **input}
    if how == "interrupt":
        return pending(graph.run(data, checkpoint_store=store, run_id=run_id))
    if how == "pause_after":
        result = graph.run(data, checkpoint_store=store, run_id=run_id, pause_after=["draft"])
        assert result.stop_reason == "paused"
        return run_id
    asked = graph.run(data, checkpoint_store=store, run_id=run_id, pause_before=["publish"])
    result = graph.resume(pending(asked), "yes", checkpoint_store=store)
    assert result.stop_reason == "paused"
    return run_id


def go_on(graph: AgentGraph, store: CheckpointStore, how: str, at: str, **options: Any) -> Any:
    """Continue what :func:`pause` stopped, under ``graph`` (answering "yes")."""
    if how == "interrupt":
        return graph.resume(at, "yes", checkpoint_store=store, **options)
    return graph.run(None, checkpoint_store=store, run_id=at, **options)


@pytest.fixture(autouse=True)
def _fresh_calls() -> None:
    CALLS.counts.clear()
    CALLS.order.clear()


# ------------------------------------------------------------ what is stored
def test_every_checkpoint_names_the_graph_and_the_first_holds_its_shape(
    store: CheckpointStore,
) -> None:
    graph = build()
    shape = graph.compile().shape
    pending_id = pause(store, "interrupt", "r")
    saved = store.list("r")
    assert [c.metadata["graph"] for c in saved] == [shape.hash] * len(saved)
    assert saved[0].metadata["graph_shape"] == shape.record
    assert all("graph_shape" not in c.metadata for c in saved[1:])
    assert all("state_version" not in c.metadata for c in saved)  # version 1 is not written
    assert shape.record["nodes"]["review"] == {"kind": "generator", "to": ["publish"]}
    assert shape.record["fields"]["priority"] == {"type": "string"}
    # Continued under the same graph: nothing checked, no shape written again.
    build().resume(pending_id, "yes", checkpoint_store=store)
    assert all("graph_shape" not in c.metadata for c in store.list("r")[len(saved) :])


def test_the_shape_leaves_out_what_a_run_does_not_need() -> None:
    first = build().compile().shape
    assert build().compile().shape.hash == first.hash  # rebuilt: the same shape
    other = AgentGraph("renamed graph", state_schema=PostV1)
    for name, fn in (("draft", draft), ("review", review), ("publish", publish)):
        other.add_node(name, fn)
    other.add_edge("draft", "review")
    other.add_edge("review", "publish")
    other.add_edge("publish", END)
    assert other.compile().shape.hash == first.hash  # the graph's name is not part of it
    assert build(audited=True).compile().shape.hash != first.hash
    assert build(schema=PostV2).compile().shape.hash != first.hash
    assert build(state_version=2, migrations={1: upgrade_priority}).compile().shape.hash != (
        first.hash
    )


# ------------------------------------------------- (a) a change the run does not need
@pytest.mark.parametrize("how", ["interrupt", "pause_before", "pause_after"])
def test_a_node_an_edge_and_an_optional_field_added_elsewhere_do_not_block(
    store: CheckpointStore, how: str
) -> None:
    at = pause(store, how, "r")
    if how == "pause_after":
        # The run routes from draft: the new conditional edge draft -> audit is not taken.
        first = go_on(build(audited=True, schema=PostTagged), store, how, at)
        at = pending(first)
        how = "interrupt"
    result = go_on(build(audited=True, schema=PostTagged), store, how, at)
    assert result.stop_reason == "end"
    assert result.state["status"] == "published (audited)"
    assert result.state["tags"] == []  # the new field's default, filled in
    assert CALLS["draft"] == 1  # completed nodes did not run again


# --------------------------------------------------- (b) the paused node renamed
@pytest.mark.parametrize("how", ["interrupt", "pause_before"])
def test_a_renamed_paused_node_is_named(store: CheckpointStore, how: str) -> None:
    at = pause(store, how, "r")
    old = "review" if how == "interrupt" else "publish"
    renamed = build(names={old: "approve"})
    before = stored(store, "r")
    with pytest.raises(GraphChanged) as caught:
        go_on(renamed, store, how, at)
    error = caught.value
    assert isinstance(error, ResumeError)
    assert error.nodes == (old,)
    assert f"'{old}'" in str(error)
    assert "migrate=" in str(error)
    assert stored(store, "r") == before  # nothing was written


@pytest.mark.parametrize("how", ["interrupt", "pause_before"])
def test_a_renamed_paused_node_goes_on_with_migrate(store: CheckpointStore, how: str) -> None:
    at = pause(store, how, "r")
    old = "review" if how == "interrupt" else "publish"
    renamed = build(names={old: "approve"})
    with pytest.raises(GraphChanged, match=f"migrate={{'{old}': 'approve'}}"):
        go_on(renamed, store, how, at)  # the message guesses the new name
    polished = CALLS["polish"]
    result = go_on(renamed, store, how, at, migrate={old: "approve"})
    assert result.stop_reason == "end"
    assert result.state["status"] == "published"
    assert "approve" in result.node_order
    assert CALLS["polish"] == polished  # the once() result was found under its new task id
    if how == "interrupt":
        answered = next(c for c in store.list("r") if c.metadata.get("trigger") == "answer")
        assert answered.next == ["approve"]
        assert list(answered.interrupts) == ["r|2:approve|0"]
        assert answered.metadata["memo"] == {"2:approve": {"polish": "A POST ABOUT OWLS."}}
    # The run's checkpoints from there on name the new graph.
    last = store.list("r")[-1]
    assert last.metadata["graph"] == renamed.compile().shape.hash


def test_a_renamed_node_the_run_routes_from_goes_on_with_migrate(store: CheckpointStore) -> None:
    at = pause(store, "pause_after", "r")
    renamed = build(names={"draft": "write"})
    with pytest.raises(GraphChanged) as caught:
        renamed.run(None, checkpoint_store=store, run_id=at)
    assert caught.value.nodes == ("draft",)
    result = renamed.run(None, checkpoint_store=store, run_id=at, migrate={"draft": "write"})
    assert result.stop_reason == "interrupted"
    assert result.interrupts[0].node == "review"


# ------------------------------------------------ (c) a field's type changed
@pytest.mark.parametrize("how", ["interrupt", "pause_before"])
def test_a_changed_field_type_is_named_then_upgraded(store: CheckpointStore, how: str) -> None:
    at = pause(store, how, "r", priority="high")
    before = stored(store, "r")
    with pytest.raises(GraphChanged) as caught:
        go_on(build(schema=PostV2), store, how, at)
    error = caught.value
    assert error.fields == ("priority",)
    assert "'priority'" in str(error)
    assert "integer" in str(error)
    assert "state_version" in str(error)  # what to do
    assert stored(store, "r") == before

    upgraded = build(schema=PostV2, state_version=2, migrations={1: upgrade_priority})
    result = go_on(upgraded, store, how, at)
    assert result.stop_reason == "end"
    assert result.state["priority"] == 2
    written = [c for c in store.list("r") if c.checkpoint_id not in {b[0] for b in before}]
    assert written
    assert all(c.metadata["state_version"] == 2 for c in written)
    # The first checkpoint after the upgrade is whole: a delta would be read against v1.
    assert written[0].kind == "snapshot"
    assert store.load_state(written[-1].checkpoint_id)["data"]["priority"] == 2


def test_a_changed_field_type_names_what_it_was(store: CheckpointStore) -> None:
    at = pause(store, "pause_before", "r", priority="high")
    with pytest.raises(GraphChanged, match="it was string when the run was saved"):
        go_on(build(schema=PostV2), store, "pause_before", at)


def test_an_upgraded_state_is_not_upgraded_again(store: CheckpointStore) -> None:
    upgraded = build(schema=PostV2, state_version=2, migrations={1: upgrade_priority})
    at = pause(store, "interrupt", "r", priority="low")
    result = upgraded.resume(at, "yes", checkpoint_store=store)
    assert result.state["priority"] == 0
    # A checkpoint written under version 2 is not migrated again (upgrade_priority(0)
    # would raise): forking from it under the same graph goes on.
    reviewed = [c for c in store.list("r") if c.metadata.get("trigger") == "node_complete"][-2]
    assert reviewed.next == [{"after": "review"}]
    forked = upgraded.run(None, checkpoint_store=store, checkpoint_id=reviewed.checkpoint_id)
    assert forked.stop_reason == "end"
    assert forked.state["priority"] == 0


def test_a_missing_or_failing_migration_is_named(store: CheckpointStore) -> None:
    at = pause(store, "pause_before", "r", priority="high")
    before = stored(store, "r")
    missing = build(schema=PostV2, state_version=3, migrations={1: upgrade_priority})
    with pytest.raises(StateMigrationError) as caught:
        missing.run(None, checkpoint_store=store, run_id=at)
    assert (caught.value.from_version, caught.value.to_version) == (2, 3)
    assert "from version 2 to 3" in str(caught.value)

    def broken(data: dict[str, Any]) -> dict[str, Any]:
        raise KeyError("urgency")

    failing = build(schema=PostV2, state_version=2, migrations={1: broken})
    with pytest.raises(StateMigrationError, match="from version 1 to 2 raised KeyError") as caught:
        failing.run(None, checkpoint_store=store, run_id=at)
    assert isinstance(caught.value.__cause__, KeyError)
    assert isinstance(caught.value, GraphChanged)

    wrong = build(schema=PostV2, state_version=2, migrations={1: lambda data: None})  # type: ignore[dict-item, return-value]
    with pytest.raises(StateMigrationError, match="returned NoneType"):
        wrong.run(None, checkpoint_store=store, run_id=at)

    unfit = build(schema=PostV2, state_version=2, migrations={1: lambda data: data})
    with pytest.raises(GraphChanged, match="after the state migrations from version 1 to 2"):
        unfit.run(None, checkpoint_store=store, run_id=at)
    assert stored(store, "r") == before


def test_a_state_saved_by_a_newer_version_is_refused(store: CheckpointStore) -> None:
    upgraded = build(schema=PostV2, state_version=2, migrations={1: upgrade_priority})
    at = pause(store, "interrupt", "r")
    asked = upgraded.resume(at, "yes", checkpoint_store=store)
    assert asked.stop_reason == "end"
    fork_from = [c for c in store.list("r") if c.metadata.get("trigger") == "node_complete"][-1]
    assert fork_from.metadata["state_version"] == 2
    with pytest.raises(StateMigrationError, match="newer than graph 'post'") as caught:
        build(schema=PostV2).run(
            None, checkpoint_store=store, checkpoint_id=fork_from.checkpoint_id
        )
    assert (caught.value.from_version, caught.value.to_version) == (2, 1)


# ------------------------------------------------- (d) an edge the run routes over
def test_a_removed_edge_the_run_routes_over_is_named(store: CheckpointStore) -> None:
    at = pause(store, "pause_after", "r")
    rewired = build(checked=True)
    before = stored(store, "r")
    with pytest.raises(GraphChanged) as caught:
        rewired.run(None, checkpoint_store=store, run_id=at)
    error = caught.value
    assert error.edges == (("draft", "review"),)
    assert "edge to 'review' is gone" in str(error)
    assert "added since: check" in str(error)
    assert "migrate={'draft': 'draft'}" in str(error)
    assert stored(store, "r") == before
    # Taking draft as it is now: the run routes over the new edge.
    result = rewired.run(None, checkpoint_store=store, run_id=at, migrate={"draft": "draft"})
    assert result.interrupts[0].node == "review"
    assert CALLS["check"] == 1


def test_an_edge_gone_elsewhere_does_not_block(store: CheckpointStore) -> None:
    at = pause(store, "interrupt", "r")  # the run needs review, not draft's edges
    result = build(checked=True).resume(at, "yes", checkpoint_store=store)
    assert result.stop_reason == "end"
    assert CALLS["check"] == 0


# ------------------------------------------- a paused subgraph run, a paused fan-out
def _asking_child(*, asks: bool = True) -> AgentGraph:
    def prep(state: GraphState) -> dict[str, Any]:
        CALLS.hit("child_prep")
        return {"prepared": True}

    def ask(state: GraphState) -> Generator[Any, Any, Any]:
        answer = yield InterruptRequest("inner?")
        return {"inner_answer": answer}

    child = AgentGraph("child")
    child.add_node("prep", prep)
    if asks:
        child.add_node("ask", ask, next_node=END)
        child.add_edge("prep", "ask")
    else:
        child.add_node("decide", lambda s: {"inner_answer": "auto"}, next_node=END)
        child.add_edge("prep", "decide")
    return child


def _with_subgraph(name: str, *, asks: bool = True) -> AgentGraph:
    parent = AgentGraph("parent")
    parent.add_node("before", lambda s: {"inner_answer": ""})
    parent.add_node(name, _asking_child(asks=asks))
    parent.add_node("after", lambda s: {"done": f"got {s['inner_answer']}"}, next_node=END)
    parent.add_edge("before", name)
    parent.add_edge(name, "after")
    return parent


def test_a_paused_subgraph_whose_inner_node_is_gone_is_named(store: CheckpointStore) -> None:
    paused = _with_subgraph("inner").run({}, checkpoint_store=store, run_id="r")
    assert pending(paused) == "r|inner/2:ask|0"
    with pytest.raises(GraphChanged) as caught:
        _with_subgraph("inner", asks=False).resume(pending(paused), "yes", checkpoint_store=store)
    assert caught.value.nodes == ("inner/ask",)
    assert "graph 'child' does not have it" in str(caught.value)


def test_a_renamed_subgraph_node_goes_on_with_its_paused_run(store: CheckpointStore) -> None:
    paused = _with_subgraph("inner").run({}, checkpoint_store=store, run_id="r")
    renamed = _with_subgraph("nested")
    with pytest.raises(GraphChanged) as caught:
        renamed.resume(pending(paused), "yes", checkpoint_store=store)
    assert caught.value.nodes == ("inner",)
    result = renamed.resume(
        pending(paused), "yes", checkpoint_store=store, migrate={"inner": "nested"}
    )
    assert result.state["done"] == "got yes"
    assert CALLS["child_prep"] == 1  # the paused child run went on; its prefix did not rerun


def _fan_out(start: str) -> AgentGraph:
    def ask(state: GraphState) -> Generator[Any, Any, Any]:
        answer = yield InterruptRequest("ok?")
        return {"answers": [f"ask={answer}"]}

    def other(state: GraphState) -> dict[str, Any]:
        CALLS.hit("other")
        return {"answers": ["other"]}

    graph = AgentGraph("fan", reducers={"answers": append})
    graph.add_node(start, lambda s: {"answers": []})
    graph.add_node("ask", ask, next_node="join")
    graph.add_node("other", other, next_node="join")
    graph.add_node("join", lambda s: {"joined": sorted(s["answers"])}, next_node=END)
    graph.add_edge(start, ["ask", "other"])
    return graph


def test_a_renamed_fan_out_source_keeps_its_finished_branches(store: CheckpointStore) -> None:
    paused = _fan_out("start").run({}, checkpoint_store=store, run_id="r")
    assert pending(paused) == "r|start:0/2:ask|0"
    assert CALLS["other"] == 1
    renamed = _fan_out("begin")
    with pytest.raises(GraphChanged, match="'start'"):
        renamed.resume(pending(paused), "yes", checkpoint_store=store)
    result = renamed.resume(
        pending(paused), "yes", checkpoint_store=store, migrate={"start": "begin"}
    )
    assert result.state["joined"] == ["ask=yes", "other"]
    assert CALLS["other"] == 1  # its writes were kept under the branch's new task id


# ------------------------------------------------------------ forks and streams
def test_a_fork_goes_on_under_a_renamed_node(store: CheckpointStore) -> None:
    at = pause(store, "pause_before", "r")
    build().run(None, checkpoint_store=store, run_id=at)  # the original ends
    paused = next(c for c in store.list("r") if c.metadata.get("trigger") == "pause")
    renamed = build(names={"publish": "release"})
    with pytest.raises(GraphChanged, match="'publish'"):
        renamed.run(None, checkpoint_store=store, checkpoint_id=paused.checkpoint_id)
    forked = renamed.run(
        None,
        checkpoint_store=store,
        checkpoint_id=paused.checkpoint_id,
        run_id="fork",
        migrate={"publish": "release"},
    )
    assert forked.stop_reason == "end"
    assert forked.node_order[-1] == "release"
    first = store.list("fork")[0]
    assert first.next == ["release"]
    assert first.metadata["graph_shape"] == renamed.compile().shape.record


async def test_astream_and_aresume_take_migrate(store: CheckpointStore) -> None:
    at = pause(store, "interrupt", "r")
    renamed = build(names={"review": "approve"})
    done = await renamed.aresume(at, "no", checkpoint_store=store, migrate={"review": "approve"})
    assert done.state["status"] == "dropped"
    at = pause(store, "pause_before", "s")
    events = [
        event
        async for event in build(names={"publish": "release"}).astream(
            None, checkpoint_store=store, run_id=at, migrate={"publish": "release"}
        )
    ]
    assert type(events[-1]).__name__ == "RunFinished"


def test_migrate_is_checked_when_given() -> None:
    graph = build()
    store = InMemoryCheckpointStore()
    with pytest.raises(ValueError, match="'approve', which is not a node of graph 'post'"):
        graph.run(None, checkpoint_store=store, run_id="x", migrate={"review": "approve"})
    with pytest.raises(ValueError, match="checkpoint_store"):
        graph.run(None, run_id="x", migrate={"review": "draft"})
    with pytest.raises(TypeError, match="migrate must map"):
        graph.run(None, checkpoint_store=store, run_id="x", migrate=["review"])  # type: ignore[arg-type]


def test_state_version_options_are_checked() -> None:
    with pytest.raises(ValueError, match="state_version must be an int >= 1"):
        AgentGraph("g", state_version=0)
    with pytest.raises(ValueError, match="keys are the versions a migration upgrades from, 1 to 1"):
        AgentGraph("g", state_version=2, state_migrations={2: upgrade_priority})
    with pytest.raises(TypeError, match=r"state_migrations\[1\] must be a function"):
        AgentGraph("g", state_version=2, state_migrations={1: "upgrade"})  # type: ignore[dict-item]


# ------------------------------------------------------------ threads
def _counter(schema: type[BaseModel], **versioning: Any) -> AgentGraph:
    """One node that counts turns: a conversation's graph, redeployed between turns."""
    graph = AgentGraph("chat", state_schema=schema, **versioning)
    graph.add_node("count", lambda s: {"status": f"turn {s['topic']}"}, next_node=END)
    return graph


def test_a_thread_goes_on_under_a_new_state_version(store: CheckpointStore) -> None:
    first = _counter(PostV1).run(
        {"topic": "1", "priority": "low"}, thread_id="t", checkpoint_store=store
    )
    assert first.stop_reason == "end"
    # The next deploy changed priority's type: without a migration the turn is refused,
    # naming the field, and the thread is left as it was (not busy, nothing written).
    before = stored(store, first.run_id)
    with pytest.raises(GraphChanged) as caught:
        _counter(PostV2).run({"topic": "2"}, thread_id="t", checkpoint_store=store)
    assert caught.value.fields == ("priority",)
    assert stored(store, first.run_id) == before
    upgraded = _counter(PostV2, state_version=2, state_migrations={1: upgrade_priority})
    second = upgraded.run({"topic": "2"}, thread_id="t", checkpoint_store=store)
    assert second.state["priority"] == 0  # "low", upgraded on the way in
    assert second.state["status"] == "turn 2"
    # A turn after that starts from a version-2 state: it is not migrated again.
    third = upgraded.run({"topic": "3"}, thread_id="t", checkpoint_store=store)
    assert (third.state["priority"], third.state["status"]) == (0, "turn 3")


# ------------------------------------------------------------ across processes
def _pause_in_new_process(db: Path, run_id: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "tests.durable.test_graph_changes", "pause", str(db), run_id],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    interrupt_id: str = json.loads(done.stdout.strip().splitlines()[-1])["interrupt_id"]
    return interrupt_id


def test_a_run_paused_by_another_process_is_upgraded(tmp_path: Path) -> None:
    at = _pause_in_new_process(tmp_path / "runs.db", "proc")
    upgraded = build(schema=PostV2, state_version=2, migrations={1: upgrade_priority})
    with SQLiteCheckpointStore(tmp_path / "runs.db") as store:
        with pytest.raises(GraphChanged, match="'priority'"):
            build(schema=PostV2).resume(at, "yes", checkpoint_store=store)
        result = upgraded.resume(at, "yes", checkpoint_store=store)
    assert result.stop_reason == "end"
    assert result.state["priority"] == 2
    assert CALLS["draft"] == 0  # it ran in the other process, once


def test_a_run_paused_by_another_process_goes_on_renamed_and_upgraded(tmp_path: Path) -> None:
    at = _pause_in_new_process(tmp_path / "runs.db", "proc")
    deployed = build(
        names={"review": "approve"},
        schema=PostV2,
        state_version=2,
        migrations={1: upgrade_priority},
    )
    with SQLiteCheckpointStore(tmp_path / "runs.db") as store:
        with pytest.raises(GraphChanged) as caught:
            deployed.resume(at, "yes", checkpoint_store=store)
        assert caught.value.nodes == ("review",)
        assert "gone since: review" in str(caught.value)
        result = deployed.resume(at, "yes", checkpoint_store=store, migrate={"review": "approve"})
    assert result.stop_reason == "end"
    assert result.state["priority"] == 2
    assert result.state["status"] == "published"
    assert CALLS["polish"] == 0  # the once() step ran in the pausing process only


def _main(argv: list[str]) -> None:
    command, db, run_id = argv
    if command != "pause":
        raise SystemExit(f"unknown command {command!r}")
    with SQLiteCheckpointStore(db) as store:
        result = build().run(
            {"topic": "owls", "priority": "high"}, checkpoint_store=store, run_id=run_id
        )
    print(json.dumps({"interrupt_id": result.interrupt_id}))


if __name__ == "__main__":
    _main(sys.argv[1:])
