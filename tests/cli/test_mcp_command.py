"""``selectgraph mcp``: the real command as a subprocess, talked to with the official mcp client."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.cli.test_cli import ROOT, selectgraph
from tests.serve.server import free_port

pytestmark = pytest.mark.slow

READY_TIMEOUT = 60.0
"""Seconds the command may take to import, load its graphs and answer."""

GRAPHS = """
from selectgraph import END, AgentGraph, InterruptRequest, MessagesState

print("importing the graphs prints this")  # must not reach the MCP client's stdout

def hear(state):
    said = [m.text for m in state["messages"] if m.role.value == "user"]
    return {"messages": [("assistant", " | ".join(said))]}

hearing = AgentGraph("hearing", state_schema=MessagesState, description="Repeats what it heard.")
hearing.add_node("hear", hear, next_node=END)

def review(state):
    answer = yield InterruptRequest("Publish this draft?", {"draft": state["messages"][-1].text})
    verdict = "published" if answer == "yes" else "kept back"
    return {"messages": [("assistant", f"The draft was {verdict}.")]}

review_graph = AgentGraph("review", state_schema=MessagesState)
review_graph.add_node("review", review, next_node=END)
"""


def _command() -> list[str]:
    found = shutil.which("selectgraph", path=str(Path(sys.executable).parent))
    return [found] if found else [sys.executable, "-m", "selectgraph"]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.pop("SELECTGRAPH_SERVE_TOKEN", None)
    env.update(SELECTGRAPH_PROVIDER="local", COLUMNS="200")
    return env


@pytest.fixture
def graphs(tmp_path: Path) -> Path:
    path = tmp_path / "served.py"
    path.write_text(GRAPHS, encoding="utf-8")
    return path


@asynccontextmanager
async def stdio_session(*args: str, log: Path) -> AsyncIterator[ClientSession]:
    """``selectgraph mcp ARGS`` started by the SDK's stdio client, as an MCP host would."""
    command = _command()
    params = StdioServerParameters(
        command=command[0], args=[*command[1:], "mcp", *args], cwd=str(ROOT), env=_env()
    )
    with log.open("w", encoding="utf-8") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


def _text(result: Any) -> str:
    [content] = result.content
    return str(content.text)


# ------------------------------------------------------------------- stdio
async def test_over_stdio_the_graphs_are_listed_as_tools(graphs: Path, tmp_path: Path) -> None:
    log = tmp_path / "stderr.log"
    async with stdio_session(f"{graphs}:hearing", f"{graphs}:review_graph", log=log) as session:
        listed = (await session.list_tools()).tools

    assert [tool.name for tool in listed] == ["hearing", "review"]
    assert listed[0].description == "Repeats what it heard."
    assert listed[0].input_schema["required"] == ["input"]
    assert set(listed[0].input_schema["properties"]) == {"input", "thread_id"}
    printed = log.read_text(encoding="utf-8")
    assert "importing the graphs prints this" in printed  # on stderr, not the protocol
    assert "'hearing', 'review' over stdio" in printed


async def test_over_stdio_a_thread_continues_and_a_question_is_answered(
    graphs: Path, tmp_path: Path
) -> None:
    log = tmp_path / "stderr.log"
    async with stdio_session(f"{graphs}:hearing", f"{graphs}:review_graph", log=log) as session:
        first = await session.call_tool("hearing", {"input": "one"})
        assert first.structured_content is not None
        thread = first.structured_content["thread_id"]
        second = await session.call_tool("hearing", {"input": "two", "thread_id": thread})
        asked = await session.call_tool("review", {"input": "my draft"})
        assert asked.structured_content is not None
        answered = await session.call_tool(
            "review", {"input": "yes", "thread_id": asked.structured_content["thread_id"]}
        )
        wrong = await session.call_tool("hearing", {"input": 42})

    assert _text(first) == "one"
    assert _text(second) == "one | two"
    assert asked.structured_content["status"] == "interrupted"
    assert asked.structured_content["question"]["prompt"] == "Publish this draft?"
    assert _text(answered) == "The draft was published."
    assert wrong.is_error
    assert "'input' must be a string" in _text(wrong)


async def test_with_a_store_a_conversation_outlives_the_server_process(
    graphs: Path, tmp_path: Path
) -> None:
    store = f"sqlite:///{tmp_path / 'threads.db'}"
    log = tmp_path / "stderr.log"
    async with stdio_session(f"{graphs}:hearing", "--store", store, log=log) as session:
        first = await session.call_tool("hearing", {"input": "before the restart"})
    assert first.structured_content is not None
    thread = first.structured_content["thread_id"]

    async with stdio_session(f"{graphs}:hearing", "--store", store, log=log) as session:
        second = await session.call_tool("hearing", {"input": "after", "thread_id": thread})

    assert _text(second) == "before the restart | after"


# -------------------------------------------------------------------- HTTP
@contextmanager
def http_server(*args: str, port: int) -> Iterator[subprocess.Popen[str]]:
    """``selectgraph mcp --transport http ARGS`` on ``port``, stopped at the end."""
    process = subprocess.Popen(
        [*_command(), "mcp", *args, "--transport", "http", "--port", str(port)],
        cwd=ROOT,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            if process.poll() is not None:
                _, printed = process.communicate()
                raise RuntimeError(f"selectgraph mcp exited: {printed}")
            try:
                httpx.get(f"http://127.0.0.1:{port}/mcp", timeout=2)
                break  # any HTTP answer: it listens
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("selectgraph mcp did not listen in time")
            time.sleep(0.1)  # polling for readiness, not waiting a fixed time
        yield process
    finally:
        process.terminate()
        try:
            process.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()


async def test_over_http_a_call_needs_the_token(graphs: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with http_server(f"{graphs}:hearing", "--token", "s3cret", port=port):
        refused = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        headers = {"Authorization": "Bearer s3cret"}
        async with (
            create_mcp_http_client(headers=headers) as http,
            streamable_http_client(url, http_client=http) as (read, write, *_),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            answered = await session.call_tool("hearing", {"input": "over http"})

    assert refused.status_code == 401
    assert _text(answered) == "over http"


# ------------------------------------------------------------ bad invocations
@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["tests.cli.graphs:asker", "--transport", "http", "--host", "0.0.0.0"], "reachable"),
        (["tests.cli.graphs:asker", "--token", "s3cret"], "--token protects --transport http"),
        (["tests.cli.graphs:not_a_graph"], "not_a_graph"),
        (["tests.cli.graphs:asker", "tests.cli.graphs:asker"], "would both be the MCP tool"),
        (["tests.cli.graphs:asker", "--name", "a", "--name", "b"], "one per GRAPH"),
        (["tests.cli.graphs:asker", "--store", "nosuch://x"], "--store nosuch://x"),
        (["tests.cli.graphs:asker", "--transport", "ftp"], "'ftp' is not one of"),
    ],
)
def test_bad_invocations_exit_2_saying_why_and_print_nothing_on_stdout(
    args: list[str], says: str
) -> None:
    done = selectgraph("mcp", *args)

    assert done.returncode == 2, done.stderr
    assert says in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""
