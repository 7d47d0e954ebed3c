"""OTelObserver: the spans a run's events become, how they nest, and what they record."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from selectgraph import END, Agent, AgentConfig, AgentGraph, ErrorPolicy, RetryPolicy
from selectgraph.core._usage import Usage
from selectgraph.observe._otel import OTelObserver
from selectgraph.providers._openai import OpenAIProvider
from selectgraph.testing import LocalReply, ScriptedProvider
from tests.providers.llm_server import FakeLLMServer, openai_stream
from tests.providers.payloads import OPENAI_MODEL, text_chunks

SECRET_KEY = "sk-test-otel-7c1e9a4b2d6f8035"


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield tracer_provider
    tracer_provider.shutdown()


def spans(exporter: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    """Finished spans by name (names are unique in these tests unless said otherwise)."""
    found = list(exporter.get_finished_spans())
    by_name = {span.name: span for span in found}
    assert len(by_name) == len(found), [span.name for span in found]
    return by_name


def parent_of(span: ReadableSpan) -> int | None:
    return None if span.parent is None else span.parent.span_id


def span_id(span: ReadableSpan) -> int:
    context = span.context
    assert context is not None
    value: int = context.span_id
    return value


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def lookup(topic: str) -> str:
    """Look a topic up.

    Args:
        topic: What to look up.
    """
    return f"facts about {topic}"


def agent(name: str, script: list[Any], **config: Any) -> Agent:
    tools = config.pop("tools", ())
    return Agent(AgentConfig(name=name, **config), provider=ScriptedProvider(script), tools=tools)


def write(key: str) -> Any:
    def node(state: Any) -> dict[str, Any]:
        return {key: True}

    return node


# --- a linear agent graph ----------------------------------------------------------


def test_a_linear_agent_graph_nests_chat_spans_under_agent_node_spans_under_the_run(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    cost = Usage(input_tokens=12, output_tokens=3, calls=1, cost_usd=0.25)
    planner = agent("planner", [LocalReply(text="Plan.", usage=cost)], temperature=0.2)
    writer = agent("writer", ["Draft."])
    graph = AgentGraph.chain(planner, writer)

    graph.run("Write a haiku", observers=[OTelObserver(provider)])

    assert sorted(s.name for s in exporter.get_finished_spans()) == [
        "chat local",
        "chat local",
        "invoke_agent planner",
        "invoke_agent writer",
        "invoke_workflow chain",
    ]
    run = next(s for s in exporter.get_finished_spans() if s.name.startswith("invoke_workflow"))
    planner_span = next(
        s for s in exporter.get_finished_spans() if s.name == "invoke_agent planner"
    )
    writer_span = next(s for s in exporter.get_finished_spans() if s.name == "invoke_agent writer")
    chats = [s for s in exporter.get_finished_spans() if s.name == "chat local"]
    assert len(chats) == 2
    assert parent_of(run) is None
    assert parent_of(planner_span) == span_id(run)
    assert parent_of(writer_span) == span_id(run)
    assert [parent_of(c) for c in chats] == [span_id(planner_span), span_id(writer_span)]
    assert run.kind == SpanKind.INTERNAL
    assert chats[0].kind == SpanKind.CLIENT

    assert attrs(run)["gen_ai.operation.name"] == "invoke_workflow"
    assert attrs(run)["gen_ai.workflow.name"] == graph.name
    assert attrs(run)["selectgraph.quality"] == "clean"
    assert attrs(planner_span)["selectgraph.node"] == "planner"
    assert attrs(planner_span)["selectgraph.step"] == 1
    assert attrs(writer_span)["selectgraph.step"] == 2
    assert attrs(planner_span)["selectgraph.visit"] == 1
    assert attrs(planner_span)["selectgraph.namespace"] == ()
    assert attrs(planner_span)["selectgraph.outcome"] == "success"
    assert attrs(planner_span)["selectgraph.attempts"] == 1
    assert attrs(planner_span)["gen_ai.agent.name"] == "planner"
    assert attrs(planner_span)["selectgraph.run_id"] == attrs(run)["selectgraph.run_id"]
    assert "selectgraph.branch" not in attrs(planner_span)

    chat = attrs(chats[0])
    assert chat["gen_ai.operation.name"] == "chat"
    assert chat["gen_ai.provider.name"] == "scripted"
    assert chat["gen_ai.request.model"] == "local"
    assert chat["gen_ai.response.model"] == "local"
    assert chat["gen_ai.usage.input_tokens"] == 12
    assert chat["gen_ai.usage.output_tokens"] == 3
    assert chat["gen_ai.response.finish_reasons"] == ("stop",)
    assert chat["gen_ai.request.temperature"] == 0.2
    assert chat["selectgraph.cost_usd"] == 0.25
    assert "gen_ai.request.temperature" not in attrs(chats[1])
    for span in exporter.get_finished_spans():
        assert span.status.status_code == StatusCode.UNSET, span.name


def test_spans_take_their_times_from_the_events(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    seen: list[Any] = []
    graph = AgentGraph("timed").add_node("a", write("a"), next_node=END).set_entry("a")

    graph.run({}, observers=[seen.append, OTelObserver(provider)])

    node_started = next(e for e in seen if type(e).__name__ == "NodeStarted")
    node_finished = next(e for e in seen if type(e).__name__ == "NodeFinished")
    run_finished = seen[-1]
    node = spans(exporter)["selectgraph.node a"]
    run = spans(exporter)["invoke_workflow timed"]
    assert node.start_time == int(node_started.timestamp * 1_000_000_000)
    assert node.end_time == int(node_finished.timestamp * 1_000_000_000)
    assert run.start_time == int(seen[0].timestamp * 1_000_000_000)
    assert run.end_time == int(run_finished.timestamp * 1_000_000_000)


def test_the_run_span_joins_the_span_current_when_the_run_starts(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    graph = AgentGraph("joined").add_node("a", write("a"), next_node=END).set_entry("a")
    tracer = provider.get_tracer("test")

    with tracer.start_as_current_span("request") as request:
        graph.run({}, observers=[OTelObserver(provider)])

    run = spans(exporter)["invoke_workflow joined"]
    assert parent_of(run) == request.get_span_context().span_id


# --- subgraphs and fan-outs ------------------------------------------------------------


def test_nodes_of_a_subgraph_nest_under_the_subgraph_node(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    inner = AgentGraph("inner").add_node("deep", write("deep"), next_node=END).set_entry("deep")
    child = AgentGraph("child")
    child.add_node("c1", write("c1"), next_node="nested")
    child.add_subgraph("nested", inner, next_node=END)
    child.set_entry("c1")
    parent = AgentGraph("parent")
    parent.add_subgraph("sub", child, next_node=END)
    parent.set_entry("sub")

    parent.run({}, observers=[OTelObserver(provider)])

    found = spans(exporter)
    assert set(found) == {
        "invoke_workflow parent",
        "selectgraph.node sub",
        "selectgraph.node c1",
        "selectgraph.node nested",
        "selectgraph.node deep",
    }
    assert parent_of(found["selectgraph.node sub"]) == span_id(found["invoke_workflow parent"])
    assert parent_of(found["selectgraph.node c1"]) == span_id(found["selectgraph.node sub"])
    assert parent_of(found["selectgraph.node nested"]) == span_id(found["selectgraph.node sub"])
    assert parent_of(found["selectgraph.node deep"]) == span_id(found["selectgraph.node nested"])
    assert attrs(found["selectgraph.node deep"])["selectgraph.namespace"] == ("sub", "nested")
    assert attrs(found["selectgraph.node deep"])["selectgraph.graph"] == "inner"


def test_branch_nodes_nest_under_the_parallel_span_under_the_group_node(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    graph = AgentGraph("fan")
    graph.add_node("p1", write("p1"))
    graph.add_node("p2", write("p2"))
    graph.add_parallel_nodes("grp", ["p1", "p2"])
    graph.add_edge("grp", END)
    graph.set_entry("grp")

    graph.run({}, observers=[OTelObserver(provider)])

    found = spans(exporter)
    group = found["selectgraph.node grp"]
    fan_out = found["selectgraph.parallel grp"]
    assert parent_of(group) == span_id(found["invoke_workflow fan"])
    assert parent_of(fan_out) == span_id(group)
    for index, member in enumerate(["p1", "p2"]):
        span = found[f"selectgraph.node {member}"]
        assert parent_of(span) == span_id(fan_out)
        assert attrs(span)["selectgraph.branch"] == member
        assert attrs(span)["selectgraph.branch.index"] == index
        assert attrs(span)["selectgraph.branch.task_id"] == f"grp:{index}"
    assert attrs(fan_out)["selectgraph.parallel.branches"] == ("p1", "p2")
    assert attrs(fan_out)["selectgraph.parallel.succeeded"] == ("p1", "p2")
    assert fan_out.status.status_code == StatusCode.UNSET


def test_a_failed_branch_under_continue_others_marks_its_node_and_the_fan_out(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    def broken(state: Any) -> None:
        raise ValueError("bad branch")

    graph = AgentGraph("partial")
    graph.add_node("ok", write("ok"))
    graph.add_node("bad", broken)
    graph.add_parallel_nodes("grp", ["ok", "bad"], failure_mode="continue_others")
    graph.add_edge("grp", END)
    graph.set_entry("grp")

    graph.run({}, observers=[OTelObserver(provider)])

    found = spans(exporter)
    assert found["selectgraph.parallel grp"].status.status_code == StatusCode.ERROR
    assert attrs(found["selectgraph.parallel grp"])["selectgraph.parallel.failed"] == ("bad",)
    bad = found["selectgraph.node bad"]
    assert bad.status.status_code == StatusCode.ERROR
    assert attrs(bad)["error.type"] == "ValueError"
    assert found["selectgraph.node ok"].status.status_code == StatusCode.UNSET


# --- tools -------------------------------------------------------------------------


def test_a_tool_call_is_an_execute_tool_span_under_its_agent_node(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    researcher = agent(
        "researcher",
        [LocalReply.tool_call("lookup", {"topic": "owls"}, call_id="call-7"), "Owls."],
        tools=[lookup],
    )

    AgentGraph.chain(researcher).run("owls?", observers=[OTelObserver(provider)])

    finished = exporter.get_finished_spans()
    tool = next(s for s in finished if s.name == "execute_tool lookup")
    node = next(s for s in finished if s.name == "invoke_agent researcher")
    assert parent_of(tool) == span_id(node)
    assert attrs(tool)["gen_ai.operation.name"] == "execute_tool"
    assert attrs(tool)["gen_ai.tool.name"] == "lookup"
    assert attrs(tool)["gen_ai.tool.call.id"] == "call-7"
    assert "gen_ai.tool.call.arguments" not in attrs(tool)
    assert "gen_ai.tool.call.result" not in attrs(tool)
    assert tool.status.status_code == StatusCode.UNSET
    chats = [s for s in finished if s.name == "chat local"]
    assert [attrs(c)["gen_ai.response.finish_reasons"] for c in chats] == [
        ("tool_calls",),
        ("stop",),
    ]


def test_a_failing_tool_sets_error_on_its_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    def explode(topic: str) -> str:
        """Explode.

        Args:
            topic: Anything.
        """
        raise ValueError("kaboom")

    researcher = agent(
        "researcher", [LocalReply.tool_call("explode", {"topic": "x"}), "Sorry."], tools=[explode]
    )

    AgentGraph.chain(researcher).run("go", observers=[OTelObserver(provider)])

    tool = next(s for s in exporter.get_finished_spans() if s.name == "execute_tool explode")
    assert tool.status.status_code == StatusCode.ERROR
    assert "kaboom" in (tool.status.description or "")
    assert attrs(tool)["error.type"] == "tool_error"


# --- failures and retries ----------------------------------------------------------


def test_a_failing_node_and_its_run_are_errors(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    def broken(state: Any) -> None:
        raise RuntimeError("nope")

    graph = AgentGraph("failing").add_node("bad", broken, next_node=END).set_entry("bad")

    with pytest.raises(Exception, match="nope"):
        graph.run({}, observers=[OTelObserver(provider)])

    found = spans(exporter)
    node = found["selectgraph.node bad"]
    run = found["invoke_workflow failing"]
    assert node.status.status_code == StatusCode.ERROR
    assert attrs(node)["selectgraph.outcome"] == "failure"
    assert attrs(node)["error.type"] == "NodeError"
    assert run.status.status_code == StatusCode.ERROR
    assert "RuntimeError: nope" in (run.status.description or "")
    assert attrs(run)["error.type"] == "NodeError"
    assert attrs(run)["selectgraph.error.category"]
    assert [event.name for event in run.events] == ["exception"]


def test_a_node_failing_inside_a_subgraph_is_an_error_under_the_subgraph_node(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    def broken(state: Any) -> None:
        raise RuntimeError("deep failure")

    child = AgentGraph("child").add_node("c", broken, next_node=END).set_entry("c")
    parent = AgentGraph("outer").add_subgraph("s", child, next_node=END).set_entry("s")

    with pytest.raises(Exception, match="deep failure"):
        parent.run({}, observers=[OTelObserver(provider)])

    found = spans(exporter)
    assert found["selectgraph.node c"].status.status_code == StatusCode.ERROR
    assert found["selectgraph.node s"].status.status_code == StatusCode.ERROR
    assert parent_of(found["selectgraph.node c"]) == span_id(found["selectgraph.node s"])


def test_a_failing_model_call_is_an_error_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    from selectgraph.core._errors import ProviderRequestError

    writer = agent("writer", [ProviderRequestError("bad request", provider="scripted")])

    with pytest.raises(Exception, match="bad request"):
        AgentGraph.chain(writer).run("go", observers=[OTelObserver(provider)])

    chat = next(s for s in exporter.get_finished_spans() if s.name == "chat local")
    assert chat.status.status_code == StatusCode.ERROR
    assert attrs(chat)["error.type"] == "ProviderRequestError"
    assert attrs(chat)["gen_ai.usage.input_tokens"] == 0


def test_a_retried_node_records_each_failed_attempt(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    attempts: list[int] = []

    def flaky(state: Any) -> dict[str, Any]:
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("transient")
        return {"done": True}

    graph = AgentGraph("retry")
    graph.add_node(
        "flaky",
        flaky,
        error_policy=ErrorPolicy.RETRY,
        retry=RetryPolicy(max_retries=1, initial_delay=0, jitter=0),
        next_node=END,
    )
    graph.set_entry("flaky")

    graph.run({}, observers=[OTelObserver(provider)])

    node = spans(exporter)["selectgraph.node flaky"]
    assert node.status.status_code == StatusCode.UNSET
    assert attrs(node)["selectgraph.attempts"] == 2
    [retry] = node.events
    assert retry.name == "selectgraph.node.retry"
    assert dict(retry.attributes or {})["selectgraph.attempt"] == 1
    assert dict(retry.attributes or {})["error.type"] == "RuntimeError"


# --- content ----------------------------------------------------------------------------


def test_content_is_not_recorded_unless_asked(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    writer = agent("writer", ["A secret answer."])

    AgentGraph.chain(writer).run("a private question", observers=[OTelObserver(provider)])

    for span in exporter.get_finished_spans():
        assert "gen_ai.input.messages" not in attrs(span)
        assert "gen_ai.output.messages" not in attrs(span)
        for value in attrs(span).values():
            assert "private question" not in str(value)
            assert "secret answer" not in str(value)


def test_content_capture_records_messages_and_tool_traffic_as_semconv_json(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    researcher = agent(
        "researcher",
        [LocalReply.tool_call("lookup", {"topic": "owls"}, call_id="c1"), "Owls hunt at night."],
        tools=[lookup],
    )

    AgentGraph.chain(researcher).run(
        "Tell me about owls", observers=[OTelObserver(provider, capture_content=True)]
    )

    finished = exporter.get_finished_spans()
    first, second = [s for s in finished if s.name == "chat local"]
    sent = json.loads(attrs(first)["gen_ai.input.messages"])
    assert sent[-1] == {
        "role": "user",
        "parts": [{"type": "text", "content": "Tell me about owls"}],
    }
    assert json.loads(attrs(first)["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "parts": [
                {"type": "tool_call", "id": "c1", "name": "lookup", "arguments": {"topic": "owls"}}
            ],
            "finish_reason": "tool_calls",
        }
    ]
    assert json.loads(attrs(second)["gen_ai.input.messages"])[-1] == {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": "c1", "response": "facts about owls"}],
    }
    assert json.loads(attrs(second)["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "Owls hunt at night."}],
            "finish_reason": "stop",
        }
    ]
    tool = next(s for s in finished if s.name == "execute_tool lookup")
    assert json.loads(attrs(tool)["gen_ai.tool.call.arguments"]) == {"topic": "owls"}
    assert attrs(tool)["gen_ai.tool.call.result"] == "facts about owls"


async def test_an_api_key_never_reaches_a_span_even_with_content_capture(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    async with FakeLLMServer() as server:
        server.script(
            "/v1/chat/completions",
            # Observed agent nodes stream their answers.
            openai_stream(text_chunks("Par", "is.", prompt_tokens=21, completion_tokens=7)),
        )
        openai = OpenAIProvider(SECRET_KEY, base_url=f"{server.base_url}/v1", timeout=5.0)
        async with openai:
            writer = Agent(AgentConfig(name="writer", max_tokens=64), provider=openai)
            graph = AgentGraph.chain(writer)
            await graph.arun(
                "Capital of France?", observers=[OTelObserver(provider, capture_content=True)]
            )
        assert server.requests[0].headers["authorization"] == f"Bearer {SECRET_KEY}"

    finished = exporter.get_finished_spans()
    chat = next(s for s in finished if s.name.startswith("chat "))
    assert attrs(chat)["gen_ai.provider.name"] == "openai"
    assert attrs(chat)["gen_ai.response.model"] == OPENAI_MODEL
    assert attrs(chat)["gen_ai.request.max_tokens"] == 64
    assert attrs(chat)["gen_ai.usage.input_tokens"] == 21
    assert "Paris." in attrs(chat)["gen_ai.output.messages"]  # content capture was on
    for span in finished:
        for value in attrs(span).values():
            assert SECRET_KEY not in str(value), span.name
        for event in span.events:
            assert SECRET_KEY not in str(dict(event.attributes or {}))


# --- streaming, many runs, setup -------------------------------------------------------


async def test_astream_runs_are_traced(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    writer = agent("writer", ["Streamed."])
    graph = AgentGraph.chain(writer)

    kinds = [
        type(e).__name__ async for e in graph.astream("go", observers=[OTelObserver(provider)])
    ]

    assert "RunFinished" in kinds
    finished = exporter.get_finished_spans()
    run = next(s for s in finished if s.name.startswith("invoke_workflow"))
    node = next(s for s in finished if s.name == "invoke_agent writer")
    chat = next(s for s in finished if s.name == "chat local")
    assert parent_of(node) == span_id(run)
    assert parent_of(chat) == span_id(node)
    assert attrs(chat)["gen_ai.request.stream"] is True


def test_many_runs_leave_no_state_behind(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    observer = OTelObserver(provider)
    graph = AgentGraph("many")
    graph.add_node("p1", write("p1"))
    graph.add_node("p2", write("p2"))
    graph.add_parallel_nodes("grp", ["p1", "p2"])
    graph.add_edge("grp", END)
    graph.set_entry("grp")

    for _ in range(50):
        graph.run({}, observers=[observer])

    assert observer.open_runs == 0
    assert observer._runs == {}
    run_ids = {
        attrs(s)["selectgraph.run_id"]
        for s in exporter.get_finished_spans()
        if s.name == "invoke_workflow many"
    }
    assert len(run_ids) == 50
    assert len(exporter.get_finished_spans()) == 50 * 5


def test_spans_left_open_by_a_failed_run_are_ended_with_it(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    def broken(state: Any) -> None:
        raise RuntimeError("branch broke")

    def slow(state: Any) -> dict[str, Any]:
        return {"slow": True}

    graph = AgentGraph("cut")
    graph.add_node("bad", broken)
    graph.add_node("slow", slow)
    graph.add_parallel_nodes("grp", ["bad", "slow"])
    graph.add_edge("grp", END)
    graph.set_entry("grp")
    observer = OTelObserver(provider)

    with pytest.raises(Exception, match="branch broke"):
        graph.run({}, observers=[observer])

    found = spans(exporter)
    assert observer.open_runs == 0
    assert "selectgraph.node grp" in found
    assert "selectgraph.parallel grp" in found
    run = found["invoke_workflow cut"]
    assert run.end_time is not None
    for span in found.values():
        assert span.end_time is not None, span.name
        assert span.end_time <= run.end_time, span.name


def test_a_global_provider_is_used_when_none_is_given(
    provider: TracerProvider, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
    graph = AgentGraph("global").add_node("a", write("a"), next_node=END).set_entry("a")

    graph.run({}, observers=[OTelObserver()])

    assert "invoke_workflow global" in spans(exporter)


def test_a_missing_opentelemetry_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)

    with pytest.raises(ImportError, match=r"selectgraph\[otel\]"):
        OTelObserver()
