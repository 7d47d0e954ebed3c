"""Graphs as tools: ``graph.as_tool(...)`` called by an agent, inside a graph run and alone.

Inside a run the graph is a child of the agent's node: its usage is the run's,
its model calls count against the run's budget, its events are nested under the
node, and a question asked inside it pauses the run, which resumes (in the same
process or from a checkpoint store in a new one) without asking the model again.
"""

from __future__ import annotations

import itertools
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from selectgraph import (
    END,
    Agent,
    AgentConfig,
    AgentGraph,
    GraphTool,
    InterruptRequest,
    Role,
    SQLiteCheckpointStore,
    ToolCall,
)
from selectgraph.observe import ToolCallFinished
from selectgraph.providers import LocalReply
from selectgraph.testing import ScriptedProvider


def draft(state: Any) -> dict[str, Any]:
    return {"draft": f"draft about {state.messages[0].text}"}


def approve(state: Any) -> Generator[Any, Any, dict[str, Any]]:
    answer = yield InterruptRequest(prompt=f"approve {state.data['draft']}?")
    return {"__last_output__": f"{state.data['draft']} ({answer})"}


def writer() -> AgentGraph:
    """Drafts, then asks for approval."""
    graph = AgentGraph(name="writer", description="Write a draft and get it approved")
    graph.add_node("draft", draft)
    graph.add_node("approve", approve)
    graph.add_edge("draft", "approve")
    graph.add_edge("approve", END)
    return graph


def echo_graph() -> AgentGraph:
    """Answers with its input, shouting."""
    graph = AgentGraph(name="shout", description="Shout the input back")
    graph.add_node("shout", lambda state: {"__last_output__": state.messages[0].text.upper()})
    graph.add_edge("shout", END)
    return graph


def talker(reply_count: int) -> AgentGraph:
    """An inner graph whose agent asks its model ``reply_count`` times, one node each."""
    provider = ScriptedProvider([f"inner answer {i}" for i in range(reply_count)])
    graph = AgentGraph(name="talker", description="Talks a lot")
    names = [f"talk{i}" for i in range(reply_count)]
    for name in names:
        graph.add_node(name, Agent(AgentConfig(name=name), provider=provider))
    for here, there in itertools.pairwise(names):
        graph.add_edge(here, there)
    graph.add_edge(names[-1], END)
    return graph


def outer_graph(provider: ScriptedProvider, *tools: Any, **settings: Any) -> AgentGraph:
    graph = AgentGraph(name="outer", **settings)
    graph.add_node("boss", Agent(AgentConfig(name="boss"), provider=provider, tools=list(tools)))
    graph.add_edge("boss", END)
    return graph


def tool_results(request: Any) -> list[str]:
    return [m.text for m in request.messages if m.role is Role.TOOL]


# ----------------------------------------------------------------------- the tool


def test_a_graph_tool_offers_one_text_argument_by_default() -> None:
    tool = writer().as_tool()

    assert isinstance(tool, GraphTool)
    assert tool.name == "writer"
    assert tool.spec.description == "Write a draft and get it approved"
    assert tool.spec.parameters["required"] == ["input"]
    assert writer().compile().as_tool("w2", "Other words").spec.description == "Other words"


class Topic(BaseModel):
    topic: str
    words: int = 100


def test_a_pydantic_input_schema_is_the_tools_parameters_and_validates_the_call() -> None:
    seen: list[Any] = []

    def record(state: Any) -> dict[str, Any]:
        seen.append(dict(state.data))
        return {"__last_output__": f"{state.data['topic']}:{state.data['words']}"}

    graph = AgentGraph(name="counted", description="Write so many words")
    graph.add_node("record", record)
    graph.add_edge("record", END)
    tool = graph.as_tool(input_schema=Topic)
    provider = ScriptedProvider(
        [
            LocalReply.tool_call("counted", {"words": 3}, call_id="bad"),
            LocalReply.tool_call("counted", {"topic": "owls", "words": 3}, call_id="good"),
            "ok",
        ]
    )

    result = outer_graph(provider, tool).run("go")

    assert result.content == "ok"
    assert tool.spec.parameters["required"] == ["topic"]
    bad, good = tool_results(provider.requests[2])
    assert "tool 'counted': invalid arguments: topic: Field required" in bad
    assert good == "owls:3"
    assert seen == [{"topic": "owls", "words": 3}]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"name": "two words"}, "tool name 'two words' must be 1-64 letters"),
        ({"input_schema": {"type": "array"}}, "input_schema must be a Pydantic model"),
    ],
)
def test_a_bad_tool_definition_is_refused_naming_what_is_wrong(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        writer().as_tool(**options)


def test_a_graph_without_a_description_needs_one_for_the_model() -> None:
    graph = AgentGraph(name="quiet")
    graph.add_node("only", lambda state: {})
    graph.add_edge("only", END)

    with pytest.raises(ValueError, match="graph 'quiet' has no description"):
        graph.as_tool()


# ------------------------------------------------------------- inside a graph run


def test_the_agent_gets_the_graphs_answer_and_the_events_nest_under_its_node() -> None:
    provider = ScriptedProvider(
        [LocalReply.tool_call("shout", {"input": "hi"}, call_id="c1"), "ok"]
    )
    events: list[Any] = []

    result = outer_graph(provider, echo_graph().as_tool()).run("go", observers=[events.append])

    assert tool_results(provider.requests[1]) == ["HI"]
    assert result.content == "ok"
    inner = [e for e in events if e.namespace == ("boss", "shout.call0-0")]
    assert [type(e).__name__ for e in inner][:2] == ["RunStarted", "NodeStarted"]
    assert {e.run_id for e in inner} == {result.run_id}
    [finished] = [e for e in events if isinstance(e, ToolCallFinished)]
    assert (finished.node, finished.tool, finished.error) == ("boss", "shout", None)


def test_the_inner_runs_usage_is_the_outer_runs() -> None:
    provider = ScriptedProvider(
        [LocalReply.tool_call("talker", {"input": "go"}, call_id="c1"), "ok"]
    )
    alone = outer_graph(ScriptedProvider(["ok"])).run("go").total_usage.calls

    result = outer_graph(provider, talker(3).as_tool()).run("go")

    assert result.total_usage.calls == 2 + 3
    assert alone == 1
    usage = result.node_results["boss"][0].usage
    assert usage is not None
    assert usage.calls == 5


def test_the_inner_runs_model_calls_count_against_the_outer_runs_budget() -> None:
    inner = talker(50)
    provider = ScriptedProvider(
        [LocalReply.tool_call("talker", {"input": "go"}, call_id="c1"), "ok"]
    )

    result = outer_graph(provider, inner.as_tool(), max_total_tokens=2_000).run("go")

    assert result.stop_reason == "token_budget"
    assert result.total_usage.total_tokens <= 2_000
    talked = inner.compile().nodes["talk0"].adapter.agent.provider  # type: ignore[attr-defined]
    assert 0 < len(talked.requests) < 50


def test_a_failing_graph_is_an_error_result_and_the_agent_goes_on() -> None:
    def broken(state: Any) -> dict[str, Any]:
        raise RuntimeError("the index is gone")

    graph = AgentGraph(name="lookup", description="Look things up")
    graph.add_node("broken", broken)
    graph.add_edge("broken", END)
    provider = ScriptedProvider([LocalReply.tool_call("lookup", {"input": "x"}), "sorry"])

    result = outer_graph(provider, graph.as_tool()).run("go")

    assert result.content == "sorry"
    [error] = [m for m in provider.requests[1].messages if m.role is Role.TOOL]
    assert error.is_error
    assert "tool 'lookup'" in error.text
    assert "the index is gone" in error.text


# --------------------------------------------------------------------- questions


def test_a_question_inside_the_graph_pauses_the_run_and_the_answer_continues_it() -> None:
    provider = ScriptedProvider(
        [
            LocalReply.tool_call("writer", {"input": "cats"}, call_id="c1"),
            lambda request: "published: " + tool_results(request)[-1],
        ]
    )
    graph = outer_graph(provider, writer().as_tool())

    paused = graph.run("cats")

    assert paused.stop_reason == "interrupted"
    [question] = paused.interrupts
    assert question.prompt == "approve draft about cats?"
    assert question.node == "approve"
    assert len(provider.requests) == 1

    done = graph.resume(question.id, "yes")

    assert done.content == "published: draft about cats (yes)"
    assert len(provider.requests) == 2  # the first answer was replayed, not asked again
    assert done.total_usage.calls == 2


def counting_tool(counter: list[str]) -> Any:
    def note(text: str) -> str:
        """Write a note down.

        Args:
            text: What to write.
        """
        counter.append(text)
        return f"noted {text}"

    return note


def test_a_run_paused_in_a_graph_tool_resumes_from_the_store_in_a_new_process(
    tmp_path: Path,
) -> None:
    database = tmp_path / "runs.db"
    notes: list[str] = []
    first_provider = ScriptedProvider(
        [
            LocalReply(
                tool_calls=[
                    ToolCall(id="n1", name="note", arguments={"text": "one"}),
                    ToolCall(id="w1", name="writer", arguments={"input": "cats"}),
                ]
            ),
        ]
    )
    first = outer_graph(first_provider, counting_tool(notes), writer().as_tool())
    paused = first.run("cats", checkpoint_store=SQLiteCheckpointStore(database), run_id="r1")
    assert paused.stop_reason == "interrupted"
    assert notes == ["one"]

    # Everything made anew, as another process would: only the store carries over.
    second_provider = ScriptedProvider([lambda request: " | ".join(tool_results(request))])
    second = outer_graph(second_provider, counting_tool(notes), writer().as_tool())
    done = second.resume(
        paused.interrupts[0].id, "ship it", checkpoint_store=SQLiteCheckpointStore(database)
    )

    assert done.stop_reason == "end"
    assert done.content == "noted one | draft about cats (ship it)"
    assert notes == ["one"]  # the finished sibling call was not run again
    assert len(second_provider.requests) == 1
    assert done.total_usage.calls == 2


# ----------------------------------------------------------------- outside a run


def test_an_agent_on_its_own_runs_the_graph_on_its_own() -> None:
    provider = ScriptedProvider([LocalReply.tool_call("shout", {"input": "hey"}), "done"])
    agent = Agent(AgentConfig(name="solo"), provider=provider, tools=[echo_graph().as_tool()])

    result = agent.run("go")

    assert result.content == "done"
    assert tool_results(provider.requests[1]) == ["HEY"]


def test_a_question_outside_a_graph_run_comes_back_as_an_error_the_model_reads() -> None:
    provider = ScriptedProvider([LocalReply.tool_call("writer", {"input": "cats"}), "gave up"])
    agent = Agent(AgentConfig(name="solo"), provider=provider, tools=[writer().as_tool()])

    result = agent.run("go")

    assert result.content == "gave up"
    [error] = [m for m in provider.requests[1].messages if m.role is Role.TOOL]
    assert error.is_error
    assert "approve draft about cats?" in error.text
    assert "run the agent as a node of a graph" in error.text


def test_graph_tools_in_parallel_branches_pause_together_and_resume_from_the_store(
    tmp_path: Path,
) -> None:
    def team(first: ScriptedProvider, second: ScriptedProvider) -> AgentGraph:
        graph = AgentGraph(name="pair")
        for name, provider in (("a", first), ("b", second)):
            agent = Agent(AgentConfig(name=name), provider=provider, tools=[writer().as_tool()])
            graph.add_node(name, agent)
        graph.add_parallel_nodes("team", ["a", "b"])
        graph.add_edge("team", END)
        return graph

    store = tmp_path / "runs.db"
    paused = team(
        ScriptedProvider([LocalReply.tool_call("writer", {"input": "owls"}, call_id="x")]),
        ScriptedProvider([LocalReply.tool_call("writer", {"input": "bats"}, call_id="x")]),
    ).run("go", checkpoint_store=SQLiteCheckpointStore(store))
    assert sorted(q.prompt for q in paused.interrupts) == [
        "approve draft about bats?",
        "approve draft about owls?",
    ]

    first = ScriptedProvider([lambda request: "A: " + tool_results(request)[-1]])
    second = ScriptedProvider([lambda request: "B: " + tool_results(request)[-1]])
    done = team(first, second).resume(
        {q.id: q.prompt.split()[-1].rstrip("?") for q in paused.interrupts},
        checkpoint_store=SQLiteCheckpointStore(store),
    )

    assert done.stop_reason == "end"
    assert [m.text for m in done.state.messages][1:] == [
        "A: draft about owls (owls)",
        "B: draft about bats (bats)",
    ]
    assert (len(first.requests), len(second.requests)) == (1, 1)


# ------------------------------------------------------- replay after a resume


def test_an_agent_inside_a_plain_tool_does_not_take_the_nodes_replay_memory() -> None:
    helper = Agent(AgentConfig(name="helper"), provider=ScriptedProvider(["HELPER"] * 3))

    async def ask_helper(question: str) -> str:
        """Ask the helper agent.

        Args:
            question: What to ask.
        """
        return (await helper.arun(question)).content

    provider = ScriptedProvider(
        [
            LocalReply(
                tool_calls=[ToolCall(id="h1", name="ask_helper", arguments={"question": "q"})]
            ),
            LocalReply(tool_calls=[ToolCall(id="w1", name="writer", arguments={"input": "cats"})]),
            lambda request: "FINAL: " + " | ".join(tool_results(request)),
        ]
    )
    graph = outer_graph(provider, ask_helper, writer().as_tool())

    paused = graph.run("cats")
    done = graph.resume(paused.interrupts[0].id, "yes")

    assert done.content == "FINAL: HELPER | draft about cats (yes)"
    assert len(provider.requests) == 3


def test_a_call_id_the_model_repeats_gets_its_own_result() -> None:
    answers = iter(["first", "second"])

    def lookup(key: str) -> str:
        """Look a key up.

        Args:
            key: The key.
        """
        return next(answers)

    provider = ScriptedProvider(
        [
            LocalReply.tool_call("lookup", {"key": "a"}, call_id="same"),
            LocalReply.tool_call("lookup", {"key": "b"}, call_id="same"),
            lambda request: " ".join(tool_results(request)),
        ]
    )

    result = outer_graph(provider, lookup, writer().as_tool()).run("go")

    assert result.content == "first second"


def test_ids_that_restart_in_a_new_process_do_not_replay_an_earlier_result(
    tmp_path: Path,
) -> None:
    # A local provider numbers its calls per process: after the resume the same ids
    # come again for new calls.
    database = tmp_path / "runs.db"
    notes: list[str] = []
    first = outer_graph(
        ScriptedProvider([LocalReply.tool_call("writer", {"input": "cats"}, call_id="call_1")]),
        counting_tool(notes),
        writer().as_tool(),
    )
    paused = first.run("go", checkpoint_store=SQLiteCheckpointStore(database), run_id="r")
    second = outer_graph(
        ScriptedProvider(
            [
                LocalReply.tool_call("note", {"text": "hello"}, call_id="call_1"),
                lambda request: " | ".join(tool_results(request)),
            ]
        ),
        counting_tool(notes),
        writer().as_tool(),
    )

    done = second.resume(
        paused.interrupts[0].id, "ok", checkpoint_store=SQLiteCheckpointStore(database)
    )

    assert done.content == "draft about cats (ok) | noted hello"
    assert notes == ["hello"]


def test_the_judges_verdicts_before_the_pause_are_replayed_not_asked_again() -> None:
    from selectgraph import LLMJudge

    judge_model = ScriptedProvider(
        ['{"decision":"retry","feedback":"use the writer"}', '{"decision":"accept"}'] * 2
    )
    provider = ScriptedProvider(
        [
            "first try",
            LocalReply.tool_call("writer", {"input": "cats"}, call_id="w1"),
            lambda request: "final: " + tool_results(request)[-1],
        ]
    )
    agent = Agent(
        AgentConfig(name="boss"),
        provider=provider,
        tools=[writer().as_tool()],
        judge=LLMJudge("be good", provider=judge_model),
    )
    graph = AgentGraph(name="outer")
    graph.add_node("boss", agent, next_node=END)

    paused = graph.run("cats")
    done = graph.resume(paused.interrupts[0].id, "yes")

    assert done.content == "final: draft about cats (yes)"
    assert len(judge_model.requests) == 2  # the retry before the pause, the accept after


def test_a_finished_sibling_graph_tools_usage_is_counted_after_the_resume() -> None:
    provider = ScriptedProvider(
        [
            LocalReply(
                tool_calls=[
                    ToolCall(id="t", name="talker", arguments={"input": "go"}),
                    ToolCall(id="w", name="writer", arguments={"input": "cats"}),
                ]
            ),
            "done",
        ]
    )
    graph = outer_graph(provider, talker(3).as_tool(), writer().as_tool())

    paused = graph.run("go")
    done = graph.resume(paused.interrupts[0].id, "yes")

    assert done.total_usage.calls == 2 + 3


def test_a_changed_conversation_on_resume_asks_the_model_again() -> None:
    # A fork whose state was edited: the remembered answers were for another request.
    store = SQLiteCheckpointStore(":memory:")
    first = ScriptedProvider([LocalReply.tool_call("writer", {"input": "cats"}, call_id="w1")])
    paused = outer_graph(first, writer().as_tool()).run("cats", checkpoint_store=store)
    graph = outer_graph(
        ScriptedProvider(
            [
                LocalReply.tool_call("shout", {"input": "dogs"}, call_id="s1"),
                lambda request: "edited: " + tool_results(request)[-1],
            ]
        ),
        writer().as_tool(),
        echo_graph().as_tool(),
    )

    done = graph.resume(paused.interrupts[0].id, "yes", checkpoint_store=store)

    assert done.content == "edited: DOGS"
