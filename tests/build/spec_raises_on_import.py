"""A module whose import fails, for the GraphSpec test of a reference to it."""

raise RuntimeError("this module refuses to load")
