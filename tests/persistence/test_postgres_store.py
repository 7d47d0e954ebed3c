"""PostgresCheckpointStore: migrations and connections the server dropped."""

from __future__ import annotations

import asyncio
import os
import secrets
import time
from collections.abc import Iterator

import pytest

from selectgraph import StoreError, StoreUnavailable
from selectgraph.persistence import Checkpoint, PostgresCheckpointStore
from selectgraph.persistence._postgres import DEFAULT_TIMEOUT
from selectgraph.persistence._postgres_sql import SCHEMA_VERSION
from tests.persistence.conftest import POSTGRES_URL, drop_schema, postgres_or_skip


@pytest.fixture
def schema() -> Iterator[str]:
    postgres_or_skip()
    name = f"sg_test_{os.getpid()}_{secrets.token_hex(4)}"
    yield name
    drop_schema(name)


def cp(version: int) -> Checkpoint:
    return Checkpoint(
        run_id="run",
        checkpoint_id=f"{secrets.token_hex(4)}-{version}",
        version=version,
        step=version,
        values={"data": {"v": version}},
    )


def terminate_pool_connections(application_name: str) -> int:
    """Kill, from another connection, every server backend the store's pool holds."""
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = %s AND pid <> pg_backend_pid()",
            (application_name,),
        ).fetchall()
    return len(rows)


def test_a_connection_the_server_dropped_is_replaced(schema: str) -> None:
    name = f"sg-test-{secrets.token_hex(4)}"
    url = f"{POSTGRES_URL}{'&' if '?' in POSTGRES_URL else '?'}application_name={name}"
    store = PostgresCheckpointStore(url, schema=schema, min_size=2, max_size=2)
    try:
        store.save(cp(1), expected_version=0)
        assert terminate_pool_connections(name) == 2
        second = cp(2)
        store.save(second, expected_version=1)  # fails on a dead connection, retried on a new one
        assert store.head("run") == second
        assert asyncio.run(store.ahead("run")) == second
    finally:
        store.close()
    store.close()  # closing twice is harmless


async def test_async_use_from_another_loop_and_close(schema: str) -> None:
    store = PostgresCheckpointStore(POSTGRES_URL, schema=schema)
    await store.asave(cp(1), expected_version=0)
    assert len(await store.alist("run")) == 1
    await store.aclose()
    await store.aclose()


def test_migrations_run_once_and_newer_schemas_are_refused(schema: str) -> None:
    import psycopg
    from psycopg import sql

    PostgresCheckpointStore(POSTGRES_URL, schema=schema).close()
    PostgresCheckpointStore(POSTGRES_URL, schema=schema).close()
    table = sql.Identifier(schema, "schema_version")
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        query = sql.SQL("SELECT version FROM {} ORDER BY version").format(table)
        rows = conn.execute(query).fetchall()
        assert rows == [(version,) for version in range(1, SCHEMA_VERSION + 1)]
        conn.execute(sql.SQL("INSERT INTO {} VALUES (%s)").format(table), (SCHEMA_VERSION + 1,))
    with pytest.raises(StoreError, match=rf"{schema}.*version {SCHEMA_VERSION + 1}.*upgrade"):
        PostgresCheckpointStore(POSTGRES_URL, schema=schema)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="schema"):
        PostgresCheckpointStore(POSTGRES_URL, schema="")


def test_no_server_fails_fast(refusing_port: int) -> None:
    url = f"postgresql://postgres@127.0.0.1:{refusing_port}/test"
    started = time.monotonic()
    with pytest.raises(StoreUnavailable, match=f"127.0.0.1:{refusing_port}.*0.5 s.*refused"):
        PostgresCheckpointStore(url, timeout=0.5)
    assert time.monotonic() - started < 3


def test_the_default_timeout_is_shorter_than_libpq_and_pool_defaults() -> None:
    assert DEFAULT_TIMEOUT == 10.0


@pytest.mark.parametrize("url", ["postgresql://a b@host/db", "notaurl", "host=h port"])
def test_a_url_that_is_not_a_connection_string_is_a_store_error(url: str) -> None:
    with pytest.raises(StoreError, match="not a libpq connection string") as caught:
        PostgresCheckpointStore(url)
    assert "a b" not in str(caught.value)  # the URL is not echoed (it may hold a password)
