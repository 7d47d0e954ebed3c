"""Routing: where a run goes after a node — edges, safe conditions, directives, fan-out."""
