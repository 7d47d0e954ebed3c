"""GraphSpec: declarative graphs from a dict, YAML or JSON build the graph the builder would."""

from __future__ import annotations

import json
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
from selectgraph.graph import Condition
from selectgraph.graph._edges import Edge
from tests.graph import spec_targets
from tests.graph.spec_targets import (
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

M = "tests.graph.spec_targets"


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
