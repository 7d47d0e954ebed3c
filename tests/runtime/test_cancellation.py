"""CancellationToken: a run stops at the next boundary, or at once during a model call."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from typing import TYPE_CHECKING, Any

import pytest

from selectgraph import END, Agent, AgentConfig, AgentGraph, InMemoryCheckpointStore
from selectgraph.core._control import CancellationToken
from selectgraph.observe import (
    CheckpointSaved,
    LLMCallFinished,
    NodeFinished,
    NodeStarted,
    ParallelFinished,
)
from selectgraph.providers._openai import OpenAIProvider
from selectgraph.providers._retry import ProviderRetry
from tests.providers.llm_server import FakeLLMServer, stall
from tests.providers.payloads import chunk

if TYPE_CHECKING:
    from collections.abc import Iterator

    from selectgraph.core._result import GraphResult

KEY = "sk-test-cancel-0123456789abcdef"
SLOW_REPLY_S = 6.0  # how long the server's reply would take if nobody hung up


class SlowServer:
    """An OpenAI-compatible server on its own thread whose replies take ``SLOW_REPLY_S``.

    A streamed request gets one text chunk every 0.1 s; a plain one gets nothing until
    the reply time is over. Each connection records when the client closed it.
    """

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.closed: list[float] = []
        self.finished_replies = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._port = 0
        self._thread = threading.Thread(target=self._main, name="slow-llm", daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}/v1"

    def start(self) -> SlowServer:
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def stop(self) -> None:
        assert self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def wait_closed(self, count: int, timeout: float = 2.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.closed) >= count:
                return True
            time.sleep(0.01)
        return False

    def _main(self) -> None:
        self._loop.run_until_complete(self._serve())
        self._loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self._port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await self._stop.wait()
            server.close()
            # Connections still being answered end here, while the loop runs: left to the
            # garbage collector, they would close their sockets on a closed loop, in
            # whichever later test happens to collect them.
            handlers = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in handlers:
                task.cancel()
            await asyncio.gather(*handlers, return_exceptions=True)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.decode("latin-1").split("\r\n"):
                if line.lower().startswith("content-length:"):
                    length = int(line.split(":", 1)[1])
            body = json.loads(await reader.readexactly(length))
            self.requests.append(body)
            hung_up = asyncio.ensure_future(reader.read())  # b"" when the client closes
            if body.get("stream"):
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    b"transfer-encoding: chunked\r\n\r\n"
                )
                for _ in range(int(SLOW_REPLY_S / 0.1)):
                    event = f"data: {json.dumps(chunk({'content': 'word '}))}\n\n".encode()
                    writer.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
                    await writer.drain()
                    done, _ = await asyncio.wait({hung_up}, timeout=0.1)
                    if done:
                        break
                else:
                    self.finished_replies += 1
            else:
                await asyncio.wait({hung_up}, timeout=SLOW_REPLY_S)
            await asyncio.wait({hung_up}, timeout=SLOW_REPLY_S)
            if hung_up.done():
                self.closed.append(time.monotonic())
        except (ConnectionError, asyncio.IncompleteReadError):
            self.closed.append(time.monotonic())
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


@pytest.fixture
def slow() -> Iterator[SlowServer]:
    server = SlowServer().start()
    yield server
    server.stop()


def wire_agent(name: str, server: SlowServer) -> Agent:
    provider = OpenAIProvider(
        KEY, base_url=server.base_url, timeout=30.0, retry=ProviderRetry(max_attempts=1)
    )
    return Agent(AgentConfig(name=name, model="gpt-4o-mini"), provider=provider)


def cancel_later(token: CancellationToken, delay: float) -> threading.Timer:
    timer = threading.Timer(delay, token.cancel)
    timer.start()
    return timer


def assert_cancelled(result: GraphResult) -> None:
    assert result.stop_reason == "cancelled"
    assert result.quality == "degraded"


# --- sync nodes: the next boundary ------------------------------------------------------


def test_cancel_from_another_thread_stops_sync_nodes_at_the_next_boundary() -> None:
    token = CancellationToken()
    ran: list[float] = []

    def tick(state: Any) -> dict[str, Any]:
        time.sleep(0.02)
        ran.append(time.monotonic())
        return {"ticks": len(ran)}

    graph = AgentGraph(
        "ticker",
        enable_loop_detection=False,
        stall_threshold=None,
        max_steps=10_000,
        cancellation_token=token,
    )
    graph.add_node("tick", tick, next_node="tick")
    timer = cancel_later(token, 0.2)
    started = time.monotonic()
    result = graph.run({})
    timer.join()

    assert_cancelled(result)
    assert time.monotonic() - started < 1.0
    assert 3 <= len(ran) < 40
    assert result.state["ticks"] == len(ran)  # the node in progress finished and was kept
    assert not [t for t in ran if t > started + 0.2 + 0.1]  # nothing ran well after cancel()


def test_token_cancelled_before_the_run_stops_before_the_first_node() -> None:
    token = CancellationToken()
    token.cancel()
    calls: list[str] = []

    def first(state: Any) -> dict[str, Any]:
        calls.append("first")
        return {"x": 1}

    graph = AgentGraph("never", cancellation_token=token)
    graph.add_node("first", first, next_node=END)
    result = graph.run({})

    assert_cancelled(result)
    assert calls == []
    assert result.node_order == []
    assert not [e for e in result.trace if isinstance(e, NodeStarted)]


# --- a model call in flight: at once ----------------------------------------------------


def test_run_cancels_an_in_flight_stream_at_once(slow: SlowServer) -> None:
    token = CancellationToken()
    graph = AgentGraph("wire", cancellation_token=token)
    graph.add_node("writer", wire_agent("writer", slow), next_node=END)
    chunks: list[str] = []
    timer = cancel_later(token, 0.4)
    started = time.monotonic()
    result = graph.run("write", observers=[lambda e: chunks.append(getattr(e, "chunk", ""))])
    elapsed = time.monotonic() - started
    timer.join()

    assert_cancelled(result)
    assert elapsed < 2.0, f"the run took {elapsed:.1f}s: the stream was not cancelled"
    assert len(slow.requests) == 1
    assert slow.wait_closed(1), "the server never saw the connection closed"
    assert slow.finished_replies == 0


async def test_arun_cancels_an_in_flight_call_and_leaves_no_tasks(slow: SlowServer) -> None:
    token = CancellationToken()
    graph = AgentGraph("wire", cancellation_token=token)
    graph.add_node("writer", wire_agent("writer", slow), next_node=END)
    timer = cancel_later(token, 0.4)
    started = time.monotonic()
    result = await graph.arun("write")
    elapsed = time.monotonic() - started
    timer.join()

    assert_cancelled(result)
    assert elapsed < 2.0
    assert slow.wait_closed(1)
    await asyncio.sleep(0)
    leftover = asyncio.all_tasks() - {asyncio.current_task()}
    assert not leftover, f"tasks still running after the cancelled run: {leftover}"
    # The task running the test was not left cancelled by the token.
    await asyncio.sleep(0.01)


def test_cancel_stops_running_parallel_branches(slow: SlowServer) -> None:
    token = CancellationToken()
    graph = AgentGraph("fan", cancellation_token=token)
    graph.add_node("a", wire_agent("a", slow))
    graph.add_node("b", wire_agent("b", slow))
    graph.add_parallel_nodes("team", ["a", "b"])
    graph.add_edge("team", END)
    timer = cancel_later(token, 0.4)
    started = time.monotonic()
    result = graph.run("go", observers=[lambda e: None])
    elapsed = time.monotonic() - started
    timer.join()

    assert_cancelled(result)
    assert elapsed < 2.0
    assert len(slow.requests) == 2
    assert slow.wait_closed(2), f"connections closed: {len(slow.closed)} of 2"
    assert slow.finished_replies == 0
    # Neither branch finished: the group is recorded as cancelled, both calls as failed.
    finished = [(e.node, e.outcome) for e in result.trace if isinstance(e, NodeFinished)]
    assert finished == [("team", "cancelled")]
    calls = [e for e in result.trace if isinstance(e, LLMCallFinished)]
    assert sorted(e.node or "" for e in calls) == ["a", "b"]
    assert all(e.error for e in calls)
    assert not any(isinstance(e, ParallelFinished) and e.succeeded for e in result.trace)


def test_cancel_saves_a_cancel_checkpoint(slow: SlowServer) -> None:
    token = CancellationToken()
    graph = AgentGraph("durable", cancellation_token=token)
    graph.add_node("prepare", lambda state: {"prepared": True}, next_node="writer")
    graph.add_node("writer", wire_agent("writer", slow), next_node=END)
    store = InMemoryCheckpointStore()
    timer = cancel_later(token, 0.4)
    result = graph.run("go", checkpoint_store=store, run_id="c-1")
    timer.join()

    assert_cancelled(result)
    saved = [e for e in result.trace if isinstance(e, CheckpointSaved)]
    assert saved[-1].trigger == "cancel"
    assert result.checkpoint_id == saved[-1].checkpoint_id
    assert result.state["prepared"] is True


# --- the token itself ------------------------------------------------------------------


def test_on_cancel_callbacks_run_once_and_can_unsubscribe() -> None:
    token = CancellationToken()
    seen: list[str] = []
    token.on_cancel(lambda: seen.append("first"))
    unsubscribe = token.on_cancel(lambda: seen.append("removed"))
    unsubscribe()
    assert not token.cancelled
    assert seen == []

    token.cancel("enough")
    token.cancel("again")  # no second round of callbacks
    assert seen == ["first"]
    assert token.cancelled
    assert token.is_set()
    assert token.reason == "enough"

    token.on_cancel(lambda: seen.append("late"))  # already cancelled: called at once
    assert seen == ["first", "late"]


def test_graph_rejects_a_cancellation_token_of_the_wrong_type() -> None:
    with pytest.raises(TypeError, match="cancellation_token"):
        AgentGraph("bad", cancellation_token=threading.Event())  # type: ignore[arg-type]


async def test_arun_cancels_a_stalled_reply_of_the_shared_wire_server() -> None:
    # The suite's FakeLLMServer: a 'stall' reply never answers until the server closes.
    async with FakeLLMServer() as server:
        server.script("/v1/chat/completions", stall())
        provider = OpenAIProvider(
            KEY, base_url=f"{server.base_url}/v1", timeout=30.0, retry=ProviderRetry(max_attempts=1)
        )
        token = CancellationToken()
        graph = AgentGraph("stalled", cancellation_token=token)
        graph.add_node(
            "writer",
            Agent(AgentConfig(name="writer", model="gpt-4o-mini"), provider=provider),
            next_node=END,
        )
        cancelled_at: list[float] = []

        async def cancel_once_the_request_is_in() -> None:
            # Waits for the server, not for a fixed time: a loaded machine may be slow to
            # send the request, and cancelling before it is sent tests something else.
            while not server.requests:
                await asyncio.sleep(0.01)
            cancelled_at.append(time.monotonic())
            token.cancel()

        canceller = asyncio.ensure_future(cancel_once_the_request_is_in())
        result = await asyncio.wait_for(graph.arun("write"), timeout=60)
        await canceller

        assert_cancelled(result)
        # The provider's timeout is 30 s: returning well before it means the request in
        # flight was abandoned when the token was cancelled, not waited out.
        assert time.monotonic() - cancelled_at[0] < 15
        assert len(server.requests) == 1
        assert server.unused_replies("/v1/chat/completions") == 0
        await provider.aclose()
