"""Errors of supervised runs."""

from __future__ import annotations

from selectgraph.core._run_errors import GraphRunError

__all__ = ["SupervisorError"]


class SupervisorError(GraphRunError):
    """A supervised run failed: its plan never validated, or a step failed after its replan.

    Like every run error it keeps ``state`` and ``result`` (what was done before the
    failure); the engine's own error is the ``__cause__``.
    """

    category = "supervisor_error"
