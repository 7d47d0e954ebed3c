"""Output to outside (the server, evaluations): what a finished run answered."""

from __future__ import annotations

from selectgraph.compile._outside import final_output

__all__ = ["final_output"]
