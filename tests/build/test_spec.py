"""GraphSpec: declarative graphs from a dict, YAML or JSON build the graph the builder would."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from selectgraph import (
    END,
    AgentGraph,
    ErrorPolicy,
    GraphBuildError,
    GraphSpec,
    GraphSpecError,
    ReducerConfigurationError,
    append,
    bounded_append,
)
from selectgraph.build._spec import NodeEntry, load_reference
from selectgraph.graph import Condition
from selectgraph.routing._edges import Edge
from tests.build import spec_targets
from tests.build.spec_targets import (
    Article,
    add_up,
    draft,
    fail,
    is_good,
    polish,
    publish,
    recover,
    review,
    route_by_score,
)

M = "tests.build.spec_targets"


def ref(name: str) -> str:
    return f"{M}:{name}"


# ----------------------------------------------------------------------- fixtures

ARTICLE_SPEC: dict[str, Any] = {
    "name": "article",
    "description": "drafts and publishes",
    "goal": "publish a good article",
    "entry": "draft",
    "state": ref("Article"),
    "max_steps": 12,
    "stall_threshold": 4,
    "error_policy": "skip",
    "nodes": {
        "draft": {"call": ref("draft")},
        "review": {"call": ref("review")},
        "polish": {"call": ref("polish"), "next": "publish"},
        "publish": {"call": ref("publish"), "next": "END"},
        "high": {"call": ref("publish"), "next": "END"},
        "broken": {"call": ref("fail"), "next": "END"},
        "recover": {"call": ref("recover"), "next": "END"},
    },
    "edges": [
        {"from": "draft", "to": "broken", "condition": ref("is_good")},
        {"from": "draft", "to": "polish", "condition": "score >= 3", "label": "good enough"},
        {"from": "draft", "to": "review"},
        {
            "from": "review",
            "router": ref("route_by_score"),
            "path_map": {"high": "high", "low": "END"},
        },
        {"from": "broken", "to": "recover", "on": "failure"},
    ],
}


def article_by_code() -> AgentGraph:
    """What ARTICLE_SPEC describes, written with the builder."""
    graph = AgentGraph(
        "article",
        description="drafts and publishes",
        goal="publish a good article",
        state_schema=Article,
        max_steps=12,
        stall_threshold=4,
        error_policy=ErrorPolicy.SKIP,
    )
    graph.add_node("draft", draft)
    graph.add_node("review", review)
    graph.add_node("polish", polish, next_node="publish")
    graph.add_node("publish", publish, next_node=END)
    graph.add_node("high", publish, next_node=END)
    graph.add_node("broken", fail, next_node=END)
    graph.add_node("recover", recover, next_node=END)
    graph.add_edge("draft", "broken", condition=is_good)
    graph.add_edge("draft", "polish", condition="score >= 3", label="good enough")
    graph.add_edge("draft", "review")
    graph.add_conditional_edge("review", route_by_score, {"high": "high", "low": END})
    graph.add_edge("broken", "recover", on="failure")
    graph.set_entry("draft")
    return graph


def edge_shape(edge: Edge) -> tuple[Any, ...]:
    """An edge with its parsed condition replaced by its text (parsed closures differ)."""
    condition: Any = edge.condition
    if isinstance(condition, Condition):
        condition = condition.source
    return (
        edge.source,
        edge.kind,
        edge.trigger,
        edge.target,
        condition,
        edge.router,
        edge.path_map,
        edge.label,
        edge.order,
    )


def spec_error(spec: Mapping[str, Any]) -> str:
    with pytest.raises(GraphSpecError) as info:
        AgentGraph.from_spec(spec)
    return str(info.value)


def minimal(**extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": "mini",
        "entry": "a",
        "nodes": {"a": {"call": ref("review"), "next": "END"}},
    }
    spec.update(extra)
    return spec


# ------------------------------------------------------------------- the same graph


def test_spec_builds_the_same_nodes_as_the_builder() -> None:
    from_spec = AgentGraph.from_spec(ARTICLE_SPEC)

    assert from_spec.nodes == article_by_code().nodes


def test_spec_builds_the_same_edges_in_the_same_order_as_the_builder() -> None:
    from_spec = AgentGraph.from_spec(ARTICLE_SPEC).compile()
    by_code = article_by_code().compile()

    assert [edge_shape(e) for e in from_spec.edges] == [edge_shape(e) for e in by_code.edges]


def test_spec_builds_the_same_settings_as_the_builder() -> None:
    from_spec = AgentGraph.from_spec(ARTICLE_SPEC).compile()
    by_code = article_by_code().compile()

    assert from_spec.settings == by_code.settings
    assert from_spec.settings.max_steps == 12
    assert from_spec.settings.error_policy is ErrorPolicy.SKIP
    assert (from_spec.name, from_spec.entry, from_spec.description) == (
        by_code.name,
        by_code.entry,
        by_code.description,
    )
    assert from_spec.schema.source == by_code.schema.source == "Article"


@pytest.mark.parametrize("score", [-5, 0, 5], ids=["review", "polish", "broken"])
def test_spec_graph_runs_like_the_builder_graph(score: int) -> None:
    from_spec = AgentGraph.from_spec(ARTICLE_SPEC).run({"score": score})
    by_code = article_by_code().run({"score": score})

    assert from_spec.state.data == by_code.state.data
    assert from_spec.node_order == by_code.node_order
    assert from_spec.fired_edges == by_code.fired_edges
    assert from_spec.quality == by_code.quality


def test_spec_graph_takes_the_failure_edge_like_the_builder_graph() -> None:
    result = AgentGraph.from_spec(ARTICLE_SPEC).run({"score": 5})

    assert result.node_order == ["draft", "broken", "recover"]
    assert result.state.data["log"] == ["draft", "recover"]
    assert result.quality == "degraded"
    assert result.state.data["recovered"] is True


def test_default_spec_settings_match_default_builder_settings() -> None:
    from_spec = AgentGraph.from_spec(minimal()).compile()
    by_code = AgentGraph("mini")
    by_code.add_node("a", review, next_node=END)
    by_code.set_entry("a")

    assert from_spec.settings == by_code.compile().settings


# --------------------------------------------------------------------------- loading


def test_from_dict_and_from_spec_of_a_mapping_agree() -> None:
    spec = GraphSpec.from_dict(ARTICLE_SPEC)

    assert spec.build().nodes == AgentGraph.from_spec(ARTICLE_SPEC).nodes
    assert AgentGraph.from_spec(spec).nodes == spec.build().nodes


def test_yaml_text_builds_the_graph() -> None:
    text = f"""
name: mini
entry: a
nodes:
  a: {{call: "{ref("draft")}", next: b}}
  b: {{call: "{ref("review")}", next: END}}
"""
    graph = GraphSpec.from_yaml(text).build()

    assert graph.run().node_order == ["a", "b"]


@pytest.mark.parametrize("suffix", [".yaml", ".yml"])
def test_yaml_file_builds_the_graph(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"article{suffix}"
    path.write_text(yaml.safe_dump(ARTICLE_SPEC, sort_keys=False))

    from_path = AgentGraph.from_spec(path)
    from_str = AgentGraph.from_spec(str(path))
    from_loader = GraphSpec.from_yaml(str(path)).build()

    assert from_path.nodes == from_str.nodes == from_loader.nodes == article_by_code().nodes
    assert from_path.run({"score": -5}).node_order == ["draft", "review"]


def test_json_text_builds_the_graph() -> None:
    graph = GraphSpec.from_json(json.dumps(ARTICLE_SPEC)).build()

    assert graph.nodes == article_by_code().nodes


def test_json_file_builds_the_graph(tmp_path: Path) -> None:
    path = tmp_path / "article.json"
    path.write_text(json.dumps(ARTICLE_SPEC))

    graph = AgentGraph.from_spec(str(path))

    assert graph.run({"score": -5}).node_order == ["draft", "review"]
    assert GraphSpec.from_json(path).build().nodes == graph.nodes


# ------------------------------------------------------------------------ references


def test_end_as_a_next_target_is_the_end_sentinel() -> None:
    edges = AgentGraph.from_spec(minimal()).compile().edges

    assert edges[0].target is END


def test_end_as_an_edge_target_is_the_end_sentinel() -> None:
    spec = minimal(
        nodes={"a": {"call": ref("review")}},
        edges=[{"from": "a", "to": "END"}],
    )

    assert AgentGraph.from_spec(spec).compile().edges[0].target is END


def test_end_in_a_list_path_map_is_the_end_sentinel() -> None:
    spec = minimal(
        nodes={"a": {"call": ref("review")}},
        edges=[{"from": "a", "router": ref("route_by_score"), "path_map": ["END"]}],
    )

    edge = AgentGraph.from_spec(spec).compile().edges[0]

    assert edge.path_map == {END: END}


def test_end_in_destinations_is_the_end_sentinel() -> None:
    spec = minimal(nodes={"a": {"call": ref("review"), "destinations": ["END"]}})

    assert AgentGraph.from_spec(spec).compile().nodes["a"].destinations == (END,)


def test_node_call_reference_resolves_to_the_function() -> None:
    graph = AgentGraph.from_spec(minimal()).compile()

    assert graph.direct_calls["a"] is review


def test_dotted_attribute_reference_resolves() -> None:
    spec = minimal(
        nodes={
            "a": {"call": ref("review")},
            "polish": {"call": ref("polish"), "next": "END"},
        },
        edges=[{"from": "a", "router": ref("Routers.always_polish")}],
    )

    graph = AgentGraph.from_spec(spec)

    assert graph.compile().edges[-1].router is spec_targets.Routers.always_polish
    assert graph.run().node_order == ["a", "polish"]


def draft_edges() -> list[Edge]:
    return [e for e in AgentGraph.from_spec(ARTICLE_SPEC).compile().edges if e.source == "draft"]


def test_condition_that_looks_like_a_reference_is_a_predicate() -> None:
    edge = draft_edges()[0]

    assert edge.condition is is_good
    assert edge.label == "is_good"


def test_condition_that_is_an_expression_is_parsed() -> None:
    edge = draft_edges()[1]

    assert isinstance(edge.condition, Condition)
    assert edge.condition.source == "score >= 3"
    assert edge.label == "good enough"


def test_condition_with_a_colon_inside_a_string_is_an_expression() -> None:
    spec = minimal(
        nodes={"a": {"call": ref("review")}, "b": {"call": ref("review"), "next": "END"}},
        edges=[
            {"from": "a", "to": "b", "condition": "stamp == 'at:noon'"},
            {"from": "a", "to": "END"},
        ],
    )

    graph = AgentGraph.from_spec(spec)

    assert graph.run({"stamp": "at:noon"}).node_order == ["a", "b"]


def test_router_with_a_dict_path_map_routes() -> None:
    graph = AgentGraph.from_spec(ARTICLE_SPEC).compile()

    router_edge = next(e for e in graph.edges if e.kind == "router")

    assert router_edge.router is route_by_score
    assert router_edge.path_map == {"high": "high", "low": END}


def test_on_failure_edge_is_a_failure_edge() -> None:
    graph = AgentGraph.from_spec(ARTICLE_SPEC).compile()

    assert [e.describe() for e in graph.routes["broken"].failure] == [
        "broken -> recover (on failure)"
    ]


def test_node_settings_are_passed_to_the_node() -> None:
    spec = minimal(
        nodes={
            "a": {
                "call": ref("review"),
                "next": "END",
                "reads": ["topic"],
                "max_visits": 2,
                "error_policy": "retry",
                "retry": {"max_retries": 1, "initial_delay": 0.0},
                "description": "reads a topic",
            }
        }
    )

    node = AgentGraph.from_spec(spec).compile().nodes["a"]

    assert node.reads == frozenset({"topic"})
    assert node.max_visits == 2
    assert node.error_policy is ErrorPolicy.RETRY
    assert node.retry is not None
    assert node.retry.max_retries == 1
    assert node.description == "reads a topic"


# --------------------------------------------------------------------------- reducers


def test_reducer_name_selects_the_built_in_reducer() -> None:
    spec = minimal(reducers={"log": "append"})

    schema = AgentGraph.from_spec(spec).compile().schema

    assert schema.reducer_for("log") is append


def test_reducer_factory_with_arguments_builds_the_reducer() -> None:
    spec = minimal(
        reducers={"log": {"bounded_append": {"max_len": 3}}},
        nodes={"a": {"call": ref("review"), "next": "END"}},
    )

    graph = AgentGraph.from_spec(spec)

    assert graph.compile().schema.reducer_for("log") == bounded_append(3)
    assert graph.run({"log": ["1", "2", "3"]}).state.data["log"] == ["2", "3", "review"]


def test_reducer_reference_is_imported() -> None:
    spec = minimal(
        reducers={"score": ref("add_up")},
        nodes={"a": {"call": ref("draft"), "next": "END"}},
    )

    graph = AgentGraph.from_spec(spec)

    assert graph.compile().schema.reducer_for("score").name == add_up.__name__
    assert graph.run({"score": 10}).state.data["score"] == 23  # 10 + (10 + 3)


def test_state_schema_reference_brings_its_reducers() -> None:
    spec = minimal(state=ref("Article"), nodes={"a": {"call": ref("review"), "next": "END"}})

    result = AgentGraph.from_spec(spec).run({"log": ["start"]})

    assert result.state.data["log"] == ["start", "review"]


# --------------------------------------------------------------------------- subgraphs


def test_nested_subgraph_spec_with_input_and_output_maps() -> None:
    spec = {
        "name": "parent",
        "state": ref("Article"),
        "entry": "writer",
        "nodes": {
            "writer": {
                "subgraph": {
                    "name": "writer",
                    "state": ref("Writer"),
                    "entry": "write",
                    "nodes": {"write": {"call": ref("write"), "next": "END"}},
                },
                "input_map": {"topic": "subject"},
                "output_map": {"body": "text"},
                "next": "END",
            }
        },
    }

    graph = AgentGraph.from_spec(spec)
    result = graph.run({"topic": "owls"})

    assert result.state.data == {"topic": "owls", "text": "all about owls"}
    assert graph.compile().nodes["writer"].adapter.kind == "subgraph"


def test_nested_subgraph_spec_is_checked_against_both_states() -> None:
    spec = {
        "name": "parent",
        "state": ref("Article"),
        "entry": "writer",
        "nodes": {
            "writer": {
                "subgraph": {
                    "state": ref("Writer"),
                    "entry": "write",
                    "nodes": {"write": {"call": ref("write"), "next": "END"}},
                },
                "output_map": {"nope": "text"},
                "next": "END",
            }
        },
    }

    graph = AgentGraph.from_spec(spec)

    with pytest.raises(GraphBuildError, match=r"'nope', which is not a field of the subgraph"):
        graph.compile()


def test_subgraph_reference_uses_the_referenced_graph() -> None:
    spec = {
        "name": "parent",
        "state": ref("Article"),
        "entry": "writer",
        "nodes": {
            "writer": {
                "subgraph": ref("child_graph"),
                "input_map": {"topic": "subject"},
                "output_map": {"body": "text"},
                "next": "END",
            }
        },
    }

    graph = AgentGraph.from_spec(spec)

    assert graph.compile().nodes["writer"].description == "subgraph writer"
    assert graph.run({"topic": "owls"}).state.data == {"topic": "owls", "text": "all about owls"}


def test_nested_subgraph_spec_builds_the_same_graph_as_add_subgraph() -> None:
    spec = {
        "name": "parent",
        "state": ref("Article"),
        "entry": "writer",
        "nodes": {
            "writer": {
                "subgraph": {
                    "name": "writer",
                    "state": ref("Writer"),
                    "entry": "write",
                    "nodes": {"write": {"call": ref("write"), "next": "END"}},
                },
                "input_map": {"topic": "subject"},
                "output_map": {"body": "text"},
                "next": "END",
            }
        },
    }
    by_code = AgentGraph("parent", state_schema=Article)
    by_code.add_subgraph(
        "writer",
        spec_targets.make_child(),
        input_map={"topic": "subject"},
        output_map={"body": "text"},
        next_node=END,
    )
    by_code.set_entry("writer")

    from_spec = AgentGraph.from_spec(spec)

    assert from_spec.nodes == by_code.nodes
    assert [edge_shape(e) for e in from_spec.compile().edges] == [
        edge_shape(e) for e in by_code.compile().edges
    ]
    assert from_spec.run({"topic": "t"}).state.data == by_code.run({"topic": "t"}).state.data


# ----------------------------------------------------------------------------- errors


def test_node_call_that_cannot_be_imported_names_the_node() -> None:
    message = spec_error(minimal(nodes={"a": {"call": "no_such_module_xyz:thing"}}))

    assert message.startswith("nodes.a.call: cannot import module 'no_such_module_xyz'")


def test_node_call_naming_a_missing_attribute_names_the_node() -> None:
    message = spec_error(minimal(nodes={"a": {"call": ref("nope")}}))

    assert message == f"nodes.a.call: module {M!r} has no attribute 'nope'"


def test_node_call_without_a_colon_names_the_node() -> None:
    message = spec_error(minimal(nodes={"a": {"call": "review"}}))

    assert message == "nodes.a.call: 'review' is not of the form 'module:attribute'"


def test_node_call_that_is_not_a_node_names_the_node() -> None:
    message = spec_error(minimal(nodes={"a": {"call": ref("NOT_A_NODE")}}))

    assert message.startswith("nodes.a: node 'a': expected an Agent, a graph, or a function")


def test_node_options_for_a_function_node_name_the_node() -> None:
    message = spec_error(minimal(nodes={"a": {"call": ref("review"), "options": {"k": 1}}}))

    assert message.startswith("nodes.a: node 'a': options k only apply to agent nodes")


def test_edge_router_that_cannot_be_imported_names_the_edge_index() -> None:
    spec = minimal(
        edges=[
            {"from": "a", "to": "END", "condition": "x > 1"},
            {"from": "a", "to": "END", "condition": "x > 2"},
            {"from": "a", "router": ref("missing_router")},
        ]
    )

    assert spec_error(spec).startswith("edges[2].router: module")


def test_edge_predicate_that_cannot_be_imported_names_the_edge_index() -> None:
    spec = minimal(edges=[{"from": "a", "to": "END", "condition": ref("missing")}])

    assert spec_error(spec).startswith("edges[0].condition: module")


def test_subgraph_reference_that_cannot_be_imported_names_the_node() -> None:
    spec = minimal(nodes={"s": {"subgraph": ref("no_child")}}, entry="s")

    assert spec_error(spec).startswith("nodes.s.subgraph: module")


def test_state_reference_that_cannot_be_imported_is_reported() -> None:
    assert spec_error(minimal(state=ref("Nope"))).startswith("state: module")


def test_unknown_top_level_field_is_reported_by_name() -> None:
    message = spec_error(minimal(entry_point="a"))

    assert message == "entry_point: Extra inputs are not permitted"


def test_unknown_node_field_is_reported_with_its_path() -> None:
    message = spec_error(minimal(nodes={"a": {"call": ref("review"), "nxt": "END"}}))

    assert "nodes.a.nxt: Extra inputs are not permitted" in message


def test_unknown_edge_field_is_reported_with_its_index() -> None:
    spec = minimal(edges=[{"from": "a", "to": "END"}, {"from": "a", "to": "END", "when": "x"}])

    assert "edges[1].when: Extra inputs are not permitted" in spec_error(spec)


def test_subgraph_node_with_fields_only_function_nodes_take_is_rejected() -> None:
    spec = minimal(
        entry="s",
        nodes={
            "s": {"subgraph": ref("child_graph"), "destinations": ["END"], "next": "END"},
        },
    )

    assert spec_error(spec).startswith("nodes.s")


def test_node_with_both_call_and_subgraph_is_rejected() -> None:
    spec = minimal(nodes={"a": {"call": ref("review"), "subgraph": ref("child_graph")}})

    assert "nodes.a: a node needs exactly one of 'call' or 'subgraph'" in (spec_error(spec))


def test_node_with_a_map_but_no_subgraph_is_rejected() -> None:
    spec = minimal(nodes={"a": {"call": ref("review"), "input_map": {"x": "y"}}})

    assert "need 'subgraph'" in spec_error(spec)


def test_edge_with_both_to_and_router_is_rejected() -> None:
    spec = minimal(edges=[{"from": "a", "to": "END", "router": ref("route_by_score")}])

    assert "edges[0]: an edge needs exactly one of 'to' or 'router'" in (spec_error(spec))


def test_router_edge_with_a_condition_is_rejected() -> None:
    spec = minimal(edges=[{"from": "a", "router": ref("route_by_score"), "condition": "x"}])

    assert "a router edge takes no 'condition'" in spec_error(spec)


def test_static_edge_with_a_path_map_is_rejected() -> None:
    spec = minimal(edges=[{"from": "a", "to": "END", "path_map": ["a"]}])

    assert "'path_map' belongs to router edges" in spec_error(spec)


def test_every_invalid_entry_is_reported_at_once() -> None:
    spec = minimal(bogus=1, nodes={"a": {"nxt": "END"}}, edges=[{"to": "END"}])

    message = spec_error(spec)

    for place in ("nodes.a.nxt", "edges[0].from", "bogus"):
        assert place in message


def test_unknown_reducer_name_is_reported_with_the_known_ones() -> None:
    message = spec_error(minimal(reducers={"log": "appendix"}))

    assert message.startswith("reducers.log: unknown reducer 'appendix'; known: ")
    assert "bounded_append" in message


def test_unknown_reducer_factory_is_reported() -> None:
    message = spec_error(minimal(reducers={"log": {"bounded": {"max_len": 3}}}))

    assert message == "reducers.log: unknown reducer factory 'bounded'"


def test_reducer_factory_entry_with_two_names_is_rejected() -> None:
    message = spec_error(
        minimal(reducers={"log": {"bounded_append": {"max_len": 3}, "dedupe_append": {}}})
    )

    assert message.startswith("reducers.log: a reducer factory is one")


def test_reducer_factory_with_unknown_argument_names_the_field() -> None:
    message = spec_error(minimal(reducers={"log": {"bounded_append": {"maxlen": 3}}}))

    assert message.startswith("reducers.log:")


def test_reducer_factory_with_invalid_value_raises_reducer_configuration_error() -> None:
    with pytest.raises(ReducerConfigurationError, match=r"max_len must be an integer >= 1"):
        AgentGraph.from_spec(minimal(reducers={"log": {"bounded_append": {"max_len": 0}}}))


def test_node_named_end_is_rejected() -> None:
    spec = minimal(nodes={"END": {"call": ref("review")}})

    assert spec_error(spec).startswith("nodes.END: in a spec 'END' means the stop target")


def test_invalid_yaml_is_reported() -> None:
    with pytest.raises(GraphSpecError, match=r"^invalid YAML: "):
        GraphSpec.from_yaml("name: [unclosed")


def test_invalid_json_is_reported() -> None:
    with pytest.raises(GraphSpecError, match=r"^invalid JSON: "):
        GraphSpec.from_json('{"name": ')


@pytest.mark.parametrize(
    ("text", "kind"), [("- a\n- b\n", "list"), ("just words", "str"), ("", "NoneType")]
)
def test_yaml_document_that_is_not_a_mapping_is_rejected(text: str, kind: str) -> None:
    with pytest.raises(GraphSpecError) as info:
        GraphSpec.from_yaml(text)

    assert str(info.value) == f"a graph spec is a mapping, got {kind}"


@pytest.mark.parametrize(("text", "kind"), [("[1, 2]", "list"), ('"graph"', "str")])
def test_json_document_that_is_not_a_mapping_is_rejected(text: str, kind: str) -> None:
    with pytest.raises(GraphSpecError) as info:
        GraphSpec.from_json(text)

    assert str(info.value) == f"a graph spec is a mapping, got {kind}"


def test_from_spec_of_something_that_is_not_a_spec_is_rejected() -> None:
    with pytest.raises(GraphSpecError, match=r"a graph spec is a mapping, got int"):
        AgentGraph.from_spec(42)


def test_missing_spec_file_is_reported_with_its_path(tmp_path: Path) -> None:
    missing = tmp_path / "absent.yaml"

    with pytest.raises(GraphSpecError) as info:
        AgentGraph.from_spec(str(missing))

    assert str(info.value).startswith(f"cannot read {missing}")


def test_wrongly_typed_setting_is_reported_with_its_path() -> None:
    message = spec_error(minimal(max_steps="many"))

    assert message.startswith("max_steps: ")


def test_spec_problems_left_to_compile_are_reported_by_compile() -> None:
    graph = AgentGraph.from_spec(minimal(edges=[{"from": "a", "to": "ghost"}]))

    with pytest.raises(GraphBuildError, match=r"dangling_edge"):
        graph.compile()


# ------------------------------------------------------- references: a spec is code

ALLOW_TARGETS = [M]


@pytest.mark.parametrize(
    ("field", "extra"),
    [
        ("nodes.a.call", {"nodes": {"a": {"call": ref("review.__globals__.get")}}}),
        (
            "edges[0].router",
            {"edges": [{"from": "a", "router": ref("Routers.__init__.__globals__")}]},
        ),
        (
            "edges[0].condition",
            {"edges": [{"from": "a", "to": "END", "condition": ref("__dict__")}]},
        ),
        ("state", {"state": ref("Article.__class__")}),
        ("reducers.log", {"reducers": {"log": ref("add_up.__builtins__")}}),
        ("nodes.a.subgraph", {"nodes": {"a": {"subgraph": ref("child_graph.__class__")}}}),
    ],
)
def test_dunder_attribute_path_is_refused_where_it_is_written(
    field: str, extra: dict[str, Any]
) -> None:
    with pytest.raises(GraphSpecError) as info:
        GraphSpec.from_dict(minimal(**extra))

    message = str(info.value)
    assert message.startswith(f"{field}: ")
    assert "may not name dunder attributes" in message


def test_dunder_attribute_path_is_refused_even_without_an_allow_list() -> None:
    # Before: resolved to review.__globals__.get, a door to everything the module holds.
    message = spec_error(minimal(nodes={"a": {"call": ref("review.__globals__.get")}}))

    assert "reaches through '__globals__'" in message


def test_spec_built_without_validation_still_refuses_a_dunder_path() -> None:
    unchecked = GraphSpec.model_construct(
        name="g", nodes={"a": NodeEntry.model_construct(call=ref("review.__globals__"))}
    )

    with pytest.raises(GraphSpecError, match=r"^nodes\.a\.call: .*dunder"):
        unchecked.build()


def test_allow_list_refuses_a_reducer_from_another_module() -> None:
    # The review's example: reducers: {cmd: "os:popen"} ran a command.
    with pytest.raises(GraphSpecError) as info:
        GraphSpec.from_dict(minimal(reducers={"cmd": "os:popen"}), allowed_modules=ALLOW_TARGETS)

    assert str(info.value) == (f"reducers.cmd: module 'os' is not in the allowed modules ({M!r})")


def test_allow_list_refuses_a_node_call_from_another_module() -> None:
    with pytest.raises(GraphSpecError, match=r"^nodes\.a\.call: module 'os' is not in"):
        GraphSpec.from_dict(minimal(nodes={"a": {"call": "os:system"}}), allowed_modules=["tests"])


def test_allow_list_is_checked_before_the_module_is_imported() -> None:
    # The module raises when imported: a refusal that names the allow-list, not
    # the RuntimeError, shows it was never imported.
    spec = minimal(nodes={"a": {"call": "tests.build.spec_raises_on_import:x", "next": "END"}})

    with pytest.raises(GraphSpecError) as info:
        GraphSpec.from_dict(spec, allowed_modules=ALLOW_TARGETS)

    assert "is not in the allowed modules" in str(info.value)


@pytest.mark.parametrize("attribute", ["json.loads", "dumps"], ids=["module", "re-export"])
def test_allow_list_refuses_what_an_allowed_module_only_imported(attribute: str) -> None:
    # spec_targets does `import json` and `from json import dumps`.
    spec = GraphSpec.from_dict(minimal(nodes={"a": {"call": ref(attribute), "next": "END"}}))

    with pytest.raises(GraphSpecError) as info:
        spec.build(allowed_modules=["tests"])

    assert str(info.value).startswith(f"nodes.a.call: {ref(attribute)!r} leads to ")
    assert "from module 'json', which is not in the allowed modules ('tests')" in str(info.value)


def test_allow_list_accepts_every_kind_of_reference_from_allowed_modules() -> None:
    spec = GraphSpec.from_dict(ARTICLE_SPEC, allowed_modules=ALLOW_TARGETS)

    graph = spec.build()

    assert graph.nodes == article_by_code().nodes
    assert graph.run({"score": 5}).node_order == ["draft", "broken", "recover"]


def test_allow_list_accepts_a_referenced_subgraph_router_and_reducer() -> None:
    spec = {
        "name": "parent",
        "state": ref("Article"),
        "entry": "writer",
        "reducers": {"score": ref("add_up")},
        "nodes": {
            "writer": {
                "subgraph": ref("child_graph"),
                "input_map": {"topic": "subject"},
                "output_map": {"body": "text"},
            },
            "polish": {"call": ref("polish"), "next": "END"},
        },
        "edges": [{"from": "writer", "router": ref("Routers.always_polish")}],
    }

    graph = GraphSpec.from_dict(spec, allowed_modules=["tests.build"]).build()

    assert graph.run({"topic": "owls"}).node_order == ["writer", "polish"]


def test_allowed_module_entry_covers_submodules_not_longer_names() -> None:
    call = {"nodes": {"a": {"call": ref("review"), "next": "END"}}}

    for allowed in (["tests"], ["tests.build."], [M]):
        assert GraphSpec.from_dict(minimal(**call), allowed_modules=allowed).build()
    with pytest.raises(GraphSpecError, match=r"not in the allowed modules \('tests\.gra'\)"):
        GraphSpec.from_dict(minimal(**call), allowed_modules=["tests.gra"])


def test_empty_allow_list_allows_names_and_expressions_but_no_import() -> None:
    spec = {
        "name": "mini",
        "reducers": {"log": "append"},
        "nodes": {"a": {"call": ref("review")}},
        "edges": [{"from": "a", "to": "END", "condition": "x > 1"}],
    }

    with pytest.raises(GraphSpecError) as info:
        GraphSpec.from_dict(spec, allowed_modules=[])

    assert str(info.value) == f"nodes.a.call: module {M!r} is not in the allowed modules (none)"


def test_spec_keeps_its_allow_list_for_build() -> None:
    spec = GraphSpec.from_dict(minimal(nodes={"a": {"call": "os:fspath", "next": "END"}}))
    called: Any = spec.build().compile().direct_calls["a"]
    assert called is os.fspath  # no allow-list: any module

    with pytest.raises(GraphSpecError, match=r"^nodes\.a\.call: module 'os' is not in"):
        spec.build(allowed_modules=["tests"])


def test_nested_spec_is_built_under_the_parents_allow_list() -> None:
    spec = minimal(
        nodes={
            "a": {
                "subgraph": {
                    "entry": "w",
                    "nodes": {"w": {"call": "os:getcwd", "next": "END"}},
                },
                "next": "END",
            }
        }
    )
    with pytest.raises(GraphSpecError) as at_load:
        GraphSpec.from_dict(spec, allowed_modules=["tests"])
    with pytest.raises(GraphSpecError) as at_build:
        GraphSpec.from_dict(spec).build(allowed_modules=["tests"])

    expected = "nodes.a.subgraph.nodes.w.call: module 'os' is not in the allowed modules ('tests')"
    assert str(at_load.value) == str(at_build.value) == expected


@pytest.mark.parametrize("text_format", ["yaml", "json"])
def test_text_loaders_take_the_allow_list(text_format: str) -> None:
    spec = minimal(reducers={"cmd": "os:popen"})
    text = yaml.safe_dump(spec) if text_format == "yaml" else json.dumps(spec)
    load = GraphSpec.from_yaml if text_format == "yaml" else GraphSpec.from_json

    with pytest.raises(GraphSpecError, match=r"^reducers\.cmd: module 'os' is not in"):
        load(text, allowed_modules=["tests"])


@pytest.mark.parametrize(
    ("allowed", "message"),
    [
        ("tests", "allowed_modules takes a list of module names, not the string 'tests'"),
        ([""], "allowed_modules: '' is not a module name"),
        (["tests", ".graph"], "allowed_modules: '.graph' is not a module name"),
        ([3], "allowed_modules: 3 is not a module name"),
    ],
)
def test_malformed_allow_list_is_rejected(allowed: Any, message: str) -> None:
    with pytest.raises(GraphSpecError) as info:
        GraphSpec.from_dict(minimal(), allowed_modules=allowed)

    assert str(info.value) == message


def test_load_reference_takes_the_allow_list() -> None:
    assert load_reference(ref("review"), "here", [M]) is review
    with pytest.raises(GraphSpecError, match=r"^here: module 'os' is not in"):
        load_reference("os:getcwd", "here", [M])


# ------------------------------------------------------ references: located errors


def test_relative_import_is_a_located_spec_error() -> None:
    message = spec_error(minimal(nodes={"a": {"call": ".spec_targets:review"}}))

    assert message.startswith("nodes.a.call: '.spec_targets:review' is a relative import")


def test_module_that_raises_on_import_is_a_located_spec_error() -> None:
    spec = minimal(nodes={"a": {"call": "tests.build.spec_raises_on_import:x", "next": "END"}})

    message = spec_error(spec)

    assert message == (
        "nodes.a.call: importing module 'tests.build.spec_raises_on_import' raised "
        "RuntimeError: this module refuses to load"
    )


def test_attribute_lookup_that_raises_is_a_located_spec_error() -> None:
    spec = minimal(nodes={"a": {"call": "tests.build.spec_lookup_fails:thing"}})

    message = spec_error(spec)

    assert message.startswith("nodes.a.call: looking up 'thing' in 'tests.build.spec_lookup_fails'")
    assert "RuntimeError: no lookups here (thing)" in message


@pytest.mark.parametrize(
    ("reference", "problem"),
    [("a..b:c", "'a..b' is not a module name"), (f"{M}:review..x", "is not an attribute path")],
)
def test_malformed_reference_is_a_located_spec_error(reference: str, problem: str) -> None:
    message = spec_error(minimal(nodes={"a": {"call": reference}}))

    assert message.startswith("nodes.a.call: ")
    assert problem in message


@pytest.mark.parametrize(
    ("name", "kind"), [("review", "a function"), ("Article", "a class"), ("NOT_A_NODE", "an int")]
)
def test_subgraph_naming_something_else_is_a_located_spec_error(name: str, kind: str) -> None:
    message = spec_error(minimal(entry="s", nodes={"s": {"subgraph": ref(name)}}))

    assert message == (
        f"nodes.s.subgraph: {ref(name)!r} is {kind}, "
        "not a graph (an AgentGraph or a compiled graph)"
    )


def test_router_naming_something_not_callable_is_a_located_spec_error() -> None:
    message = spec_error(minimal(edges=[{"from": "a", "router": ref("NOT_A_NODE")}]))

    assert message.startswith("edges[0].router: ")


def test_predicate_naming_something_not_callable_is_a_located_spec_error() -> None:
    message = spec_error(
        minimal(edges=[{"from": "a", "to": "END", "condition": ref("NOT_A_NODE")}])
    )

    assert message.startswith("edges[0].condition: ")


def test_errors_in_a_nested_spec_carry_the_whole_path() -> None:
    spec = minimal(
        entry="s",
        nodes={"s": {"subgraph": {"nodes": {"w": {"call": ref("nope")}}}}},
    )

    assert spec_error(spec).startswith("nodes.s.subgraph.nodes.w.call: module ")


@pytest.mark.parametrize(
    ("retry", "field"),
    [
        ({"max_retries": -1}, "max_retries"),
        ({"initial_delay": -0.5}, "initial_delay"),
        ({"max_delay": -1}, "max_delay"),
        ({"jitter": -1}, "jitter"),
        ({"initial_delay": "nan"}, "initial_delay"),
        ({"max_delay": "inf"}, "max_delay"),
    ],
)
def test_invalid_node_retry_is_a_located_spec_error(retry: dict[str, Any], field: str) -> None:
    message = spec_error(minimal(nodes={"a": {"call": ref("review"), "retry": retry}}))

    assert message.startswith(f"nodes.a.retry.{field}: ")


def test_invalid_graph_retry_is_a_located_spec_error() -> None:
    assert spec_error(minimal(retry={"max_retries": -1})).startswith("retry.max_retries: ")


# --------------------------------------------------------------------- YAML and JSON


def alias_bomb(levels: int) -> str:
    """A YAML spec whose node options nest ``levels`` aliases of nine aliases each."""
    lines = ['  l0: &l0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for level in range(1, levels + 1):
        previous = f"*l{level - 1}"
        lines.append(f"  l{level}: &l{level} [{', '.join([previous] * 9)}]")
    body = "\n".join("      " + line for line in lines)
    return f"""
name: bomb
entry: a
nodes:
  a:
    call: "{ref("review")}"
    next: END
    options:
{body}
"""


def test_yaml_alias_expansion_is_bounded() -> None:
    text = alias_bomb(5)  # 9**5 = 59,049 nodes from under 1 KB of text

    with pytest.raises(GraphSpecError) as info:
        GraphSpec.from_yaml(text)

    assert str(info.value).startswith("invalid YAML: aliases expand the document from ")
    assert "at most 10,000 more are allowed" in str(info.value)


def test_yaml_alias_bomb_is_refused_at_once() -> None:
    started = time.perf_counter()
    with pytest.raises(GraphSpecError, match="aliases expand"):
        GraphSpec.from_yaml(alias_bomb(9))  # 9**9 = 387 million nodes once expanded

    assert time.perf_counter() - started < 2.0


def test_yaml_merge_key_expansion_is_bounded() -> None:
    # Each level merges the one below twice: PyYAML's merge flattening doubles
    # per level (20 levels, 943 bytes, took 11 s before the bound).
    lines = ["m0: &m0 {k0: 1}"]
    lines += [f"m{n}: &m{n} {{<<: [*m{n - 1}, *m{n - 1}], k{n}: {n}}}" for n in range(1, 15)]
    text = f"name: bomb\nnodes:\n  a:\n    call: {ref('review')}\n    options:\n" + "".join(
        f"      {line}\n" for line in lines
    )

    with pytest.raises(GraphSpecError, match=r"^invalid YAML: aliases expand the document"):
        GraphSpec.from_yaml(text)


def test_yaml_aliases_within_the_bound_still_work() -> None:
    text = f"""
name: mini
entry: a
nodes:
  a: {{call: "{ref("review")}", next: b, retry: &patient {{max_retries: 5, initial_delay: 0}}}}
  b: {{call: "{ref("review")}", next: END, retry: *patient}}
"""
    graph = GraphSpec.from_yaml(text).build().compile()

    assert [graph.nodes[name].retry.max_retries for name in "ab"] == [5, 5]  # type: ignore[union-attr]


def test_yaml_merge_key_may_override_a_merged_key() -> None:
    text = f"""
name: mini
entry: a
retry: &base {{max_retries: 1, initial_delay: 0}}
nodes:
  a: {{call: "{ref("review")}", next: END, retry: {{<<: *base, max_retries: 4}}}}
"""
    spec = GraphSpec.from_yaml(text)

    assert spec.nodes["a"].retry is not None
    assert spec.nodes["a"].retry.max_retries == 4


def test_yaml_alias_that_contains_itself_is_refused() -> None:
    with pytest.raises(GraphSpecError, match=r"^invalid YAML: the alias at line 2 contains itself"):
        GraphSpec.from_yaml("name: x\nedges: &loop [*loop]\n")


def test_duplicate_yaml_node_key_is_refused_with_its_line() -> None:
    # Before: the second 'a' silently replaced the first.
    text = f"""
name: mini
nodes:
  a: {{call: "{ref("review")}"}}
  b: {{call: "{ref("review")}"}}
  a: {{call: "{ref("polish")}"}}
"""
    with pytest.raises(GraphSpecError) as info:
        GraphSpec.from_yaml(text)

    message = str(info.value)
    assert message.startswith("invalid YAML: ")
    assert "found duplicate key 'a' (first at line 4)" in message
    assert "line 6, column 3" in message


def test_duplicate_top_level_yaml_key_is_refused() -> None:
    with pytest.raises(GraphSpecError, match=r"duplicate key 'entry' \(first at line 1\)"):
        GraphSpec.from_yaml("entry: a\nname: g\nentry: b\n")


@pytest.mark.parametrize(
    ("text", "where", "key"),
    [
        ('{"name": "a", "name": "b"}', "<root>", "name"),
        ('{"nodes": {"a": {"call": "m:f"}, "a": {"call": "m:g"}}}', "nodes", "a"),
        ('{"edges": [{"from": "a"}, {"from": "a", "from": "b"}]}', "edges[1]", "from"),
    ],
)
def test_duplicate_json_key_is_refused_with_its_place(text: str, where: str, key: str) -> None:
    with pytest.raises(GraphSpecError) as info:
        GraphSpec.from_json(text)

    assert str(info.value) == f"invalid JSON: {where}: duplicate key {key!r}"


def test_deeply_nested_yaml_is_a_spec_error() -> None:
    with pytest.raises(GraphSpecError, match=r"^invalid YAML: nested too deeply$"):
        GraphSpec.from_yaml("options: " + "[" * 5000)


def test_deeply_nested_json_is_a_spec_error() -> None:
    with pytest.raises(GraphSpecError, match=r"^invalid JSON: nested too deeply$"):
        GraphSpec.from_json('{"options": ' + "[" * 100_000)


def test_from_spec_passes_the_allow_list_on() -> None:
    assert AgentGraph.from_spec(ARTICLE_SPEC, allowed_modules=["tests.build"]).nodes
    with pytest.raises(GraphSpecError, match="allowed"):
        AgentGraph.from_spec(ARTICLE_SPEC, allowed_modules=["myapp"])
    spec = GraphSpec.from_dict(ARTICLE_SPEC)
    with pytest.raises(GraphSpecError):
        AgentGraph.from_spec(spec, allowed_modules=["myapp"])


def test_an_edges_on_key_is_a_string_in_yaml() -> None:
    # YAML 1.1 would read ``on`` as true (and ``yes``/``no``/``off`` as booleans).
    spec = GraphSpec.from_yaml(
        "name: g\n"
        "entry: a\n"
        "nodes:\n"
        f"  a: {{call: '{M}:draft'}}\n"
        f"  b: {{call: '{M}:fail'}}\n"
        "edges:\n"
        "  - {from: a, to: END}\n"
        "  - {from: a, to: b, on: failure}\n"
        "  - {from: b, to: END}\n"
    )
    assert spec.edges[1].on == "failure"
