"""Reading Pydantic models back from state: as they were written, or as restored dicts."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from pydantic import BaseModel

__all__ = ["as_model", "as_models"]

M = TypeVar("M", bound=BaseModel)


def as_model(value: Any, model: type[M]) -> M:
    """``value`` as a ``model`` instance (a restored checkpoint may hold it as a dict).

    Raises:
        pydantic.ValidationError: ``value`` does not fit ``model``.
    """
    return value if isinstance(value, model) else model.model_validate(value)


def as_models(values: Iterable[Any] | None, model: type[M]) -> list[M]:
    """Each of ``values`` as a ``model`` instance (``None`` is no values)."""
    return [as_model(value, model) for value in values or ()]
