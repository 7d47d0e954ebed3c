"""The same kind of graph, declared in YAML: nodes are module:function references.

Run: python examples/07_declarative.py
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from selectgraph import GraphSpec, GraphState

SPEC = """
name: support
entry: classify
max_steps: 10
nodes:
  classify: {call: "__main__:classify", description: "tag the ticket"}
  billing:  {call: "__main__:billing", next: END}
  general:  {call: "__main__:general", next: END}
edges:
  - {from: classify, to: billing, condition: "category == 'billing'"}
  - {from: classify, to: general}
"""


def classify(state: GraphState) -> dict[str, Any]:
    return {"category": "billing" if "invoice" in state["text"] else "general"}


def billing(state: GraphState) -> dict[str, Any]:
    return {"answer": "Forwarded to billing."}


def general(state: GraphState) -> dict[str, Any]:
    return {"answer": "A colleague will get back to you."}


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    graph = GraphSpec.from_yaml(SPEC).build()
    for text in ("Where is my invoice?", "Hello there"):
        result = graph.run({"text": text})
        print(f"{text!r}: {' -> '.join(result.node_order)}: {result.state['answer']}")
