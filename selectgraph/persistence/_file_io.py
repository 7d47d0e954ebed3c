"""The file store's file handling: safe names, atomic writes, locks (``_file.py``).

Shared by the checkpoint and the thread halves of :class:`FileCheckpointStore`.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Final

__all__ = [
    "WIDTH",
    "fsync_dir",
    "key",
    "locked",
    "numbered",
    "remove_tree",
    "size",
    "write_atomic",
]

WIDTH: Final = 12  # version digits in file names, so names sort like versions


def key(text: str) -> str:
    """A safe, short file name for ``text`` (a run, thread or checkpoint id)."""
    # Ids are caller data: hashed, they are always one safe, short file name.
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def fsync_dir(directory: Path) -> None:
    """Make a directory's entries (a rename, a new file) durable."""
    if sys.platform == "win32":  # pragma: no cover - directories cannot be opened there
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so a crash leaves either the old file or the new one."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(temp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    try:
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Lock ``path`` exclusively (created if missing); released on exit or process death."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
            import msvcrt

            msvcrt.locking(fd, msvcrt.LK_LOCK, 1)
        else:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def numbered(directory: Path, suffix: str) -> builtins.list[int]:
    """The numbers of the ``<number><suffix>`` files in ``directory``, in order."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    length = WIDTH + len(suffix)
    return sorted(
        int(name[:WIDTH])
        for name in names
        if len(name) == length and name.endswith(suffix) and name[:WIDTH].isdigit()
    )


def size(path: Path) -> int:
    """The file's size in bytes (0: it is gone)."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def remove_tree(path: Path, keep: tuple[str, ...] = ()) -> None:
    """Delete ``path`` and what it holds, but the entries named in ``keep`` (and ``path``)."""
    if not path.is_dir():
        return
    for child in sorted(path.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        if child.name in keep and child.parent == path:
            continue
        if child.is_dir():
            child.rmdir()
        else:
            child.unlink()
    if not keep:
        path.rmdir()
