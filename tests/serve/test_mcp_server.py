"""The MCP server: served graphs listed and called by the official ``mcp`` client.

Most tests connect the SDK's client to the server in-process (``mcp.Client``); the
HTTP tests run the served app on uvicorn on 127.0.0.1 and connect with the SDK's
streamable HTTP client. The command, over stdio and HTTP, is tested in
``tests/cli/test_mcp_command.py``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Generator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from selectgraph import END, AgentGraph, InterruptRequest, MCPServerError, MCPTools, MessagesState
from selectgraph.serve import ServedGraph
from selectgraph.serve._app import create_app
from selectgraph.serve._mcp_http import LOOPBACK_HOSTS, mcp_app, mcp_part
from selectgraph.serve._mcp_server import OUTPUT_SCHEMA, mcp_server, tool_name
from tests.serve.server import Server, agent_graph, hearing_graph, review_graph


def vote_graph() -> AgentGraph:
    """Asks a typed question (a boolean) about each message."""

    def vote(state: Any) -> Generator[InterruptRequest, Any, dict[str, Any]]:
        said = state["messages"][-1].text
        answer = yield InterruptRequest(f"Approve {said!r}?", response_schema={"type": "boolean"})
        verdict = "approved" if answer else "refused"
        return {"messages": [("assistant", f"{said}: {verdict}")]}

    graph = AgentGraph("vote", state_schema=MessagesState, description="Votes on a proposal.")
    graph.add_node("vote", vote, next_node=END)
    return graph


def failing_graph() -> AgentGraph:
    def boom(state: Any) -> Any:
        raise ConnectionError("the backend is down")

    graph = AgentGraph("failing", state_schema=MessagesState)
    graph.add_node("boom", boom, next_node=END)
    return graph


def _served() -> list[ServedGraph]:
    return [
        ServedGraph(hearing_graph()),
        ServedGraph(review_graph()),
        ServedGraph(vote_graph()),
        ServedGraph(failing_graph()),
    ]


class Caller:
    """One server; each request on a connection of its own, as the SDK's ``Client`` makes.

    Conversations live in the served graphs' stores, not in a connection, so a
    thread continues across connections. (A fixture cannot hold one connection open:
    the SDK's task groups must be left by the task that entered them.)
    """

    def __init__(self, graphs: list[ServedGraph]) -> None:
        self.server = mcp_server(graphs)

    async def list_tools(self) -> Any:
        async with Client(self.server) as connected:
            return await connected.list_tools()

    async def call_tool(self, name: str, arguments: dict[str, Any], **options: Any) -> Any:
        async with Client(self.server) as connected:
            return await connected.call_tool(name, arguments, **options)


@pytest.fixture
def client() -> Caller:
    return Caller(_served())


def _text(result: Any) -> str:
    [content] = result.content
    assert content.type == "text"
    return str(content.text)


# ----------------------------------------------------------------- listing
async def test_each_served_graph_is_a_tool_with_its_description_and_schemas(
    client: Caller,
) -> None:
    listed = (await client.list_tools()).tools

    assert [tool.name for tool in listed] == ["hearing", "review", "vote", "failing"]
    hearing = listed[0]
    assert hearing.description == "Repeats what it heard."
    assert hearing.input_schema == ServedGraph(hearing_graph()).input_schema
    assert hearing.input_schema["required"] == ["input"]
    assert set(hearing.input_schema["properties"]) == {"input", "thread_id"}
    assert hearing.output_schema == OUTPUT_SCHEMA


def test_tool_names_keep_only_the_characters_mcp_allows() -> None:
    assert tool_name("my graph/v2") == "my_graph_v2"
    assert tool_name("ok-name_1.0") == "ok-name_1.0"
    assert tool_name("ünï") == "n"
    assert tool_name("///") == "graph"
    assert len(tool_name("x" * 300)) == 128


def test_two_graphs_that_would_be_one_tool_are_refused_naming_both() -> None:
    first = ServedGraph(hearing_graph(), name="a b")
    second = ServedGraph(hearing_graph(), name="a/b")
    with pytest.raises(ValueError, match=r"'a b' and 'a/b' would both be the MCP tool 'a_b'"):
        mcp_server([first, second])


def test_a_server_needs_a_graph() -> None:
    with pytest.raises(ValueError, match="at least one ServedGraph"):
        mcp_server([])
    with pytest.raises(ValueError, match="graphs holds a AgentGraph, not a ServedGraph"):
        mcp_server([hearing_graph()])  # type: ignore[list-item]


def test_the_sdk_finds_each_tools_input_schema_without_listing() -> None:
    served = ServedGraph(hearing_graph())
    server = mcp_server([served])

    assert server.get_tool_input_schema is not None
    assert server.get_tool_input_schema("hearing") == served.input_schema
    assert server.get_tool_input_schema("nope") is None


# ----------------------------------------------------------------- calling
async def test_a_call_answers_with_the_reply_and_the_turn_as_structured_content(
    client: Caller,
) -> None:
    result = await client.call_tool("hearing", {"input": "one"})

    assert not result.is_error
    assert _text(result) == "one"
    turn = result.structured_content
    assert turn is not None
    assert set(turn) == {"thread_id", "run_id", "status", "reply", "output", "question"}
    assert (turn["status"], turn["reply"], turn["question"]) == ("done", "one", None)


async def test_passing_the_thread_id_back_continues_the_conversation(client: Caller) -> None:
    first = await client.call_tool("hearing", {"input": "one"})
    assert first.structured_content is not None
    thread = first.structured_content["thread_id"]

    second = await client.call_tool("hearing", {"input": "two", "thread_id": thread})
    other = await client.call_tool("hearing", {"input": "three"})

    assert _text(second) == "one | two"
    assert second.structured_content is not None
    assert second.structured_content["thread_id"] == thread
    assert _text(other) == "three"  # no thread_id: a conversation of its own


async def test_an_interrupt_is_returned_as_a_question_and_the_next_call_answers_it(
    client: Caller,
) -> None:
    asked = await client.call_tool("review", {"input": "my draft"})
    turn = asked.structured_content
    assert turn is not None
    assert turn["status"] == "interrupted"
    question = turn["question"]
    assert question["prompt"] == "Publish this draft?"
    assert question["payload"] == {"draft": "my draft"}
    assert question["response_schema"] is None
    assert question["interrupt_id"]
    assert "Publish this draft?" in _text(asked)

    answered = await client.call_tool("review", {"input": "yes", "thread_id": turn["thread_id"]})

    assert _text(answered) == "The draft was published."
    assert answered.structured_content is not None
    assert answered.structured_content["status"] == "done"


async def test_a_typed_question_takes_json_and_refuses_an_answer_that_does_not_fit(
    client: Caller,
) -> None:
    asked = await client.call_tool("vote", {"input": "lunch at noon"})
    assert asked.structured_content is not None
    thread = asked.structured_content["thread_id"]
    assert asked.structured_content["question"]["response_schema"] == {"type": "boolean"}

    wrong = await client.call_tool("vote", {"input": "maybe", "thread_id": thread})
    right = await client.call_tool("vote", {"input": "true", "thread_id": thread})

    assert wrong.is_error
    assert "does not fit the question" in _text(wrong)
    assert "status 422" in _text(wrong)
    assert _text(right) == "lunch at noon: approved"


async def test_text_the_graph_streams_arrives_as_progress_when_asked() -> None:
    graph, _ = agent_graph(["Hello there, Ann."])
    messages: list[str] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        assert message is not None
        messages.append(message)

    async with Client(mcp_server([ServedGraph(graph)])) as connected:
        result = await connected.call_tool("assistant", {"input": "hi"}, progress_callback=progress)

    assert _text(result) == "Hello there, Ann."
    assert len(messages) > 1
    assert "".join(messages) == "Hello there, Ann."


# --------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ({"input": 3}, "the argument 'input' must be a string, got a number"),
        ({"input": ["a"]}, "the argument 'input' must be a string, got an array"),
        ({"input": "x", "thread_id": 7}, "the argument 'thread_id' must be a string, got a number"),
        ({"input": "x", "thread_id": None}, "'thread_id' must be a string, got null"),
        ({"input": True}, "'input' must be a string, got a boolean"),
        ({"input": {"a": 1}}, "'input' must be a string, got an object"),
        ({}, "the argument 'input' (the message for the graph) is missing"),
        ({"input": "x", "mood": "happy"}, "unknown arguments ['mood']"),
    ],
)
async def test_arguments_of_the_wrong_shape_are_an_error_result_saying_what_is_wrong(
    client: Caller, arguments: dict[str, Any], says: str
) -> None:
    result = await client.call_tool("hearing", arguments)

    assert result.is_error
    assert says in _text(result)
    assert _text(result).startswith("hearing: ")


@pytest.mark.parametrize("thread_id", ["a|b", "", "x" * 300, "tab\there"])
async def test_a_thread_id_that_cannot_be_stored_is_an_error_result(
    client: Caller, thread_id: str
) -> None:
    result = await client.call_tool("hearing", {"input": "x", "thread_id": thread_id})

    assert result.is_error
    assert "thread_id" in _text(result)
    assert "status 400" in _text(result)


async def test_a_failing_run_is_an_error_result_and_the_server_goes_on(client: Caller) -> None:
    failed = await client.call_tool("failing", {"input": "x"})
    after = await client.call_tool("hearing", {"input": "still here"})

    assert failed.is_error
    assert "failed" in _text(failed)
    assert "status 500" in _text(failed)
    assert _text(after) == "still here"


# -------------------------------------------------------------------- HTTP
@asynccontextmanager
async def _http_session(url: str, token: str | None = None) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(url, http_client=http) as (read, write, *_),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


@pytest.fixture
def served_app() -> Iterator[Server]:
    served = _served()
    with Server(create_app(served, parts=[mcp_part(served)], token="s3cret")) as running:
        yield running


async def test_the_served_app_answers_mcp_calls_at_slash_mcp(served_app: Server) -> None:
    async with _http_session(f"{served_app.url}/mcp", token="s3cret") as session:
        names = [tool.name for tool in (await session.list_tools()).tools]
        asked = await session.call_tool("review", {"input": "draft 2"})
        assert asked.structured_content is not None
        thread = asked.structured_content["thread_id"]
        answered = await session.call_tool("review", {"input": "no", "thread_id": thread})

    assert names == ["hearing", "review", "vote", "failing"]
    assert asked.structured_content["status"] == "interrupted"
    assert _text(answered) == "The draft was kept back."


async def test_an_unknown_tool_is_a_protocol_error_naming_the_tools_there_are(
    served_app: Server,
) -> None:
    # Over a real transport: the in-process client raises a server's protocol error
    # out of its task group instead of answering it.
    async with _http_session(f"{served_app.url}/mcp", token="s3cret") as session:
        with pytest.raises(MCPError, match=r"unknown tool 'nope'; this server has 'hearing'"):
            await session.call_tool("nope", {"input": "x"})
        after = await session.call_tool("hearing", {"input": "still here"})
    assert _text(after) == "still here"


def test_the_mcp_endpoint_refuses_a_request_without_the_token(served_app: Server) -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream"}
    refused = httpx.post(f"{served_app.url}/mcp", json=initialize, headers=headers)
    wrong = httpx.post(
        f"{served_app.url}/mcp",
        json=initialize,
        headers={**headers, "Authorization": "Bearer guess"},
    )

    assert refused.status_code == 401
    assert wrong.status_code == 401
    assert "Authorization: Bearer" in refused.json()["error"]["message"]


async def test_selectgraphs_own_mcp_client_calls_a_served_graph_with_the_token(
    served_app: Server,
) -> None:
    url = f"{served_app.url}/mcp"
    async with MCPTools(url=url, headers={"Authorization": "Bearer s3cret"}) as tools:
        answer = await tools.acall("hearing", {"input": "from an agent's tools"})

    assert not answer.is_error
    assert isinstance(answer.content, dict)
    assert answer.content["reply"] == "from an agent's tools"


async def test_an_mcp_client_without_the_token_gets_a_typed_error_not_a_hang(
    served_app: Server,
) -> None:
    tools = MCPTools(url=f"{served_app.url}/mcp", connect_timeout=30)
    try:
        with pytest.raises(MCPServerError) as refused:
            await tools.list_tools()
    finally:
        await tools.aclose()
    assert refused.value.reason == "unavailable"
    assert "/mcp" in str(refused.value)


async def test_the_part_runs_again_when_its_app_is_started_again() -> None:
    served = [ServedGraph(hearing_graph())]
    app = mcp_app(served)
    for said in ("first start", "second start"):
        with Server(app) as running:
            async with _http_session(f"{running.url}/mcp") as session:
                result = await session.call_tool("hearing", {"input": said})
        assert _text(result) == said


def test_a_loopback_app_refuses_a_foreign_host_header() -> None:
    app = mcp_app([ServedGraph(hearing_graph())], allowed_hosts=LOOPBACK_HOSTS)
    with Server(app) as running:
        foreign = httpx.post(
            f"{running.url}/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={"Host": "evil.example:80", "Accept": "application/json, text/event-stream"},
        )
    assert foreign.status_code == 421


async def test_a_request_before_the_app_started_is_answered_503() -> None:
    app = mcp_app([ServedGraph(hearing_graph())])
    transport = httpx.ASGITransport(app=app)  # no lifespan: the session manager never ran
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        answered = await http.post("/mcp", json={})

    assert answered.status_code == 503
    assert "not running" in answered.json()["error"]["message"]


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [({"token": ""}, "token must not be empty"), ({"max_body": 0}, "positive number of bytes")],
)
def test_an_mcp_app_that_cannot_work_is_refused(kwargs: dict[str, Any], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        mcp_app([ServedGraph(hearing_graph())], **kwargs)


# ------------------------------------------------------------ cancellation
class Hold:
    """A graph whose node waits until cancelled, noting when it starts and when it stops."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.stopped = threading.Event()

    def graph(self) -> AgentGraph:
        async def wait(state: Any) -> Any:
            self.entered.set()
            try:
                await asyncio.Event().wait()  # never set: only a cancellation ends it
            finally:
                self.stopped.set()

        graph = AgentGraph("hold", state_schema=MessagesState)
        graph.add_node("wait", wait, next_node=END)
        return graph


async def _until(event: threading.Event) -> None:
    deadline = time.monotonic() + 30
    while not event.is_set():
        assert time.monotonic() < deadline, "the event was not set in 30 s"
        await asyncio.sleep(0.01)  # polling the event, not waiting a fixed time


async def test_a_call_the_client_cancels_stops_its_run() -> None:
    hold = Hold()
    served = [ServedGraph(hold.graph())]
    with Server(mcp_app(served)) as running:
        async with _http_session(f"{running.url}/mcp") as session:
            call = asyncio.ensure_future(session.call_tool("hold", {"input": "wait"}))
            await _until(hold.entered)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            await _until(hold.stopped)
            after = await session.call_tool("hold", {"input": "x", "thread_id": "!|bad"})

    assert after.is_error  # the session still answers
