"""Module-level state types for the round-trip tests (a stored state names classes by module)."""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel


class Priority(Enum):
    """An enum value kept in the state."""

    LOW = "low"
    HIGH = "high"


class Item(BaseModel):
    """A model value kept in the state."""

    name: str
    qty: int = 1
    priority: Priority = Priority.LOW


class Order(BaseModel):
    """A state schema whose fields name a model."""

    item: Item | None = None
    items: list[Item] = []
    n: int = 0
