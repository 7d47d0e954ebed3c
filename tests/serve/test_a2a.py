"""The A2A agent: served graphs reached by the ``a2a-sdk``'s own client over real HTTP.

Each test serves an app made of the A2A part alone on uvicorn on 127.0.0.1, and
talks to it with the SDK's client (JSON-RPC, or REST where named), as any A2A
client would.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.client.client import Client
from a2a.helpers import (
    get_artifact_text,
    get_data_parts,
    get_message_text,
    get_text_parts,
    new_data_part,
)
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)
from a2a.utils.constants import TransportProtocol
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError, UnsupportedOperationError
from starlette.applications import Starlette

from selectgraph import END, AgentGraph, MessagesState
from selectgraph.persistence import SQLiteCheckpointStore
from selectgraph.serve import ServedGraph
from selectgraph.serve._a2a import a2a_part, agent_path
from selectgraph.serve._app import create_app
from tests.serve.server import Gate, Server, agent_graph, hearing_graph, review_graph


class _Late:
    """An ASGI app set after the server picked its port (the cards name the port)."""

    app: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


@pytest.fixture
def serve() -> Iterator[Any]:
    """Serve graphs as A2A agents; gives the server's URL."""
    servers: list[Server] = []

    def start(graphs: Sequence[ServedGraph]) -> str:
        late = _Late()
        server = Server(late)
        part = a2a_part(graphs, base_url=server.url)
        lifespan = part.lifespan
        assert lifespan is not None

        @asynccontextmanager
        async def running(app: Starlette) -> AsyncIterator[None]:
            async with lifespan():
                yield

        late.app = Starlette(routes=list(part.routes), lifespan=running)
        servers.append(server.__enter__())
        return server.url

    yield start
    for server in servers:
        server.__exit__(None, None, None)


def failing_graph() -> AgentGraph:
    def boom(state: Any) -> Any:
        raise ConnectionError("the backend is down")

    graph = AgentGraph("failing", state_schema=MessagesState)
    graph.add_node("boom", boom, next_node=END)
    return graph


def _message(text: str | None = None, **ids: str) -> SendMessageRequest:
    parts = [] if text is None else [Part(text=text)]
    message = Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=parts, **ids)
    return SendMessageRequest(message=message)


async def _client(url: str, *, streaming: bool = False, rest: bool = False) -> Client:
    bindings = [TransportProtocol.HTTP_JSON.value] if rest else []
    config = ClientConfig(streaming=streaming, supported_protocol_bindings=bindings)
    return await create_client(url, client_config=config)


async def _send(client: Client, request: SendMessageRequest) -> Task:
    """The task a non-streamed message gives."""
    [response] = [event async for event in client.send_message(request)]
    assert response.HasField("task")
    return response.task


def _reply(task: Task) -> str:
    [artifact] = task.artifacts
    assert artifact.name == "reply"
    return get_artifact_text(artifact, "")


# ----------------------------------------------------------------- cards
async def test_the_root_card_names_the_graph_its_skill_and_its_endpoints(serve: Any) -> None:
    url = serve([ServedGraph(hearing_graph())])

    card = httpx.get(f"{url}/.well-known/agent-card.json").json()

    assert card["name"] == "hearing"
    assert card["description"] == "Repeats what it heard."
    assert card["capabilities"]["streaming"] is True
    assert [skill["id"] for skill in card["skills"]] == ["hearing"]
    assert card["supportedInterfaces"] == [
        {"url": f"{url}/a2a/hearing/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        {
            "url": f"{url}/a2a/hearing/rest",
            "protocolBinding": "HTTP+JSON",
            "protocolVersion": "1.0",
        },
    ]
    agent_card = httpx.get(f"{url}/a2a/hearing/.well-known/agent-card.json").json()
    assert agent_card == card


async def test_each_of_several_graphs_is_an_agent_at_its_own_path(serve: Any) -> None:
    url = serve([ServedGraph(hearing_graph()), ServedGraph(hearing_graph("second"))])

    root = httpx.get(f"{url}/.well-known/agent-card.json").json()
    second = httpx.get(f"{url}/a2a/second/.well-known/agent-card.json").json()
    assert root["name"] == "hearing"  # the root card is the first graph's
    assert second["name"] == "second"
    async with await _client(f"{url}/a2a/second/") as client:
        task = await _send(client, _message("hi"))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert _reply(task) == "hi"


def test_agent_paths_keep_only_url_safe_characters() -> None:
    assert agent_path("my graph/v2") == "my_graph_v2"
    assert agent_path("ok-name_1") == "ok-name_1"
    assert agent_path("") == "graph"


def test_a_part_refuses_what_it_cannot_serve() -> None:
    with pytest.raises(ValueError, match="at least one ServedGraph"):
        a2a_part([], base_url="http://127.0.0.1:1")
    with pytest.raises(ValueError, match="base_url must be the server's http"):
        a2a_part([ServedGraph(hearing_graph())], base_url="127.0.0.1:1")
    twins = [ServedGraph(hearing_graph(), name="a b"), ServedGraph(hearing_graph(), name="a/b")]
    with pytest.raises(ValueError, match=r"'a b' and 'a/b' would both be the A2A agent"):
        a2a_part(twins, base_url="http://127.0.0.1:1")


# ----------------------------------------------------------------- messages
async def test_a_message_gives_a_completed_task_with_the_reply(serve: Any) -> None:
    url = serve([ServedGraph(hearing_graph())])

    async with await _client(url) as client:
        task = await _send(client, _message("one"))

    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert _reply(task) == "one"
    assert task.context_id  # a new conversation: the thread's id
    assert task.artifacts[0].metadata["thread_id"] == task.context_id
    assert [get_message_text(m) for m in task.history] == ["one"]


async def test_the_rest_binding_answers_too(serve: Any) -> None:
    url = serve([ServedGraph(hearing_graph())])

    async with await _client(url, rest=True) as client:
        task = await _send(client, _message("over rest"))

    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert _reply(task) == "over rest"


async def test_a_streamed_message_follows_status_and_artifact_events_to_completion(
    serve: Any,
) -> None:
    graph, _ = agent_graph(["Hello there, my dear friend"])
    url = serve([ServedGraph(graph)])

    async with await _client(url, streaming=True) as client:
        events: list[StreamResponse] = [e async for e in client.send_message(_message("hi"))]

    kinds = [event.WhichOneof("payload") for event in events]
    deltas = [e.artifact_update for e in events[2:-2]]
    assert kinds == [
        "task",
        "status_update",
        *["artifact_update"] * (len(deltas) + 1),
        "status_update",
    ]
    assert events[0].task.status.state == TaskState.TASK_STATE_SUBMITTED
    assert events[1].status_update.status.state == TaskState.TASK_STATE_WORKING
    assert len(deltas) > 1  # streamed as the agent made it, not in one piece
    assert [d.append for d in deltas] == [False, *[True] * (len(deltas) - 1)]
    assert (
        "".join(get_artifact_text(d.artifact, "") for d in deltas) == "Hello there, my dear friend"
    )
    final = events[-2].artifact_update
    assert final.last_chunk
    assert not final.append
    assert get_artifact_text(final.artifact) == "Hello there, my dear friend"
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED


async def test_two_messages_on_one_context_continue_one_thread(serve: Any) -> None:
    url = serve([ServedGraph(hearing_graph())])

    async with await _client(url) as client:
        first = await _send(client, _message("one"))
        second = await _send(client, _message("two", context_id=first.context_id))

    assert second.context_id == first.context_id
    assert second.id != first.id  # one task per run
    assert _reply(second) == "one | two"  # the graph saw what it heard before


async def test_an_interrupt_asks_for_input_and_the_next_message_answers_it(
    serve: Any,
) -> None:
    url = serve([ServedGraph(review_graph())])

    async with await _client(url) as client:
        asked = await _send(client, _message("my draft"))
        answer = _message("yes", task_id=asked.id, context_id=asked.context_id)
        done = await _send(client, answer)

    assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    question = asked.status.message
    [text] = get_text_parts(question.parts)
    assert text.startswith("Publish this draft?")
    assert "Reply with your answer" in text
    [data] = get_data_parts(question.parts)
    assert data["prompt"] == "Publish this draft?"
    assert data["payload"] == {"draft": "my draft"}
    assert done.id == asked.id  # the same task goes on
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert _reply(done) == "The draft was published."
    assert done.artifacts[0].metadata["run_id"] == question.metadata["run_id"]


async def test_cancelling_a_running_task_stops_its_run(serve: Any) -> None:
    gate = Gate()
    served = ServedGraph(gate.graph())
    url = serve([served])

    async with await _client(url) as client:
        request = _message("wait")
        request.configuration.CopyFrom(SendMessageConfiguration(return_immediately=True))
        started = await _send(client, request)
        assert await asyncio.to_thread(gate.entered.wait, 20)
        cancelled = await client.cancel_task(CancelTaskRequest(id=started.id))
        stored = await client.get_task(GetTaskRequest(id=started.id))

    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    assert stored.status.state == TaskState.TASK_STATE_CANCELED
    assert not await served.cancel(started.context_id)  # nothing runs on the thread now
    gate.release.set()


async def test_an_answer_naming_only_the_context_goes_to_the_task_that_asked(
    serve: Any,
) -> None:
    url = serve([ServedGraph(review_graph())])

    async with await _client(url) as client:
        asked = await _send(client, _message("my draft"))
        done = await _send(client, _message("no", context_id=asked.context_id))

    assert done.id == asked.id
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert _reply(done) == "The draft was kept back."


@pytest.mark.parametrize("on_disk", [False, True], ids=["memory", "sqlite"])
async def test_after_cancel_the_next_message_starts_a_new_turn(
    serve: Any, tmp_path: Any, on_disk: bool
) -> None:
    store = SQLiteCheckpointStore(str(tmp_path / "a2a.db")) if on_disk else None
    url = serve([ServedGraph(review_graph(), store=store)])

    async with await _client(url) as client:
        asked = await _send(client, _message("my draft"))
        await client.cancel_task(CancelTaskRequest(id=asked.id))
        # Before, this answered the canceled question ("kept back"); now it is new input.
        again = await _send(client, _message("second draft", context_id=asked.context_id))
        done = await _send(client, _message("yes", context_id=asked.context_id))
    if store is not None:
        store.close()

    assert again.id != asked.id
    assert again.context_id == asked.context_id
    assert again.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert get_data_parts(again.status.message.parts)[0]["payload"] == {"draft": "second draft"}
    assert done.id == again.id
    assert _reply(done) == "The draft was published."


async def test_a_task_canceled_after_a_restart_drops_its_question(
    serve: Any, tmp_path: Any
) -> None:
    store = SQLiteCheckpointStore(str(tmp_path / "a2a.db"))
    async with await _client(serve([ServedGraph(review_graph(), store=store)])) as client:
        asked = await _send(client, _message("my draft"))

    # The new server has no run for the task: the SDK cancels the stored task itself.
    async with await _client(serve([ServedGraph(review_graph(), store=store)])) as client:
        cancelled = await client.cancel_task(CancelTaskRequest(id=asked.id))
        again = await _send(client, _message("second draft", context_id=asked.context_id))
        stored = await client.get_task(GetTaskRequest(id=asked.id))
    store.close()

    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    assert stored.status.state == TaskState.TASK_STATE_CANCELED
    assert again.id != asked.id
    assert again.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert get_data_parts(again.status.message.parts)[0]["payload"] == {"draft": "second draft"}


async def test_cancelling_a_task_waiting_for_input_cancels_it(serve: Any) -> None:
    url = serve([ServedGraph(review_graph())])

    async with await _client(url) as client:
        asked = await _send(client, _message("my draft"))
        cancelled = await client.cancel_task(CancelTaskRequest(id=asked.id))
        with pytest.raises(UnsupportedOperationError):  # a canceled task takes no answer
            await _send(client, _message("yes", task_id=asked.id, context_id=asked.context_id))

    assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED


async def test_a_streamed_interrupt_ends_the_stream_asking_for_input(serve: Any) -> None:
    url = serve([ServedGraph(review_graph())])

    async with await _client(url, streaming=True) as client:
        events = [e async for e in client.send_message(_message("my draft"))]

    last = events[-1].status_update.status
    assert last.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert get_data_parts(last.message.parts)[0]["payload"] == {"draft": "my draft"}


def gated_graph() -> AgentGraph:
    """Drafts, then pauses before publishing until it is told to go on."""
    graph = AgentGraph("gated", state_schema=MessagesState, pause_before=["publish"])
    graph.add_node("draft", lambda s: {"messages": [("assistant", "drafted")]}, next_node="publish")
    graph.add_node("publish", lambda s: {"messages": [("assistant", "published")]}, next_node=END)
    return graph


async def test_a_paused_run_asks_for_input_and_the_next_message_continues_it(
    serve: Any,
) -> None:
    url = serve([ServedGraph(gated_graph())])

    async with await _client(url) as client:
        paused = await _send(client, _message("go"))
        done = await _send(
            client, _message("go on", task_id=paused.id, context_id=paused.context_id)
        )

    assert paused.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert "send another message to continue" in get_message_text(paused.status.message)
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert _reply(done) == "published"


async def test_after_a_restart_a_task_is_found_and_the_conversation_goes_on(
    serve: Any, tmp_path: Any
) -> None:
    store = SQLiteCheckpointStore(str(tmp_path / "a2a.db"))
    first_url = serve([ServedGraph(hearing_graph(), store=store)])
    async with await _client(first_url) as client:
        first = await _send(client, _message("one"))

    # Another server on the same store, as after a restart: nothing in its memory.
    second_url = serve([ServedGraph(hearing_graph(), store=store)])
    async with await _client(second_url) as client:
        found = await client.get_task(GetTaskRequest(id=first.id))
        second = await _send(client, _message("two", context_id=first.context_id))
        listed = await client.list_tasks(
            ListTasksRequest(context_id=first.context_id, include_artifacts=True)
        )
    store.close()

    assert found.status.state == TaskState.TASK_STATE_COMPLETED
    assert _reply(found) == "one"
    assert [get_message_text(m) for m in found.history] == ["one"]
    assert _reply(second) == "one | two"
    assert {task.id: _reply(task) for task in listed.tasks} == {
        first.id: "one",
        second.id: "one | two",
    }


async def test_a_question_asked_before_a_restart_is_answered_after_it(
    serve: Any, tmp_path: Any
) -> None:
    store = SQLiteCheckpointStore(str(tmp_path / "a2a.db"))
    async with await _client(serve([ServedGraph(review_graph(), store=store)])) as client:
        asked = await _send(client, _message("my draft"))

    async with await _client(serve([ServedGraph(review_graph(), store=store)])) as client:
        waiting = await client.get_task(GetTaskRequest(id=asked.id))
        done = await _send(client, _message("yes", context_id=asked.context_id))
        stored = await client.get_task(GetTaskRequest(id=asked.id))
    store.close()

    assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert get_data_parts(waiting.status.message.parts)[0]["payload"] == {"draft": "my draft"}
    assert done.id == asked.id  # the waiting task goes on, on the new server
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert _reply(done) == "The draft was published."
    assert stored.status.state == TaskState.TASK_STATE_COMPLETED


async def test_tasks_of_one_agent_are_not_another_agents_on_a_shared_store(
    serve: Any, tmp_path: Any
) -> None:
    store = SQLiteCheckpointStore(str(tmp_path / "a2a.db"))
    url = serve(
        [
            ServedGraph(hearing_graph(), store=store),
            ServedGraph(hearing_graph("second"), store=store),
        ]
    )
    async with await _client(url) as client:
        first = await _send(client, _message("one"))
    async with await _client(f"{url}/a2a/second/") as client:
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id=first.id))
        listed = await client.list_tasks(ListTasksRequest())
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id="x" * 40))  # no context in it
    store.close()

    assert list(listed.tasks) == []


async def test_a_structured_output_is_also_a_data_part_of_the_reply(serve: Any) -> None:
    graph = AgentGraph("echo")
    graph.add_node("echo", lambda s: {"said": s.messages[-1].text}, next_node=END)
    url = serve([ServedGraph(graph)])

    async with await _client(url) as client:
        task = await _send(client, _message("hi"))

    [artifact] = task.artifacts
    assert get_text_parts(artifact.parts) == ['{"said": "hi"}']
    assert get_data_parts(artifact.parts) == [{"said": "hi"}]


async def test_a_run_cancelled_on_the_server_cancels_its_task() -> None:
    # In this test's event loop (the app over httpx's ASGI transport), so the test
    # can cancel the thread's run itself, as another protocol's client would.
    gate = Gate()
    served = ServedGraph(gate.graph())
    part = a2a_part([served], base_url="http://agents.local")
    transport = httpx.ASGITransport(app=Starlette(routes=list(part.routes)))
    async with httpx.AsyncClient(transport=transport) as http:
        config = ClientConfig(streaming=False, httpx_client=http)
        async with await create_client("http://agents.local", client_config=config) as client:
            request = _message("wait")
            request.configuration.CopyFrom(SendMessageConfiguration(return_immediately=True))
            started = await _send(client, request)
            assert await asyncio.to_thread(gate.entered.wait, 20)
            assert await served.cancel(started.context_id)
            task = await client.get_task(GetTaskRequest(id=started.id))
            for _ in range(2000):  # the executor's last event lands after the run stops
                if task.status.state != TaskState.TASK_STATE_WORKING:
                    break
                await asyncio.sleep(0.01)
                task = await client.get_task(GetTaskRequest(id=started.id))

    assert task.status.state == TaskState.TASK_STATE_CANCELED
    assert get_message_text(task.status.message) == "The run was cancelled."


# ----------------------------------------------------------------- failures
async def test_a_failed_run_fails_the_task_saying_why(serve: Any) -> None:
    url = serve([ServedGraph(failing_graph())])

    async with await _client(url) as client:
        task = await _send(client, _message("go"))

    assert task.status.state == TaskState.TASK_STATE_FAILED
    assert "the backend is down" in get_message_text(task.status.message)


@pytest.mark.parametrize("on_disk", [False, True], ids=["memory", "sqlite"])
async def test_input_the_graph_refuses_rejects_the_task(
    serve: Any, tmp_path: Any, on_disk: bool
) -> None:
    store = SQLiteCheckpointStore(str(tmp_path / "a2a.db")) if on_disk else None
    url = serve([ServedGraph(hearing_graph(), store=store)])

    async with await _client(url) as client:
        task = await _send(client, _message("hi", context_id="bad|id"))
        # No run claimed a thread for it: the task is kept in memory, and found there.
        found = await client.get_task(GetTaskRequest(id=task.id))
    if store is not None:
        store.close()

    assert task.status.state == TaskState.TASK_STATE_REJECTED
    assert "bad|id" in get_message_text(task.status.message)
    assert found.status.state == TaskState.TASK_STATE_REJECTED


async def test_a_message_without_text_is_an_invalid_params_error(serve: Any) -> None:
    url = serve([ServedGraph(hearing_graph())])

    async with await _client(url) as client:
        request = _message()
        request.message.parts.append(Part(url="https://example.com/a.png"))
        with pytest.raises(InvalidParamsError, match="has no text part"):
            await _send(client, request)
        listed = await client.list_tasks(ListTasksRequest())

    assert list(listed.tasks) == []  # refused before it became a task


async def test_a_data_part_is_a_state_update(serve: Any) -> None:
    url = serve([ServedGraph(hearing_graph())])

    async with await _client(url) as client:
        request = _message()
        request.message.parts.append(
            new_data_part({"messages": [{"role": "user", "content": "from data"}]})
        )
        task = await _send(client, request)

    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert _reply(task) == "from data"


async def test_an_unknown_task_is_a_task_not_found_error(serve: Any) -> None:
    url = serve([ServedGraph(hearing_graph())])

    async with await _client(url) as client:
        with pytest.raises(TaskNotFoundError):
            await _send(client, _message("hi", task_id="no-such-task"))
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id="no-such-task"))


async def test_a_malformed_request_is_a_json_rpc_error_not_a_server_error(serve: Any) -> None:
    url = serve([ServedGraph(hearing_graph())])

    async with httpx.AsyncClient() as http:
        response = await http.post(f"{url}/a2a/hearing/", content=b"{not json")
        params = await http.post(
            f"{url}/a2a/hearing/",
            json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"x": 1}},
            headers={"A2A-Version": "1.0"},
        )

    assert response.status_code < 500
    assert response.json()["error"]["code"] == -32700
    assert params.status_code < 500
    assert params.json()["error"]["code"] in (-32602, -32600)


# ----------------------------------------------------------------- in the served app
async def test_in_the_served_app_the_agent_needs_the_token() -> None:
    late = _Late()
    server = Server(late)
    served = [ServedGraph(hearing_graph())]
    late.app = create_app(served, parts=[a2a_part(served, base_url=server.url)], token="s3cret")

    with server:
        refused = httpx.get(f"{server.url}/.well-known/agent-card.json")
        headers = {"Authorization": "Bearer s3cret"}
        async with httpx.AsyncClient(headers=headers) as http:
            config = ClientConfig(streaming=False, httpx_client=http)
            async with await create_client(server.url, client_config=config) as client:
                task = await _send(client, _message("with a token"))

    assert refused.status_code == 401
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert _reply(task) == "with a token"
