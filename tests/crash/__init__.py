"""Crash-safety tests (issue 9): SIGKILL a durable run at random points, restart, compare."""
