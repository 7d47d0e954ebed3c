"""Errors of supervised runs."""

from __future__ import annotations

from selectgraph.core._run_errors import GraphRunError

__all__ = ["SupervisorError"]


class SupervisorError(GraphRunError):
    """A supervised run failed: a PLAN_AND_EXECUTE step failed again after its replan.

    An unusable answer of the supervisor's own model is not an error: the supervisor
    falls back and records why (``SupervisorResult.fallbacks``).

    Like every run error it keeps ``state`` and ``result`` (what was done before the
    failure); the engine's own error is the ``__cause__``.
    """

    category = "supervisor_error"
