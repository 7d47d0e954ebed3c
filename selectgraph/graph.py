"""The graph engine: build, compile and run graphs of agents and functions."""

from __future__ import annotations

from selectgraph.build._builder import AgentGraph
from selectgraph.build._spec import GraphSpec
from selectgraph.compile._compiled import CompiledGraph
from selectgraph.compile._png import PngUnavailable
from selectgraph.core._node_result import NodeResult
from selectgraph.core._policies import (
    ErrorPolicy,
    LoopAction,
    MaxStepsAction,
    Outcome,
    Quality,
    RetryPolicy,
    StopReason,
)
from selectgraph.core._result import GraphResult
from selectgraph.core._state import LAST_OUTPUT, STATE_KEY_LAST_OUTPUT, GraphState
from selectgraph.nodes._middleware import Middleware, NodeCall
from selectgraph.nodes._spec import NodeAdapter, NodeContext, NodeSpec
from selectgraph.routing._directives import Command, Directive, goto, update
from selectgraph.routing._parallel import FailureMode, MergePolicy, ParallelGroup, Scatter
from selectgraph.routing._safe_eval import Condition, ConditionSyntaxError, parse_condition
from selectgraph.runtime._settings import GraphSettings
from selectgraph.state._add_messages import (
    REMOVE_ALL_MESSAGES,
    MessagesState,
    RemoveMessage,
    add_messages,
)
from selectgraph.state._reducers import (
    Reducer,
    append,
    bounded_append,
    concat_flatten,
    dedupe_append,
    last_write_wins,
    merge,
    merge_all,
    merge_by_key,
    reducer,
)

__all__ = [
    "LAST_OUTPUT",
    "REMOVE_ALL_MESSAGES",
    "STATE_KEY_LAST_OUTPUT",
    "AgentGraph",
    "Command",
    "CompiledGraph",
    "Condition",
    "ConditionSyntaxError",
    "Directive",
    "ErrorPolicy",
    "FailureMode",
    "GraphNode",
    "GraphResult",
    "GraphSettings",
    "GraphSpec",
    "GraphState",
    "LoopAction",
    "MaxStepsAction",
    "MergePolicy",
    "MessagesState",
    "Middleware",
    "NodeAdapter",
    "NodeCall",
    "NodeContext",
    "NodeResult",
    "NodeSpec",
    "Outcome",
    "ParallelGroup",
    "PngUnavailable",
    "Quality",
    "Reducer",
    "RemoveMessage",
    "RetryPolicy",
    "Scatter",
    "StopReason",
    "add_messages",
    "append",
    "bounded_append",
    "concat_flatten",
    "dedupe_append",
    "goto",
    "last_write_wins",
    "merge",
    "merge_all",
    "merge_by_key",
    "parse_condition",
    "reducer",
    "update",
]

GraphNode = NodeSpec
"""Seed 004's name for a node as the compiled graph holds it (``compiled.nodes[name]``)."""
