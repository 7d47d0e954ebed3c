"""Store fixtures for the durable-run tests.

``store`` is each of the in-process stores in turn (memory, file, SQLite);
``disk_store`` only those that outlive the process; ``pg`` a PostgreSQL
store in a schema of its own, reached the way tests/persistence reaches it
(skipped without a server, except under CI).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from selectgraph import (
    CheckpointStore,
    FileCheckpointStore,
    InMemoryCheckpointStore,
    SQLiteCheckpointStore,
)
from tests.persistence.conftest import Harness, drop_schema, make_harness

KINDS = ["memory", "file", "sqlite"]


def open_store(kind: str, tmp_path: Path) -> CheckpointStore:
    """A fresh store of ``kind`` under ``tmp_path``."""
    if kind == "memory":
        return InMemoryCheckpointStore()
    if kind == "file":
        return FileCheckpointStore(tmp_path / "checkpoints")
    assert kind == "sqlite"
    return SQLiteCheckpointStore(tmp_path / "x.db")


@pytest.fixture(params=KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CheckpointStore]:
    """Each of InMemoryCheckpointStore, FileCheckpointStore and SQLiteCheckpointStore."""
    opened = open_store(request.param, tmp_path)
    yield opened
    opened.close()


@pytest.fixture(params=["file", "sqlite"])
def disk_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CheckpointStore]:
    """The stores another graph object (or process) can reopen: file and SQLite."""
    opened = open_store(request.param, tmp_path)
    yield opened
    opened.close()


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[SQLiteCheckpointStore]:
    """A SQLite store at ``tmp_path / "x.db"``."""
    opened = SQLiteCheckpointStore(tmp_path / "x.db")
    yield opened
    opened.close()


@pytest.fixture
def pg(tmp_path: Path) -> Iterator[Harness]:
    """A PostgresCheckpointStore in a fresh schema (``pg.store``; ``pg.reopen()`` for another
    handle on it), dropped afterwards."""
    closing: list[Any] = []
    harness = make_harness("postgres", tmp_path, closing)
    try:
        yield harness
    finally:
        for item in reversed(closing):
            if isinstance(item, str):
                drop_schema(item)
            else:
                item.close()
