"""Agents: LLM-backed nodes with tools, context modes, layered prompts and judges."""

from __future__ import annotations

from selectgraph.agents._agent import Agent, AgentInput, AgentOutputError
from selectgraph.agents._config import AgentConfig, ContextMode
from selectgraph.agents._decide import LLMDecider
from selectgraph.agents._defaults import default_provider
from selectgraph.agents._judge import FunctionJudge, Judge, JudgeEscalated, JudgeRequest, LLMJudge
from selectgraph.agents._node import AgentNode
from selectgraph.agents._prompts import PromptLayers
from selectgraph.agents._result import AgentChunk, AgentResult
from selectgraph.agents._tools import Tool, ToolDefinitionError, tool
from selectgraph.agents._verdict import JudgeDecision, Verdict

__all__ = [
    "Agent",
    "AgentChunk",
    "AgentConfig",
    "AgentInput",
    "AgentNode",
    "AgentOutputError",
    "AgentResult",
    "ContextMode",
    "FunctionJudge",
    "Judge",
    "JudgeDecision",
    "JudgeEscalated",
    "JudgeRequest",
    "LLMDecider",
    "LLMJudge",
    "PromptLayers",
    "Tool",
    "ToolDefinitionError",
    "Verdict",
    "default_provider",
    "tool",
]
