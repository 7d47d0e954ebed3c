"""FileCheckpointStore: atomic writes, crash recovery and its on-disk layout."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

import pytest

from selectgraph import StoreError
from selectgraph.persistence import (
    Checkpoint,
    CheckpointDecodeError,
    CheckpointNotFound,
    FileCheckpointStore,
    _file,
)

ROOT = Path(__file__).resolve().parents[2]


WHEN = dt.datetime(2026, 11, 23, 3, 0, tzinfo=dt.UTC)


def cp(version: int, checkpoint_id: str | None = None) -> Checkpoint:
    return Checkpoint(
        run_id="run",
        checkpoint_id=checkpoint_id or f"c{version}",
        version=version,
        step=version,
        values={"data": {"v": version}},
        created_at=WHEN,
    )


def fail_on(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Make os.replace raise when it would put ``name`` in place, as a crash there would."""
    real = os.replace

    def replace(src: Any, dst: Any) -> None:
        if Path(dst).name == name:
            raise OSError("simulated crash")
        real(src, dst)

    monkeypatch.setattr(os, "replace", replace)


@pytest.mark.parametrize("crash_at", ["record", "id entry", "HEAD"])
def test_a_crash_mid_save_leaves_the_previous_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, crash_at: str
) -> None:
    store = FileCheckpointStore(tmp_path)
    store.save(cp(1), expected_version=0)
    names = {"record": f"{2:012d}.json", "id entry": _file._key("c2"), "HEAD": "HEAD"}
    with monkeypatch.context() as patch:
        fail_on(patch, names[crash_at])
        with pytest.raises(OSError, match="simulated crash"):
            store.save(cp(2), expected_version=1)
    # A fresh handle, as after a restart: the run is exactly as before the failed save.
    reopened = FileCheckpointStore(tmp_path)
    assert reopened.list("run") == [cp(1)]
    assert reopened.head("run") == cp(1)
    assert reopened.load("c1") == cp(1)
    with pytest.raises(CheckpointNotFound):
        reopened.load("c2")
    assert not list(tmp_path.rglob("*.tmp"))  # no temporary file left behind
    # The next writer, based on the last committed version, goes ahead.
    reopened.save(cp(2, "c2-again"), expected_version=1)
    assert [c.checkpoint_id for c in reopened.list("run")] == ["c1", "c2-again"]
    with pytest.raises(CheckpointNotFound):
        reopened.load("c2")  # its id entry, if written, now points at another checkpoint
    with pytest.raises(CheckpointNotFound):
        reopened.list("run", after="c2")
    # The failed checkpoint may be saved again later under its own id.
    reopened.save(cp(3, "c2"), expected_version=2)
    assert [c.checkpoint_id for c in reopened.list("run")] == ["c1", "c2-again", "c2"]


def test_layout_is_one_json_file_per_checkpoint(tmp_path: Path) -> None:
    store = FileCheckpointStore(tmp_path)
    store.save(cp(1), expected_version=0)
    store.save(cp(2), expected_version=1)
    run_dir = store._run_dir("run")
    assert sorted(p.name for p in run_dir.iterdir()) == [
        f"{1:012d}.json",
        f"{2:012d}.json",
        "HEAD",
        "LOCK",
    ]
    record = json.loads((run_dir / f"{2:012d}.json").read_text())
    assert record["checkpoint_id"] == "c2"
    assert json.loads((run_dir / "HEAD").read_text()) == {"run_id": "run", "version": 2}
    assert repr(store) == f"FileCheckpointStore({str(tmp_path)!r})"


def test_run_ids_of_any_form_are_safe_file_names(tmp_path: Path) -> None:
    store = FileCheckpointStore(tmp_path / "store")
    for run_id in ("../escape", "a/b", "x" * 1000, "ünï"):
        store.save(
            cp(1, f"id-{len(run_id)}-{run_id[:3]}").replace(run_id=run_id), expected_version=0
        )
        assert store.head(run_id) is not None
    assert sorted(p.name for p in (tmp_path / "store").iterdir()) == [
        "FORMAT",
        "ids",
        "runs",
        "threads",
    ]
    assert len(list((tmp_path / "store" / "runs").iterdir())) == 4


@pytest.mark.parametrize("head", [b"{", b'{"version": "2"}', b"[]"])
def test_a_malformed_head_file_is_a_decode_error(tmp_path: Path, head: bytes) -> None:
    store = FileCheckpointStore(tmp_path)
    store.save(cp(1), expected_version=0)
    (store._run_dir("run") / "HEAD").write_bytes(head)
    with pytest.raises(CheckpointDecodeError, match="HEAD"):
        store.save(cp(2), expected_version=1)


def test_malformed_index_and_writes_files_are_decode_errors(tmp_path: Path) -> None:
    store = FileCheckpointStore(tmp_path)
    store.save(cp(1), expected_version=0)
    (tmp_path / "ids" / _file._key("c1")).write_text("garbage")
    with pytest.raises(CheckpointDecodeError, match="id entry"):
        store.load("c1")
    store.save(cp(1, "w1").replace(run_id="w"), expected_version=0)
    store.put_writes("w", "w1", "task", [1])
    writes = next((store._run_dir("w") / "writes").rglob("*.json"))
    for garbage, message in (
        ('{"task_id": 5}', "malformed writes file"),
        ("{oops", "not valid stored JSON"),
        ('{"task_id": "task", "writes": {}}', "expected a list"),
    ):
        writes.write_text(garbage)
        with pytest.raises(CheckpointDecodeError, match=message):
            store.load("w1")


def test_runs_reads_run_ids_from_head_not_directory_names(tmp_path: Path) -> None:
    store = FileCheckpointStore(tmp_path)
    run_ids = ["../escape", "a/b", "x" * 1000, "ünï"]
    for minute, run_id in enumerate(run_ids):
        made = cp(1, f"c-{minute}").replace(
            run_id=run_id, created_at=WHEN + dt.timedelta(minutes=minute)
        )
        store.save(made, expected_version=0)
    assert store.runs() == run_ids[::-1]
    # Left by crashes and by hand: no HEAD (a first save that crashed, a deleted run), not a
    # directory at all. None of them is a run.
    (tmp_path / "runs" / "no-head").mkdir()
    (tmp_path / "runs" / "no-head" / f"{1:012d}.json").write_bytes(b"{}")
    (tmp_path / "runs" / "a-file").write_text("not a run")
    store.save(cp(1, "left").replace(run_id="deleted"), expected_version=0)
    store.delete_run("deleted")
    assert store._run_dir("deleted").is_dir()  # its LOCK stays
    assert FileCheckpointStore(tmp_path).runs() == run_ids[::-1]


def test_runs_skips_a_first_save_that_crashed_before_head(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FileCheckpointStore(tmp_path)
    store.save(cp(1), expected_version=0)
    with monkeypatch.context() as patch:
        fail_on(patch, "HEAD")
        with pytest.raises(OSError, match="simulated crash"):
            store.save(cp(1, "other").replace(run_id="crashed"), expected_version=0)
    assert (store._run_dir("crashed") / f"{1:012d}.json").exists()
    assert store.runs() == ["run"]


@pytest.mark.parametrize(
    ("head", "message"),
    [
        (b"{", "malformed HEAD"),
        (b'{"version": 1}', "malformed HEAD"),
        (b"[]", "malformed HEAD"),
        (b'{"run_id": 5, "version": 1}', "another run"),
        (b'{"run_id": "other", "version": 1}', "another run"),
    ],
)
def test_runs_refuses_a_head_that_does_not_name_its_run(
    tmp_path: Path, head: bytes, message: str
) -> None:
    store = FileCheckpointStore(tmp_path)
    store.save(cp(1), expected_version=0)
    (store._run_dir("run") / "HEAD").write_bytes(head)
    with pytest.raises(CheckpointDecodeError, match=message):
        store.runs()


def test_runs_refuses_a_record_of_another_run(tmp_path: Path) -> None:
    store = FileCheckpointStore(tmp_path)
    store.save(cp(1), expected_version=0)
    store.save(cp(1, "o1").replace(run_id="other"), expected_version=0)
    moved = (store._run_dir("other") / f"{1:012d}.json").read_bytes()
    (store._run_dir("run") / f"{1:012d}.json").write_bytes(moved)
    with pytest.raises(CheckpointDecodeError, match="a checkpoint of run 'other' in run 'run'"):
        store.runs()
    (store._run_dir("run") / f"{1:012d}.json").write_bytes(b"{oops")
    with pytest.raises(CheckpointDecodeError, match="not valid stored JSON"):
        store.runs()


def test_a_directory_a_newer_selectgraph_wrote_is_a_store_error(tmp_path: Path) -> None:
    FileCheckpointStore(tmp_path)
    assert json.loads((tmp_path / "FORMAT").read_bytes()) == {"format": 1}
    (tmp_path / "FORMAT").write_bytes(b'{"format": 2}')
    with pytest.raises(StoreError, match="upgrade selectgraph") as caught:
        FileCheckpointStore(tmp_path)
    assert str(tmp_path) in str(caught.value)
    (tmp_path / "FORMAT").write_bytes(b"\xff not json")
    with pytest.raises(StoreError, match="format None"):
        FileCheckpointStore(tmp_path)


def test_a_file_named_as_the_directory_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / "notadir").write_text("x")
    with pytest.raises(StoreError, match="is a file"):
        FileCheckpointStore(tmp_path / "notadir")


def test_a_directory_from_before_the_format_file_is_marked_and_read(tmp_path: Path) -> None:
    store = FileCheckpointStore(tmp_path)
    store.save(cp(1), expected_version=0)
    (tmp_path / "FORMAT").unlink()
    assert FileCheckpointStore(tmp_path).load("c1") == cp(1)
    assert (tmp_path / "FORMAT").exists()
