"""FileCheckpointStore: one JSON file per checkpoint, written atomically, for one machine.

Layout under the directory::

    runs/<run key>/HEAD                  {"run_id", "version": n, "events": m}: the commit point
    runs/<run key>/LOCK                  locked (flock) while a writer works on the run
    runs/<run key>/<version>.json        one checkpoint, its whole record
    runs/<run key>/writes/<version>/<task key>.json   pending writes of finished tasks
    runs/<run key>/events/<seq>.jsonl    the events one save appended, from seq on, one a line
    ids/<checkpoint id key>              "<run key>/<version>", to find a checkpoint by id
    FORMAT                               {"format": 1}: the layout's version
    threads/<thread key>/THREAD          the thread's record (owner, last run, runs: n...)
    threads/<thread key>/LOCK            locked while a claim, save or change works on it
    threads/<thread key>/runs/<seq>.json one run of the thread (ThreadRun)
    threads/<thread key>/by_run/<run key>  the seqs of a run's records there, to find them
    threads/<thread key>/QUEUE           the tickets of inputs waiting for it, in order

Every file is written to a temporary name, fsynced, then renamed over its
final name (``os.replace`` is atomic), and the directory is fsynced. A save is
committed when HEAD says so: a checkpoint file or id entry left by a writer
that crashed before HEAD moved is ignored, then overwritten by the next save;
so is an events file past HEAD's ``events``. A thread's THREAD file is its
commit point the same way: run records past its ``runs`` are ignored.

A save that names a thread locks the thread, then the run (every writer takes
them in that order), so a claim and the run's save never interleave.
"""

from __future__ import annotations

import builtins
import contextlib
import datetime as dt
import json
import os
from pathlib import Path
from typing import Any, Final

from selectgraph.core._errors import (
    CheckpointConflict,
    CheckpointDecodeError,
    CheckpointNotFound,
    StoreError,
)
from selectgraph.persistence._base import BlockingStore, rebased_child, window
from selectgraph.persistence._checkpoint import Checkpoint
from selectgraph.persistence._codec import (
    decode_record,
    encode_events,
    encode_record,
    seal_entry,
    unseal_entry,
    writes_json,
)
from selectgraph.persistence._file_io import (
    WIDTH,
    fsync_dir,
    key,
    locked,
    remove_tree,
    write_atomic,
)
from selectgraph.persistence._file_threads import FileThreads
from selectgraph.persistence._thread_records import check_owner, thread_to_json, touched

__all__ = ["FORMAT", "FileCheckpointStore"]

FORMAT: Final = 1
"""The directory's format, recorded in its ``FORMAT`` file; records carry checksums from 1 on."""

_key = key  # its name before _file_io: tests and tools reach it as _file._key


class FileCheckpointStore(FileThreads, BlockingStore):
    """Checkpoints as JSON files in a directory: readable, durable, safe across processes.

    Writes are atomic (temporary file, fsync, rename) and a run's writers take
    turns through a lock file, so two processes resuming one run end with
    exactly one winner. Suited to one machine; the directory must not be on a
    network file system whose locks or renames are not atomic.

    Args:
        directory: Where to keep the files; created if missing.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        """The store's directory."""
        try:
            (self.directory / "runs").mkdir(parents=True, exist_ok=True)
            (self.directory / "ids").mkdir(exist_ok=True)
            (self.directory / "threads").mkdir(exist_ok=True)  # a directory made before threads
        except (FileExistsError, NotADirectoryError) as exc:
            raise StoreError(
                f"cannot open file checkpoint store {str(self.directory)!r}: it, or a part of "
                f"its path, is a file ({exc.strerror}); name a directory"
            ) from exc
        self._check_format()

    def _check_format(self) -> None:
        """Refuse a directory a newer selectgraph wrote (``FORMAT``); mark an older one."""
        path = self.directory / "FORMAT"
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            # A new store, or one made before the format was recorded (its records
            # carry no checksums; they load as they are). A directory this process
            # may only read stays unmarked: the marker is only for newer versions.
            with contextlib.suppress(OSError):
                write_atomic(path, b'{"format":%d}' % FORMAT)
            return
        try:
            found = json.loads(raw)["format"]
        except (ValueError, KeyError, TypeError, RecursionError):
            found = None
        if type(found) is not int or found > FORMAT:
            raise StoreError(
                f"file checkpoint store {str(self.directory)!r} has format {found!r} "
                f"({str(path)!r}); this selectgraph reads formats up to {FORMAT}: upgrade "
                "selectgraph to open it (a newer version wrote it)"
            )

    def __repr__(self) -> str:
        return f"FileCheckpointStore({str(self.directory)!r})"

    # -- paths and head --------------------------------------------------------

    def _run_dir(self, run_id: str) -> Path:
        return self.directory / "runs" / key(run_id)

    def _record_path(self, run_dir: Path, version: int) -> Path:
        return run_dir / f"{version:0{WIDTH}d}.json"

    def _version(self, run_dir: Path) -> int:
        return self._head_info(run_dir)[0]

    def _head_info(self, run_dir: Path) -> tuple[int, int]:
        """The run's committed version and number of events (0, 0: no HEAD)."""
        head = run_dir / "HEAD"
        try:
            raw = head.read_bytes()
        except FileNotFoundError:
            return 0, 0
        try:
            record = json.loads(raw)
            version, events = record["version"], record.get("events", 0)  # no events: older
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            raise CheckpointDecodeError(
                "<head>", "version", f"malformed HEAD: {exc}", location=str(head)
            ) from exc
        if type(version) is not int or type(events) is not int:
            raise CheckpointDecodeError(
                "<head>", "version", f"malformed HEAD: {raw!r}", location=str(head)
            )
        return version, events

    @staticmethod
    def _write_head(run_dir: Path, run_id: str, version: int, events: int) -> None:
        head = {"run_id": run_id, "version": version}
        if events:
            head["events"] = events
        write_atomic(run_dir / "HEAD", json.dumps(head).encode())

    def _versions(self, run_dir: Path) -> builtins.list[int]:
        """The committed versions still stored, in order."""
        try:
            names = os.listdir(run_dir)
        except FileNotFoundError:
            return []
        limit = self._version(run_dir)
        found = sorted(
            int(name[:WIDTH])
            for name in names
            if len(name) == WIDTH + 5 and name.endswith(".json") and name[:WIDTH].isdigit()
        )
        return [v for v in found if v <= limit]

    def _locate(self, checkpoint_id: str) -> tuple[Path, int] | None:
        """The run directory and version of a committed checkpoint, or None."""
        try:
            raw = (self.directory / "ids" / key(checkpoint_id)).read_bytes()
        except FileNotFoundError:
            return None
        entry = raw.decode("ascii", "replace")
        run_key, _, version_text = entry.partition("/")
        if (
            not version_text.isdigit()
            or not version_text.isascii()
            or len(run_key) != len(key(""))
            or not run_key.isalnum()
        ):
            raise CheckpointDecodeError(
                checkpoint_id,
                "<index>",
                f"malformed id entry {entry!r}",
                location=str(self.directory / "ids" / key(checkpoint_id)),
            )
        run_dir, version = self.directory / "runs" / run_key, int(version_text)
        if version > self._version(run_dir):  # left by a writer that crashed before HEAD
            return None
        return run_dir, version

    def _read(
        self, run_dir: Path, version: int, checkpoint_id: str, run_id: str = ""
    ) -> Checkpoint | None:
        """The checkpoint stored as ``version`` in ``run_dir``, checked to be of that run.

        None when there is no such file, or ``checkpoint_id`` is given and the file
        holds another; ``run_id`` is the run asked for ("" when not known).
        """
        path = self._record_path(run_dir, version)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        label = checkpoint_id or f"<version {version}>"
        checkpoint = decode_record(raw, label, location=str(path), run_id=run_id)
        if checkpoint_id and checkpoint.checkpoint_id != checkpoint_id:
            return None  # a stale id entry: that version now holds another checkpoint
        if self._run_dir(checkpoint.run_id) != run_dir or checkpoint.version != version:
            # A record copied from another run's folder, or to another version's name.
            raise CheckpointDecodeError(
                checkpoint.checkpoint_id,
                "run_id" if self._run_dir(checkpoint.run_id) != run_dir else "version",
                f"the record of version {checkpoint.version} of run {checkpoint.run_id!r} "
                f"is stored as version {version} of another run's folder"
                if self._run_dir(checkpoint.run_id) != run_dir
                else f"the record of version {checkpoint.version} is stored as version {version}",
                location=str(path),
                run_id=checkpoint.run_id,
            )
        writes_dir = run_dir / "writes" / f"{version:0{WIDTH}d}"
        if writes_dir.is_dir():
            writes = {}
            for entry in sorted(writes_dir.glob("*.json")):
                task, stored = _read_writes(entry, checkpoint)
                writes[task] = stored
            checkpoint = checkpoint.replace(pending_writes={**checkpoint.pending_writes, **writes})
        return checkpoint

    # -- primitives ------------------------------------------------------------

    def _save(self, checkpoint: Checkpoint, expected_version: int) -> None:
        record = encode_record(checkpoint)  # encoding errors surface before anything changes
        events = encode_events(checkpoint.events, checkpoint.run_id)
        named = checkpoint.metadata.get("thread_id")
        thread_id = None if named is None else str(named)
        run_dir = self._run_dir(checkpoint.run_id)
        with contextlib.ExitStack() as stack:
            # The thread first, then the run: the order every writer locks them in.
            thread_dir = None if thread_id is None else self._thread_dir(thread_id)
            if thread_dir is not None and thread_dir.is_dir():
                stack.enter_context(locked(thread_dir / "LOCK"))
            thread = None
            if thread_id is not None:
                # Before the version check: a rolled-back run has no head left to
                # conflict with, and must hear that it lost the thread.
                thread = None if thread_dir is None else self._read_thread(thread_dir)
                check_owner(thread, thread_id, checkpoint.run_id)
            run_dir.mkdir(exist_ok=True)
            stack.enter_context(locked(run_dir / "LOCK"))
            actual, logged = self._head_info(run_dir)
            if actual != expected_version:
                if self._stored(checkpoint.checkpoint_id) == (run_dir, checkpoint.version):
                    return  # this very save was committed before: a retry
                raise CheckpointConflict(
                    checkpoint.run_id, expected_version=expected_version, actual_version=actual
                )
            if self._stored(checkpoint.checkpoint_id) is not None:
                raise ValueError(f"checkpoint id {checkpoint.checkpoint_id!r} is already stored")
            version = checkpoint.version
            write_atomic(self._record_path(run_dir, version), record)
            write_atomic(
                self.directory / "ids" / key(checkpoint.checkpoint_id),
                f"{run_dir.name}/{version}".encode(),
            )
            if events:
                self._write_events(run_dir, logged + 1, events)
            # The commit point: until HEAD says so, the files above are ignored.
            self._write_head(run_dir, checkpoint.run_id, version, logged + len(events))
            if thread is not None and thread_dir is not None:
                write_atomic(
                    thread_dir / "THREAD", thread_to_json(touched(thread, checkpoint.created_at))
                )

    def _load(self, checkpoint_id: str) -> Checkpoint:
        place = self._locate(checkpoint_id)
        checkpoint = self._read(*place, checkpoint_id) if place is not None else None
        if checkpoint is None:
            raise CheckpointNotFound(checkpoint_id)
        return checkpoint

    def _stored(self, checkpoint_id: str) -> tuple[Path, int] | None:
        """Like :meth:`_locate`, but only if the file there still holds this checkpoint."""
        place = self._locate(checkpoint_id)
        if place is None or self._read(*place, checkpoint_id) is None:
            return None
        return place

    def _cursor(self, run_id: str, checkpoint_id: str | None) -> int | None:
        if checkpoint_id is None:
            return None
        place = self._stored(checkpoint_id)
        if place is None or place[0] != self._run_dir(run_id):
            raise CheckpointNotFound(checkpoint_id, where=f"run {run_id!r}")
        return place[1]

    def _list(
        self, run_id: str, limit: int | None, before: str | None, after: str | None
    ) -> builtins.list[Checkpoint]:
        run_dir = self._run_dir(run_id)
        versions = self._versions(run_dir)
        chosen = window(
            versions, versions, self._cursor(run_id, before), self._cursor(run_id, after), limit
        )
        found = [self._read(run_dir, version, "", run_id) for version in chosen]
        return [checkpoint for checkpoint in found if checkpoint is not None]

    def _delete(self, checkpoint_id: str) -> bool:
        place = self._locate(checkpoint_id)
        if place is None:
            return False
        run_dir, version = place
        with locked(run_dir / "LOCK"):
            deleted = self._read(run_dir, version, checkpoint_id)
            if deleted is None:  # deleted meanwhile
                return False
            for later in self._versions(run_dir):
                if later <= version:
                    continue
                child = self._read(run_dir, later, "")
                if child is None or child.parent_id != checkpoint_id:
                    continue
                rebased = rebased_child(deleted, child, self.load_state)
                write_atomic(self._record_path(run_dir, later), encode_record(rebased))
            # The record goes first: once it is gone the checkpoint is, whatever else remains.
            self._record_path(run_dir, version).unlink()
            (self.directory / "ids" / key(checkpoint_id)).unlink(missing_ok=True)
            remove_tree(run_dir / "writes" / f"{version:0{WIDTH}d}")
            fsync_dir(run_dir)
        return True

    def _delete_run(self, run_id: str) -> int:
        run_dir = self._run_dir(run_id)
        if not run_dir.is_dir():
            return 0
        with locked(run_dir / "LOCK"):
            checkpoints = self._list(run_id, None, None, None)
            # HEAD goes first, so a crash part-way leaves a run with no committed versions.
            (run_dir / "HEAD").unlink(missing_ok=True)
            fsync_dir(run_dir)
            for checkpoint in checkpoints:
                (self.directory / "ids" / key(checkpoint.checkpoint_id)).unlink(missing_ok=True)
            remove_tree(run_dir, keep=("LOCK",))
        return len(checkpoints)

    def _head(self, run_id: str) -> Checkpoint | None:
        run_dir = self._run_dir(run_id)
        for version in reversed(self._versions(run_dir)):
            checkpoint = self._read(run_dir, version, "", run_id)
            if checkpoint is not None:
                return checkpoint
        return None

    def _list_runs(self, limit: int | None) -> builtins.list[str]:
        heads: builtins.list[tuple[dt.datetime, str]] = []
        for name in sorted(os.listdir(self.directory / "runs")):
            head = self._newest(self.directory / "runs" / name)
            if head is not None:
                heads.append((head.created_at, head.run_id))
        # Newest head first; runs whose heads were made at the same time in run id order.
        heads.sort(key=lambda head: head[1])
        heads.sort(key=lambda head: head[0], reverse=True)
        return [run_id for _, run_id in heads[:limit]]

    def _newest(self, run_dir: Path) -> Checkpoint | None:
        """The latest checkpoint in a run directory, its run id checked against HEAD; or None.

        None when the directory holds no committed checkpoint (a deleted run, a
        first save that crashed before HEAD, or not a run directory at all).
        """
        head = run_dir / "HEAD"
        try:
            raw = head.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            run_id = json.loads(raw)["run_id"]
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            raise CheckpointDecodeError(
                "<head>", "run_id", f"malformed HEAD: {exc}", location=str(head)
            ) from exc
        if type(run_id) is not str or self._run_dir(run_id) != run_dir:
            # The directory's name is a key made from the run id: HEAD must name that run.
            raise CheckpointDecodeError(
                "<head>", "run_id", f"HEAD names another run: {run_id!r}", location=str(head)
            )
        for version in reversed(self._versions(run_dir)):
            path = self._record_path(run_dir, version)
            try:
                record = path.read_bytes()
            except FileNotFoundError:  # deleted since the directory was listed
                continue
            checkpoint = decode_record(
                record, f"<version {version} of run {run_id!r}>", location=str(path)
            )
            if checkpoint.run_id != run_id:
                raise CheckpointDecodeError(
                    checkpoint.checkpoint_id,
                    "run_id",
                    f"a checkpoint of run {checkpoint.run_id!r} in run {run_id!r}",
                    location=str(path),
                )
            return checkpoint
        return None

    def _put_writes(
        self, run_id: str, checkpoint_id: str, task_id: str, writes: builtins.list[Any]
    ) -> None:
        encoded = writes_json(writes, checkpoint_id, task_id)
        place = self._locate(checkpoint_id)
        run_dir = self._run_dir(run_id)
        if place is None or place[0] != run_dir:
            raise CheckpointNotFound(checkpoint_id, where=f"run {run_id!r}")
        with locked(run_dir / "LOCK"):
            actual = self._version(run_dir)
            if place[1] != actual or self._read(run_dir, place[1], checkpoint_id) is None:
                raise CheckpointConflict(run_id, expected_version=place[1], actual_version=actual)
            directory = run_dir / "writes" / f"{place[1]:0{WIDTH}d}"
            directory.mkdir(parents=True, exist_ok=True)
            entry = b'{"task_id":' + json.dumps(task_id).encode() + b',"writes":' + encoded + b"}"
            write_atomic(directory / f"{key(task_id)}.json", seal_entry(entry, checkpoint_id))


def _read_writes(path: Path, checkpoint: Checkpoint) -> tuple[str, builtins.list[Any]]:
    """The task id and writes a pending-writes file holds (checked against its checksum)."""
    checkpoint_id, run_id = checkpoint.checkpoint_id, checkpoint.run_id
    record = unseal_entry(path.read_bytes(), checkpoint_id, location=str(path), run_id=run_id)
    if type(record) is not dict or type(record.get("task_id")) is not str:
        raise CheckpointDecodeError(
            checkpoint_id,
            "pending_writes",
            "malformed writes file",
            location=str(path),
            run_id=run_id,
        )
    writes = record.get("writes")
    if type(writes) is not list or record.keys() - {"task_id", "writes", "crc"}:
        raise CheckpointDecodeError(
            checkpoint_id,
            f"pending_writes.{record['task_id']}",
            "expected a list of writes",
            location=str(path),
            run_id=run_id,
        )
    return record["task_id"], writes
