"""Offline providers under the module name seed 004 imports them from (``providers.stubs``).

Prefer ``from selectgraph.providers import LocalProvider`` in new code.
"""

from __future__ import annotations

from selectgraph.providers._local import LocalProvider

__all__ = ["LocalProvider"]
