"""Two runs side by side: the path each took, tokens, cost, time, and how their states differ.

Each run is read from what it recorded: a run this studio drives from its live log, any
other from the store's event log (its node order, usage and first-to-last time), and
its final state from its last checkpoint. A store without event logs still gives the
path (the checkpoints saved after each node) and the state.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from selectgraph.core._errors import SelectGraphError
from selectgraph.observe._codec import json_value
from selectgraph.studio._runs import StudioError

if TYPE_CHECKING:
    from selectgraph.studio._runs import RunManager

__all__ = ["compare_runs"]


def compare_runs(manager: RunManager, first: str, second: str) -> dict[str, Any]:
    """``first`` and ``second`` summarized, and their final states' differences (blocking).

    Raises:
        StudioError: 404 when either run is unknown.
    """
    a, b = summary(manager, first), summary(manager, second)
    state_a, state_b = a.pop("state"), b.pop("state")
    differences = {
        key: {"a": state_a.get(key), "b": state_b.get(key)}
        for key in sorted(set(state_a) | set(state_b))
        if _text(state_a.get(key)) != _text(state_b.get(key))
    }
    same = sorted(k for k in set(state_a) & set(state_b) if k not in differences)
    return {"a": a, "b": b, "state_differences": differences, "same": same}


def summary(manager: RunManager, run_id: str) -> dict[str, Any]:
    """One run's path, usage, duration, status and final state."""
    try:
        snapshot = manager.graph.get_state(run_id, checkpoint_store=manager.store)
    except SelectGraphError:
        snapshot = None
    live = manager.runs.get(run_id)
    if snapshot is None and live is None:
        raise StudioError(404, f"no run {run_id!r}")
    records = _records(manager, run_id)
    path = [
        str(r.get("node"))
        for r in records
        # A visit paused by a question finishes again when answered: counted once.
        if r.get("event") == "NodeFinished"
        and not r.get("namespace")
        and r.get("outcome") != "interrupted"
    ]
    if not records:  # no event log: the checkpoints saved after each node
        checkpoints = manager.store.list(run_id)
        path = [
            str(cp.node_name)
            for cp in checkpoints
            if cp.metadata.get("trigger") == "node_complete" and cp.node_name
        ]
    calls = [r for r in records if r.get("event") == "LLMCallFinished"]
    times = [float(r["timestamp"]) for r in records if isinstance(r.get("timestamp"), int | float)]
    status = live.status if live is not None else manager.stored_status(run_id)[0]
    return {
        "run_id": run_id,
        "status": status,
        "path": path,
        "steps": len(path),
        "input_tokens": sum(int(r.get("input_tokens") or 0) for r in calls),
        "output_tokens": sum(int(r.get("output_tokens") or 0) for r in calls),
        "llm_calls": len(calls),
        "cost_usd": sum(float(r.get("cost_usd") or 0.0) for r in calls),
        "duration_s": (max(times) - min(times)) if times else None,
        "state": {} if snapshot is None else json_value(dict(snapshot.values)),
    }


def _records(manager: RunManager, run_id: str) -> list[dict[str, Any]]:
    live = manager.runs.get(run_id)
    if live is not None:
        return live.log.since(0)[1]
    threads = manager.threads
    if threads is None:
        return []
    return [stored.event for stored in threads.read_events(run_id)]


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=repr)
