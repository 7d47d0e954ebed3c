"""Nodes: how the engine calls a node — its spec and context, function and generator nodes."""
