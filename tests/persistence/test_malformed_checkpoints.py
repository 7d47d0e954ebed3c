"""Well-formed JSON holding the wrong shapes: every reader gets CheckpointDecodeError (issue 25).

Each case stores, as a paused run's new head, a checkpoint whose JSON is valid
(and whose checksum is right: it went through ``store.save``) but whose fields
have shapes the runner cannot use. ``get_state``, ``get_history``, ``resume``
and continuing the run must each raise the typed decode error naming the run,
the checkpoint and the path, never a ``KeyError``/``TypeError``/``ValueError``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from selectgraph import (
    END,
    AgentGraph,
    CheckpointDecodeError,
    FileCheckpointStore,
    InterruptRequest,
    ResumeError,
    SQLiteCheckpointStore,
)
from selectgraph.persistence import CheckpointStore, new_checkpoint_id
from selectgraph.persistence._file_io import key


def _review(state: dict[str, Any]) -> Any:
    answer = yield InterruptRequest("Publish?", {"draft": state["draft"]})
    return {"approved": answer == "yes"}


def _graph() -> AgentGraph:
    graph = AgentGraph("post")
    graph.add_node("draft", lambda state: {"draft": "text"}, next_node="review")
    graph.add_node("review", _review, next_node=END)
    return graph


def _paused(store: CheckpointStore, *, gate: bool = False) -> str:
    """Run "r1" until it asks its question (its interrupt id), or, with ``gate``, until
    a pause gate stops it before the question (a run that ``run(None)`` continues)."""
    if gate:
        graph = _graph()
        paused = graph.run({"t": 1}, checkpoint_store=store, run_id="r1", pause_before=["review"])
        assert paused.stop_reason == "paused"
        return ""
    result = _graph().run({"topic": "owls"}, checkpoint_store=store, run_id="r1")
    assert result.stop_reason == "interrupted"
    assert result.interrupt_id is not None
    return result.interrupt_id


Change = Callable[[dict[str, Any]], None]
"""Edits the head checkpoint's fields (``values``, ``next``, ``interrupts``, ``metadata``)."""


def _store_changed(store: CheckpointStore, change: Change) -> str:
    """Save the run's head again, changed, as a new snapshot head; its id."""
    head = store.head("r1")
    assert head is not None
    fields: dict[str, Any] = {
        "values": store.load_state(head.checkpoint_id),
        "next": list(head.next),
        "interrupts": {k: dict(v) for k, v in head.interrupts.items()},
        "metadata": dict(head.metadata),
        "pending_writes": dict(head.pending_writes),
    }
    change(fields)
    changed = head.replace(
        checkpoint_id=new_checkpoint_id(),
        version=head.version + 1,
        parent_id=head.checkpoint_id,
        kind="snapshot",
        **fields,
    )
    store.save(changed, expected_version=head.version)
    return changed.checkpoint_id


def _first_interrupt(fields: dict[str, Any]) -> dict[str, Any]:
    if not fields["interrupts"]:  # a run stopped by a gate: give it a question
        fields["interrupts"]["r1|2:review|0"] = {"node": "review", "prompt": "?", "index": 0}
    return next(iter(fields["interrupts"].values()))


CASES: dict[str, tuple[Change, str]] = {
    "an interrupt index that is not an int": (
        lambda f: _first_interrupt(f).update(index="0"),
        "interrupts[",
    ),
    "a memo that is not an object": (lambda f: f["metadata"].update(memo=[1, 2]), "metadata.memo"),
    "a memo entry that is not an object": (
        lambda f: f["metadata"].update(memo={"t": [1]}),
        "metadata.memo",
    ),
    "a children entry of the wrong shape": (
        lambda f: f["metadata"].update(children={"1:sub": ["state"]}),
        "metadata.children",
    ),
    "a child without its counters": (
        lambda f: f["metadata"].update(
            children={"1:sub": {"state": {"data": {}, "metadata": {}}, "next": []}}
        ),
        "metadata.children",
    ),
    "a history_start that is not an int": (
        lambda f: f["metadata"].update(history_start="2"),
        "metadata.history_start",
    ),
    "a negative history_start": (
        lambda f: f["metadata"].update(history_start=-5),
        "metadata.history_start",
    ),
    "usage fields of the wrong type": (
        lambda f: f["metadata"].update(usage={"input_tokens": "many"}),
        "metadata.usage.input_tokens",
    ),
    "usage that is a list": (lambda f: f["metadata"].update(usage=[1]), "metadata.usage"),
    "a state without data": (lambda f: f["values"].pop("data"), "values.data"),
    "a state without metadata": (lambda f: f["values"].pop("metadata"), "values.metadata"),
    "a goto that is a list": (
        lambda f: f.update(next=[{"after": "review", "goto": ["draft"]}]),
        "next[0].goto",
    ),
}


def _readers(store: CheckpointStore, interrupt_id: str) -> dict[str, Callable[[], Any]]:
    graph = _graph()
    return {
        "get_state": lambda: graph.get_state("r1", checkpoint_store=store),
        "get_history": lambda: list(graph.get_history("r1", checkpoint_store=store)),
        "resume": lambda: graph.resume(interrupt_id, "yes", checkpoint_store=store),
        "continue": lambda: graph.run(None, checkpoint_store=store, run_id="r1"),
    }


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("reader", ["get_state", "get_history", "resume", "continue"])
def test_a_misshapen_field_is_a_decode_error_for_every_reader(
    tmp_path: Path, case: str, reader: str
) -> None:
    store = SQLiteCheckpointStore(tmp_path / "c.db")
    change, path = CASES[case]
    try:
        interrupt_id = _paused(store, gate=reader == "continue")
        bad = _store_changed(store, change)
        error = _raised(_readers(store, interrupt_id)[reader])
    finally:
        store.close()
    if error is None:
        # Only a look at a state that lacks a part may go on: GraphState.from_dict
        # gives it its default. A run is never rebuilt from it.
        assert case.startswith("a state without"), f"{reader} read {case} without an error"
        assert reader.startswith("get_"), f"{reader} read {case} without an error"
    elif isinstance(error, CheckpointDecodeError):
        assert error.checkpoint_id == bad
        assert error.run_id == "r1"
        assert error.path.startswith(path), error.path
        assert "'r1'" in str(error)
    else:
        # A reader that stops first for a reason of its own (a run waiting for an
        # answer cannot be continued) is fine: nothing raw escaped.
        assert isinstance(error, ResumeError), error
        assert reader in ("continue", "resume"), error


def _raised(read: Callable[[], Any]) -> Exception | None:
    """What ``read`` raised of the typed errors a reader may give (anything else escapes)."""
    try:
        read()
    except (CheckpointDecodeError, ResumeError) as error:
        return error
    return None


def test_a_writes_row_stored_as_text_is_read_or_refused_typed(tmp_path: Path) -> None:
    store = SQLiteCheckpointStore(tmp_path / "c.db")
    try:
        _paused(store)
        head = store.head("r1")
        assert head is not None
        store.put_writes("r1", head.checkpoint_id, "t", [1])
    finally:
        store.close()
    with sqlite3.connect(tmp_path / "c.db") as conn:
        conn.execute("UPDATE writes SET body = CAST('[1, 2]' AS TEXT)")
    store = SQLiteCheckpointStore(tmp_path / "c.db")
    try:
        # Text where the store wrote a checksummed blob: refused...
        with pytest.raises(CheckpointDecodeError, match="no checksum"):
            store.load(head.checkpoint_id)
    finally:
        store.close()
    _unsealed(tmp_path / "c.db")
    store = SQLiteCheckpointStore(tmp_path / "c.db")
    try:
        # ...and in a row from before checksums, read as text.
        assert store.load(head.checkpoint_id).pending_writes["t"] == [1, 2]
        with sqlite3.connect(tmp_path / "c.db") as conn:
            conn.execute("UPDATE writes SET body = CAST('[1, ' AS TEXT)")
        with pytest.raises(CheckpointDecodeError, match=r"pending_writes\.t") as caught:
            store.load(head.checkpoint_id)
        assert caught.value.run_id == "r1"
    finally:
        store.close()


def test_a_file_store_id_entry_that_is_not_utf8_is_a_decode_error(tmp_path: Path) -> None:
    store = FileCheckpointStore(tmp_path)
    _paused(store)
    head = store.head("r1")
    assert head is not None
    (tmp_path / "ids" / key(head.checkpoint_id)).write_bytes(b"\xff\xfe/\x80")
    with pytest.raises(CheckpointDecodeError, match="id entry"):
        store.load(head.checkpoint_id)


def _unsealed(path: Path) -> None:
    """Make every row of a SQLite store one written before checksums (read unchecked)."""
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE sealed_from SET id = 1000000000")


def _as_before_checksums(durable: Any, checkpoint_id: str) -> Any:
    """The store again, reading ``checkpoint_id`` as a row from before checksums."""
    if durable.kind == "sqlite":
        _unsealed(Path(durable.spec["target"]))
    elif durable.kind == "postgres":
        import psycopg
        from psycopg import sql

        from tests.persistence.conftest import POSTGRES_URL

        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(
                sql.SQL("INSERT INTO {} VALUES (%s)").format(
                    sql.Identifier(durable.spec["schema"], "unsealed")
                ),
                (checkpoint_id,),
            )
    return durable.reopen()


def _nested(depth: int) -> bytes:
    return b'{"values": ' + b"[" * depth + b"]" * depth + b"}"


@pytest.mark.parametrize("depth", [10_000, 200_000])
def test_deeply_nested_stored_json_is_a_decode_error(durable: Any, depth: int) -> None:
    """json.loads raises RecursionError on deep nesting: every durable store reports it typed.

    The row is one from before checksums (a body with a checksum is refused before
    its JSON is read, unless the checksum is right).
    """
    interrupt_id = _paused(durable.store)
    head = durable.store.head("r1")
    assert head is not None
    durable.corrupt(head.checkpoint_id, _nested(depth))
    store = _as_before_checksums(durable, head.checkpoint_id)
    graph = _graph()
    for read in (
        lambda: store.load(head.checkpoint_id),
        lambda: graph.get_state("r1", checkpoint_store=store),
        lambda: graph.resume(interrupt_id, "yes", checkpoint_store=store),
    ):
        with pytest.raises(CheckpointDecodeError) as caught:
            read()
        # A file read as a run's head is named by its file (the id is inside the record).
        assert (
            caught.value.checkpoint_id == head.checkpoint_id
            or f"{head.version:012d}.json" in caught.value.location
        )
        assert "nested too deeply" in str(caught.value)


def test_a_next_naming_a_node_its_own_graph_lacks_is_refused_typed(tmp_path: Path) -> None:
    store = SQLiteCheckpointStore(tmp_path / "c.db")
    try:
        _paused(store, gate=True)
        _store_changed(store, lambda f: f.update(next=[{"after": "zz"}]))
        with pytest.raises(ResumeError, match=r"'zz' in its next.*inconsistent"):
            _graph().run(None, checkpoint_store=store, run_id="r1")  # was a raw KeyError
    finally:
        store.close()


def test_branch_writes_whose_update_is_not_an_object_are_a_decode_error(tmp_path: Path) -> None:
    store = SQLiteCheckpointStore(tmp_path / "c.db")
    try:
        _paused(store, gate=True)
        writes = {"r1:draft:0/review": [{"outputs": [["review", {"update": 1}]]}]}
        bad = _store_changed(store, lambda f: f.update(pending_writes=writes))
        with pytest.raises(CheckpointDecodeError) as caught:  # was a raw TypeError
            _graph().run(None, checkpoint_store=store, run_id="r1")
    finally:
        store.close()
    assert caught.value.checkpoint_id == bad
    assert caught.value.path.endswith(".update"), caught.value.path
