"""MCPTools: agents using the tools of a real MCP server, over stdio and streamable HTTP."""

from __future__ import annotations

import asyncio
import sys
import threading
from typing import TYPE_CHECKING, Any

import pytest

from selectgraph import (
    END,
    Agent,
    AgentGraph,
    AgentResult,
    MCPServerError,
    MCPTools,
    Message,
    Role,
    Tool,
    ToolCall,
    tool,
)
from selectgraph.agents import ToolDefinitionError
from selectgraph.providers import LocalReply
from selectgraph.testing import ScriptedProvider
from tests.interop.conftest import ROOT, SERVER, listings

if TYPE_CHECKING:
    from pathlib import Path


def _agent(
    tools: MCPTools, *script: str | LocalReply, extra: tuple[Tool[..., Any], ...] = ()
) -> Agent:
    return Agent(provider=ScriptedProvider(list(script)), tools=[*extra, tools])


def _tool_messages(result: AgentResult) -> list[Message]:
    return [m for m in result.new_messages if m.role is Role.TOOL]


# ----------------------------------------------------------------- calling tools
async def test_an_agent_calls_an_mcp_tool_and_reads_its_result(stdio_tools: MCPTools) -> None:
    provider = ScriptedProvider([LocalReply.tool_call("add", {"a": 2, "b": 40}), "42"])
    agent = Agent(provider=provider, tools=[stdio_tools])

    result = await agent.arun("What is 2 + 40?")

    [answer] = _tool_messages(result)
    assert answer.content == {"result": 42}
    assert not answer.is_error
    assert result.content == "42"
    sent = provider.requests[0].tools
    assert {spec.name for spec in sent} == {"add", "echo", "slow", "crash", "fail", "pid"}
    add = next(spec for spec in sent if spec.name == "add")
    assert add.description == "Add two integers."
    assert add.parameters["required"] == ["a", "b"]


def test_a_graph_run_emits_tool_events_for_mcp_calls(stdio_tools: MCPTools) -> None:
    provider = ScriptedProvider([LocalReply.tool_call("echo", {"text": "hi"}, call_id="c1"), "ok"])
    graph = AgentGraph("mcp")
    graph.add_node("ask", Agent(provider=provider, tools=[stdio_tools]), next_node=END)

    async def names() -> list[str]:
        return [type(e).__name__ async for e in graph.astream("go")]

    seen = asyncio.run(names())
    tool_events = [name for name in seen if name.startswith("ToolCall")]
    assert tool_events == ["ToolCallStarted", "ToolCallFinished"]


def test_a_blocking_run_uses_the_same_server_session_as_an_async_one(
    stdio_tools: MCPTools, list_log: Path
) -> None:
    script: list[str | LocalReply] = [LocalReply.tool_call("pid", {}), "done"]
    first = _agent(stdio_tools, *script).run("pid?")
    second = asyncio.run(_agent(stdio_tools, *script).arun("pid?"))

    assert _tool_messages(first)[0].content == _tool_messages(second)[0].content
    assert listings(list_log) == 1


async def test_tools_are_listed_once_per_session(stdio_tools: MCPTools, list_log: Path) -> None:
    assert listings(list_log) == 0  # nothing starts before first use
    for _ in range(3):
        await _agent(stdio_tools, LocalReply.tool_call("echo", {"text": "x"}), "ok").arun("go")
    assert listings(list_log) == 1
    await stdio_tools.aclose()
    await stdio_tools.list_tools()
    assert listings(list_log) == 2  # a new session lists again


async def test_include_exclude_and_prefix_choose_the_tools_the_model_sees(
    list_log: Path,
) -> None:
    async with MCPTools(
        command=sys.executable,
        args=SERVER,
        cwd=str(ROOT),
        include=["add", "echo", "fail"],
        exclude=["fail"],
        prefix="m_",
        server_stderr=False,
    ) as tools:
        provider = ScriptedProvider([LocalReply.tool_call("m_add", {"a": 1, "b": 2}), "3"])
        result = await Agent(provider=provider, tools=[tools]).arun("1 + 2?")

        assert [spec.name for spec in provider.requests[0].tools] == ["m_add", "m_echo"]
        assert _tool_messages(result)[0].content == {"result": 3}
        assert tools.name == "m"


async def test_a_clash_with_a_python_tool_names_the_fix(stdio_tools: MCPTools) -> None:
    @tool
    def echo(text: str) -> str:
        """Echo locally."""
        return text

    agent = _agent(stdio_tools, "unused", extra=(echo,))
    with pytest.raises(ToolDefinitionError, match=r"'echo'.*prefix="):
        await agent.arun("go")


# ------------------------------------------------------------------ failures
async def test_a_raising_server_tool_reaches_the_model_as_an_error(stdio_tools: MCPTools) -> None:
    agent = _agent(stdio_tools, LocalReply.tool_call("fail", {"reason": "no"}), "sorry")

    result = await agent.arun("go")

    [answer] = _tool_messages(result)
    assert answer.is_error
    assert answer.text.startswith("tool 'fail' failed: ")
    assert answer.metadata == {"tool_error": "tool_error"}
    assert result.content == "sorry"


async def test_a_server_crash_mid_call_is_a_typed_error_and_the_next_call_restarts_it(
    stdio_tools: MCPTools,
) -> None:
    before = (await stdio_tools.acall("pid")).content
    with pytest.raises(MCPServerError) as crashed:
        await stdio_tools.acall("crash")
    assert (crashed.value.reason, crashed.value.server, crashed.value.tool) == (
        "crashed",
        "test-server",
        "crash",
    )
    assert "test-server" in str(crashed.value)
    after = (await stdio_tools.acall("pid")).content
    assert after != before  # a new server process


async def test_an_agent_sees_a_crash_as_an_error_result_and_goes_on(stdio_tools: MCPTools) -> None:
    script: list[str | LocalReply] = [
        LocalReply.tool_call("crash", {}, call_id="c1"),
        LocalReply.tool_call("echo", {"text": "back"}, call_id="c2"),
        "recovered",
    ]
    result = await _agent(stdio_tools, *script).arun("go")

    crash, echo = _tool_messages(result)
    assert crash.is_error
    assert crash.metadata["exception"] == "MCPServerError"
    assert crash.metadata["mcp_failure"] == "crashed"
    assert echo.content == {"result": "back"}
    assert result.content == "recovered"


async def test_a_hanging_call_times_out_with_a_typed_error_and_the_session_stays() -> None:
    async with MCPTools(
        command=sys.executable, args=SERVER, cwd=str(ROOT), timeout=0.5, server_stderr=False
    ) as tools:
        await tools.list_tools()  # the start-up is not what is timed
        with pytest.raises(MCPServerError) as hung:
            await tools.acall("slow", {"seconds": 3600})
        assert hung.value.reason == "timeout"
        assert (await tools.acall("echo", {"text": "still here"})).content == {
            "result": "still here"
        }
        result = await _agent(tools, LocalReply.tool_call("slow", {"seconds": 3600}), "ok").arun(
            "go"
        )
        [answer] = _tool_messages(result)
        assert answer.metadata["mcp_failure"] == "timeout"


async def test_invalid_json_arguments_are_reported_without_calling_the_server(
    stdio_tools: MCPTools, list_log: Path
) -> None:
    [echo] = [t for t in await stdio_tools.list_tools() if t.name == "echo"]

    answer = await echo.execute(ToolCall(id="c", name="echo", arguments={}, raw_arguments="{oops"))
    assert answer.is_error
    assert answer.metadata == {"tool_error": "invalid_arguments"}


async def test_arguments_the_server_rejects_come_back_as_an_error(stdio_tools: MCPTools) -> None:
    answer = await stdio_tools.acall("add", {"a": "two"})
    assert answer.is_error
    assert "add" in answer.text


# ----------------------------------------------------------------- bad input
async def test_a_command_that_does_not_exist_is_a_typed_error_naming_the_server() -> None:
    tools = MCPTools(command="/nonexistent/mcp-server", name="ghost")
    agent = _agent(tools, "unused")
    with pytest.raises(MCPServerError) as missing:
        await agent.arun("go")
    assert missing.value.reason == "unavailable"
    assert "'ghost'" in str(missing.value)
    tools.close()


async def test_a_url_nobody_listens_on_is_a_typed_error_naming_the_server() -> None:
    tools = MCPTools(url="http://127.0.0.1:9/mcp", connect_timeout=10)
    with pytest.raises(MCPServerError) as refused:
        await tools.list_tools()
    assert refused.value.reason == "unavailable"
    assert "http://127.0.0.1:9/mcp" in str(refused.value)
    tools.close()


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [
        ({}, "either command"),
        ({"command": "x", "url": "http://h"}, "either command"),
        ({"command": "x", "headers": {"a": "b"}}, "headers"),
        ({"command": "x", "timeout": 0}, "positive"),
    ],
)
def test_a_server_description_that_cannot_work_is_refused(
    kwargs: dict[str, object], problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        MCPTools(**kwargs)  # type: ignore[arg-type]


# --------------------------------------------------------------------- HTTP
async def test_an_agent_calls_a_tool_over_streamable_http(http_server: tuple[str, Path]) -> None:
    url, log = http_server
    before = listings(log)
    async with MCPTools(url=url, headers={"X-Test": "1"}, name="web") as tools:
        provider = ScriptedProvider(
            [
                LocalReply.tool_call("add", {"a": 5, "b": 6}),
                LocalReply.tool_call("add", {"a": 1, "b": 1}),
                "11",
            ]
        )
        result = await Agent(provider=provider, tools=[tools]).arun("5 + 6?")
        first, second = _tool_messages(result)
        assert first.content == {"result": 11}
        assert second.content == {"result": 2}
        await _agent(tools, "no tools needed").arun("hi")
    assert listings(log) == before + 1


async def test_leaving_async_with_stops_the_session_thread_and_a_later_use_reopens(
    http_server: tuple[str, Path],
) -> None:
    # A server that makes MCPTools per request must not keep a thread per request.
    url, _ = http_server
    tools = MCPTools(url=url, name="per-request")
    for _ in range(2):
        async with tools:
            answer = await tools.acall("echo", {"text": "hi"})
            assert answer.content == {"result": "hi"}
    for thread in threading.enumerate():
        if thread.name == "selectgraph-mcp-per-request":
            thread.join(timeout=10)
            assert not thread.is_alive(), "the session's thread outlived async with"


def test_a_blocking_call_reaches_an_http_server(http_server: tuple[str, Path]) -> None:
    url, _ = http_server
    tools = MCPTools(url=url)
    try:
        assert tools.call("echo", {"text": "sync"}).content == {"result": "sync"}
        assert tools.call("fail", {"reason": "x"}).is_error
    finally:
        tools.close()
