"""The ``selectgraph`` command line (``selectgraph --help``)."""

from __future__ import annotations

from selectgraph.cli._app import EXIT_FAILED, EXIT_PAUSED, EXIT_USAGE, app

__all__ = ["EXIT_FAILED", "EXIT_PAUSED", "EXIT_USAGE", "app", "main"]


def main() -> None:
    """Run the command line (the ``selectgraph`` console script)."""
    app()
