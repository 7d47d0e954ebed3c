"""Stored checkpoints are checked: checksums, runs, inflate limit (issue 25, items 2-4).

The tamper fuzz and the bit-flip sweep (``_tamper.py``) run short here and long
under ``@pytest.mark.slow``; a bad trial prints its seed and the change made.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from selectgraph import CheckpointDecodeError, CheckpointNotFound
from selectgraph.persistence import (
    Checkpoint,
    FileCheckpointStore,
    InMemoryCheckpointStore,
    SQLiteCheckpointStore,
)
from selectgraph.persistence._codec import (
    DEFAULT_INFLATE_LIMIT,
    INFLATE_LIMIT_VARIABLE,
    encode_body,
    encode_writes,
)
from selectgraph.persistence._delta import materialize
from selectgraph.persistence._file_io import key
from tests.persistence import _tamper
from tests.persistence.conftest import postgres_or_skip

STATE = {"data": {"n": 1, "when": "now"}, "metadata": {}, "messages": [], "history": []}


def _cp(run_id: str, checkpoint_id: str, version: int, **fields: Any) -> Checkpoint:
    return Checkpoint(
        run_id=run_id,
        checkpoint_id=checkpoint_id,
        version=version,
        step=version - 1,
        values=fields.pop("values", STATE),
        **fields,
    )


# -- the fuzz --------------------------------------------------------------------------


def _place(kind: str, tmp_path: Path) -> _tamper.RowTarget | _tamper.FileTarget:
    if kind == "postgres":
        postgres_or_skip()
    return _tamper.target(kind, tmp_path)


def _assert_clean(tally: _tamper.Tally, name: str) -> None:
    print(tally.line(name))
    assert (tally.raw, tally.silent) == (0, 0), "\n".join(
        f"seed {seed}: {change} -> {outcome}" for seed, change, outcome in tally.bad
    )
    assert tally.typed > 0


@pytest.mark.parametrize("kind", ["sqlite", "file", "postgres"])
def test_tampered_records_are_refused_typed(kind: str, tmp_path: Path) -> None:
    place = _place(kind, tmp_path)
    try:
        _assert_clean(_tamper.fuzz(place, range(40)), f"tamper fuzz, {kind}")
    finally:
        place.close()


@pytest.mark.parametrize("kind", ["sqlite", "file", "postgres"])
def test_bit_flips_in_a_snapshot_are_refused(kind: str, tmp_path: Path) -> None:
    place = _place(kind, tmp_path)
    try:
        _assert_clean(_tamper.flip_bits(place, every=29), f"bit flips, {kind}")
    finally:
        place.close()


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("kind", ["sqlite", "file", "postgres"])
def test_many_tampered_records_are_refused_typed(kind: str, tmp_path: Path) -> None:
    place = _place(kind, tmp_path)
    try:
        _assert_clean(_tamper.fuzz(place, range(1000, 1600)), f"tamper fuzz, {kind}")
        _assert_clean(_tamper.flip_bits(place), f"bit flips, {kind}")
    finally:
        place.close()


# -- checksums -----------------------------------------------------------------------------


def test_a_flipped_bit_in_a_sqlite_body_is_refused_not_read_differently(tmp_path: Path) -> None:
    """The reviewer's case: a flip that turned the key "n" into "e" loaded a different state."""
    store = SQLiteCheckpointStore(tmp_path / "c.db")
    store.save(_cp("r", "c1", 1), expected_version=0)
    store.close()
    with sqlite3.connect(tmp_path / "c.db") as conn:
        (body,) = conn.execute("SELECT body FROM checkpoints").fetchone()
        flipped = bytearray(body)
        flipped[-3] ^= 0x01
        conn.execute("UPDATE checkpoints SET body = ?", (bytes(flipped),))
    store = SQLiteCheckpointStore(tmp_path / "c.db")
    try:
        with pytest.raises(CheckpointDecodeError, match="checksum") as caught:
            store.load_state("c1")
        assert (caught.value.run_id, caught.value.checkpoint_id) == ("r", "c1")
    finally:
        store.close()


def test_a_key_changed_in_a_file_record_is_refused(tmp_path: Path) -> None:
    store = FileCheckpointStore(tmp_path)
    store.save(_cp("r", "c1", 1), expected_version=0)
    path = store._run_dir("r") / f"{1:012d}.json"
    path.write_bytes(path.read_bytes().replace(b'"when"', b'"chen"'))
    with pytest.raises(CheckpointDecodeError, match="checksum"):
        store.load_state("c1")


def test_a_body_moved_to_another_row_is_refused(tmp_path: Path) -> None:
    store = SQLiteCheckpointStore(tmp_path / "c.db")
    store.save(_cp("a", "a1", 1), expected_version=0)
    store.save(_cp("b", "b1", 1, values={**STATE, "data": {"n": 2}}), expected_version=0)
    store.close()
    with sqlite3.connect(tmp_path / "c.db") as conn:
        (body,) = conn.execute("SELECT body FROM checkpoints WHERE checkpoint_id = 'b1'").fetchone()
        conn.execute("UPDATE checkpoints SET body = ? WHERE checkpoint_id = 'a1'", (body,))
    store = SQLiteCheckpointStore(tmp_path / "c.db")
    try:
        with pytest.raises(CheckpointDecodeError, match="checksum"):
            store.load_state("a1")
        assert store.load_state("b1")["data"] == {"n": 2}
    finally:
        store.close()


def test_writes_copied_to_another_task_are_refused(tmp_path: Path) -> None:
    store = SQLiteCheckpointStore(tmp_path / "c.db")
    store.save(_cp("r", "c1", 1), expected_version=0)
    store.put_writes("r", "c1", "t1", [1])
    store.put_writes("r", "c1", "t2", [2])
    store.close()
    with sqlite3.connect(tmp_path / "c.db") as conn:
        conn.execute(
            "UPDATE writes SET body = (SELECT body FROM writes WHERE task_id = 't1') "
            "WHERE task_id = 't2'"
        )
    store = SQLiteCheckpointStore(tmp_path / "c.db")
    try:
        with pytest.raises(CheckpointDecodeError, match=r"pending_writes\.t2"):
            store.load("c1")
    finally:
        store.close()


# -- chains stay in their run ------------------------------------------------------------


def test_a_delta_whose_parent_is_in_another_run_is_refused() -> None:
    """Even read unchecked (the memory store, records from before checksums)."""
    other = _cp("other", "o1", 1)
    delta = _cp("r", "r2", 2, kind="delta", parent_id="o1", values={"set": [["/data/n", 5]]})
    with pytest.raises(CheckpointDecodeError, match="belongs to run 'other'") as caught:
        materialize([other, delta])
    assert caught.value.run_id == "r"

    store = InMemoryCheckpointStore()
    store.save(other, expected_version=0)
    store.save(_cp("r", "r1", 1), expected_version=0)
    store.save(delta, expected_version=1)
    with pytest.raises(CheckpointDecodeError, match="belongs to run 'other'"):
        store.load_state("r2")


def test_a_sqlite_delta_pointed_at_another_runs_checkpoint_is_refused(tmp_path: Path) -> None:
    store = SQLiteCheckpointStore(tmp_path / "c.db")
    store.save(_cp("other", "o1", 1), expected_version=0)
    store.save(_cp("r", "r1", 1), expected_version=0)
    store.save(
        _cp("r", "r2", 2, kind="delta", parent_id="r1", values={"set": [["/data/n", 5]]}),
        expected_version=1,
    )
    store.close()
    with sqlite3.connect(tmp_path / "c.db") as conn:
        conn.execute("UPDATE checkpoints SET parent_id = 'o1' WHERE checkpoint_id = 'r2'")
    store = SQLiteCheckpointStore(tmp_path / "c.db")
    try:
        with pytest.raises(CheckpointDecodeError):
            store.load_state("r2")
    finally:
        store.close()


def test_another_runs_record_copied_into_a_run_folder_is_refused(tmp_path: Path) -> None:
    """The reviewer's case: get_state returned the other run's state, run_id and all."""
    store = FileCheckpointStore(tmp_path)
    store.save(_cp("mine", "m1", 1), expected_version=0)
    store.save(_cp("theirs", "t1", 1, values={**STATE, "data": {"secret": 1}}), expected_version=0)
    mine, theirs = store._run_dir("mine"), store._run_dir("theirs")
    shutil.copyfile(theirs / f"{1:012d}.json", mine / f"{1:012d}.json")
    with pytest.raises(CheckpointDecodeError, match="of run 'theirs', stored as one of") as caught:
        store.head("mine")
    assert caught.value.run_id == "mine"
    with pytest.raises(CheckpointDecodeError):
        store.list("mine")


def test_an_id_entry_pointing_into_another_run_is_refused(tmp_path: Path) -> None:
    store = FileCheckpointStore(tmp_path)
    store.save(_cp("mine", "m1", 1), expected_version=0)
    store.save(_cp("theirs", "t1", 1), expected_version=0)
    (tmp_path / "ids" / key("m1")).write_bytes((tmp_path / "ids" / key("t1")).read_bytes())
    # The entry leads to a record of another id: not this checkpoint (never the other one).
    with pytest.raises(CheckpointNotFound):
        store.load("m1")


# -- records from before checksums --------------------------------------------------------


def test_sqlite_rows_from_before_checksums_still_load(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    old = _cp("r", "c1", 1)
    store = SQLiteCheckpointStore(path)
    store.save(old, expected_version=0)
    store.put_writes("r", "c1", "t", [1])
    store.close()
    with sqlite3.connect(path) as conn:  # as a selectgraph before checksums left it
        conn.execute("UPDATE checkpoints SET body = ?", (encode_body(old)[5:],))
        conn.execute("UPDATE writes SET body = ?", (encode_writes([1], "c1", "t")[5:],))
        conn.execute("DROP TABLE sealed_from")
        conn.execute("DROP TABLE run_dicts")  # schema 4's
        conn.execute("DELETE FROM schema_version WHERE version >= 3")
    store = SQLiteCheckpointStore(path)
    try:
        assert store.load_state("c1") == STATE
        assert store.load("c1").pending_writes == {"t": [1]}
        store.save(_cp("r", "c2", 2, parent_id="c1"), expected_version=1)
    finally:
        store.close()
    with sqlite3.connect(path) as conn:  # a row written since must keep its checksum
        conn.execute("UPDATE checkpoints SET body = ? WHERE checkpoint_id = 'c2'", (b"v{}",))
    store = SQLiteCheckpointStore(path)
    try:
        with pytest.raises(CheckpointDecodeError, match="no checksum"):
            store.load("c2")
    finally:
        store.close()


def test_file_records_from_before_checksums_still_load(tmp_path: Path) -> None:
    store = FileCheckpointStore(tmp_path)
    store.save(_cp("r", "c1", 1), expected_version=0)
    path = store._run_dir("r") / f"{1:012d}.json"
    record = json.loads(path.read_bytes())
    del record["crc"]
    path.write_bytes(json.dumps(record).encode())
    assert store.load_state("c1") == STATE
    record["crb"] = "00000000"  # what a flipped bit in the "crc" key would leave
    path.write_bytes(json.dumps(record).encode())
    with pytest.raises(CheckpointDecodeError, match="unknown fields"):
        store.load("c1")


# -- the inflate limit ---------------------------------------------------------------------


def test_the_default_inflate_limit_is_256_mib() -> None:
    assert DEFAULT_INFLATE_LIMIT == 256 * 1024 * 1024
    assert INFLATE_LIMIT_VARIABLE == "SELECTGRAPH_MAX_INFLATE"


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
def test_a_body_that_inflates_past_the_limit_is_refused(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A small stored body (a few KB) that inflates to 8 MB, with the limit set to 1 MB."""
    big = {**STATE, "data": {"zeros": "0" * (8 * 1024 * 1024)}}
    store: Any = SQLiteCheckpointStore(tmp_path / "c.db") if kind == "sqlite" else None
    if store is None:
        store = InMemoryCheckpointStore()
    try:
        store.save(_cp("r", "c1", 1, values=big), expected_version=0)
        monkeypatch.setenv(INFLATE_LIMIT_VARIABLE, str(1024 * 1024))
        if kind == "sqlite":
            with pytest.raises(CheckpointDecodeError, match="inflates to more than 1048576"):
                store.load_state("c1")
        else:  # the memory store keeps plain JSON: nothing to inflate
            assert store.load_state("c1") == big
        monkeypatch.setenv(INFLATE_LIMIT_VARIABLE, str(64 * 1024 * 1024))
        assert store.load_state("c1") == big
        monkeypatch.setenv(INFLATE_LIMIT_VARIABLE, "lots")
        if kind == "sqlite":
            with pytest.raises(ValueError, match=INFLATE_LIMIT_VARIABLE):
                store.load_state("c1")
    finally:
        store.close()
