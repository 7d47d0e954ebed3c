"""``input_field``: where text from outside goes, declared on the graph or in a spec."""

from __future__ import annotations

from typing import Any

import pytest

from selectgraph import END, AgentGraph, GraphSpec
from selectgraph.build._input import graph_input, input_field_of


def shout(state: Any) -> dict[str, Any]:
    return {"answer": state["topic"].upper()}


def test_text_goes_to_the_declared_field_and_is_the_first_message() -> None:
    graph = AgentGraph("g", input_field="topic")
    graph.add_node("shout", shout, next_node=END)

    result = graph.run(graph_input(graph, None, "owls"))

    assert result.state["answer"] == "OWLS"
    assert [m.text for m in result.state.messages] == ["owls"]
    assert input_field_of(graph) == "topic"


def test_a_spec_declares_it_too() -> None:
    spec = GraphSpec.from_dict(
        {
            "name": "s",
            "input_field": "topic",
            "nodes": {"shout": {"call": f"{__name__}:shout", "next": "END"}},
        },
        allowed_modules=[__name__],
    )

    assert spec.build().run(graph_input(spec.build(), None, "bats")).state["answer"] == "BATS"


@pytest.mark.parametrize("bad", ["", "two words", 3])
def test_a_field_that_is_not_a_name_is_refused(bad: Any) -> None:
    with pytest.raises(ValueError, match="input_field must be the name of a state field"):
        AgentGraph("g", input_field=bad)
