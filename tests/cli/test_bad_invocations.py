"""Every kind of bad invocation ends with exit code 2 and one line saying what was wrong.

Issue 25 (item 10) counted 21 of 59 bad invocations that printed a Python traceback
and exited 1. Each kind is a row here: a spec file that cannot be read, an ``--input``
nested too deeply, a store that cannot be opened or read. The rows run the real
command line in this process through :func:`selectgraph.cli.main` (an exception
escaping it is the traceback a user would see); a few also run the console script.
"""

from __future__ import annotations

import io
import sqlite3
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from selectgraph import SQLiteCheckpointStore
from selectgraph.cli import main
from selectgraph.persistence._postgres import PostgresCheckpointStore
from tests.cli.graphs import approval
from tests.cli.test_cli import selectgraph

DEEP = 5_000
"""Levels of nesting: past what Python's parsers (and its recursion limit) take."""
LONG_INT = "9" * 5_000
"""Digits: past the 4,300 Python reads as an int."""

SPEC_FILES: dict[str, bytes] = {
    "timestamp.yaml": b"name: g\ndescription: !!timestamp 2001-13-45\n",
    "int.yaml": b"name: g\nmax_steps: !!int abc\n",
    "nul.yaml": b"name: a\x00b\n",
    "nul_escaped.yaml": b'name: "a\\0b"\n',
    "surrogate.yaml": b'name: "\\uD800"\n',
    "surrogate.json": b'{"name": "\\ud800"}',
    "long_int.yaml": f"max_steps: {LONG_INT}\n".encode(),
    "long_int.json": f'{{"max_steps": {LONG_INT}}}'.encode(),
    "deep.yaml": ("name: " + "[" * DEEP + "]" * DEEP).encode(),
    "deep.json": ('{"name": ' + "[" * DEEP + "]" * DEEP + "}").encode(),
    "latin1.yaml": b"name: caf\xe9\n",
    "deep_input.json": ('{"x": ' + "[" * DEEP + "]" * DEEP + "}").encode(),
    "notadb.txt": b"this is text, not a SQLite database; " * 4,
}


@dataclass(frozen=True)
class Row:
    """A bad invocation and a fragment of the one line that must say what was wrong."""

    args: tuple[str, ...]
    message: str


GRAPH = "tests.cli.graphs:approval"

ROWS: dict[str, Row] = {
    # Spec files (GraphSpec loaders).
    "spec: bad timestamp": Row(("run", "{tmp}/timestamp.yaml"), "cannot read timestamp value"),
    "spec: !!int abc": Row(("run", "{tmp}/int.yaml"), "cannot read int value"),
    "spec: raw NUL": Row(("run", "{tmp}/nul.yaml"), "unacceptable character #x0000"),
    "spec: escaped NUL": Row(("run", "{tmp}/nul_escaped.yaml"), "name: a NUL character"),
    "spec: lone surrogate (YAML)": Row(("run", "{tmp}/surrogate.yaml"), "a lone surrogate"),
    "spec: lone surrogate (JSON)": Row(("run", "{tmp}/surrogate.json"), "a lone surrogate"),
    "spec: 5,000-digit int (YAML)": Row(("graph", "{tmp}/long_int.yaml"), "5,000 digits"),
    "spec: 5,000-digit int (JSON)": Row(("graph", "{tmp}/long_int.json"), "5,000 digits"),
    "spec: deep YAML": Row(("run", "{tmp}/deep.yaml"), "invalid YAML: nested too deeply"),
    "spec: deep JSON": Row(("run", "{tmp}/deep.json"), "invalid JSON: nested too deeply"),
    "spec: not UTF-8": Row(("run", "{tmp}/latin1.yaml"), "not UTF-8 text"),
    # --input.
    "input: deep inline JSON": Row(
        ("run", GRAPH, "--input", "[" * DEEP + "]" * DEEP), "--input: the JSON is nested too"
    ),
    "input: deep JSON file": Row(
        ("run", GRAPH, "--input", "@{tmp}/deep_input.json"), "the JSON is nested too deeply"
    ),
    "input: metadata nested deeper than a store keeps": Row(
        (
            "threads",
            "send",
            GRAPH,
            "t1",
            "hi",
            "--store",
            "memory:",
            "--metadata",
            "k=" + "[" * 150 + "]" * 150,
        ),
        "the JSON is nested deeper than 100 levels",
    ),
    "input: run id with |": Row(("run", GRAPH, "--run-id", "a|b"), "run id 'a|b' cannot be"),
    "input: run id with a control character": Row(
        ("runs", "show", "a\x01b", "--store", "memory:"), "run id 'a\\x01b' cannot be stored"
    ),
    # Stores.
    "store: not a database": Row(
        ("runs", "list", "--store", "sqlite:///{tmp}/notadb.txt"), "not a SQLite database"
    ),
    "store: no such folder": Row(
        ("run", GRAPH, "--store", "sqlite:///{tmp}/nodir/x.db"), "'{tmp}/nodir' does not exist"
    ),
    "store: newer schema": Row(
        ("runs", "list", "--store", "sqlite:///{tmp}/newer.db"), "schema version 999"
    ),
    "store: PostgreSQL unreachable": Row(
        ("runs", "list", "--store", "postgresql://postgres@127.0.0.1:1/none"), "could not connect"
    ),
    "store: PostgreSQL URL libpq refuses": Row(
        ("runs", "list", "--store", "postgresql://%zz@127.0.0.1/none"), "invalid percent-encoded"
    ),
    "store: runs list with a corrupt run": Row(
        ("runs", "list", "--store", "sqlite:///{tmp}/corrupt.db"), "run 'bad' cannot be read"
    ),
    "store: runs show of a corrupt run": Row(
        ("runs", "show", "bad", "--store", "sqlite:///{tmp}/corrupt.db"),
        "run 'bad' cannot be read",
    ),
    "store: runs list --limit past the store's ints": Row(
        ("runs", "list", "--store", "sqlite:///{tmp}/runs.db", "--limit", "99999999999999999999"),
        "Invalid value for '--limit'",
    ),
    "store: threads list --limit past the store's ints": Row(
        (
            "threads",
            "list",
            "--store",
            "sqlite:///{tmp}/runs.db",
            "--limit",
            "99999999999999999999",
        ),
        "--limit must be from 1 to 10,000",
    ),
}


@pytest.fixture
def tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with the bad files the rows name, and the stores they open."""
    for name, content in SPEC_FILES.items():
        (tmp_path / name).write_bytes(content)
    with sqlite3.connect(tmp_path / "newer.db") as newer:
        newer.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        newer.execute("INSERT INTO schema_version (version) VALUES (999)")
    newer.close()
    corrupt_store(tmp_path / "corrupt.db")
    # The store's own wait for an unreachable server (10 s) is tested with the store;
    # here only what the command line makes of it matters.
    kwdefaults = PostgresCheckpointStore.__init__.__kwdefaults__
    assert kwdefaults is not None
    monkeypatch.setitem(kwdefaults, "timeout", 0.5)
    return tmp_path


def corrupt_store(path: Path) -> None:
    """A store with two paused runs, ``good`` and ``bad``, whose checkpoints are garbage."""
    store = SQLiteCheckpointStore(path)
    try:
        for run_id in ("good", "bad"):
            approval.run({}, run_id=run_id, checkpoint_store=store)
    finally:
        store.close()
    with sqlite3.connect(path) as db:
        db.execute(
            "UPDATE checkpoints SET body = ? WHERE run_key = "
            "(SELECT run_key FROM runs WHERE run_id = 'bad')",
            (b"not a checkpoint",),
        )
    db.close()


def run_main(args: list[str], monkeypatch: pytest.MonkeyPatch) -> int:
    """Run the command line in this process; its exit code (an exception fails the test)."""
    monkeypatch.setattr(sys, "argv", ["selectgraph", *args])
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # a run that asks finds nobody
    with pytest.raises(SystemExit) as exited:
        main()
    code = exited.value.code
    return code if isinstance(code, int) else 1


def assert_one_line(output: str, message: str) -> None:
    assert "Traceback" not in output, output
    lines = [line for line in output.splitlines() if message in line]
    assert lines, f"no line says {message!r}:\n{output}"


def fill(parts: tuple[str, ...] | str, tmp: Path) -> list[str]:
    given = [parts] if isinstance(parts, str) else list(parts)
    return [part.replace("{tmp}", str(tmp)) for part in given]


@pytest.mark.parametrize("kind", list(ROWS))
def test_a_bad_invocation_exits_2_with_one_line_and_no_traceback(
    kind: str, tmp: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    row = ROWS[kind]
    code = run_main(fill(row.args, tmp), monkeypatch)
    captured = capsys.readouterr()
    assert code == 2, (captured.out, captured.err)
    assert_one_line(captured.err, fill(row.message, tmp)[0])


def test_runs_list_shows_the_readable_runs_and_flags_the_corrupt_one(
    tmp: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run_main(["runs", "list", "--store", f"sqlite:///{tmp}/corrupt.db"], monkeypatch)
    captured = capsys.readouterr()
    assert code == 2
    listed = {line.split("│")[1].strip(): line for line in captured.out.splitlines() if "│" in line}
    assert set(listed) == {"good", "bad"}
    assert "interrupted" in listed["good"]
    assert "unreadable" in listed["bad"]
    errors = [line for line in captured.err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1
    assert errors[0].startswith("error: run 'bad' cannot be read: cannot load checkpoint")


@pytest.mark.slow
@pytest.mark.parametrize(
    "kind",
    ["spec: bad timestamp", "input: deep inline JSON", "store: runs list with a corrupt run"],
)
def test_the_console_script_says_the_same_without_a_traceback(kind: str, tmp: Path) -> None:
    row = ROWS[kind]
    done = selectgraph(*fill(row.args, tmp))
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert_one_line(done.stderr, fill(row.message, tmp)[0])


def test_the_table_covers_each_kind_of_item_10(capsys: pytest.CaptureFixture[str]) -> None:
    kinds: list[Callable[[str], bool]] = [
        lambda k: "timestamp" in k,
        lambda k: "!!int" in k,
        lambda k: "NUL" in k,
        lambda k: "surrogate" in k,
        lambda k: "5,000-digit" in k and "YAML" in k,
        lambda k: "5,000-digit" in k and "JSON" in k,
        lambda k: k.startswith("input: deep"),
        lambda k: "not a database" in k,
        lambda k: "no such folder" in k,
        lambda k: "PostgreSQL unreachable" in k,
        lambda k: "newer schema" in k,
        lambda k: "runs list with a corrupt" in k,
        lambda k: "runs show of a corrupt" in k,
    ]
    assert all(any(kind(row) for row in ROWS) for kind in kinds)
