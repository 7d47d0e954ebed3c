"""Sentinels: END (the routing target that stops a run) and UNSET (an argument not given)."""

from __future__ import annotations

from enum import Enum
from typing import Final, TypeAlias

__all__ = ["END", "UNSET", "EndType", "Target", "Unset"]


class EndType(Enum):
    """Type of :data:`END`; an enum so it pickles, compares by identity and type-checks."""

    END = "__end__"

    def __repr__(self) -> str:
        return "END"

    def __str__(self) -> str:
        return "END"


END: Final = EndType.END
"""Routing target that stops the run. A sentinel, not a node name: a node may be called "END"."""


class Unset(Enum):
    """Type of :data:`UNSET`."""

    UNSET = "unset"

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = Unset.UNSET
"""Marks an argument that was not given, where ``None`` has a meaning of its own."""

Target: TypeAlias = "str | EndType"
"""A routing target: a node name or END."""
