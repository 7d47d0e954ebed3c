"""Branch identity: which fan-out branch something happened in, and the branches around it."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BranchRef"]


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
