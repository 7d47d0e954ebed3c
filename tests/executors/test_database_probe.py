"""Workers starting at once on a database that does not exist yet all start."""

from __future__ import annotations

import threading
import uuid

import psycopg
import sqlalchemy as sa

from selectgraph.executors.dbos._database import _create_database, probe

ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"


def _exists(name: str) -> bool:
    with psycopg.connect(ADMIN, autocommit=True) as connection:
        found = connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
        return found.fetchone() is not None


def _drop(name: str) -> None:
    with psycopg.connect(ADMIN, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_creating_a_database_another_worker_just_created_is_not_an_error() -> None:
    # The path of the worker that loses the race: its CREATE DATABASE finds the name taken.
    name = f"sg_probe_{uuid.uuid4().hex[:12]}"
    url = sa.make_url(f"postgresql://postgres@127.0.0.1:5432/{name}")
    try:
        _create_database(url)
        _create_database(url)
        assert _exists(name)
    finally:
        _drop(name)


def test_workers_probing_a_new_database_at_once_all_succeed() -> None:
    name = f"sg_probe_{uuid.uuid4().hex[:12]}"
    url = f"postgresql://postgres@127.0.0.1:5432/{name}"
    start = threading.Barrier(4)
    failures: list[BaseException] = []

    def worker() -> None:
        start.wait()
        try:
            probe(url)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert failures == []
        assert _exists(name)
    finally:
        _drop(name)
