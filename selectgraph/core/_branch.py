"""Branch identity: which fan-out branch something happened in, and the branches around it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["BranchRef", "branch_from_json", "branch_to_json"]


@dataclass(frozen=True, slots=True)
class BranchRef:
    """Where an event comes from inside fan-outs: the branch and every branch around it."""

    source: str
    """The node or group that fanned out."""
    index: int
    """The branch's position in merge order."""
    name: str | None = None
    """The branch's name: the member of a parallel group or list fan-out; ``None`` for Scatter."""
    parent: BranchRef | None = None
    """The branch this fan-out itself ran in, for nested fan-outs."""

    @property
    def label(self) -> str:
        """``member`` for named branches, ``node[i]`` for Scatter."""
        return self.name if self.name is not None else f"{self.source}[{self.index}]"

    @property
    def chain(self) -> tuple[BranchRef, ...]:
        """Enclosing branches, outermost first, this one last."""
        refs: list[BranchRef] = []
        ref: BranchRef | None = self
        while ref is not None:
            refs.append(ref)
            ref = ref.parent
        return tuple(reversed(refs))

    @property
    def task_id(self) -> str:
        """A stable identifier of the branch within its run (same after a restart)."""
        return "/".join(f"{ref.source}:{ref.index}" for ref in self.chain)


def branch_to_json(ref: BranchRef) -> dict[str, Any]:
    """``ref`` as JSON data (its label and task id included, for readers)."""
    return {
        "source": ref.source,
        "index": ref.index,
        "name": ref.name,
        "label": ref.label,
        "task_id": ref.task_id,
        "parent": branch_to_json(ref.parent) if ref.parent is not None else None,
    }


def branch_from_json(raw: Any) -> BranchRef | None:
    """The BranchRef :func:`branch_to_json` wrote (``None`` for None).

    Raises:
        ValueError: ``raw`` is not such an object.
    """
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ValueError(f"a branch must be an object, got {type(raw).__name__}")
    try:
        return BranchRef(
            source=str(raw["source"]),
            index=int(raw["index"]),
            name=None if raw.get("name") is None else str(raw["name"]),
            parent=branch_from_json(raw.get("parent")),
        )
    except (KeyError, TypeError) as exc:
        raise ValueError(f"a branch needs a source and an integer index: {exc}") from None
