"""Durable runs and human-in-the-loop: checkpoints, interrupts, pauses, restarts, time travel."""
