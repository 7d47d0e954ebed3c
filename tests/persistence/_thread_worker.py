"""Processes that race on one thread: claimers and a saver, for ``test_thread_races``.

Each function runs in a process of its own (``multiprocessing``, spawn), opens
the store from a harness spec and reports what happened on a queue: a result
tuple, or ``("error", repr)`` when something unexpected was raised.
"""

from __future__ import annotations

import traceback
from typing import Any

from selectgraph.core._errors import CheckpointConflict, ThreadBusy
from selectgraph.persistence import Checkpoint, new_checkpoint_id
from tests.persistence._worker import open_store

WAIT: float = 60.0
"""Seconds a process waits for another's signal before giving up (a hung test fails)."""


def claim(
    spec: dict[str, str],
    thread_id: str,
    run_id: str,
    barrier: Any,
    results: Any,
) -> None:
    """Wait for every claimer at ``barrier``, then claim with "reject"; report won/busy."""
    try:
        store: Any = open_store(spec)
        try:
            barrier.wait(WAIT)
            try:
                won = store.claim_thread(thread_id, run_id, strategy="reject")
            except ThreadBusy as exc:
                results.put((run_id, "busy", exc.owner))
            else:
                results.put((run_id, "won", won.start_from))
        finally:
            store.close()
    except BaseException:
        results.put(("error", traceback.format_exc()))


def take_over(
    spec: dict[str, str],
    thread_id: str,
    run_id: str,
    strategy: str,
    ready: Any,
    claimed: Any,
    results: Any,
) -> None:
    """Once ``ready`` is set, claim the thread with ``strategy``; report where it starts."""
    try:
        store: Any = open_store(spec)
        try:
            if not ready.wait(WAIT):
                raise TimeoutError("the saver never got ready")
            won = store.claim_thread(thread_id, run_id, strategy=strategy)
            claimed.set()
            results.put(("claimer", won.start_from, won.superseded))
        finally:
            store.close()
    except BaseException:
        claimed.set()  # do not leave the saver waiting
        results.put(("error", traceback.format_exc()))


def _checkpoint(run_id: str, thread_id: str, version: int) -> Checkpoint:
    return Checkpoint(
        run_id=run_id,
        checkpoint_id=new_checkpoint_id(),
        version=version,
        step=version,
        values={"data": {"n": version}},
        metadata={"thread_id": thread_id},
        events=({"type": "node_start", "n": version}, {"type": "node_end", "n": version}),
    )


def keep_saving(
    spec: dict[str, str],
    thread_id: str,
    run_id: str,
    ready_after: int,
    window: int,
    ready: Any,
    claimed: Any,
    results: Any,
) -> None:
    """Save checkpoints of ``run_id`` (which owns ``thread_id``) while another process claims it.

    Sets ``ready`` after ``ready_after`` saves and keeps saving, back to back, up to
    ``window`` more: the claim lands somewhere among them. Then (if still saving)
    it waits for ``claimed``, so the claim always happens, and tries three more
    saves. Reports the ids it saved, the first refusal and what the later tries got.
    """
    try:
        store: Any = open_store(spec)
        try:
            saved: list[str] = []
            refused: str | None = None
            version = 0
            for _ in range(ready_after + window):
                checkpoint = _checkpoint(run_id, thread_id, version + 1)
                try:
                    store.save(checkpoint, expected_version=version)
                except CheckpointConflict as exc:
                    refused = type(exc).__name__
                    break
                saved.append(checkpoint.checkpoint_id)
                version += 1
                if len(saved) == ready_after:
                    ready.set()
            ready.set()
            if not claimed.wait(WAIT):
                raise TimeoutError("the claimer never claimed")
            later: list[str] = []
            for _ in range(3):
                try:
                    store.save(
                        _checkpoint(run_id, thread_id, version + 1), expected_version=version
                    )
                except CheckpointConflict as exc:
                    later.append(type(exc).__name__)
                else:
                    later.append("saved")
            results.put(("saver", saved, refused, later))
        finally:
            store.close()
    except BaseException:
        ready.set()
        results.put(("error", traceback.format_exc()))
