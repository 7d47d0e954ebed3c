"""Diagrams: graph.to_mermaid() and graph.visualize("ascii" | "mermaid"), with and without a run."""

from __future__ import annotations

import json
import os
import re
import struct
import sys
from pathlib import Path
from typing import Any

import pytest

from selectgraph import END, AgentGraph, GraphResult, GraphState, goto
from selectgraph.compile import _png
from selectgraph.compile._png import PngUnavailable

# --------------------------------------------------------------------------- helpers


def noop(state: GraphState) -> None:
    return None


def fail(state: GraphState) -> None:
    raise ValueError("kaput")


def route(state: GraphState) -> Any:
    return END if state.data.get("done") else "fix"


def support_graph() -> AgentGraph:
    """classify -> (billing | general), general routed by ``route``, billing may fail."""
    graph = AgentGraph("support")
    graph.add_node("classify", noop)
    graph.add_node("billing", noop, next_node=END)
    graph.add_node("general", noop)
    graph.add_node("fix", noop, next_node=END)
    graph.add_edge("classify", "billing", condition="topic == 'billing'")
    graph.add_edge("classify", "general")
    graph.add_conditional_edge("general", route, {"fix": "fix", "stop": END})
    graph.add_edge("billing", "fix", on="failure")
    graph.set_entry("classify")
    return graph


def _names(mermaid: str) -> dict[str, str]:
    """Node id -> node name, read from the node declarations (``n3["name (kind)"]``)."""
    names = {"__start__": "START", "__end__": "END"}
    for node_id, label in re.findall(r'^\s+(n\d+)\["(.*)"\]$', mermaid, re.M):
        names[node_id] = re.sub(r" \((agent|subgraph|graph)\)$", "", label)
    return names


def links(mermaid: str) -> list[str]:
    """The link lines, in order (link 0 is the start arrow), with ids shown as node names."""
    names = _names(mermaid)
    return [
        re.sub(r"\b(n\d+|__start__|__end__)\b", lambda m: names.get(m[1], m[1]), line.strip())
        for line in mermaid.splitlines()
        if " --> " in line or " -.-> " in line or "-->|" in line or "-.->|" in line
    ]


def highlighted(mermaid: str) -> list[str]:
    """The link lines a ``linkStyle`` line highlights, in linkStyle order."""
    all_links = links(mermaid)
    return [all_links[int(i)] for i in re.findall(r"^\s*linkStyle (\d+) ", mermaid, re.M)]


def starred(ascii_art: str) -> list[str]:
    return [line[2:] for line in ascii_art.splitlines() if line.startswith("* ")]


def edge_lines(ascii_art: str) -> list[str]:
    lines = ascii_art.splitlines()
    start = lines.index("Edges:") + 1
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    return [line[2:] for line in lines[start:end]]


# --------------------------------------------------------------------------- mermaid


def test_mermaid_labels_a_router_s_arrows_with_its_path_map_answers() -> None:
    # Seed 004's picture: writer -->|"pass"| reviewer, writer -->|"fail"| END.
    graph = AgentGraph("pipeline")
    graph.add_node("writer", noop)
    graph.add_node("reviewer", noop, next_node=END)
    graph.add_conditional_edge(
        "writer", route, {"pass": "reviewer", "fail": END, "again": "reviewer"}
    )

    assert links(graph.to_mermaid())[1:] == [
        "reviewer --> END",
        'writer -.->|"fail"| END',
        'writer -.->|"pass, again"| reviewer',
    ]


def test_mermaid_is_a_flowchart_starting_at_the_entry() -> None:
    lines = support_graph().to_mermaid().splitlines()

    assert lines[0] == "flowchart TD"
    assert links("\n".join(lines))[0] == 'START(["start"]) --> classify'


def test_mermaid_declares_every_node_and_end() -> None:
    text = support_graph().to_mermaid()

    declared = re.findall(r'^\s+(\w+)\(?\["(.*?)"\]\)?$', text, re.M)
    assert declared == [
        ("n0", "classify"),
        ("n1", "billing"),
        ("n2", "general"),
        ("n3", "fix"),
        ("__end__", "END"),
    ]
    assert '    __end__(["END"])' in text.splitlines()


def test_mermaid_draws_every_edge_with_its_label() -> None:
    text = support_graph().to_mermaid()

    assert links(text)[1:] == [
        "billing --> END",
        "fix --> END",
        "classify -->|\"topic == 'billing'\"| billing",
        "classify --> general",
        'general -.->|"stop"| END',  # the path_map answer that leads there
        'general -.->|"route"| fix',  # answer and target alike: the router's name
        'billing -->|"on failure"| fix',
    ]


def test_mermaid_labels_a_conditional_failure_edge_with_trigger_and_condition() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", noop, next_node=END)
    graph.add_node("b", noop, next_node=END)
    graph.add_edge("a", "b", condition="retries < 3", on="failure")
    graph.set_entry("a")

    assert 'a -->|"on failure: retries < 3"| b' in links(graph.to_mermaid())


def test_mermaid_router_without_path_map_may_go_to_every_node_and_end() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", noop)
    graph.add_node("b", noop, next_node=END)
    graph.add_conditional_edge("a", route)
    graph.set_entry("a")

    router_links = [line for line in links(graph.to_mermaid()) if line.startswith("a ")]

    assert router_links == [
        'a -.->|"route"| END',
        'a -.->|"route"| a',
        'a -.->|"route"| b',
    ]


def test_mermaid_draws_declared_goto_destinations() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", noop, destinations=["b", END])
    graph.add_node("b", noop, next_node=END)
    graph.set_entry("a")

    text = graph.to_mermaid()

    assert 'a -.->|"goto"| b' in links(text)
    assert 'a -.->|"goto"| END' in links(text)


def test_mermaid_escapes_double_quotes_in_labels() -> None:
    graph = AgentGraph("g")
    graph.add_node('say "hi"', noop)
    graph.add_edge('say "hi"', END, condition='greeting == "hi"')
    graph.add_edge('say "hi"', END)
    graph.set_entry('say "hi"')

    text = graph.to_mermaid()

    assert '["say #quot;hi#quot;"]' in text
    assert '|"greeting == #quot;hi#quot;"|' in text


def test_mermaid_labels_subgraph_nodes_with_their_kind() -> None:
    child = AgentGraph("child")
    child.add_node("x", noop, next_node=END)
    child.set_entry("x")
    graph = AgentGraph("g")
    graph.add_subgraph("inner", child, next_node=END)
    graph.set_entry("inner")

    assert '    n0["inner (subgraph)"]' in graph.to_mermaid().splitlines()


def test_mermaid_node_named_end_is_not_the_end_terminal() -> None:
    graph = AgentGraph("g")
    graph.add_node("END", noop, next_node=END)
    graph.set_entry("END")

    text = graph.to_mermaid()

    # The node gets an id of its own; only the terminal is __end__.
    assert '    n0["END"]' in text.splitlines()
    assert "    n0 --> __end__" in text.splitlines()


@pytest.mark.parametrize("name", ["my node", "a-b", "what?!", "x.y/z", "ünï", "1st"])
def test_mermaid_ids_of_awkward_node_names_are_valid(name: str) -> None:
    graph = AgentGraph("g")
    graph.add_node(name, noop, next_node=END)
    graph.set_entry(name)

    text = graph.to_mermaid()

    declaration = next(line for line in text.splitlines() if f'["{name}"]' in line)
    node_id = declaration.strip().split("[", 1)[0]
    assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", node_id)
    assert f"    {node_id} --> __end__" in text.splitlines()


def test_mermaid_ids_of_distinct_node_names_are_distinct() -> None:
    graph = AgentGraph("g")
    graph.add_node("a b", noop, next_node="a-b")
    graph.add_node("a-b", noop, next_node=END)
    graph.set_entry("a b")

    declarations = re.findall(r"^\s*(\w+)\[\"", graph.to_mermaid(), re.M)

    assert len(declarations) == 2
    assert len(set(declarations)) == 2


def test_mermaid_without_a_result_highlights_nothing() -> None:
    text = support_graph().to_mermaid()

    assert "linkStyle" not in text
    assert "visited" not in text


def test_mermaid_highlights_exactly_the_edges_that_fired() -> None:
    graph = support_graph()
    result = graph.run({"topic": "other"})

    assert result.fired_edges == [("classify", "general"), ("general", "fix"), ("fix", END)]
    assert sorted(highlighted(graph.to_mermaid(result))) == sorted(
        [
            "classify --> general",
            'general -.->|"route"| fix',
            "fix --> END",
        ]
    )


def test_mermaid_highlights_a_failure_edge_that_fired() -> None:
    graph = AgentGraph("g")
    graph.add_node("charge", fail, next_node=END)
    graph.add_node("refund", noop, next_node=END)
    graph.add_edge("charge", "refund", on="failure")
    graph.set_entry("charge")
    result = graph.run()

    assert sorted(highlighted(graph.to_mermaid(result))) == [
        'charge -->|"on failure"| refund',
        "refund --> END",
    ]


def test_mermaid_highlights_a_goto_that_fired() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", lambda state: goto("b"), destinations=["b"])
    graph.add_node("b", noop, next_node=END)
    graph.set_entry("a")
    result = graph.run()

    assert sorted(highlighted(graph.to_mermaid(result))) == [
        'a -.->|"goto"| b',
        "b --> END",
    ]


def test_mermaid_does_not_highlight_a_parallel_edge_that_did_not_fire() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", noop)
    graph.add_node("b", noop, next_node=END)
    graph.add_edge("a", "b", condition="score > 5")
    graph.add_edge("a", "b")
    graph.set_entry("a")
    result = graph.run({"score": 1})  # the fallback fires, not the condition

    assert sorted(highlighted(graph.to_mermaid(result))) == ["a --> b", "b --> END"]


def test_mermaid_marks_exactly_the_visited_nodes() -> None:
    graph = support_graph()
    result = graph.run({"topic": "billing"})

    lines = graph.to_mermaid(result).splitlines()

    assert "    classDef visited fill:#fde8e8,stroke:#d33" in lines
    assert "    class n0,n1 visited" in lines  # classify and billing, in declaration order


def test_mermaid_shows_the_label_of_a_static_edge() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", noop)
    graph.add_edge("a", END, label="hand off")
    graph.set_entry("a")

    assert 'a -->|"hand off"| END' in links(graph.to_mermaid())


# ------------------------------------------------------------------------- visualize


def test_visualize_mermaid_is_to_mermaid() -> None:
    graph = support_graph()
    result = graph.run({"topic": "billing"})

    assert graph.visualize("mermaid") == graph.to_mermaid()
    assert graph.visualize("mermaid", result) == graph.to_mermaid(result)


def test_visualize_defaults_to_ascii() -> None:
    graph = support_graph()

    assert graph.visualize() == graph.visualize("ascii")
    assert graph.visualize().startswith("Graph: support\n")


def test_compiled_graph_draws_the_same_as_its_builder() -> None:
    graph = support_graph()

    assert graph.compile().to_mermaid() == graph.to_mermaid()
    assert graph.compile().visualize("ascii") == graph.visualize("ascii")


def test_visualize_rejects_an_unknown_format() -> None:
    graph: Any = support_graph()

    with pytest.raises(ValueError, match=r"unknown format 'svg'; use 'ascii', 'mermaid' or 'png'"):
        graph.visualize("svg")


def test_visualize_prints_the_picture_as_seed_004_shows_and_returns_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    graph = support_graph()

    text = graph.visualize("ascii")

    assert capsys.readouterr().out == text + "\n"
    assert text.startswith("Graph: support\n")
    assert graph.visualize("mermaid", show=False) == graph.to_mermaid()
    assert capsys.readouterr().out == ""


def test_visualize_png_without_playwright_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "playwright.sync_api", None)  # an import that fails

    with pytest.raises(PngUnavailable, match=r'pip install "selectgraph\[png\]"'):
        support_graph().visualize("png", path=tmp_path / "g.png")
    assert not (tmp_path / "g.png").exists()


def test_visualize_png_without_a_chromium_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pytest.importorskip("playwright.sync_api")
    monkeypatch.setattr(_png, "_chromium", lambda: str(tmp_path / "no-chromium"))

    with pytest.raises(PngUnavailable, match="no Chromium to draw the PNG with"):
        support_graph().visualize("png", path=tmp_path / "g.png")


@pytest.mark.slow
@pytest.mark.skipif(
    _png._chromium() is None and not os.environ.get("CI"), reason="no Chromium on this machine"
)
def test_visualize_png_draws_the_graph_with_mermaid_offline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "support.png"

    drawn = support_graph().visualize("png", path=target)

    assert drawn == str(target)
    assert f"drawn to {target}" in capsys.readouterr().out
    body = target.read_bytes()
    assert body.startswith(b"\x89PNG\r\n\x1a\n")
    width, height = struct.unpack(">II", body[16:24])
    assert width > 200
    assert height > 300


# ----------------------------------------------------------------------------- ascii


def test_ascii_lists_the_graph_entry_and_every_node() -> None:
    graph = support_graph()
    graph_with_limit = AgentGraph("g")
    graph_with_limit.add_node("a", noop, next_node=END, max_visits=3)
    graph_with_limit.set_entry("a")

    lines = graph.visualize("ascii").splitlines()

    assert lines[:5] == ["Graph: support", "=" * 40, "Entry: classify", "", "Nodes:"]
    assert lines[5:9] == [
        "-> [function] classify",
        "   [function] billing",
        "   [function] general",
        "   [function] fix",
    ]
    assert "-> [function] a  max_visits=3" in graph_with_limit.visualize().splitlines()


def test_ascii_lists_every_edge_with_conditions_routers_and_triggers() -> None:
    assert edge_lines(support_graph().visualize("ascii")) == [
        "billing --> (END)",
        "fix --> (END)",
        "classify --[topic == 'billing']--> billing",
        "classify --> general",
        "general --router route--> (END) | fix",
        "billing -- on failure--> fix",
    ]


def test_ascii_router_without_path_map_goes_to_any() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", noop)
    graph.add_node("b", noop, next_node=END)
    graph.add_conditional_edge("a", route)
    graph.set_entry("a")

    assert "a --router route--> any" in edge_lines(graph.visualize())


def test_ascii_without_a_result_stars_nothing() -> None:
    text = support_graph().visualize("ascii")

    assert starred(text) == []
    assert "Run:" not in text


def test_ascii_stars_exactly_the_edges_that_fired() -> None:
    graph = support_graph()
    result = graph.run({"topic": "other"})

    text = graph.visualize("ascii", result)

    assert starred(text) == [
        "fix --> (END)",
        "classify --> general",
        "general --router route--> (END) | fix",
    ]


def test_ascii_with_a_result_shows_the_path_and_stop_reason() -> None:
    graph = support_graph()
    result = graph.run({"topic": "billing"})

    lines = graph.visualize("ascii", result).splitlines()

    assert lines[-2:] == ["Run: classify -> billing (end)", "(* = edge taken in this run)"]


def test_ascii_stars_a_failure_edge_that_fired() -> None:
    graph = AgentGraph("g")
    graph.add_node("charge", fail, next_node=END)
    graph.add_node("refund", noop, next_node=END)
    graph.add_edge("charge", "refund", on="failure")
    graph.set_entry("charge")
    result: GraphResult = graph.run()

    assert starred(graph.visualize("ascii", result)) == [
        "refund --> (END)",
        "charge -- on failure--> refund",
    ]


def test_ascii_does_not_star_a_router_that_did_not_fire() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", noop)
    graph.add_node("b", noop, next_node=END)
    graph.add_node("c", noop, next_node=END)
    graph.add_edge("a", "b", condition="x == 1")
    graph.add_conditional_edge("a", lambda state: "c", ["c"])
    graph.set_entry("a")
    result = graph.run({"x": 1})  # the condition fires; the router is never asked

    assert starred(graph.visualize("ascii", result)) == ["b --> (END)", "a --[x == 1]--> b"]


def test_ascii_shows_the_label_of_a_static_edge() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", noop)
    graph.add_edge("a", END, label="hand off")
    graph.set_entry("a")

    assert "hand off" in graph.visualize("ascii")


# ----------------------------------------------------------------------- DAG export


def test_the_dag_export_is_the_graph_s_shape_as_json_data() -> None:
    dag = support_graph().to_dag()

    assert json.loads(json.dumps(dag)) == dag
    assert (dag["graph"], dag["entry"]) == ("support", "classify")
    assert [node["name"] for node in dag["nodes"]] == ["classify", "billing", "general", "fix"]
    assert {(e["source"], e["target"], e["kind"], e["on"]) for e in dag["edges"]} == {
        ("billing", "END", "static", "success"),
        ("fix", "END", "static", "success"),
        ("classify", "billing", "condition", "success"),
        ("classify", "general", "static", "success"),
        ("general", "END", "router", "success"),
        ("general", "fix", "router", "success"),
        ("billing", "fix", "static", "failure"),
    }
    assert "run" not in dag
    assert all("fired" not in edge for edge in dag["edges"])


def test_the_dag_export_of_a_run_says_which_edges_fired_and_how_it_ended() -> None:
    graph = support_graph()
    result = graph.run({"topic": "other"})  # classify -> general -(route)-> fix -> END

    dag = graph.to_dag(result)

    fired = {(e["source"], e["target"], e["times"]) for e in dag["edges"] if e["fired"]}
    assert fired == {("classify", "general", 1), ("general", "fix", 1), ("fix", "END", 1)}
    assert {n["name"]: n["runs"] for n in dag["nodes"]}["billing"] == 0
    assert dag["run"]["stop_reason"] == result.stop_reason
    assert dag["run"]["path"] == [name for name, *_ in result.state.history]
    assert dag["run"]["last_node"] == dag["run"]["path"][-1]
    assert dag["run"]["interrupted"] is False


def test_a_supervisors_member_draws_one_arrow_to_each_place_it_may_go() -> None:
    from selectgraph import Agent, AgentConfig, SupervisorAgent, SupervisorStrategy
    from selectgraph.testing import ScriptedProvider

    team = {name: Agent(AgentConfig(name=name)) for name in ("a", "b", "c")}
    supervisor = SupervisorAgent(
        agents=team, provider=ScriptedProvider([]), strategy=SupervisorStrategy.DYNAMIC
    )

    drawn = links(supervisor.to_mermaid())

    from_a = [line for line in drawn if line.startswith("a ")]
    assert len(from_a) == len(set(from_a))
    assert len({line.rsplit(" ", 1)[1] for line in from_a}) == len(from_a)  # one per target
    assert any("on failure" in line and "after_a" in line for line in from_a)
