"""A tamper fuzz and a bit-flip sweep of stored checkpoints (issue 25, item 2).

Two runs are stored (one paused, answered and finished, with pending writes; one
to take records from). Each trial changes the stored bytes one way (a flipped bit,
a byte, a cut, a column set to another row's value or another type, a record
swapped or copied from the other run...), reads everything back through the
store, and sorts the outcome:

- ``same``: read back exactly as stored (the change did not matter, e.g. an
  unused column, a file past HEAD);
- ``typed``: a :class:`~selectgraph.SelectGraphError` (``CheckpointDecodeError``,
  ``CheckpointNotFound``...);
- ``raw``: any other exception (a bug);
- ``silent``: read back without an error but different (a bug).

Changes that only remove or roll back whole records (deleting a row, renaming a
run, moving HEAD back) are not made: a checksum of each record cannot see a
record that is gone. The SQL schemas' foreign keys are on, as in the stores, so a
row cannot be pointed at a run or checkpoint that does not exist (that too would
be a row gone); pointed at another one that does exist, it is a trial.

Every trial comes from ``random.Random(seed)``, and a bad outcome is reported
with its seed and a description of the change, so
``python -m tests.persistence._tamper --store sqlite --seed 7 --trials 1`` replays it.
"""

from __future__ import annotations

import argparse
import os
import random
import secrets
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from selectgraph import END, AgentGraph, InterruptRequest, SelectGraphError
from selectgraph.persistence import (
    CheckpointStore,
    FileCheckpointStore,
    PostgresCheckpointStore,
    SQLiteCheckpointStore,
)

POSTGRES_URL = os.environ.get(
    "SELECTGRAPH_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
RUN, OTHER = "r1", "r2"


@dataclass
class Tally:
    """Outcomes of a fuzz, and the first few bad trials as ``(seed, change, outcome)``."""

    trials: int = 0
    same: int = 0
    typed: int = 0
    raw: int = 0
    silent: int = 0
    bad: list[tuple[int, str, str]] = field(default_factory=list)

    def add(self, seed: int, change: str, outcome: str, detail: str = "") -> None:
        self.trials += 1
        setattr(self, outcome, getattr(self, outcome) + 1)
        if outcome in ("raw", "silent") and len(self.bad) < 20:
            self.bad.append((seed, change, f"{outcome}: {detail}"[:300]))

    def line(self, name: str) -> str:
        return (
            f"{name}: {self.trials} trials, {self.typed} typed errors, {self.same} unchanged, "
            f"{self.raw} raw exceptions, {self.silent} silently different"
        )


# -- the stored runs -------------------------------------------------------------


def _review(state: dict[str, Any]) -> Any:
    answer = yield InterruptRequest("Publish?", {"draft": state["draft"]})
    return {"approved": answer == "yes", "notes": [state["draft"]] * 3}


def _graph() -> AgentGraph:
    graph = AgentGraph("post")
    graph.add_node("draft", lambda s: {"draft": f"A post about {s['topic']}."}, next_node="review")
    graph.add_node("review", _review, next_node="publish")
    graph.add_node("publish", lambda s: {"status": "published", "n": 7}, next_node=END)
    return graph


def fill(store: CheckpointStore) -> None:
    """Store the two runs every trial starts from."""
    graph = _graph()
    for run_id, topic in ((RUN, "owls"), (OTHER, "bats")):
        paused = graph.run({"topic": topic}, checkpoint_store=store, run_id=run_id)
        assert paused.interrupt_id is not None
        head = store.head(run_id)
        assert head is not None
        store.put_writes(run_id, head.checkpoint_id, "t-1", [{"key": "x", "value": topic}])
        graph.resume(paused.interrupt_id, "yes", checkpoint_store=store)


def observe(store: CheckpointStore) -> Any:
    """Everything a reader gets of both runs: their checkpoints, states and heads."""
    seen = []
    for run_id in (RUN, OTHER):
        listed = store.list(run_id)
        seen.append(
            (
                listed,
                [store.load_state(cp.checkpoint_id) for cp in listed],
                [store.load(cp.checkpoint_id) for cp in listed],
                store.head(run_id),
            )
        )
    return seen


def classify(read: Callable[[], Any], baseline: Any) -> tuple[str, str]:
    """(outcome, detail) of reading after a change."""
    try:
        got = read()
    except SelectGraphError:
        return "typed", ""
    except Exception as exc:  # what the fuzz looks for, reported
        return "raw", f"{type(exc).__name__}: {exc}"
    return ("same", "") if got == baseline else ("silent", repr(got)[:200])


# -- changing stored values ------------------------------------------------------------


def mutate_bytes(rng: random.Random, raw: bytes, others: list[bytes]) -> tuple[bytes, str]:
    """``raw`` changed one way; and how."""
    if not raw:
        return b"\x00", "empty -> one byte"
    kind = rng.choice(["flip", "flip", "byte", "cut", "other", "append", "splice"])
    i = rng.randrange(len(raw))
    if kind == "flip":
        bit = rng.randrange(8)
        return raw[:i] + bytes([raw[i] ^ (1 << bit)]) + raw[i + 1 :], f"flip bit {bit} of byte {i}"
    if kind == "byte":
        value = rng.randrange(256)
        return raw[:i] + bytes([value]) + raw[i + 1 :], f"byte {i} = {value}"
    if kind == "cut":
        return raw[:i], f"cut at {i}"
    if kind == "append":
        return raw + bytes(rng.randrange(256) for _ in range(rng.randint(1, 8))), "appended"
    candidates = [o for o in others if o != raw]
    if not candidates:
        return raw[:i], f"cut at {i}"
    other = rng.choice(candidates)
    if kind == "other":
        return other, "replaced by another record"
    j = rng.randrange(len(other))
    return raw[:i] + other[j:], f"spliced at {i} with another record from {j}"


def mutate_value(rng: random.Random, value: Any, column: list[Any]) -> tuple[Any, str]:
    """A column's value changed one way (another row's, another type, nudged); and how."""
    others = [v for v in column if v != value]
    kind = rng.choice(["other", "other", "type", "nudge", "null"])
    if kind == "other" and others:
        return rng.choice(others), "another row's value"
    if kind == "null":
        return None, "NULL"
    if kind == "nudge" and type(value) is int:
        delta = rng.choice([-2, -1, 1, 2, 1000])
        return value + delta, f"{delta:+d}"
    if kind == "nudge" and type(value) is str and value:
        i = rng.randrange(len(value))
        return value[:i] + rng.choice("0az|/") + value[i + 1 :], f"char {i} changed"
    return rng.choice(["text", 12, 1.5, b"\x00\x01", "[]"]), "another type"


# -- SQLite and PostgreSQL: rows -----------------------------------------------------------

_SQLITE_TABLES = {
    "checkpoints": (
        ("id",),
        [
            *("run_key", "version", "id_hash", "checkpoint_id", "parent_id", "step", "kind"),
            *("created_at", "body"),
        ],
    ),
    "writes": (("checkpoint", "task_id"), ["checkpoint", "task_id", "body"]),
    "runs": (("run_key",), ["version"]),
}
_POSTGRES_TABLES = {
    "checkpoints": (
        ("checkpoint_id",),
        ["checkpoint_id", "run_id", "version", "parent_id", "step", "kind", "created_at", "body"],
    ),
    "writes": (("checkpoint_id", "task_id"), ["checkpoint_id", "task_id", "body"]),
    "runs": (("run_id",), ["version"]),
}


class RowTarget:
    """A SQL store's tables: read rows, change one value, put everything back."""

    def __init__(self, kind: str, where: Path) -> None:
        self.kind = kind
        self.tables = _SQLITE_TABLES if kind == "sqlite" else _POSTGRES_TABLES
        if kind == "sqlite":
            self.path = where / "tamper.db"
            store: CheckpointStore = SQLiteCheckpointStore(self.path)
        else:
            self.schema = f"sg_tamper_{os.getpid()}_{secrets.token_hex(3)}"
            store = PostgresCheckpointStore(POSTGRES_URL, schema=self.schema)
        fill(store)
        self.baseline = observe(store)
        store.close()
        if kind == "sqlite":
            self.pristine = where / "pristine.db"
            shutil.copyfile(self.path, self.pristine)
        else:
            self.saved = {
                table: self._rows(table, ["*"]) for table in ("runs", "checkpoints", "writes")
            }

        self._shared: CheckpointStore | None = None

    def open(self) -> CheckpointStore:
        """A store on the changed tables: SQLite's opened anew (its file was replaced);
        PostgreSQL's kept open (it remembers nothing the changes touch)."""
        if self.kind == "sqlite":
            return SQLiteCheckpointStore(self.path)
        if self._shared is None:
            self._shared = PostgresCheckpointStore(POSTGRES_URL, schema=self.schema)
        return self._shared

    @contextmanager
    def _conn(self) -> Iterator[Any]:
        if self.kind == "sqlite":
            conn = sqlite3.connect(self.path, isolation_level=None)
            # As the store's own connection does: a row pointed at no run or no
            # checkpoint is refused by the schema (it would be a row deleted).
            conn.execute("PRAGMA foreign_keys=ON")
            try:
                yield conn
            finally:
                conn.close()
        else:
            import psycopg

            with psycopg.connect(POSTGRES_URL, autocommit=True) as pg:
                yield pg

    def _name(self, table: str) -> str:
        return table if self.kind == "sqlite" else f'"{self.schema}".{table}'

    def _rows(self, table: str, columns: list[str]) -> list[tuple[Any, ...]]:
        with self._conn() as conn:
            rows = conn.execute(f"SELECT {', '.join(columns)} FROM {self._name(table)}").fetchall()
        return [tuple(bytes(v) if isinstance(v, memoryview) else v for v in row) for row in rows]

    def change(self, rng: random.Random) -> str:
        """Change one stored value at random; describe it."""
        table = rng.choice(["checkpoints"] * 6 + ["writes"] * 2 + ["runs"])
        keys, columns = self.tables[table]
        column = rng.choice(["body"] * 4 + columns) if "body" in columns else rng.choice(columns)
        rows = self._rows(table, [*keys, column])
        if not rows:
            return "nothing to change"
        row = rng.choice(rows)
        key, value = row[: len(keys)], row[len(keys)]
        values = [r[len(keys)] for r in rows]
        if isinstance(value, bytes) and rng.random() < 0.85:
            new, how = mutate_bytes(rng, value, [v for v in values if isinstance(v, bytes)])
        else:
            new, how = mutate_value(rng, value, values)
        mark = "?" if self.kind == "sqlite" else "%s"
        sql = f"UPDATE {self._name(table)} SET {column} = {mark} WHERE " + " AND ".join(
            f"{k} = {mark}" for k in keys
        )
        try:
            with self._conn() as conn:
                conn.execute(sql, (new, *key))
        except Exception as exc:  # the database refused the change
            return f"refused by the database ({type(exc).__name__})"
        return f"{table}.{column} of {key!r}: {how}"

    def restore(self) -> None:
        if self.kind == "sqlite":
            shutil.copyfile(self.pristine, self.path)
            for suffix in ("-wal", "-shm"):
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)
            return
        with self._conn() as conn:
            conn.execute(
                f"TRUNCATE {self._name('writes')}, {self._name('checkpoints')}, "
                f"{self._name('runs')} CASCADE"
            )
            for table in ("runs", "checkpoints", "writes"):
                for row in self.saved[table]:
                    marks = ", ".join(["%s"] * len(row))
                    conn.execute(f"INSERT INTO {self._name(table)} VALUES ({marks})", row)

    def first_snapshot(self) -> tuple[Callable[[bytes], None], bytes]:
        """(write a body, the stored body) of run r1's first checkpoint, a snapshot."""
        checkpoint_id = self.baseline[0][0][0].checkpoint_id
        (raw,) = [
            r[1]
            for r in self._rows("checkpoints", ["checkpoint_id", "body"])
            if r[0] == checkpoint_id
        ]

        def write(body: bytes) -> None:
            mark = "?" if self.kind == "sqlite" else "%s"
            with self._conn() as conn:
                conn.execute(
                    f"UPDATE {self._name('checkpoints')} SET body = {mark} "
                    f"WHERE checkpoint_id = {mark}",
                    (body, checkpoint_id),
                )

        return write, raw

    def close(self) -> None:
        if self._shared is not None:
            self._shared.close()
        if self.kind == "postgres":
            with self._conn() as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')


# -- the file store: files -------------------------------------------------------------


class FileTarget:
    """A file store's directory: change one file, put the directory back."""

    def __init__(self, where: Path) -> None:
        self.path = where / "store"
        store = FileCheckpointStore(self.path)
        fill(store)
        self.baseline = observe(store)
        self.pristine = where / "pristine"
        shutil.copytree(self.path, self.pristine)
        self.run_dir = store._run_dir(RUN)
        self.other_dir = store._run_dir(OTHER)

    def open(self) -> CheckpointStore:
        return FileCheckpointStore(self.path)

    def _files(self, directory: Path) -> list[Path]:
        return sorted(
            p for p in directory.rglob("*") if p.is_file() and p.name not in ("LOCK", "HEAD")
        )

    def change(self, rng: random.Random) -> str:
        run_files = self._files(self.run_dir)
        other_files = self._files(self.other_dir)
        ids = sorted((self.path / "ids").iterdir())
        kind = rng.choice(["record"] * 6 + ["copy"] * 2 + ["id"] * 2 + ["head"])
        if kind == "head":  # HEAD's run id (moving HEAD back is a rollback: not made)
            head = self.run_dir / "HEAD"
            text = head.read_text().replace(f'"{RUN}"', f'"{OTHER}"')
            head.write_text(text)
            return "HEAD names the other run"
        if kind == "copy":  # another run's file over one of this run's, same name or not
            source = rng.choice(other_files)
            target = rng.choice(run_files)
            shutil.copyfile(source, target)
            return f"{source.relative_to(self.path)} copied over {target.relative_to(self.path)}"
        if kind == "id":
            entry = rng.choice(ids)
            raw, how = mutate_bytes(rng, entry.read_bytes(), [e.read_bytes() for e in ids])
            entry.write_bytes(raw)
            return f"id entry {entry.name[:8]}: {how}"
        target = rng.choice(run_files)
        raw = target.read_bytes()
        new, how = mutate_bytes(rng, raw, [f.read_bytes() for f in run_files + other_files])
        target.write_bytes(new)
        return f"{target.relative_to(self.path)}: {how}"

    def restore(self) -> None:
        shutil.rmtree(self.path)
        shutil.copytree(self.pristine, self.path)

    def first_snapshot(self) -> tuple[Callable[[bytes], None], bytes]:
        path = self.run_dir / f"{1:012d}.json"

        def write(body: bytes) -> None:
            path.write_bytes(body)

        return write, path.read_bytes()

    def close(self) -> None:
        return None


def target(kind: str, where: Path) -> RowTarget | FileTarget:
    """The storage of a ``kind`` store ("sqlite", "postgres", "file") under ``where``."""
    return FileTarget(where) if kind == "file" else RowTarget(kind, where)


def _read(place: RowTarget | FileTarget) -> Callable[[], Any]:
    def read() -> Any:
        store = place.open()
        try:
            return observe(store)
        finally:
            if store is not getattr(place, "_shared", None):
                store.close()

    return read


def fuzz(place: RowTarget | FileTarget, seeds: range) -> Tally:
    """One trial per seed: change, read, sort, restore."""
    tally = Tally()
    for seed in seeds:
        change = place.change(random.Random(seed))
        try:
            if change.startswith(("refused", "nothing")):
                continue
            outcome, detail = classify(_read(place), place.baseline)
            tally.add(seed, change, outcome, detail)
        finally:
            place.restore()
    return tally


def flip_bits(place: RowTarget | FileTarget, every: int = 1) -> Tally:
    """Flip each bit (every ``every``-th) of run r1's first snapshot, one at a time."""
    write, raw = place.first_snapshot()
    tally = Tally()
    for bit in range(0, len(raw) * 8, every):
        i, b = divmod(bit, 8)
        write(raw[:i] + bytes([raw[i] ^ (1 << b)]) + raw[i + 1 :])
        outcome, detail = classify(_read(place), place.baseline)
        tally.add(bit, f"flip bit {b} of byte {i}", outcome, detail)
    write(raw)
    return tally


def main() -> None:  # pragma: no cover - the measuring command, run by hand
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", action="append", choices=["sqlite", "postgres", "file"])
    parser.add_argument("--seed", type=int, default=0, help="the first trial's seed")
    parser.add_argument("--trials", type=int, default=1500)
    args = parser.parse_args()
    import tempfile

    for kind in args.store or ["sqlite", "postgres", "file"]:
        with tempfile.TemporaryDirectory() as where:
            place = target(kind, Path(where))
            try:
                tally = fuzz(place, range(args.seed, args.seed + args.trials))
                print(tally.line(f"tamper fuzz, {kind}"))
                flips = flip_bits(place)
                print(flips.line(f"bit flips, {kind}"))
                for seed, change, outcome in tally.bad + flips.bad:
                    print(f"  seed {seed}: {change} -> {outcome}")
            finally:
                place.close()


if __name__ == "__main__":  # pragma: no cover
    main()
