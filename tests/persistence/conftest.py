"""Store fixtures: every contract test runs against each of the four stores.

PostgreSQL: the URL comes from ``SELECTGRAPH_TEST_POSTGRES_URL`` (default
``postgresql://postgres@127.0.0.1:5432/test``). Each store gets a schema of its
own, dropped afterwards. Where no server answers the tests skip, except when
``CI`` is set: there they fail.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from selectgraph.persistence import (
    CheckpointStore,
    FileCheckpointStore,
    InMemoryCheckpointStore,
    PostgresCheckpointStore,
    SQLiteCheckpointStore,
)

POSTGRES_URL = os.environ.get(
    "SELECTGRAPH_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
STORES = ["memory", "file", "sqlite", "postgres"]
DURABLE = ["file", "sqlite", "postgres"]


def postgres_or_skip() -> None:
    """Skip (or, under CI, fail) when no PostgreSQL server answers at POSTGRES_URL."""
    import psycopg

    try:
        with psycopg.connect(POSTGRES_URL, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.OperationalError as exc:
        reason = f"no PostgreSQL server answers at {POSTGRES_URL}: {exc}"
        if os.environ.get("CI"):
            pytest.fail(f"{reason} (CI is set, so the Postgres tests are mandatory)")
        pytest.skip(reason)


def drop_schema(schema: str) -> None:
    """Remove a test schema and everything in it."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@dataclass
class Harness:
    """One store under test, plus what the tests need to reach behind it."""

    kind: str
    store: CheckpointStore
    spec: dict[str, str]
    """How another process opens the same storage (see ``_worker.open_store``)."""
    corrupt: Callable[[str, bytes], None]
    """Overwrite a checkpoint's stored record with the given bytes."""
    reopen: Callable[[], CheckpointStore]
    """Another handle on the same storage (the same object for the memory store)."""


def _corrupt_memory(store: InMemoryCheckpointStore) -> Callable[[str, bytes], None]:
    def corrupt(checkpoint_id: str, raw: bytes) -> None:
        store._records[checkpoint_id] = raw

    return corrupt


def _corrupt_file(directory: Path) -> Callable[[str, bytes], None]:
    def corrupt(checkpoint_id: str, raw: bytes) -> None:
        store = FileCheckpointStore(directory)
        place = store._locate(checkpoint_id)
        assert place is not None
        store._record_path(*place).write_bytes(raw)

    return corrupt


def _corrupt_sqlite(path: Path) -> Callable[[str, bytes], None]:
    def corrupt(checkpoint_id: str, raw: bytes) -> None:
        with sqlite3.connect(path) as conn:
            conn.execute(
                "UPDATE checkpoints SET body = ? WHERE checkpoint_id = ?", (raw, checkpoint_id)
            )

    return corrupt


def _corrupt_postgres(schema: str) -> Callable[[str, bytes], None]:
    def corrupt(checkpoint_id: str, raw: bytes) -> None:
        import psycopg
        from psycopg import sql

        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(
                sql.SQL("UPDATE {}.checkpoints SET body = %s WHERE checkpoint_id = %s").format(
                    sql.Identifier(schema)
                ),
                (raw, checkpoint_id),
            )

    return corrupt


def make_harness(kind: str, tmp_path: Path, closing: list[Any]) -> Harness:
    """Open a fresh store of ``kind``; everything opened is appended to ``closing``."""

    def opened(store: Any) -> Any:
        closing.append(store)
        return store

    if kind == "memory":
        memory = InMemoryCheckpointStore()
        return Harness(kind, memory, {}, _corrupt_memory(memory), lambda: memory)
    if kind == "file":
        directory = tmp_path / "checkpoints"
        return Harness(
            kind,
            FileCheckpointStore(directory),
            {"kind": "file", "target": str(directory)},
            _corrupt_file(directory),
            lambda: FileCheckpointStore(directory),
        )
    if kind == "sqlite":
        path = tmp_path / "checkpoints.db"
        return Harness(
            kind,
            opened(SQLiteCheckpointStore(path)),
            {"kind": "sqlite", "target": str(path)},
            _corrupt_sqlite(path),
            lambda: opened(SQLiteCheckpointStore(path)),
        )
    assert kind == "postgres"
    postgres_or_skip()
    schema = f"sg_test_{os.getpid()}_{secrets.token_hex(4)}"
    closing.append(schema)
    return Harness(
        kind,
        opened(PostgresCheckpointStore(POSTGRES_URL, schema=schema)),
        {"kind": "postgres", "target": POSTGRES_URL, "schema": schema},
        _corrupt_postgres(schema),
        lambda: opened(PostgresCheckpointStore(POSTGRES_URL, schema=schema)),
    )


def close_all(items: list[Any]) -> None:
    """Close the stores, and drop the Postgres schemas, ``make_harness`` opened."""
    for item in reversed(items):
        if isinstance(item, str):
            drop_schema(item)
        else:
            item.close()


@pytest.fixture
def closing() -> Iterator[list[Any]]:
    """Stores (and Postgres schemas) to close (drop) when the test ends."""
    items: list[Any] = []
    yield items
    close_all(items)


@pytest.fixture(params=STORES)
def harness(request: pytest.FixtureRequest, tmp_path: Path, closing: list[Any]) -> Harness:
    """Each of the four stores in turn."""
    return make_harness(request.param, tmp_path, closing)


@pytest.fixture(params=DURABLE)
def durable(request: pytest.FixtureRequest, tmp_path: Path, closing: list[Any]) -> Harness:
    """The stores that outlive the process: file, SQLite and PostgreSQL."""
    return make_harness(request.param, tmp_path, closing)
