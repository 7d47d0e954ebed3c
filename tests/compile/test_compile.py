"""Compile-time validation: AgentGraph.compile() / .validate() and their diagnostics."""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

import pytest
from pydantic import BaseModel, ConfigDict

from selectgraph import (
    END,
    AgentGraph,
    Diagnostic,
    GraphBuildError,
    GraphState,
    append,
    bounded_append,
    merge,
)

# --------------------------------------------------------------------------- helpers


def noop(state: GraphState) -> None:
    return None


def bump(state: GraphState) -> dict[str, Any]:
    return {"x": state.data.get("x", 0) + 1}


def pick_b(state: GraphState) -> str:
    return "b"


def build_error(graph: AgentGraph) -> GraphBuildError:
    with pytest.raises(GraphBuildError) as info:
        graph.compile()
    return info.value


def the(error: GraphBuildError, category: str) -> Diagnostic:
    """The one diagnostic of ``category`` (fails if there are none or several)."""
    found = [d for d in error.diagnostics if d.category == category]
    assert len(found) == 1, f"expected one {category!r}, got {error.categories}"
    return found[0]


def chain(*names: str) -> AgentGraph:
    """``names[0] -> names[1] -> ... -> END``, entry at the first."""
    graph = AgentGraph("g")
    targets: list[str | Any] = [*names[1:], END]
    for name, target in zip(names, targets, strict=True):
        graph.add_node(name, noop, next_node=target)
    graph.set_entry(names[0])
    return graph


class Notes(TypedDict, total=False):
    topic: str
    notes: Annotated[list[str], append]


class Draft(TypedDict, total=False):
    subject: str
    notes: list[str]


class Scored(BaseModel):
    score: int = 0
    label: str = ""


class Loose(BaseModel):
    model_config = ConfigDict(extra="allow")

    score: int = 0


def child_graph() -> AgentGraph:
    child = AgentGraph("child", state_schema=Draft)
    child.add_node("write", noop, next_node=END)
    child.set_entry("write")
    return child


def parent_graph() -> AgentGraph:
    parent = AgentGraph("parent", state_schema=Notes)
    parent.set_entry("s")
    return parent


# ------------------------------------------------------------------ structure errors


def test_graph_without_nodes_reports_empty_graph_only() -> None:
    error = build_error(AgentGraph("lonely"))

    assert error.categories == ["empty_graph"]
    assert "'lonely'" in error.diagnostics[0].message


def test_graph_with_an_empty_name_is_rejected() -> None:
    graph = AgentGraph("")
    graph.add_node("a", noop, next_node=END)
    graph.set_entry("a")

    assert build_error(graph).categories == ["invalid_name"]


def test_missing_entry_reports_no_declared_entry_listing_the_nodes_when_strict() -> None:
    graph = AgentGraph("g", strict_entry=True)
    graph.add_node("a", noop, next_node="b")
    graph.add_node("b", noop, next_node=END)

    diagnostic = the(build_error(graph), "no_declared_entry")

    assert "set_entry" in diagnostic.message
    assert "a, b" in diagnostic.message


def test_without_set_entry_the_first_node_added_is_the_entry() -> None:
    graph = AgentGraph("g")
    graph.add_node("start", lambda s: {"path": [*s.get("path", []), "start"]}, next_node="b")
    graph.add_node("b", lambda s: {"path": [*s["path"], "b"]}, next_node=END)

    result = graph.run()

    assert graph.compile().entry == "start"
    assert result.state["path"] == ["start", "b"]


def test_an_explicit_entry_wins_over_the_first_node() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", lambda s: {"path": [*s.get("path", []), "a"]}, next_node=END)
    graph.add_node("b", lambda s: {"path": ["b"]}, next_node="a")
    graph.set_entry("b")

    assert graph.run().state["path"] == ["b", "a"]


def test_entry_that_is_not_a_node_reports_unknown_entry() -> None:
    graph = chain("a")
    graph.set_entry("nope")

    error = build_error(graph)

    assert error.categories == ["unknown_entry"]
    assert "'nope'" in error.diagnostics[0].message


def test_unreachable_node_is_named_with_the_entry() -> None:
    graph = chain("a")
    graph.add_node("island", noop, next_node=END)

    diagnostic = the(build_error(graph), "unreachable_node")

    assert diagnostic.node == "island"
    assert "'island'" in diagnostic.message
    assert "entry 'a'" in diagnostic.message


def test_edge_from_unknown_node_is_dangling() -> None:
    graph = chain("a")
    graph.add_edge("ghost", "a")

    diagnostic = the(build_error(graph), "dangling_edge")

    assert "edge from 'ghost'" in diagnostic.message


def test_edge_to_unknown_node_is_dangling_and_names_source_and_target() -> None:
    graph = chain("a")
    graph.add_edge("a", "ghost", condition="x > 1")

    diagnostic = the(build_error(graph), "dangling_edge")

    assert diagnostic.node == "a"
    assert "'a' -> 'ghost'" in diagnostic.message
    assert "selectgraph.END" not in diagnostic.message


@pytest.mark.parametrize("written", ["END", "__end__"])
def test_end_written_as_a_string_is_dangling_with_a_hint(written: str) -> None:
    graph = AgentGraph("g")
    graph.add_node("a", noop, next_node=written)
    graph.set_entry("a")

    diagnostic = the(build_error(graph), "dangling_edge")

    assert f"no node named {written!r}" in diagnostic.message
    assert "use selectgraph.END" in diagnostic.message


def test_string_end_is_a_plain_target_when_a_node_is_named_end() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", noop, next_node="END")
    graph.add_node("END", noop, next_node=END)
    graph.set_entry("a")

    assert graph.run().node_order == ["a", "END"]


def test_edge_leaving_end_is_reported() -> None:
    graph = chain("a")
    graph.add_edge(END, "a")

    error = build_error(graph)

    assert error.categories == ["edge_from_end"]
    assert "END is terminal" in error.diagnostics[0].message


def test_edge_leaving_end_names_the_edge() -> None:
    graph = chain("a")
    graph.add_edge(END, "a")

    assert "'a'" in the(build_error(graph), "edge_from_end").message


def test_two_unconditional_edges_report_multiple_outgoing_edges_naming_both() -> None:
    graph = chain("a", "b")
    graph.add_edge("a", END)

    diagnostic = the(build_error(graph), "multiple_outgoing_edges")

    assert diagnostic.node == "a"
    assert "2 unconditional edges" in diagnostic.message
    assert "a -> b" in diagnostic.message
    assert "a -> END" in diagnostic.message


def test_router_plus_static_edge_report_multiple_outgoing_edges() -> None:
    graph = chain("a", "b")
    graph.add_conditional_edge("a", pick_b, ["b"])

    diagnostic = the(build_error(graph), "multiple_outgoing_edges")

    assert "router pick_b" in diagnostic.message


def test_conditional_edges_with_one_fallback_compile() -> None:
    graph = chain("a", "b")
    graph.add_edge("a", END, condition="x > 1")
    graph.add_edge("a", "a", condition="x < 0")

    compiled = graph.compile()

    assert [e.describe() for e in compiled.routes["a"].success] == [
        "a -> END [x > 1]",
        "a -> a [x < 0]",
        "a -> b",
    ]


def test_failure_fallback_counts_separately_from_success_fallback() -> None:
    graph = chain("a", "b")
    graph.add_edge("a", END, on="failure")

    routes = graph.compile().routes["a"]

    assert [e.describe() for e in routes.success] == ["a -> b"]
    assert [e.describe() for e in routes.failure] == ["a -> END (on failure)"]


def test_two_failure_fallbacks_report_multiple_outgoing_edges_on_failure() -> None:
    graph = chain("a", "b")
    graph.add_edge("a", "b", on="failure")
    graph.add_edge("a", END, on="failure")

    diagnostic = the(build_error(graph), "multiple_outgoing_edges")

    assert "unconditional edges on failure" in diagnostic.message


def test_always_edge_counts_as_a_success_fallback() -> None:
    graph = chain("a", "b")
    graph.add_edge("a", END, on="always")

    diagnostic = the(build_error(graph), "multiple_outgoing_edges")

    assert "a -> END (on always)" in diagnostic.message


def test_node_without_success_edge_is_a_dead_end() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", noop)
    graph.set_entry("a")

    error = build_error(graph)

    assert error.categories == ["dead_end_node"]
    assert error.diagnostics[0].node == "a"
    assert "add_edge('a', END)" in error.diagnostics[0].message


def test_node_with_only_a_failure_edge_is_a_dead_end() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", noop)
    graph.add_edge("a", END, on="failure")
    graph.set_entry("a")

    assert build_error(graph).categories == ["dead_end_node"]


def test_declared_destinations_exempt_a_node_from_dead_end() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", noop, destinations=["b", END])
    graph.add_node("b", noop, next_node=END)
    graph.set_entry("a")

    compiled = graph.compile()

    assert compiled.nodes["a"].destinations == ("b", END)
    assert compiled.targets_of("a") == ["b", END]


def test_destination_naming_unknown_node_is_dangling() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", noop, destinations=["ghost"])
    graph.set_entry("a")

    diagnostic = the(build_error(graph), "dangling_edge")

    assert diagnostic.node == "a"
    assert "destination 'ghost'" in diagnostic.message


@pytest.mark.parametrize(
    "path_map",
    [{"yes": "a", "no": "ghost"}, ["a", "ghost"]],
    ids=["dict", "list"],
)
def test_path_map_naming_unknown_node_is_dangling(path_map: Any) -> None:
    graph = AgentGraph("g")
    graph.add_node("a", noop)
    graph.add_conditional_edge("a", pick_b, path_map)
    graph.set_entry("a")

    diagnostic = the(build_error(graph), "dangling_edge")

    assert diagnostic.node == "a"
    assert "path_map of 'a' -> 'ghost'" in diagnostic.message


def test_path_map_value_that_is_not_a_name_is_dangling() -> None:
    graph = AgentGraph("g")
    not_a_name: dict[Any, Any] = {"yes": 3}
    graph.add_node("a", noop)
    graph.add_conditional_edge("a", pick_b, not_a_name)
    graph.set_entry("a")

    diagnostic = the(build_error(graph), "dangling_edge")

    assert "maps 'yes' to 3" in diagnostic.message


def test_path_map_with_string_end_gets_the_end_hint() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", noop)
    graph.add_conditional_edge("a", pick_b, {"done": "END"})
    graph.set_entry("a")

    assert "use selectgraph.END" in the(build_error(graph), "dangling_edge").message


def test_duplicate_node_is_reported_with_its_name() -> None:
    graph = chain("a")
    graph.add_node("a", bump, next_node=END)

    error = build_error(graph)

    assert error.categories == ["duplicate_node"]
    assert error.diagnostics[0].node == "a"
    assert "'a' is declared twice" in error.diagnostics[0].message


@pytest.mark.parametrize("schema", [int, dict], ids=["int", "dict"])
def test_state_schema_that_is_not_a_model_or_typeddict_is_rejected(schema: type[Any]) -> None:
    graph = AgentGraph("g", state_schema=schema)
    graph.add_node("a", noop, next_node=END)
    graph.set_entry("a")

    diagnostic = the(build_error(graph), "invalid_state_schema")

    assert schema.__name__ in diagnostic.message


# -------------------------------------------------------------------- settings errors


@pytest.mark.parametrize("max_steps", [0, -5])
def test_max_steps_below_one_is_invalid(max_steps: int) -> None:
    graph = AgentGraph("g", max_steps=max_steps)
    graph.add_node("a", noop, next_node=END)
    graph.set_entry("a")

    error = build_error(graph)

    assert error.categories == ["invalid_max_steps"]
    assert f"got {max_steps}" in error.diagnostics[0].message


def test_max_steps_none_means_unlimited_and_compiles() -> None:
    graph = AgentGraph("g", max_steps=None)
    graph.add_node("a", noop, next_node=END)
    graph.set_entry("a")

    assert graph.compile().settings.max_steps is None


def test_stall_threshold_below_one_is_invalid() -> None:
    graph = AgentGraph("g", stall_threshold=0)
    graph.add_node("a", noop, next_node=END)
    graph.set_entry("a")

    error = build_error(graph)

    assert error.categories == ["invalid_stall_threshold"]
    assert "got 0" in error.diagnostics[0].message


def test_negative_max_visits_is_invalid_and_names_the_node() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", noop, next_node=END, max_visits=-1)
    graph.set_entry("a")

    error = build_error(graph)

    assert error.categories == ["invalid_max_visits"]
    assert error.diagnostics[0].node == "a"


def test_max_visits_zero_means_unlimited() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", noop, next_node=END, max_visits=0)
    graph.set_entry("a")

    assert graph.compile().nodes["a"].max_visits is None


# -------------------------------------------------------------------- reducer errors


def test_two_reducers_in_one_annotated_conflict() -> None:
    class State(TypedDict):
        items: Annotated[list[int], append, merge]

    graph = AgentGraph("g", state_schema=State)
    graph.add_node("a", noop, next_node=END)
    graph.set_entry("a")

    diagnostic = the(build_error(graph), "conflicting_reducers")

    assert "field 'items'" in diagnostic.message
    assert "append, merge" in diagnostic.message


def test_schema_reducer_and_reducers_argument_conflict() -> None:
    class State(TypedDict):
        items: Annotated[list[int], append]

    graph = AgentGraph("g", state_schema=State, reducers={"items": bounded_append(2)})
    graph.add_node("a", noop, next_node=END)
    graph.set_entry("a")

    diagnostic = the(build_error(graph), "conflicting_reducers")

    assert "append, bounded_append(max_len=2)" in diagnostic.message


def test_same_reducer_in_schema_and_reducers_argument_is_not_a_conflict() -> None:
    class State(TypedDict):
        items: Annotated[list[int], bounded_append(3)]

    graph = AgentGraph("g", state_schema=State, reducers={"items": bounded_append(3)})
    graph.add_node("a", noop, next_node=END)
    graph.set_entry("a")

    assert graph.compile().schema.reducer_for("items").name == "bounded_append(max_len=3)"


def test_reducer_for_a_field_the_schema_lacks_is_reported() -> None:
    graph = AgentGraph("g", state_schema=Notes, reducers={"other": append})
    graph.add_node("a", noop, next_node=END)
    graph.set_entry("a")

    diagnostic = the(build_error(graph), "unknown_state_key")

    assert "'other'" in diagnostic.message
    assert "Notes" in diagnostic.message


def test_reducer_that_is_not_callable_is_reported() -> None:
    graph = AgentGraph("g", reducers={"x": 3})
    graph.add_node("a", noop, next_node=END)
    graph.set_entry("a")

    assert "reducers['x'] is 3" in the(build_error(graph), "invalid_reducer").message


# ------------------------------------------------------------------- subgraph errors


def test_input_map_naming_undeclared_fields_is_reported_on_both_sides() -> None:
    graph = parent_graph()
    graph.add_subgraph("s", child_graph(), input_map={"missing": "absent"}, next_node=END)

    error = build_error(graph)

    assert error.categories == ["mapping_references_undeclared_field"] * 2
    parent_side, child_side = error.diagnostics
    assert parent_side.node == child_side.node == "s"
    assert "'missing', which is not a field of the parent state (Notes" in parent_side.message
    assert "'absent', which is not a field of the subgraph state (Draft" in child_side.message


def test_output_map_naming_undeclared_child_field_is_reported() -> None:
    graph = parent_graph()
    graph.add_subgraph("s", child_graph(), output_map={"ghost": "notes"}, next_node=END)

    diagnostic = the(build_error(graph), "mapping_references_undeclared_field")

    assert "'ghost'" in diagnostic.message
    assert "subgraph state" in diagnostic.message


def test_projects_out_naming_undeclared_field_is_reported() -> None:
    graph = parent_graph()
    graph.add_subgraph("s", child_graph(), projects_out=["subject"], next_node=END)

    diagnostic = the(build_error(graph), "mapping_references_undeclared_field")

    assert "'subject', which is not a field of the parent state" in diagnostic.message


def test_subgraph_with_both_projection_forms_is_rejected() -> None:
    graph = parent_graph()
    graph.add_subgraph(
        "s", child_graph(), input_map={"topic": "subject"}, projects_out=["notes"], next_node=END
    )

    error = build_error(graph)

    assert error.categories == ["conflicting_projection_forms"]
    assert error.diagnostics[0].node == "s"


def test_output_map_sending_two_fields_to_one_is_rejected() -> None:
    graph = parent_graph()
    graph.add_subgraph(
        "s", child_graph(), output_map={"notes": "topic", "subject": "topic"}, next_node=END
    )

    diagnostic = the(build_error(graph), "conflicting_projection")

    assert "both 'notes' and 'subject' to 'topic'" in diagnostic.message


def test_invalid_subgraph_problems_are_reported_against_the_subgraph_node() -> None:
    broken = AgentGraph("broken")
    broken.add_node("x", noop)
    graph = AgentGraph("g")
    graph.add_subgraph("s", broken, next_node=END)
    graph.set_entry("s")

    error = build_error(graph)

    assert error.categories == ["dead_end_node"]
    assert all(d.node == "s" for d in error.diagnostics)
    assert all(d.message.startswith("in subgraph 's': ") for d in error.diagnostics)


# ------------------------------------------------------------------ condition errors


@pytest.mark.parametrize(
    ("condition", "fragments"),
    [
        ("score.value > 1", ["attribute access", "'score.value'"]),
        ("len(items) > 1", ["function call", "'len(items)'"]),
        ("score + 1 > 2", ["arithmetic", "'score + 1'"]),
        ("__class__ == 1", ["dunder name", "'__class__'"]),
        ("items[1:2] == []", ["non-literal index", "'items[1:2]'"]),
        ("score >", ["invalid syntax"]),
        ("", ["non-empty string"]),
    ],
)
def test_unsafe_or_malformed_condition_is_rejected_naming_the_part(
    condition: str, fragments: list[str]
) -> None:
    graph = chain("a")
    graph.add_edge("a", "a", condition=condition)

    diagnostic = the(build_error(graph), "unsafe_condition")

    assert diagnostic.node == "a"
    assert "edge 'a' -> 'a'" in diagnostic.message
    for fragment in fragments:
        assert fragment in diagnostic.message


def test_condition_naming_unknown_schema_key_is_reported() -> None:
    graph = AgentGraph("g", state_schema=Scored)
    graph.add_node("a", noop, next_node=END)
    graph.add_edge("a", "a", condition="scor > 1 and label == 'x'")
    graph.set_entry("a")

    diagnostic = the(build_error(graph), "unknown_state_key")

    assert diagnostic.node == "a"
    assert "names 'scor'" in diagnostic.message
    assert "fields: label, score" in diagnostic.message


def test_condition_keys_are_not_checked_without_a_schema() -> None:
    graph = chain("a")
    graph.add_edge("a", "a", condition="anything > 1")

    assert graph.validate() == []


def test_condition_keys_are_not_checked_when_the_schema_allows_extra() -> None:
    graph = AgentGraph("g", state_schema=Loose)
    graph.add_node("a", noop, reads=["extra"], next_node=END)
    graph.add_edge("a", "a", condition="extra > 1")
    graph.set_entry("a")

    assert graph.compile().nodes["a"].reads == frozenset({"extra"})


def test_declared_reads_and_writes_outside_the_schema_are_reported() -> None:
    graph = AgentGraph("g", state_schema=Scored)
    graph.add_node("a", noop, reads=["score", "zeta"], writes=["omega"], optional_writes=["psi"])
    graph.add_edge("a", END)
    graph.set_entry("a")

    error = build_error(graph)

    assert error.categories == ["unknown_state_key"] * 3
    assert [d.message.split(",")[0] for d in error.diagnostics] == [
        "node 'a' declares reads 'zeta'",
        "node 'a' declares writes 'omega'",
        "node 'a' declares optional_writes 'psi'",
    ]


def test_unsafe_condition_does_not_hide_a_dangling_target() -> None:
    graph = chain("a")
    graph.add_edge("a", "ghost", condition="f(x)")

    assert build_error(graph).categories == ["unsafe_condition", "dangling_edge"]


# -------------------------------------------------------------------- all at once


def broken_graph() -> AgentGraph:
    graph = AgentGraph("broken", max_steps=0)
    graph.add_node("a", noop, next_node="ghost")
    graph.add_node("b", noop, next_node=END)
    graph.add_node("b", bump)
    graph.add_edge("b", END, condition="len(x)")
    graph.add_edge(END, "a")
    graph.set_entry("a")
    return graph


def test_every_problem_is_reported_at_once_in_a_stable_order() -> None:
    error = build_error(broken_graph())

    assert error.categories == [
        "duplicate_node",
        "invalid_max_steps",
        "dangling_edge",
        "unsafe_condition",
        "edge_from_end",
        "unreachable_node",  # a's only edge is broken: reported once, not also as a dead end
    ]


def test_the_same_graph_reports_the_same_diagnostics_every_time() -> None:
    first = build_error(broken_graph()).diagnostics
    second = build_error(broken_graph()).diagnostics

    assert first == second


def test_build_error_message_lists_every_diagnostic() -> None:
    error = build_error(broken_graph())

    text = str(error)

    assert text.startswith("graph is invalid (6 problems):")
    for diagnostic in error.diagnostics:
        assert f"  - [{diagnostic.category}] {diagnostic.message}" in text


def test_build_error_holds_only_errors_not_warnings() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", bump)
    graph.add_edge("a", END, condition="x > 0")  # a warning: no fallback edge
    graph.add_node("island", noop, next_node=END)  # an error: unreachable
    graph.set_entry("a")

    error = build_error(graph)

    assert error.categories == ["unreachable_node"]


# ------------------------------------------------------------------------ validate()


def test_validate_returns_no_warnings_for_a_clean_graph() -> None:
    assert chain("a", "b").validate() == []


def test_validate_returns_the_errors_compile_raises_without_raising() -> None:
    found = broken_graph().validate()

    assert [d for d in found if d.severity == "error"] == build_error(broken_graph()).diagnostics


def test_validate_lists_an_unreachable_node_as_seed_004_shows() -> None:
    graph = chain("a")
    graph.add_node("island", noop, next_node=END)

    found = graph.validate()

    assert [(d.category, d.severity, d.node) for d in found] == [
        ("unreachable_node", "error", "island")
    ]
    with pytest.raises(GraphBuildError):  # still refused where it matters
        graph.compile()


def test_validate_warns_about_a_cycle_with_no_way_out() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", bump, next_node="b")
    graph.add_node("b", bump, next_node="a")
    graph.set_entry("a")

    warnings = graph.validate()

    assert [(w.category, w.severity, w.node) for w in warnings] == [
        ("no_path_to_end", "warning", "a"),
        ("no_path_to_end", "warning", "b"),
    ]
    assert "'a' has no path to END" in warnings[0].message


def test_validate_warns_about_a_node_with_only_conditional_edges() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", bump)
    graph.add_edge("a", END, condition="x > 0")
    graph.set_entry("a")

    warnings = graph.validate()

    assert [(w.category, w.node) for w in warnings] == [("no_fallback_edge", "a")]
    assert "RoutingError" in warnings[0].message


def test_validate_warns_about_a_non_idempotent_projection_round_trip() -> None:
    graph = parent_graph()
    graph.add_subgraph("s", child_graph(), projects_in=["notes"], projects_out=["notes"])
    graph.add_edge("s", END)

    warnings = graph.validate()

    assert [(w.category, w.node) for w in warnings] == [("projection_reducer_round_trip", "s")]
    assert "'notes'" in warnings[0].message
    assert "reducer append" in warnings[0].message


def test_replace_reducer_round_trip_is_not_warned_about() -> None:
    graph = parent_graph()
    graph.add_subgraph(
        "s", child_graph(), input_map={"topic": "subject"}, output_map={"subject": "topic"}
    )
    graph.add_edge("s", END)

    assert graph.validate() == []


def test_warnings_do_not_stop_compile_and_are_kept_on_the_compiled_graph() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", bump)
    graph.add_edge("a", END, condition="x > 0")
    graph.set_entry("a")

    compiled = graph.compile()

    assert [w.category for w in compiled.warnings] == ["no_fallback_edge"]
    assert compiled.run().state.data == {"x": 1}


# --------------------------------------------------------------------------- caching


def test_compile_is_cached_while_the_graph_is_unchanged() -> None:
    graph = chain("a")

    assert graph.compile() is graph.compile()


def test_run_uses_the_cached_compiled_graph() -> None:
    graph = chain("a")
    compiled = graph.compile()

    graph.run()

    assert graph.compile() is compiled


@pytest.mark.parametrize(
    "change",
    ["add_node", "add_edge", "add_conditional_edge", "set_entry", "add_subgraph"],
)
def test_any_declaration_invalidates_the_cache(change: str) -> None:
    graph = chain("a", "b")
    before = graph.compile()

    if change == "add_node":
        graph.add_node("c", noop, next_node=END)
        graph.add_edge("a", "c", condition="x > 1")
    elif change == "add_edge":
        graph.add_edge("a", END, condition="x > 1")
    elif change == "add_conditional_edge":
        graph.add_conditional_edge("b", pick_b, {"b": END}, on="failure")
    elif change == "set_entry":
        graph.add_edge("b", "a", condition="x > 1")
        graph.set_entry("b")
    else:
        graph.add_subgraph("s", chain("x"), next_node=END)
        graph.add_edge("a", "s", condition="x > 1")

    assert graph.compile() is not before


def test_a_change_that_breaks_the_graph_makes_compile_raise_again() -> None:
    graph = chain("a")
    graph.compile()

    graph.add_edge("a", "ghost")

    assert "dangling_edge" in build_error(graph).categories


def test_declaring_a_duplicate_node_after_compile_makes_compile_raise() -> None:
    graph = chain("a")
    graph.compile()

    graph.add_node("a", bump, next_node=END)

    assert build_error(graph).categories == ["duplicate_node"]


def test_compiled_graph_is_unaffected_by_later_builder_changes() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", bump, next_node=END)
    graph.set_entry("a")
    compiled = graph.compile()

    graph.add_node("b", bump, next_node=END)
    graph.add_edge("a", "b", condition="x > 0")

    assert list(compiled.nodes) == ["a"]
    assert [e.describe() for e in compiled.edges] == ["a -> END"]
    assert compiled.run().node_order == ["a"]
    assert graph.run().node_order == ["a", "b"]


def test_compiled_graph_keeps_its_own_copy_of_a_path_map() -> None:
    path_map: dict[Any, Any] = {"b": END}
    graph = AgentGraph("g")
    graph.add_node("a", noop)
    graph.add_conditional_edge("a", pick_b, path_map)
    graph.set_entry("a")
    compiled = graph.compile()

    path_map["b"] = "a"

    assert compiled.edges[0].path_map == {"b": END}
    assert compiled.run().node_order == ["a"]


def test_compiled_graph_keeps_its_own_copy_of_declared_lists() -> None:
    reads = ["x"]
    graph = AgentGraph("g")
    graph.add_node("a", noop, reads=reads, next_node=END)
    graph.set_entry("a")
    compiled = graph.compile()

    reads.append("y")

    assert compiled.nodes["a"].reads == frozenset({"x"})


def test_validate_warns_that_retry_on_an_agent_node_is_left_to_its_judge() -> None:
    from selectgraph import Agent, AgentConfig, ErrorPolicy
    from selectgraph.testing import ScriptedProvider

    writer = Agent(AgentConfig(name="writer"), provider=ScriptedProvider(["draft"]))
    graph = AgentGraph("g")
    graph.add_node("writer", writer, error_policy=ErrorPolicy.RETRY, next_node="tidy")
    graph.add_node("tidy", noop, error_policy=ErrorPolicy.RETRY, next_node=END)

    warnings = graph.validate()

    assert [(w.category, w.severity, w.node) for w in warnings] == [
        ("retry_policy_ignored", "warning", "writer")
    ]
    assert "judge" in warnings[0].message
    assert list(graph.compile().warnings) == warnings  # a warning: the graph still compiles


# ------------------------------------------------------------ add_node input checks


def test_add_node_refuses_the_agent_class_instead_of_an_instance() -> None:
    from selectgraph import Agent

    graph = AgentGraph("g")

    with pytest.raises(TypeError, match=r"node 'writer': got the class Agent, not an Agent"):
        graph.add_node("writer", Agent)
    with pytest.raises(TypeError, match=r"got the class Agent"):
        graph.add_node("writer", Agent, context_mode="last")


def test_add_node_refuses_a_function_with_three_required_parameters() -> None:
    def node(state: Any, context: Any, extra: Any) -> None:
        return None

    graph = AgentGraph("g")

    with pytest.raises(TypeError, match=r"node 'n': node requires 3 arguments \(state"):
        graph.add_node("n", node)


def test_add_node_accepts_extra_parameters_with_defaults() -> None:
    def node(state: Any, context: Any = None, *, scale: int = 2) -> dict[str, Any]:
        return {"x": scale}

    graph = AgentGraph("g")
    graph.add_node("n", node, next_node=END)

    assert graph.run().state["x"] == 2
