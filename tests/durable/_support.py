"""Small helpers shared by the durable-run tests."""

from __future__ import annotations

from typing import Any

from selectgraph import CheckpointStore


def stored(store: CheckpointStore, run_id: str) -> list[tuple[str, int, str]]:
    """``(checkpoint id, version, trigger)`` of every checkpoint of ``run_id``, oldest first."""
    return [
        (c.checkpoint_id, c.version, str(c.metadata.get("trigger"))) for c in store.list(run_id)
    ]


def triggers(store: CheckpointStore, run_id: str) -> list[str]:
    """The trigger of each checkpoint of ``run_id``, oldest first."""
    return [trigger for _, _, trigger in stored(store, run_id)]


class Calls:
    """Counts calls by name: ``calls.hit("draft")``, ``calls["draft"]``."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.order: list[str] = []

    def hit(self, name: str) -> None:
        """Record one call of ``name``."""
        self.counts[name] = self.counts.get(name, 0) + 1
        self.order.append(name)

    def __getitem__(self, name: str) -> int:
        return self.counts.get(name, 0)

    def __repr__(self) -> str:
        return f"Calls({self.counts!r})"


def data_without_history(state: Any) -> dict[str, Any]:
    """``state.data`` as a plain dict (for comparing final states)."""
    return dict(state.data)


def pending(result: Any) -> str:
    """The first pending interrupt id of a paused result (failing the test when there is none)."""
    interrupt_id = result.interrupt_id
    assert isinstance(interrupt_id, str), f"the run did not pause at an interrupt: {result!r}"
    return interrupt_id
