"""A separate process that writes to a store: for the two-process race and crash tests.

Run as ``python -m tests.persistence._worker <command> <json spec> ...``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from selectgraph.persistence import (
    Checkpoint,
    CheckpointConflict,
    CheckpointStore,
    FileCheckpointStore,
    PostgresCheckpointStore,
    SQLiteCheckpointStore,
)


def open_store(spec: dict[str, str]) -> CheckpointStore:
    """The store a harness spec names."""
    if spec["kind"] == "file":
        return FileCheckpointStore(spec["target"])
    if spec["kind"] == "sqlite":
        return SQLiteCheckpointStore(spec["target"])
    return PostgresCheckpointStore(spec["target"], schema=spec["schema"])


def race(store: CheckpointStore, go: Path, name: str) -> str:
    """Wait for ``go`` to appear, then save version 2 of run "race" on version 1."""
    checkpoint = Checkpoint(
        run_id="race",
        checkpoint_id=f"racer-{name}",
        parent_id="first",
        version=2,
        step=1,
        values={"data": {"winner": name}},
    )
    while not go.exists():
        time.sleep(0.001)
    try:
        store.save(checkpoint, expected_version=1)
    except CheckpointConflict:
        return "conflict"
    return "won"


def save_forever(store: CheckpointStore) -> None:
    """Save checkpoints of run "crash" until killed, printing each committed version."""
    version = 0
    payload: dict[str, Any] = {"data": {"blob": "x" * 20_000}}
    while True:
        version += 1
        store.save(
            Checkpoint(
                run_id="crash",
                checkpoint_id=f"crash-{version}",
                version=version,
                step=version,
                values=payload,
            ),
            expected_version=version - 1,
        )
        print(version, flush=True)


def main() -> None:
    """Entry point: ``race <spec> <go file> <name>`` or ``save_forever <spec>``."""
    command, spec = sys.argv[1], json.loads(sys.argv[2])
    store = open_store(spec)
    try:
        if command == "race":
            print(race(store, Path(sys.argv[3]), sys.argv[4]), flush=True)
        else:
            save_forever(store)
    finally:
        store.close()


if __name__ == "__main__":
    main()
