"""Sentinels: END (the target that stops a run), START (where it begins), UNSET (not given)."""

from __future__ import annotations

from enum import Enum
from typing import Final, TypeAlias

__all__ = ["END", "START", "UNSET", "EndType", "StartType", "Target", "Unset"]


class EndType(Enum):
    """Type of :data:`END`; an enum so it pickles, compares by identity and type-checks."""

    END = "__end__"

    def __repr__(self) -> str:
        return "END"

    def __str__(self) -> str:
        return "END"


END: Final = EndType.END
"""Routing target that stops the run. A sentinel, not a node name: a node may be called "END"."""


class StartType(Enum):
    """Type of :data:`START`."""

    START = "__start__"

    def __repr__(self) -> str:
        return "START"

    def __str__(self) -> str:
        return "START"


START: Final = StartType.START
"""Where a run begins, as LangGraph spells it: ``add_edge(START, "a")`` is ``set_entry("a")``."""


class Unset(Enum):
    """Type of :data:`UNSET`."""

    UNSET = "unset"

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = Unset.UNSET
"""Marks an argument that was not given, where ``None`` has a meaning of its own."""

Target: TypeAlias = "str | EndType"
"""A routing target: a node name or END."""
