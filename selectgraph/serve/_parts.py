"""Parts: each protocol's share of the served app (its routes, and what runs beside them)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

__all__ = ["ServedPart"]


@dataclass(frozen=True, slots=True)
class ServedPart:
    """One protocol's share of the served app: its routes, and a lifespan if it needs one."""

    routes: Sequence[BaseRoute]
    """Starlette routes and mounts, added to the app as they are."""
    lifespan: Callable[[], AbstractAsyncContextManager[None]] | None = None
    """Started with the app and stopped at its shutdown (an MCP session manager...)."""
