"""Agents as graph nodes: what they see, what their prompt says, what they write."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from selectgraph import (
    END,
    LAST_OUTPUT,
    STATE_KEY_LAST_OUTPUT,
    Agent,
    AgentConfig,
    AgentGraph,
    AgentResult,
    ErrorPolicy,
    GraphState,
    JudgeEscalated,
    Message,
    NodeError,
    RetryPolicy,
    Role,
    ToolCall,
    Verdict,
    goto,
)
from selectgraph.agents import AgentNode, ContextMode
from selectgraph.core._errors import ProviderRequestError
from selectgraph.core._state import CONVERSATION_SUMMARY
from selectgraph.observe import GraphEvent, NodeChunk, NodeFinished, NodeStarted, RunFinished
from selectgraph.testing import LocalReply, ScriptedProvider
from tests.agents.conftest import sent, system_of, usage


class Review(BaseModel):
    """Module level, so a state holding one can be serialised and loaded again."""

    approved: bool
    notes: str


def lookup(topic: str) -> str:
    """Look a topic up.

    Args:
        topic: What to look up.
    """
    return f"facts about {topic}"


def handover(previous: str, node: str, task: str = "continue the work above") -> str:
    """The transition marker text when ``node`` takes over from ``previous``."""
    return f"[workflow] Step {previous!r} is done. Step {node!r} takes over now: {task}"


def make(name: str, script: list[Any], **config: Any) -> tuple[Agent, ScriptedProvider]:
    provider = ScriptedProvider(script)
    tools = config.pop("tools", ())
    judge = config.pop("judge", None)
    agent = Agent(AgentConfig(name=name, **config), provider=provider, tools=tools, judge=judge)
    return agent, provider


# --- AgentGraph.chain -----------------------------------------------------------------


def test_chain_runs_agents_in_order_in_one_line() -> None:
    planner, p1 = make("planner", [LocalReply(text="Plan.", usage=usage(10, 2, 0.01))])
    writer, p2 = make("writer", [LocalReply(text="Draft.", usage=usage(20, 4, 0.02))])
    reviewer, p3 = make("reviewer", [LocalReply(text="Approved.", usage=usage(30, 1, 0.03))])

    result = AgentGraph.chain(planner, writer, reviewer).run("Write a haiku")

    assert result.node_order == ["planner", "writer", "reviewer"]
    assert result.content == "Approved."
    assert result.total_usage.input_tokens == 60
    assert result.total_usage.output_tokens == 7
    assert result.total_usage.calls == 3
    assert result.total_usage.cost_usd == pytest.approx(0.06)
    assert result.quality == "clean"
    for provider in (p1, p2, p3):
        provider.assert_all_used()


def test_chain_makes_repeated_agent_names_unique() -> None:
    first, _ = make("writer", ["one"])
    second, _ = make("writer", ["two"])

    result = AgentGraph.chain(first, second).run("go")

    assert result.node_order == ["writer", "writer_2"]
    assert [m.name for m in result.state.messages[1:]] == ["writer", "writer_2"]


# --- what a node writes ---------------------------------------------------------------


def test_a_node_writes_last_output_and_appends_its_answer_named_after_the_node() -> None:
    agent, _ = make("writer", ["A draft."])
    graph = AgentGraph("g").add_node("editor", agent, next_node=END).set_entry("editor")

    result = graph.run("Write something")

    assert result.state.last_output == "A draft."
    assert list(result.state.messages) == [
        Message.user("Write something"),
        Message.assistant("A draft.", name="editor"),
    ]
    assert result.node_results["editor"][0].output == {LAST_OUTPUT: "A draft."}


def test_output_key_also_holds_the_answer() -> None:
    agent, _ = make("writer", ["A draft."])
    graph = (
        AgentGraph("g")
        .add_node("writer", agent, output_key="draft", next_node=END)
        .set_entry("writer")
    )

    result = graph.run("Write")

    assert result.state["draft"] == "A draft."
    assert result.state.last_output == "A draft."


def test_output_key_holds_the_parsed_model_for_an_output_schema() -> None:
    agent, _ = make(
        "reviewer",
        [LocalReply.json({"approved": True, "notes": "Nice."})],
        output_schema=Review,
    )
    graph = (
        AgentGraph("g")
        .add_node("reviewer", agent, output_key="review", next_node=END)
        .set_entry("reviewer")
    )

    result = graph.run("Review it")

    assert result.state["review"] == Review(approved=True, notes="Nice.")
    assert result.state.last_output == '{"approved": true, "notes": "Nice."}'


def test_an_isolated_node_appends_only_its_answer_not_its_tool_traffic() -> None:
    agent, _ = make(
        "researcher",
        [LocalReply.tool_call("lookup", {"topic": "owls"}), "Owls are nocturnal."],
        tools=[lookup],
    )

    result = AgentGraph.chain(agent).run("Tell me about owls")

    assert [(m.role, m.text) for m in result.state.messages] == [
        (Role.USER, "Tell me about owls"),
        (Role.ASSISTANT, "Owls are nocturnal."),
    ]
    agent_result = result.node_results["researcher"][0].agent_result
    assert [m.role for m in agent_result.new_messages] == [
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
    ]


def test_an_isolated_node_appends_its_answer_when_its_last_turn_called_tools() -> None:
    researcher, _ = make(
        "researcher",
        [
            LocalReply.tool_call("lookup", {"topic": "owls"}),
            LocalReply.tool_call("lookup", {"topic": "bats"}, text="Owls are nocturnal."),
        ],
        tools=[lookup],
        max_tool_iterations=1,
    )
    writer, provider = make("writer", ["Noted."])

    result = AgentGraph.chain(researcher, writer).run("Tell me about owls")

    assert [m.role for m in result.state.messages] == [Role.USER, Role.ASSISTANT, Role.ASSISTANT]
    assert result.state.messages[1].text == "Owls are nocturnal."
    assert "Owls are nocturnal." in provider.last_request.messages[-1].text


def test_the_agent_result_and_usage_are_on_the_node_result() -> None:
    agent, _ = make("writer", [LocalReply(text="Done.", usage=usage(12, 3, 0.5))])

    result = AgentGraph.chain(agent).run("go")

    [node_result] = result.node_results["writer"]
    assert isinstance(node_result.agent_result, AgentResult)
    assert node_result.agent_result.content == "Done."
    assert node_result.content == "Done."
    assert node_result.usage == usage(12, 3, 0.5)
    assert node_result.agent_result.usage == usage(12, 3, 0.5)


def test_state_round_trips_through_json_after_an_agent_run() -> None:
    agent, _ = make(
        "reviewer",
        [
            LocalReply.tool_call("lookup", {"topic": "style"}),
            LocalReply.json({"approved": False, "notes": "Too long."}),
        ],
        tools=[lookup],
        output_schema=Review,
        judge=lambda result: Verdict.accept("ok"),
    )
    graph = (
        AgentGraph("g")
        .add_node("reviewer", agent, output_key="review", next_node=END)
        .set_entry("reviewer")
    )
    state = graph.run("Review").state

    # The agent's output model is user code: loading it must be allowed explicitly.
    restored = GraphState.from_dict(json.loads(json.dumps(state.to_dict())), allowed_types=[Review])

    assert restored == state
    agent_result = restored.history[0][1].agent_result
    assert isinstance(agent_result, AgentResult)
    assert agent_result.output == Review(approved=False, notes="Too long.")
    assert agent_result.verdicts == (Verdict.accept("ok"),)
    assert restored["review"] == Review(approved=False, notes="Too long.")


# --- the onion prompt -----------------------------------------------------------------


def test_system_prompt_layers_identity_goal_workflow_and_focus() -> None:
    planner, _ = make("planner", ["Plan."], identity="You are careful.", instructions="Plan it.")
    writer, provider = make("writer", ["Draft."], identity="You are a poet.")
    graph = AgentGraph("poems", goal="Publish a haiku about autumn.")
    graph.add_node("planner", planner, next_node="writer")
    graph.add_node("writer", writer, focus="Write the haiku.\nUse the plan.", next_node=END)
    graph.set_entry("planner")

    graph.run("Go")

    assert system_of(provider.last_request) == (
        "# Identity\nYou are a poet.\n\n"
        "# Goal\nPublish a haiku about autumn.\n"
        "You are step 'writer' of the workflow 'poems' (other steps: planner).\n\n"
        "# Your task\nWrite the haiku.\nUse the plan."
    )


def test_without_a_graph_goal_the_users_first_message_is_the_goal() -> None:
    planner, _ = make("planner", ["Plan."])
    writer, provider = make("writer", ["Draft."], instructions="Write.")

    AgentGraph.chain(planner, writer, name="pipeline").run("A limerick about cats")

    assert system_of(provider.last_request) == (
        "# Goal\nThe user's request: A limerick about cats\n"
        "You are step 'writer' of the workflow 'pipeline' (other steps: planner).\n\n"
        "# Your task\nWrite."
    )


def test_without_a_focus_the_agents_instructions_are_the_task() -> None:
    agent, provider = make("writer", ["ok"], instructions="Always rhyme.")

    AgentGraph.chain(agent).run("go")

    assert system_of(provider.last_request).endswith("# Your task\nAlways rhyme.")


def test_focus_replaces_the_agents_instructions() -> None:
    agent, provider = make("writer", ["ok"], instructions="Always rhyme.")
    graph = (
        AgentGraph("g")
        .add_node("writer", agent, focus="Write prose.", next_node=END)
        .set_entry("writer")
    )

    graph.run("go")

    system = system_of(provider.last_request)
    assert system.endswith("# Your task\nWrite prose.")
    assert "rhyme" not in system


def test_an_output_schema_adds_output_requirements_to_the_focus() -> None:
    agent, provider = make(
        "reviewer",
        [LocalReply.json({"approved": True, "notes": ""})],
        instructions="Review the draft.",
        output_schema=Review,
    )

    AgentGraph.chain(agent).run("go")

    focus = system_of(provider.last_request).split("# Your task\n", 1)[1]
    assert focus == (
        "Review the draft.\n\n"
        "Answer with a single JSON object, and nothing else, that matches this JSON schema:\n"
        + json.dumps(Review.model_json_schema(), ensure_ascii=False)
    )


def test_a_nodes_judge_is_told_the_graph_goal() -> None:
    goals: list[str] = []

    def judge(result: AgentResult, request: Any) -> bool:
        goals.append(request.goal)
        return True

    agent, _ = make("writer", ["ok"], judge=judge)

    AgentGraph.chain(agent, goal="Ship it").run("go")

    assert goals == ["Ship it"]


# --- context modes in a graph ---------------------------------------------------------


def planner_writer(
    writer_options: dict[str, Any], *, planner_script: list[Any] | None = None
) -> tuple[AgentGraph, ScriptedProvider]:
    planner, _ = make(
        "planner",
        planner_script
        or [LocalReply.tool_call("lookup", {"topic": "autumn"}), "Plan: leaves and wind."],
        tools=[lookup],
    )
    writer, provider = make("writer", ["Draft."])
    graph = AgentGraph("g")
    graph.add_node("planner", planner, next_node="writer")
    graph.add_node("writer", writer, next_node=END, **writer_options)
    graph.set_entry("planner")
    return graph, provider


def test_by_default_a_node_sees_only_the_previous_answer() -> None:
    graph, provider = planner_writer({})

    graph.run("Write a haiku about autumn")

    assert sent(provider.last_request)[1:] == [("user", "[planner] Plan: leaves and wind.")]


def test_last_n_shows_the_last_context_n_messages() -> None:
    graph, provider = planner_writer({"context_mode": ContextMode.LAST_N, "context_n": 1})

    graph.run("Write a haiku about autumn")

    assert sent(provider.last_request)[1:] == [("user", "[planner] Plan: leaves and wind.")]


def test_last_n_of_two_also_shows_the_users_request() -> None:
    graph, provider = planner_writer({"context_mode": "last_n", "context_n": 2})

    graph.run("Write a haiku about autumn")

    assert sent(provider.last_request)[1:] == [
        ("user", "Write a haiku about autumn\n\n[planner] Plan: leaves and wind.")
    ]


def test_full_shows_the_whole_conversation() -> None:
    graph, provider = planner_writer({"context_mode": ContextMode.FULL})

    result = graph.run("Write a haiku about autumn")

    # An isolated planner leaves only its answer in the conversation, not its tool calls.
    assert len(result.state.messages) == 3
    assert sent(provider.last_request)[1:] == [
        ("user", "Write a haiku about autumn\n\n[planner] Plan: leaves and wind.")
    ]


def test_summary_mode_writes_the_rolling_summary_and_counts_its_usage() -> None:
    first, _ = make("first", ["One."])
    second, _ = make("second", ["Two."])
    third, provider = make(
        "third",
        [LocalReply(text="Summary: one, two.", usage=usage(50, 5, 0.1)), LocalReply(text="Three.")],
    )
    graph = AgentGraph("g")
    graph.add_node("first", first, next_node="second")
    graph.add_node("second", second, next_node="third")
    graph.add_node("third", third, context_mode=ContextMode.SUMMARY, context_n=1, next_node=END)
    graph.set_entry("first")

    result = graph.run("Count")

    summary_request, answer_request = provider.requests
    assert summary_request.messages[-1].text == "user: Count\nassistant (first): One."
    assert sent(answer_request)[1:] == [
        ("user", "Summary of the conversation so far:\nSummary: one, two.\n\n[second] Two.")
    ]
    assert result.state[CONVERSATION_SUMMARY] == {"upto": 2, "text": "Summary: one, two."}
    third_usage = result.node_results["third"][0].usage
    assert third_usage is not None
    assert third_usage.calls == 2
    assert third_usage.cost_usd == pytest.approx(0.1)
    assert result.total_usage.calls == 4


def test_without_messages_a_node_responds_to_the_previous_nodes_output() -> None:
    agent, provider = make("writer", ["Summary."])
    graph = AgentGraph("g")
    graph.add_node("fetch", lambda state: {LAST_OUTPUT: f"Report on {state['topic']}"})
    graph.add_node("writer", agent, next_node=END)
    graph.add_edge("fetch", "writer")
    graph.set_entry("fetch")

    result = graph.run({"topic": "owls"})

    assert sent(provider.last_request)[1:] == [("user", "Report on owls")]
    assert result.content == "Summary."


def test_custom_context_uses_the_input_transform() -> None:
    graph, provider = planner_writer(
        {
            "context_mode": ContextMode.CUSTOM,
            "input_transform": lambda state: f"Rewrite: {state.last_output}",
        }
    )

    graph.run("Write a haiku about autumn")

    assert sent(provider.last_request)[1:] == [("user", "Rewrite: Plan: leaves and wind.")]


# --- revisits -------------------------------------------------------------------------


def writer_critic(**writer_options: Any) -> tuple[AgentGraph, ScriptedProvider]:
    writer, provider = make("writer", ["Draft one.", "Draft two."], instructions="Write.")
    critic, _ = make("critic", ["Too short.", "APPROVED"])
    graph = AgentGraph("loop")
    graph.add_node("writer", writer, next_node="critic", **writer_options)
    graph.add_node("critic", critic)
    graph.add_edge("critic", END, condition=lambda state: state.last_output == "APPROVED")
    graph.add_edge("critic", "writer")
    graph.set_entry("writer")
    return graph, provider


def test_on_a_revisit_the_prompt_names_the_visit_and_the_previous_answer() -> None:
    graph, provider = writer_critic()

    result = graph.run("Write a poem")

    assert result.node_order == ["writer", "critic", "writer", "critic"]
    first, second = (system_of(r) for r in provider.requests)
    assert "visit" not in first
    assert second.endswith(
        "# Your task\nWrite.\n\n"
        "This is visit 2 of step 'writer'. Build on your previous answer rather than starting "
        "over, and take into account everything said since.\n"
        "Your previous answer was:\nDraft one."
    )
    assert sent(provider.requests[1])[1:] == [("user", "[critic] Too short.")]


def test_feedback_on_revisit_can_be_turned_off() -> None:
    graph, provider = writer_critic(feedback_on_revisit=False)

    graph.run("Write a poem")

    first, second = (system_of(r) for r in provider.requests)
    assert second == first


# --- input and output transforms ------------------------------------------------------


@pytest.mark.parametrize(
    "transform",
    [lambda state: "Just this.", lambda state: Message.user("Just this.")],
    ids=["str", "message"],
)
def test_input_transform_replaces_the_context(transform: Any) -> None:
    agent, provider = make("writer", ["ok"])
    graph = (
        AgentGraph("g")
        .add_node("writer", agent, input_transform=transform, next_node=END)
        .set_entry("writer")
    )

    graph.run("The user's prompt")

    assert sent(provider.last_request)[1:] == [("user", "Just this.")]


def test_input_transform_list_is_sent_as_given() -> None:
    conversation = [Message.user("Just"), Message.assistant("?"), Message.user("this.")]
    agent, provider = make("writer", ["ok"])
    graph = (
        AgentGraph("g")
        .add_node("writer", agent, input_transform=lambda state: conversation, next_node=END)
        .set_entry("writer")
    )

    graph.run("ignored")

    assert list(provider.last_request.messages[1:]) == conversation


def test_transforms_may_be_async() -> None:
    async def ask(state: GraphState) -> str:
        return "Async prompt."

    async def keep(result: AgentResult, state: GraphState) -> dict[str, Any]:
        return {"kept": result.content}

    agent, provider = make("writer", ["ok"])
    graph = (
        AgentGraph("g")
        .add_node("writer", agent, input_transform=ask, output_transform=keep, next_node=END)
        .set_entry("writer")
    )

    result = graph.run("ignored")

    assert sent(provider.last_request)[1:] == [("user", "Async prompt.")]
    assert result.state["kept"] == "ok"


def test_output_transform_mapping_replaces_the_default_writes() -> None:
    agent, _ = make("writer", [LocalReply(text="A draft.", usage=usage(5, 2, 0.2))])
    graph = (
        AgentGraph("g")
        .add_node(
            "writer",
            agent,
            output_transform=lambda result, state: {"words": len(result.content.split())},
            next_node=END,
        )
        .set_entry("writer")
    )

    result = graph.run("Write")

    assert result.state["words"] == 2
    assert result.state.last_output is None
    assert len(result.state.messages) == 1
    assert result.total_usage == usage(5, 2, 0.2)


def test_the_seed_s_output_transform_records_the_visit_once() -> None:
    # Seed 004's custom_output appends (current_node, result) to history itself.
    def custom_output(result: AgentResult, state: GraphState) -> GraphState:
        state.data["draft"] = result.content
        state.data[STATE_KEY_LAST_OUTPUT] = result.content
        # The seed appends its AgentResult where the engine keeps NodeResults.
        state.history.append((state.current_node, result))  # type: ignore[arg-type]
        state.history.append(("note", result))  # type: ignore[arg-type]  # another name: kept
        return state

    agent, _ = make("writer", ["A draft."])
    graph = AgentGraph("g").add_node("writer", agent, output_transform=custom_output)
    graph.add_edge("writer", END)

    result = graph.run("Write")

    assert [name for name, _ in result.state.history] == ["note", "writer"]
    assert result.state["draft"] == "A draft."
    assert len(result.node_results["writer"]) == 1


def test_output_transform_returning_none_writes_nothing_but_keeps_the_usage() -> None:
    agent, _ = make("writer", [LocalReply(text="A draft.", usage=usage(5, 2))])
    graph = (
        AgentGraph("g")
        .add_node("writer", agent, output_transform=lambda result, state: None, next_node=END)
        .set_entry("writer")
    )

    result = graph.run("Write")

    assert result.state.data == {}
    assert result.total_usage == usage(5, 2)
    assert result.node_results["writer"][0].agent_result.content == "A draft."


def test_output_transform_goto_routes_and_updates() -> None:
    agent, _ = make("triage", ["urgent"])
    graph = AgentGraph("g")
    graph.add_node(
        "triage",
        agent,
        output_transform=lambda result, state: goto(result.content, {"label": result.content}),
        destinations=["urgent", "normal"],
    )
    graph.add_node("urgent", lambda state: {"handled_by": "urgent"}, next_node=END)
    graph.add_node("normal", lambda state: {"handled_by": "normal"}, next_node=END)
    graph.add_edge("triage", "normal")
    graph.set_entry("triage")

    result = graph.run("Server down!")

    assert result.node_order == ["triage", "urgent"]
    assert result.state["label"] == "urgent"
    assert result.state["handled_by"] == "urgent"


# --- continuous conversation ----------------------------------------------------------


def test_a_continuous_conversation_threads_markers_tool_traffic_and_answers() -> None:
    planner, _ = make(
        "planner",
        [LocalReply.tool_call("lookup", {"topic": "owls"}, call_id="c1"), "Plan: owls at night."],
        tools=[lookup],
        instructions="Plan the piece.",
    )
    writer, provider = make("writer", ["Owls hunt at night."], instructions="Write it.\nShort.")

    result = AgentGraph.chain(planner, writer, conversation="continuous").run("An owl piece")

    assert [(m.role.value, m.name, m.text) for m in result.state.messages] == [
        ("user", None, "An owl piece"),
        ("user", None, "[workflow] Step 'planner' takes over now: Plan the piece."),
        ("assistant", "planner", ""),
        ("tool", "lookup", "facts about owls"),
        ("assistant", "planner", "Plan: owls at night."),
        ("user", None, handover("planner", "writer", "Write it.")),
        ("assistant", "writer", "Owls hunt at night."),
    ]
    assert result.state.messages[1].metadata == {"transition": True, "node": "planner"}
    assert result.state.messages[2].tool_calls == (
        ToolCall(id="c1", name="lookup", arguments={"topic": "owls"}),
    )
    # The writer is shown the whole thread (FULL), tool traffic as text, then its marker.
    assert sent(provider.last_request)[1:] == [
        (
            "user",
            "An owl piece\n\n"
            "[workflow] Step 'planner' takes over now: Plan the piece.\n\n"
            '[planner] called lookup({"topic": "owls"})\n\n'
            "[tool lookup result] facts about owls\n\n"
            "[planner] Plan: owls at night.\n\n" + handover("planner", "writer", "Write it."),
        ),
    ]


def test_one_node_can_join_a_continuous_conversation_in_an_isolated_graph() -> None:
    planner, _ = make("planner", ["Plan."])
    writer, provider = make("writer", ["Draft."])
    graph = AgentGraph("g")
    graph.add_node("planner", planner, next_node="writer")
    graph.add_node("writer", writer, conversation="continuous", next_node=END)
    graph.set_entry("planner")

    result = graph.run("Go")

    # The hand-over joins the last user turn, so turns still alternate.
    assert sent(provider.last_request)[1:] == [
        ("user", "Go\n\n[planner] Plan.\n\n" + handover("planner", "writer")),
    ]
    assert [m.text for m in result.state.messages] == [
        "Go",
        "Plan.",
        handover("planner", "writer"),
        "Draft.",
    ]


def test_a_node_can_stay_isolated_in_a_continuous_graph() -> None:
    planner, _ = make("planner", ["Plan."])
    writer, provider = make("writer", ["Draft."])
    graph = AgentGraph("g", conversation="continuous")
    graph.add_node("planner", planner, next_node="writer")
    graph.add_node("writer", writer, conversation="isolated", next_node=END)
    graph.set_entry("planner")

    result = graph.run("Go")

    assert sent(provider.last_request)[1:] == [("user", "[planner] Plan.")]
    assert result.state.messages[-1] == Message.assistant("Draft.", name="writer")


def test_a_context_mode_overrides_full_in_a_continuous_conversation() -> None:
    planner, _ = make("planner", ["Plan."])
    writer, provider = make("writer", ["Draft."])
    graph = AgentGraph("g", conversation="continuous")
    graph.add_node("planner", planner, next_node="writer")
    graph.add_node("writer", writer, context_mode=ContextMode.LAST_MESSAGE, next_node=END)
    graph.set_entry("planner")

    graph.run("Go")

    assert sent(provider.last_request)[1:] == [
        ("user", "[planner] Plan.\n\n" + handover("planner", "writer")),
    ]


def test_compaction_writes_and_extends_a_rolling_summary() -> None:
    first, _ = make("first", ["One."])
    second, p2 = make("second", [LocalReply(text="S1", usage=usage(40, 2, 0.4)), "Two."])
    third, p3 = make("third", ["S2", "Three."])
    graph = AgentGraph("g", conversation="continuous", compact_at_tokens=1)
    graph.add_node("first", first, context_n=1, next_node="second")
    graph.add_node("second", second, context_n=1, next_node="third")
    graph.add_node("third", third, context_n=1, next_node=END)
    graph.set_entry("first")

    result = graph.run("Count")

    # The second node summarises all but the last message ...
    assert p2.requests[0].messages[-1].text == (
        "user: Count\nuser: [workflow] Step 'first' takes over now: continue the work above"
    )
    # ... and the third extends that summary instead of starting over.
    assert p3.requests[0].messages[-1].text == (
        "Earlier summary:\nS1\n\nThen:\nassistant (first): One.\n"
        "user: [workflow] Step 'first' is done. Step 'second' takes over now: continue the work "
        "above"
    )
    assert result.state[CONVERSATION_SUMMARY] == {"upto": 4, "text": "S2"}
    assert sent(p3.requests[1])[1:] == [
        (
            "user",
            "Summary of the conversation so far:\nS2\n\n[second] Two.\n\n"
            + handover("second", "third"),
        ),
    ]
    assert result.total_usage.calls == 5
    assert result.total_usage.cost_usd == pytest.approx(0.4)


def test_no_compaction_below_the_token_limit() -> None:
    first, p1 = make("first", ["One."])
    second, p2 = make("second", ["Two."])

    result = AgentGraph.chain(first, second, conversation="continuous").run("Count")

    assert len(p1.requests) == len(p2.requests) == 1
    assert CONVERSATION_SUMMARY not in result.state


# --- failures -------------------------------------------------------------------------


def test_the_engine_never_retries_an_agent_node_even_under_error_policy_retry() -> None:
    flaky_calls: list[int] = []

    def flaky(state: GraphState) -> dict[str, Any]:
        flaky_calls.append(1)
        if len(flaky_calls) == 1:
            raise RuntimeError("transient")
        return {"prepared": True}

    agent, provider = make(
        "writer",
        [ProviderRequestError("bad request", provider="scripted"), "never used"],
    )
    graph = AgentGraph(
        "g",
        error_policy=ErrorPolicy.RETRY,
        retry=RetryPolicy(max_retries=3, initial_delay=0.0, jitter=0.0),
    )
    graph.add_node("prepare", flaky, next_node="writer")
    graph.add_node("writer", agent, next_node=END)
    graph.set_entry("prepare")

    with pytest.raises(NodeError, match="ProviderRequestError: bad request") as caught:
        graph.run("Go")

    assert len(flaky_calls) == 2  # RETRY is in force: the function node was retried
    assert len(provider.requests) == 1  # ... but the agent node ran once
    assert caught.value.node == "writer"


def test_judge_escalation_fails_the_node_so_on_failure_routes_to_a_fallback() -> None:
    agent, _ = make("writer", ["Off-topic rant."], judge=lambda r: Verdict.escalate("off topic"))
    graph = AgentGraph("g")
    graph.add_node("writer", agent, next_node=END)
    graph.add_node("human", lambda state: {"escalated_to": "human"}, next_node=END)
    graph.add_edge("writer", "human", on="failure")
    graph.set_entry("writer")

    result = graph.run("Write")

    assert result.node_order == ["writer", "human"]
    assert result.quality == "degraded"
    assert result.state["escalated_to"] == "human"
    [error] = result.state.errors
    assert error["node"] == "writer"
    assert error["type"] == "JudgeEscalated"
    assert error["error"] == "agent 'writer': the judge escalated: off topic"
    assert result.node_results["writer"][0].outcome == "failure"


def test_usage_of_an_escalated_agent_node_is_still_counted() -> None:
    agent, _ = make(
        "writer",
        [LocalReply(text="Rant.", usage=usage(100, 50, 1.25))],
        judge=lambda r: Verdict.escalate("off topic"),
    )
    graph = AgentGraph("g")
    graph.add_node("writer", agent, next_node=END)
    graph.add_node("human", lambda state: {"escalated_to": "human"}, next_node=END)
    graph.add_edge("writer", "human", on="failure")
    graph.set_entry("writer")

    result = graph.run("Write")

    assert result.total_usage.cost_usd == pytest.approx(1.25)
    assert result.total_usage.calls == 1


def test_judge_escalation_without_a_failure_edge_fails_the_run() -> None:
    agent, _ = make("writer", ["Rant."], judge=lambda r: Verdict.escalate("off topic"))

    with pytest.raises(NodeError) as caught:
        AgentGraph.chain(agent).run("Write")

    assert isinstance(caught.value.__cause__, JudgeEscalated)
    assert caught.value.result is not None
    assert caught.value.result.quality == "failed"


def test_a_node_with_nothing_to_respond_to_fails_clearly() -> None:
    agent, provider = make("writer", [])

    with pytest.raises(NodeError, match="has nothing to respond to"):
        AgentGraph.chain(agent).run()

    assert provider.requests == []


# --- streaming ------------------------------------------------------------------------


async def test_astream_emits_node_chunks_with_the_agents_text() -> None:
    planner, _ = make("planner", ["Plan first."])
    writer, _ = make("writer", ["Falling red leaves drift"])
    events: list[GraphEvent] = [e async for e in AgentGraph.chain(planner, writer).astream("Go")]

    chunks = [e for e in events if isinstance(e, NodeChunk)]
    assert [(c.node, c.delta) for c in chunks] == [
        ("planner", "Plan"),
        ("planner", " first."),
        ("writer", "Falling"),
        ("writer", " red"),
        ("writer", " leaves"),
        ("writer", " drift"),
    ]
    # The writer's text streams while the writer runs: after it starts, before it finishes.
    started = next(
        i for i, e in enumerate(events) if isinstance(e, NodeStarted) and e.node == "writer"
    )
    done = next(
        i for i, e in enumerate(events) if isinstance(e, NodeFinished) and e.node == "writer"
    )
    writer_chunks = [
        i for i, e in enumerate(events) if isinstance(e, NodeChunk) and e.node == "writer"
    ]
    assert started < min(writer_chunks) <= max(writer_chunks) < done
    finished = events[-1]
    assert isinstance(finished, RunFinished)
    assert finished.result is not None
    assert finished.result.content == "Falling red leaves drift"


async def test_a_run_without_listeners_records_no_node_chunks() -> None:
    writer, _ = make("writer", ["Falling red leaves"])

    result = await AgentGraph.chain(writer).arun("Go")

    assert not [e for e in result.trace if isinstance(e, NodeChunk)]
    assert result.content == "Falling red leaves"


# --- node options ---------------------------------------------------------------------


def test_custom_context_without_an_input_transform_is_rejected() -> None:
    agent, _ = make("writer", [])

    with pytest.raises(ValueError, match=r"node 'w': ContextMode\.CUSTOM needs an input_transform"):
        AgentGraph("g").add_node("w", agent, context_mode=ContextMode.CUSTOM)


def test_context_n_below_one_is_rejected() -> None:
    agent, _ = make("writer", [])

    with pytest.raises(ValueError, match="node 'w': context_n must be at least 1, got 0"):
        AgentGraph("g").add_node("w", agent, context_n=0)


def test_an_unknown_conversation_is_rejected() -> None:
    agent, _ = make("writer", [])

    with pytest.raises(ValueError, match="conversation must be 'isolated' or 'continuous'"):
        AgentGraph("g").add_node("w", agent, conversation="shared")


def test_an_unknown_context_mode_is_rejected() -> None:
    agent, _ = make("writer", [])

    with pytest.raises(ValueError, match="'everything'"):
        AgentGraph("g").add_node("w", agent, context_mode="everything")


def test_agent_options_on_a_function_node_are_rejected() -> None:
    with pytest.raises(TypeError, match="options context_mode only apply to agent nodes"):
        AgentGraph("g").add_node("f", lambda state: {}, context_mode="full")


def test_an_unknown_option_on_an_agent_node_is_rejected() -> None:
    agent, _ = make("writer", [])

    with pytest.raises(TypeError, match="temperature"):
        AgentGraph("g").add_node("w", agent, temperature=0.5)


def test_agent_nodes_are_agent_node_adapters() -> None:
    agent, _ = make("writer", [], instructions="Write well.\nMore detail.")
    compiled = (
        AgentGraph("g")
        .add_node("plain", agent, next_node="focused")
        .add_node("focused", agent, focus="Edit.", next_node=END)
        .set_entry("plain")
        .compile()
    )

    plain = compiled.nodes["plain"].adapter
    focused = compiled.nodes["focused"].adapter
    assert isinstance(plain, AgentNode)
    assert isinstance(focused, AgentNode)
    assert plain.kind == "agent"
    assert plain.executor_retries is False
    assert plain.description == "Write well."
    assert focused.description == "Edit."
