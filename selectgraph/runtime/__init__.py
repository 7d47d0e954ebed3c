"""The runtime: running a compiled graph's steps, branches and joins."""
