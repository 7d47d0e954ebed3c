"""A module whose attribute lookup fails with something other than AttributeError."""

from __future__ import annotations


def __getattr__(name: str) -> object:
    raise RuntimeError(f"no lookups here ({name})")
