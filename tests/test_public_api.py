"""The public surface: what `selectgraph` exports, and nothing private leaking out."""

from __future__ import annotations

import selectgraph
import selectgraph.graph
import selectgraph.observe


def test_top_level_all_is_sorted_and_complete() -> None:
    assert selectgraph.__all__ == sorted(selectgraph.__all__, key=lambda n: (not n.isupper(), n))
    for name in selectgraph.__all__:
        assert hasattr(selectgraph, name), name


def test_no_private_module_is_exported() -> None:
    for module in (selectgraph, selectgraph.graph, selectgraph.observe):
        for name in module.__all__:
            assert not name.startswith("_"), name


def test_core_names_are_public() -> None:
    expected = {
        "AgentGraph",
        "GraphState",
        "GraphResult",
        "GraphSpec",
        "END",
        "goto",
        "update",
        "append",
        "merge",
        "ErrorPolicy",
        "SelectGraphError",
        "GraphBuildError",
        "ReducerError",
    }
    assert expected <= set(selectgraph.__all__)


def test_every_public_error_descends_from_selectgraph_error() -> None:
    for name in selectgraph.__all__:
        value = getattr(selectgraph, name)
        if isinstance(value, type) and issubclass(value, Exception):
            assert issubclass(value, selectgraph.SelectGraphError), name
