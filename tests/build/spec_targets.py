"""Objects that tests/build/test_spec.py references from specs as ``module:attribute``."""

from __future__ import annotations

import json
from json import dumps
from typing import Annotated, Any, TypedDict

from selectgraph import END, AgentGraph, GraphState, append


class Article(TypedDict, total=False):
    """The parent state of the spec tests."""

    topic: str
    text: str
    score: int
    log: Annotated[list[str], append]
    recovered: bool


class Writer(TypedDict, total=False):
    """The state of the nested writer subgraph."""

    subject: str
    body: str


def draft(state: GraphState) -> dict[str, Any]:
    return {"text": "a draft", "score": state.data.get("score", 0) + 3, "log": ["draft"]}


def review(state: GraphState) -> dict[str, Any]:
    return {"log": ["review"]}


def polish(state: GraphState) -> dict[str, Any]:
    return {"log": ["polish"]}


def publish(state: GraphState) -> dict[str, Any]:
    return {"log": ["publish"]}


def fail(state: GraphState) -> dict[str, Any]:
    raise ValueError("the printer is on fire")


def recover(state: GraphState) -> dict[str, Any]:
    return {"recovered": True, "log": ["recover"]}


def note(state: GraphState) -> dict[str, Any]:
    return {"notes": ["n"]}


def write(state: GraphState) -> dict[str, Any]:
    return {"body": f"all about {state['subject']}"}


def route_by_score(state: GraphState) -> str:
    return "high" if state["score"] >= 5 else "low"


def is_good(state: GraphState) -> bool:
    return bool(state["score"] >= 5)


def add_up(current: Any, update: Any) -> int:
    return int(current or 0) + int(update)


class Routers:
    """Holds a router, to reference it through a dotted attribute path."""

    @staticmethod
    def always_polish(state: GraphState) -> str:
        return "polish"


NOT_A_NODE = 42


def make_child() -> AgentGraph:
    child = AgentGraph("writer", state_schema=Writer)
    child.add_node("write", write, next_node=END)
    child.set_entry("write")
    return child


child_graph = make_child()


def as_json(state: GraphState) -> dict[str, Any]:
    """Uses ``json`` and a re-exported ``dumps``: names the allow-list tests reach for."""
    return {"text": dumps(json.loads('{"a": 1}'))}
