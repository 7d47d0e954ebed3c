"""Compile: check a declared graph and turn it into a CompiledGraph, the data the runtime reads."""
