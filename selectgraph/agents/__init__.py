"""Agents: LLM-backed nodes with tools, context modes, layered prompts and judges."""
