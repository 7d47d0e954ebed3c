"""MCPTools against a server that breaks the protocol: typed errors, never a hang.

The server (``tests/interop/servers/broken_mcp.py``) is written by hand, without the
SDK, so it can answer what the SDK's server never would: content of an unknown type,
a result that is not a CallToolResult, JSON-RPC errors without a code, lines that are
not JSON, answers to requests nobody sent, half a line before exiting. A line that is
not JSON-RPC fails the calls in flight at once; only an answer to a request nobody
sent is left to the call's timeout.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from selectgraph import Agent, MCPServerError, MCPTools, Role
from selectgraph.providers import LocalReply
from selectgraph.testing import ScriptedProvider
from tests.interop.conftest import ROOT
from tests.interop.servers.broken_mcp import BROKEN, LISTINGS

pytestmark = pytest.mark.slow

SERVER = ["-m", "tests.interop.servers.broken_mcp"]
TIMEOUT = 5.0
"""Seconds a call may take: an answer the client cannot read is never answered."""

MALFORMED = ["wrong_content", "content_not_a_list", "structured_not_an_object"]
"""Valid JSON-RPC carrying a result that is not a CallToolResult: refused at once."""
NOT_JSON_RPC = ["not_a_result", "error_without_code", "no_jsonrpc_field", "not_json"]
"""Lines that are not JSON-RPC messages: every call in flight fails at once."""
UNREADABLE = ["wrong_id"]
"""A well-formed answer to a request nobody sent (the SDK drops it): the call times out."""


def _tools(env: dict[str, str] | None = None) -> MCPTools:
    return MCPTools(
        command=sys.executable,
        args=SERVER,
        cwd=str(ROOT),
        name="broken",
        timeout=TIMEOUT,
        server_stderr=False,
        env=env,
    )


@pytest.fixture(scope="module")
def broken() -> Iterator[MCPTools]:
    """One session with the broken server for the module (restarted if it exits)."""
    tools = _tools()
    yield tools
    tools.close()


def test_every_way_the_server_breaks_is_covered() -> None:
    assert set(BROKEN) == {*MALFORMED, *NOT_JSON_RPC, *UNREADABLE, "half_line_then_exit"}


@pytest.mark.parametrize("tool", MALFORMED)
async def test_a_result_that_is_not_a_call_tool_result_is_a_protocol_error(
    broken: MCPTools, tool: str
) -> None:
    with pytest.raises(MCPServerError) as failed:
        await broken.acall(tool)

    assert (failed.value.reason, failed.value.server, failed.value.tool) == (
        "protocol",
        "broken",
        tool,
    )
    assert f"MCP server 'broken' failed while calling {tool!r}" in str(failed.value)
    assert (await broken.acall("ok")).content == "fine"  # the session goes on


@pytest.mark.parametrize("tool", NOT_JSON_RPC)
async def test_a_line_that_is_not_json_rpc_fails_the_call_at_once(
    broken: MCPTools, tool: str
) -> None:
    with pytest.raises(MCPServerError) as failed:
        await broken.acall(tool)

    assert (failed.value.reason, failed.value.server, failed.value.tool) == (
        "protocol",
        "broken",
        tool,
    )
    assert "it wrote a line that is not JSON-RPC" in str(failed.value)
    assert (await broken.acall("ok")).content == "fine"  # the session goes on


@pytest.mark.parametrize("tool", UNREADABLE)
async def test_an_answer_the_client_cannot_read_is_a_timeout_not_a_hang(
    broken: MCPTools, tool: str
) -> None:
    with pytest.raises(MCPServerError) as failed:
        await broken.acall(tool)

    assert (failed.value.reason, failed.value.tool) == ("timeout", tool)
    assert f"did not answer within {TIMEOUT:g} s" in str(failed.value)
    assert (await broken.acall("ok")).content == "fine"


async def test_half_a_line_then_an_exit_is_a_crash_and_the_next_call_restarts_it(
    broken: MCPTools,
) -> None:
    with pytest.raises(MCPServerError) as failed:
        await broken.acall("half_line_then_exit")

    assert failed.value.reason == "crashed"
    assert (await broken.acall("ok")).content == "fine"


async def test_an_agent_sees_a_malformed_result_as_an_error_and_goes_on(
    broken: MCPTools,
) -> None:
    script: list[str | LocalReply] = [
        LocalReply.tool_call("wrong_content", {}, call_id="c1"),
        LocalReply.tool_call("ok", {}, call_id="c2"),
        "recovered",
    ]
    result = await Agent(provider=ScriptedProvider(script), tools=[broken]).arun("go")

    malformed, fine = [m for m in result.new_messages if m.role is Role.TOOL]
    assert malformed.is_error
    assert malformed.metadata["exception"] == "MCPServerError"
    assert malformed.metadata["mcp_failure"] == "protocol"
    assert fine.content == "fine"
    assert result.content == "recovered"


@pytest.mark.parametrize("listing", sorted(LISTINGS))
async def test_a_broken_tool_listing_is_a_protocol_error(listing: str) -> None:
    async with _tools(env={"SG_BROKEN_LIST": listing}) as tools:
        with pytest.raises(MCPServerError) as failed:
            await tools.list_tools()

    assert (failed.value.reason, failed.value.tool) == ("protocol", None)
    assert "while listing its tools" in str(failed.value)
