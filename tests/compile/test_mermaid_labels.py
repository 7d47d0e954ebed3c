"""Mermaid labels: a node name or an edge label is text, never markup (issue 25, item 9)."""

from __future__ import annotations

import pytest

from selectgraph import END, AgentGraph


def one_node(name: str) -> str:
    graph = AgentGraph("labels")
    graph.add_node(name, lambda state: {}, next_node=END)
    return graph.to_mermaid()


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("n<b>1</b><img src=x>", "n#lt;b>1#lt;/b>#lt;img src=x>"),
        ("a<!-- c -->", "a#lt;!-- c -->"),
        ("`**bold**`", "#96;**bold**#96;"),
        ("a #lt; b", "a #35;lt; b"),
        ('say "hi"', "say #quot;hi#quot;"),
    ],
)
def test_markup_in_a_node_name_is_written_as_entity_codes(name: str, label: str) -> None:
    assert f'    n0["{label}"]' in one_node(name).splitlines()


@pytest.mark.parametrize(
    "name", ["write", "fetch data", "a-b_c.d", "x < 3", "a > b", "Q&A", "#1", "100%", "ünï"]
)
def test_a_name_without_markup_is_written_as_it_is(name: str) -> None:
    assert f'    n0["{name}"]' in one_node(name).splitlines()


def test_an_edge_label_with_a_tag_is_written_as_entity_codes() -> None:
    graph = AgentGraph("edges")
    graph.add_node("a", lambda state: {})
    graph.add_node("b", lambda state: {}, next_node=END)
    graph.add_edge("a", "b", condition=lambda state: True, label="<img src=x> ok")
    assert '    n0 -->|"#lt;img src=x> ok"| n1' in graph.to_mermaid().splitlines()
