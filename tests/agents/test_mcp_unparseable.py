"""MCPTools against a stdio server that writes lines the SDK cannot parse: typed errors at once.

The server (``tests/agents/mcp_garbling_server.py``) is written by hand, without the
SDK, and never answers the calls it garbles: a call can only end by the client
failing it. The timeout is long, a safety net only; the tests assert on the error,
which says the line was not JSON-RPC (a timeout would say it was not answered).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from selectgraph import MCPServerError, MCPTools
from tests.interop.conftest import ROOT

pytest.importorskip("mcp", reason="the MCP tests need the 'mcp' extra")
pytestmark = pytest.mark.slow

SAFETY_NET = 120.0
"""Seconds a call may take before it times out; the failures come long before."""


def _tools(**env: str) -> MCPTools:
    return MCPTools(
        command=sys.executable,
        args=["-m", "tests.agents.mcp_garbling_server"],
        cwd=str(ROOT),
        name="garbling",
        timeout=SAFETY_NET,
        connect_timeout=SAFETY_NET,
        server_stderr=False,
        env=env or None,
    )


@pytest.fixture(scope="module")
def garbling() -> Iterator[MCPTools]:
    """One session with the server for the module."""
    tools = _tools()
    yield tools
    tools.close()


@pytest.mark.parametrize(
    ("tool", "shown"),
    [
        ("prints", "'Loading the model weights... done'"),
        ("no_jsonrpc", '\'{"id": 0, "result": {"content": []}}\''),
        ("long_line", f"'{'x' * 80}...'"),
    ],
)
async def test_a_line_that_is_not_json_rpc_fails_the_call_naming_the_server_and_the_line(
    garbling: MCPTools, tool: str, shown: str
) -> None:
    with pytest.raises(MCPServerError) as failed:
        await garbling.acall(tool)

    assert (failed.value.reason, failed.value.server, failed.value.tool) == (
        "protocol",
        "garbling",
        tool,
    )
    message = str(failed.value)
    assert message.startswith(f"MCP server 'garbling' failed while calling {tool!r}")
    assert f"it wrote a line that is not JSON-RPC: {shown}" in message
    assert "did not answer" not in message
    assert (await garbling.acall("ok")).content == "fine"  # the session goes on


def test_the_same_in_blocking_code(garbling: MCPTools) -> None:
    with pytest.raises(MCPServerError, match="not JSON-RPC: 'Loading the model") as failed:
        garbling.call("prints")

    assert failed.value.reason == "protocol"


async def test_garbage_instead_of_the_handshake_fails_the_start_at_once() -> None:
    async with _tools(SG_GARBLE_HANDSHAKE="1") as tools:
        with pytest.raises(MCPServerError) as failed:
            await tools.list_tools()

    assert (failed.value.reason, failed.value.server) == ("unavailable", "garbling")
    assert "not JSON-RPC: 'Starting server on stdout, sorry'" in str(failed.value)
