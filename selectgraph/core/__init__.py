"""Core: the value types every stage shares, and the serializer that stores them.

State, results, interrupts, usage, messages, errors, policies and run control live
here; nothing in this folder imports anything above it.
"""
