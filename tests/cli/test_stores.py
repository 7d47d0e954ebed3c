"""``--store`` URLs name the store they mean, or say what is wrong with them."""

from __future__ import annotations

from pathlib import Path

import pytest

from selectgraph import (
    FileCheckpointStore,
    InMemoryCheckpointStore,
    PostgresCheckpointStore,
    SQLiteCheckpointStore,
)
from selectgraph.cli._stores import StoreURLError, open_store


def test_each_kind_of_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert isinstance(open_store("memory:"), InMemoryCheckpointStore)
    relative = open_store("sqlite:///runs.db")
    assert isinstance(relative, SQLiteCheckpointStore)
    assert relative.path == Path("runs.db")
    absolute = open_store(f"sqlite:///{tmp_path}/abs.db")
    assert isinstance(absolute, SQLiteCheckpointStore)
    assert absolute.path == tmp_path / "abs.db"
    assert isinstance(open_store("bare.sqlite"), SQLiteCheckpointStore)
    folder = open_store(f"file://{tmp_path}/files")
    assert isinstance(folder, FileCheckpointStore)
    (tmp_path / "existing").mkdir()
    assert isinstance(open_store(str(tmp_path / "existing")), FileCheckpointStore)


def test_postgres_urls_open_the_postgres_store() -> None:
    store = open_store("postgresql://postgres@127.0.0.1:5432/test")
    try:
        assert isinstance(store, PostgresCheckpointStore)
    finally:
        store.close()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("sqlite://runs.db", "three slashes"),
        ("sqlite:///", "has no file name"),
        ("mysql://localhost/db", "is not a store"),
        ("nowhere/at/all", "is not a store"),
    ],
)
def test_bad_urls_say_what_is_wrong(url: str, message: str) -> None:
    with pytest.raises(StoreURLError, match=message):
        open_store(url)
