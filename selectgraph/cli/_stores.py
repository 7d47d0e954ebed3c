"""``--store`` URLs: which checkpoint store a command uses."""

from __future__ import annotations

from pathlib import Path

from selectgraph.persistence._file import FileCheckpointStore
from selectgraph.persistence._memory import InMemoryCheckpointStore
from selectgraph.persistence._protocol import CheckpointStore
from selectgraph.persistence._sqlite import SQLiteCheckpointStore

__all__ = ["StoreURLError", "open_store"]

EXAMPLES = "sqlite:///runs.db, postgresql://user@host/db, file:///path/to/dir or memory:"


class StoreURLError(ValueError):
    """A ``--store`` value names no store."""


def open_store(url: str) -> CheckpointStore:
    """The store ``url`` names.

    - ``sqlite:///relative.db`` or ``sqlite:////absolute.db`` (also a bare ``*.db``
      or ``*.sqlite`` path): SQLiteCheckpointStore;
    - ``postgresql://...`` or ``postgres://...``: PostgresCheckpointStore (the
      ``postgres`` extra);
    - ``file:///dir`` or an existing directory: FileCheckpointStore;
    - ``memory:``: InMemoryCheckpointStore (gone when the command exits).

    Raises:
        StoreURLError: the URL names no store.
    """
    text = url.strip()
    if text in ("memory:", "memory"):
        return InMemoryCheckpointStore()
    if text.startswith("sqlite://"):
        rest = text.removeprefix("sqlite://")
        if not rest.startswith("/"):
            raise StoreURLError(f"{url!r}: write sqlite:///file.db (three slashes)")
        rest = rest[1:]  # sqlite:///x.db is x.db; sqlite:////tmp/x.db is /tmp/x.db
        if not rest:
            raise StoreURLError(f"{url!r}: the sqlite URL has no file name")
        return SQLiteCheckpointStore(Path(rest))
    if text.startswith(("postgresql://", "postgres://")):
        from selectgraph.persistence._postgres import PostgresCheckpointStore

        _check_postgres_url(text)
        return PostgresCheckpointStore(text)
    if text.startswith("file://"):
        return FileCheckpointStore(Path(text.removeprefix("file://")))
    path = Path(text)
    if path.suffix in (".db", ".sqlite", ".sqlite3"):
        return SQLiteCheckpointStore(path)
    if path.is_dir():
        return FileCheckpointStore(path)
    raise StoreURLError(f"{url!r} is not a store; use one of: {EXAMPLES}")


def _check_postgres_url(url: str) -> None:
    """Refuse a URL libpq cannot parse, in our words (psycopg raises a ProgrammingError)."""
    try:
        from psycopg import Error
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        return  # the store's own ImportError says which extra to install
    try:
        conninfo_to_dict(url)
    except Error as error:
        raise StoreURLError(f"not a PostgreSQL URL libpq can read: {error}") from None
