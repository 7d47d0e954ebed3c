"""The system database: its URL, a probe that answers or fails fast, and our own two tables.

DBOS retries a lost connection forever, which is right for a run in flight
and wrong for a URL that never answered: :func:`probe` connects once, with a
timeout, before anything else is started, so a wrong URL is an error naming
the database, not a hang.

Besides DBOS's schema, the executor keeps small tables of its own:
``selectgraph_executors`` (each worker's heartbeat: the lease that lets the
others take over its runs when it dies), ``selectgraph_answers`` (which
answer each interrupt got: the one claim that wins a race between two
resumers), and ``selectgraph_threads`` with ``selectgraph_thread_runs``
(conversations: each thread's state between runs and the order of its runs).
They live in the same database, so they share its backups and its
availability.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import sqlalchemy as sa

__all__ = [
    "ANSWERS_TABLE",
    "EXECUTORS_TABLE",
    "THREADS_TABLE",
    "THREAD_RUNS_TABLE",
    "DatabaseUnavailableError",
    "create_engine",
    "is_sqlite",
    "metadata",
    "probe",
    "redacted",
]

CONNECT_TIMEOUT: Final = 5.0

metadata = sa.MetaData()

EXECUTORS_TABLE: Final = sa.Table(
    "selectgraph_executors",
    metadata,
    sa.Column("executor_id", sa.Text, primary_key=True),
    sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
)

ANSWERS_TABLE: Final = sa.Table(
    "selectgraph_answers",
    metadata,
    sa.Column("interrupt_id", sa.Text, primary_key=True),
    sa.Column("run_id", sa.Text, nullable=False),
    sa.Column("answer", sa.Text, nullable=False),
    sa.Column("answered_at", sa.DateTime(timezone=True), server_default=sa.func.now()),
)

THREADS_TABLE: Final = sa.Table(
    "selectgraph_threads",
    metadata,
    sa.Column("thread_id", sa.Text, primary_key=True),
    sa.Column("graph", sa.Text, nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("runs", sa.Integer, nullable=False),
    sa.Column("last_run", sa.Text),
    sa.Column("state", sa.Text),
    sa.Column("metadata", sa.Text, nullable=False),
    sa.Column("ttl", sa.Float),
    sa.Column("expires_at", sa.DateTime(timezone=True)),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
)

THREAD_RUNS_TABLE: Final = sa.Table(
    "selectgraph_thread_runs",
    metadata,
    sa.Column("run_id", sa.Text, primary_key=True),
    sa.Column("thread_id", sa.Text, nullable=False, index=True),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("strategy", sa.Text, nullable=False),
    sa.Column("jumps", sa.Boolean, nullable=False),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("superseded", sa.Text),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)


class DatabaseUnavailableError(ConnectionError):
    """The executor's database did not answer."""


def is_sqlite(url: str) -> bool:
    """Whether ``url`` names a SQLite file (one-machine development)."""
    return url.startswith("sqlite")


def redacted(url: str) -> str:
    """``url`` without its password, for messages."""
    try:
        return sa.make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "<unparsable database URL>"


def _driver_url(url: str) -> sa.URL:
    parsed = sa.make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


def create_engine(url: str, *, pool_size: int = 2) -> sa.Engine:
    """An engine for our own tables, failing within a few seconds when the server is gone."""
    parsed = _driver_url(url)
    kwargs: dict[str, Any] = {"pool_pre_ping": True}
    if parsed.get_backend_name() == "postgresql":
        kwargs.update(
            pool_size=pool_size,
            max_overflow=2,
            pool_timeout=CONNECT_TIMEOUT,
            connect_args={
                "connect_timeout": int(CONNECT_TIMEOUT),
                "application_name": "selectgraph",
                "options": "-c statement_timeout=10000",
            },
        )
    return sa.create_engine(parsed, **kwargs)


def probe(url: str) -> None:
    """Connect once, or raise DatabaseUnavailableError within a few seconds.

    Raises:
        DatabaseUnavailableError: the server does not answer, refuses us, or the
            SQLite file's folder does not exist.
        ValueError: ``url`` is not a database URL.
    """
    try:
        parsed = _driver_url(url)
    except Exception as exc:
        raise ValueError(
            f"{url!r} is not a database URL; use postgresql://user@host:port/db "
            "or sqlite:///path/to/file.sqlite"
        ) from exc
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        database = parsed.database or ""
        if database and database != ":memory:" and not Path(database).parent.exists():
            raise DatabaseUnavailableError(
                f"SQLite database {redacted(url)}: folder {str(Path(database).parent)!r} "
                "does not exist"
            )
        return
    if backend != "postgresql":
        raise ValueError(
            f"the DBOS executor runs on PostgreSQL or SQLite, not {backend!r} ({redacted(url)})"
        )
    try:
        _select_one(url)
    except Exception as exc:
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        if "does not exist" not in reason or not parsed.database:
            raise DatabaseUnavailableError(
                f"database {redacted(url)} did not answer within {CONNECT_TIMEOUT:g} s: {reason}"
            ) from None
        _create_database(parsed)  # as DBOS would: the server answers, the database is new


def _select_one(url: str) -> None:
    engine = create_engine(url, pool_size=1)
    try:
        with engine.connect() as connection:
            connection.execute(sa.text("select 1"))
    finally:
        engine.dispose()


def _create_database(parsed: sa.URL) -> None:
    name = parsed.database
    assert name is not None
    engine = create_engine(parsed.set(database="postgres").render_as_string(hide_password=False))
    try:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            quoted = connection.dialect.identifier_preparer.quote(name)
            connection.execute(sa.text(f"create database {quoted}"))
    except (sa.exc.ProgrammingError, sa.exc.IntegrityError) as exc:
        # No check first: two workers starting at once would both pass it. The one that
        # loses gets "already exists" (PostgreSQL reports it as either error class).
        if "already exists" not in str(exc):
            raise
    finally:
        engine.dispose()


def create_tables(engine: sa.Engine) -> None:
    """Create our tables if they are missing (idempotent, safe from many workers at once)."""
    try:
        metadata.create_all(engine, checkfirst=True)
    except sa.exc.IntegrityError:
        pass  # another process created them between our check and our create
    except sa.exc.ProgrammingError as exc:
        if "already exists" not in str(exc):
            raise
