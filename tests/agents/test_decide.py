"""LLM-decided edges: a model picks the next node; anything but a valid pick fires the fallback."""

from __future__ import annotations

import json
from typing import Any

import pytest

from selectgraph import END, Agent, AgentConfig, AgentGraph, GraphBuildError, GraphResult
from selectgraph.core._errors import ProviderRequestError
from selectgraph.observe import EdgeFired
from selectgraph.providers import ResponseFormat
from selectgraph.testing import LocalReply, ScriptedProvider
from tests.agents.conftest import sent, usage


def choose(target: str, reasoning: str = "It fits.") -> LocalReply:
    return LocalReply.json({"target": target, "reasoning": reasoning})


def triage_graph(
    decider: ScriptedProvider,
    *,
    goal: str = "Resolve customer tickets.",
    output: str = "Customer says the invoice total is wrong.",
    instructions: str = "",
    model: str | None = None,
) -> AgentGraph:
    """``triage`` writes ``output``; a model picks billing, tech or END; the fallback is human."""

    def billing(state: Any) -> dict[str, Any]:
        """Handles invoices, refunds and payments."""
        return {"handled_by": "billing"}

    def tech(state: Any) -> dict[str, Any]:
        """Fixes bugs and outages."""
        return {"handled_by": "tech"}

    def human(state: Any) -> dict[str, Any]:
        """A person takes over."""
        return {"handled_by": "human"}

    graph = AgentGraph("support", goal=goal)
    graph.add_node("triage", lambda state: {"__last_output__": output})
    graph.add_node("billing", billing, next_node=END)
    graph.add_node("tech", tech, next_node=END)
    graph.add_node("human", human, next_node=END)
    graph.add_llm_edge(
        "triage",
        ["billing", "tech", END],
        fallback="human",
        provider=decider,
        model=model,
        instructions=instructions,
    )
    graph.set_entry("triage")
    return graph


def llm_edge(result: GraphResult) -> EdgeFired:
    [edge] = [e for e in result.trace if isinstance(e, EdgeFired) and e.kind == "llm"]
    return edge


def test_the_models_choice_routes_there_and_its_reasoning_is_on_the_event() -> None:
    decider = ScriptedProvider([choose("billing", "The invoice is a billing matter.")])

    result = triage_graph(decider).run()

    assert result.node_order == ["triage", "billing"]
    assert result.state["handled_by"] == "billing"
    edge = llm_edge(result)
    assert (edge.source, edge.target) == ("triage", "billing")
    assert edge.reason == "The invoice is a billing matter."
    assert edge.label == "llm_decide"
    assert result.quality == "clean"


def test_the_prompt_has_the_goal_the_output_and_each_targets_description() -> None:
    decider = ScriptedProvider([choose("billing")])

    triage_graph(decider).run()

    assert sent(decider.last_request) == [
        ("system", "You route work between the steps of a workflow."),
        (
            "user",
            "Goal: Resolve customer tickets.\n\n"
            "Step 'triage' just produced:\nCustomer says the invoice total is wrong.\n\n"
            "Choose what runs next. Options:\n"
            "- billing: Handles invoices, refunds and payments.\n"
            "- tech: Fixes bugs and outages.\n"
            "- END: finish: the task is complete\n"
            '\nReply with JSON: {"target": "<one option>", "reasoning": "<one sentence>"}.',
        ),
    ]


def test_the_decision_asks_for_json_naming_one_candidate() -> None:
    decider = ScriptedProvider([choose("tech")])

    triage_graph(decider, model="fast-router").run()

    request = decider.last_request
    assert request.model == "fast-router"
    assert request.temperature == 0.0
    assert request.response_format == ResponseFormat(
        name="route",
        json_schema={
            "type": "object",
            "properties": {
                "target": {"type": "string", "enum": ["END", "billing", "tech"]},
                "reasoning": {"type": "string"},
            },
            "required": ["target", "reasoning"],
            "additionalProperties": False,
        },
    )


def test_routing_instructions_are_added_to_the_prompt() -> None:
    decider = ScriptedProvider([choose("tech")])

    triage_graph(decider, instructions="Prefer tech when unsure.").run()

    assert "\nPrefer tech when unsure.\n" in decider.last_request.messages[-1].text


def test_without_a_goal_the_prompt_says_so() -> None:
    decider = ScriptedProvider([choose("tech")])

    triage_graph(decider, goal="").run()

    assert decider.last_request.messages[-1].text.startswith("Goal: not stated\n")


def test_an_agent_targets_description_is_its_instructions() -> None:
    decider = ScriptedProvider([choose("writer")])
    writer = Agent(
        AgentConfig(name="writer", instructions="Drafts replies to customers.\nBe kind."),
        provider=ScriptedProvider(["Dear customer ..."]),
    )
    graph = AgentGraph("g")
    graph.add_node("start", lambda state: {"__last_output__": "ticket"})
    graph.add_node("writer", writer, next_node=END)
    graph.add_llm_edge("start", ["writer", END], fallback=END, provider=decider)
    graph.set_entry("start")

    result = graph.run()

    assert "- writer: Drafts replies to customers.\n" in decider.last_request.messages[-1].text
    assert result.content == "Dear customer ..."


def test_an_explicit_node_description_is_used() -> None:
    decider = ScriptedProvider([choose("a")])
    graph = AgentGraph("g")
    graph.add_node("start", lambda state: {"__last_output__": "x"})
    graph.add_node("a", lambda state: {}, description="Option A.", next_node=END)
    graph.add_llm_edge("start", ["a", END], fallback=END, provider=decider)
    graph.set_entry("start")

    graph.run()

    assert "- a: Option A.\n" in decider.last_request.messages[-1].text


def test_an_agent_nodes_focus_is_its_description() -> None:
    decider = ScriptedProvider([choose("poet")])
    agent = Agent(
        AgentConfig(name="writer", instructions="General-purpose writer."),
        provider=ScriptedProvider(["start", "A poem."]),
    )
    graph = AgentGraph("g")
    graph.add_node("start", agent)
    graph.add_node("poet", agent, focus="Write the final poem.", next_node=END)
    graph.add_llm_edge("start", ["poet", END], fallback=END, provider=decider)
    graph.set_entry("start")

    graph.run("Go")

    assert "- poet: Write the final poem.\n" in decider.last_request.messages[-1].text


def test_an_agent_sources_answer_is_the_output_shown() -> None:
    decider = ScriptedProvider([choose("END", "Done.")])
    agent = Agent(AgentConfig(name="triage"), provider=ScriptedProvider(["Looks like billing."]))
    graph = AgentGraph("g")
    graph.add_node("triage", agent)
    graph.add_node("billing", lambda state: {}, next_node=END)
    graph.add_llm_edge("triage", ["billing", END], fallback="billing", provider=decider)
    graph.set_entry("triage")

    graph.run("My invoice is wrong")

    assert "Step 'triage' just produced:\nLooks like billing.\n" in decider.prompts[0]


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (
            "billing, definitely",
            "fallback: unparseable reply (Invalid JSON: expected value at line 1 column 1): "
            "'billing, definitely'",
        ),
        ("", "fallback: unparseable reply (Invalid JSON: EOF while parsing a value"),
        ('{"reasoning": "no target"}', "fallback: unparseable reply (target: Field required)"),
        ('["billing"]', "fallback: unparseable reply (Input should be an object)"),
        (
            '{"target": 3, "reasoning": "three"}',
            "fallback: unparseable reply (target: Input should be a valid string)",
        ),
        (
            '{"target": "tech", "reasoning": ["a", "list"]}',
            "fallback: unparseable reply (reasoning: Input should be a valid string)",
        ),
        (
            json.dumps({"target": "sales", "reasoning": "Sounds like sales."}),
            "fallback: chose 'sales', which is not one of ['END', 'billing', 'tech']",
        ),
    ],
    ids=[
        "prose",
        "empty",
        "no target",
        "not an object",
        "target not text",
        "reasoning not text",
        "unknown target",
    ],
)
def test_an_invalid_decision_fires_the_fallback_with_the_cause(reply: str, reason: str) -> None:
    decider = ScriptedProvider([reply])

    result = triage_graph(decider).run()

    assert result.node_order == ["triage", "human"]
    assert result.state["handled_by"] == "human"
    edge = llm_edge(result)
    assert edge.target == "human"
    assert edge.reason.startswith(reason)


def test_a_provider_failure_fires_the_fallback_with_the_cause() -> None:
    decider = ScriptedProvider([ProviderRequestError("model not found", provider="scripted")])

    result = triage_graph(decider).run()

    assert result.node_order == ["triage", "human"]
    assert llm_edge(result).reason == "fallback: ProviderRequestError: model not found"
    assert result.total_usage.calls == 0


def test_end_as_a_candidate_stops_the_run() -> None:
    decider = ScriptedProvider([choose("END", "Nothing to do.")])

    result = triage_graph(decider).run()

    assert result.node_order == ["triage"]
    assert result.stop_reason == "end"
    assert llm_edge(result).target is END


def test_fenced_json_is_accepted() -> None:
    decider = ScriptedProvider(['```json\n{"target": "tech", "reasoning": "A bug."}\n```'])

    result = triage_graph(decider).run()

    assert result.node_order == ["triage", "tech"]


@pytest.mark.parametrize(
    ("reply", "reasoning"),
    [
        ('{"target": "tech"}', ""),
        ('{"target": "tech", "reasoning": null}', ""),
        ('{"target": "tech", "reasoning": "A bug.", "confidence": 0.9}', "A bug."),
    ],
    ids=["no reasoning", "null reasoning", "extra keys"],
)
def test_a_decision_without_reasoning_or_with_extra_keys_still_routes(
    reply: str, reasoning: str
) -> None:
    result = triage_graph(ScriptedProvider([reply])).run()

    assert result.node_order == ["triage", "tech"]
    assert llm_edge(result).reason == reasoning


def test_the_decision_calls_usage_is_added_to_total_usage() -> None:
    decider = ScriptedProvider([LocalReply(text=choose("tech").text, usage=usage(80, 9, 0.004))])
    writer = Agent(
        AgentConfig(name="writer"),
        provider=ScriptedProvider([LocalReply(text="Fixed.", usage=usage(20, 2, 0.001))]),
    )
    graph = AgentGraph("g")
    graph.add_node("writer", writer)
    graph.add_node("tech", lambda state: {}, next_node=END)
    graph.add_llm_edge("writer", ["tech", END], fallback=END, provider=decider)
    graph.set_entry("writer")

    result = graph.run("Fix it")

    assert result.total_usage.calls == 2
    assert result.total_usage.input_tokens == 100
    assert result.total_usage.cost_usd == pytest.approx(0.005)


def test_a_fallback_decisions_usage_is_still_counted() -> None:
    decider = ScriptedProvider([LocalReply(text="no idea", usage=usage(70, 3, 0.002))])

    result = triage_graph(decider).run()

    assert result.node_order == ["triage", "human"]
    assert result.total_usage == usage(70, 3, 0.002)


@pytest.mark.parametrize(
    ("targets", "fallback"),
    [(["billing", "nowhere"], "billing"), (["billing"], "nowhere")],
    ids=["unknown target", "unknown fallback"],
)
def test_unknown_targets_or_fallback_are_compile_errors(targets: list[str], fallback: str) -> None:
    graph = AgentGraph("g")
    graph.add_node("triage", lambda state: {})
    graph.add_node("billing", lambda state: {}, next_node=END)
    graph.add_llm_edge("triage", targets, fallback=fallback, provider=ScriptedProvider())
    graph.set_entry("triage")

    with pytest.raises(GraphBuildError, match="no node named 'nowhere'") as caught:
        graph.compile()

    assert "dangling_edge" in caught.value.categories


def test_an_llm_edge_without_targets_is_a_compile_error() -> None:
    graph = AgentGraph("g")
    graph.add_node("triage", lambda state: {}, next_node=END)
    graph.add_llm_edge("triage", [], fallback=END, provider=ScriptedProvider())
    graph.set_entry("triage")

    with pytest.raises(GraphBuildError, match="llm_decide edge on 'triage' has no targets"):
        graph.compile()


def test_visualize_draws_the_llm_edge_its_targets_and_fallback() -> None:
    graph = triage_graph(ScriptedProvider())

    ascii_art = graph.visualize()
    mermaid = graph.visualize("mermaid")

    [line] = [line for line in ascii_art.splitlines() if "llm_decide" in line]
    assert line.split()[0] == "triage"
    assert "billing" in line
    assert "tech" in line
    assert line.endswith("fallback human")
    # One dotted arrow per candidate (billing, tech, END), and one to the fallback.
    assert mermaid.count('-.->|"llm_decide"|') == 3
    assert mermaid.count('-.->|"llm fallback"|') == 1


def test_visualize_stars_the_llm_edge_a_run_took() -> None:
    graph = triage_graph(ScriptedProvider([choose("tech")]))

    result = graph.run()

    [line] = [line for line in graph.visualize(result=result).splitlines() if "llm_decide" in line]
    assert line.startswith("* triage")
