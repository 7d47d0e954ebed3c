"""The same kind of graph, declared in YAML: nodes are module:function references.

Run: python examples/07_declarative.py
"""

from __future__ import annotations

from typing import Any

from selectgraph import GraphSpec, GraphState

SPEC = """
name: support
input_field: text
entry: classify
max_steps: 10
nodes:
  classify: {call: "HERE:classify", description: "tag the ticket"}
  billing:  {call: "HERE:billing", next: END}
  general:  {call: "HERE:general", next: END}
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


# HERE is this module, under whatever name it was imported (__main__ when run as a script).
graph = GraphSpec.from_yaml(SPEC.replace("HERE", __name__)).build()

if __name__ == "__main__":
    for text in ("Where is my invoice?", "Hello there"):
        result = graph.run({"text": text})
        print(f"{text!r}: {' -> '.join(result.node_order)}: {result.state['answer']}")
