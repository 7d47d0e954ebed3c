"""An MCP server for the interop tests, written with the SDK's server API.

Run as ``python -m tests.interop.mcp_server`` (stdio) or with ``--http PORT``
(streamable HTTP on 127.0.0.1). Every ``tools/list`` it answers appends a line
to the file named by ``SG_MCP_LOG``, so tests can count listings.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

from mcp.server.mcpserver import MCPServer


class _CountingServer(MCPServer):
    async def list_tools(self) -> list[Any]:
        log = os.environ.get("SG_MCP_LOG")
        if log:
            with open(log, "a", encoding="utf-8") as file:
                file.write("list\n")
        return await super().list_tools()


server = _CountingServer("selectgraph-test")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep, then answer."""
    await asyncio.sleep(seconds)
    return "slept"


@server.tool()
def crash() -> str:
    """Exit the server process mid-call."""
    sys.stdout.flush()
    os._exit(3)


@server.tool()
def fail(reason: str) -> str:
    """Raise an error."""
    raise ValueError(reason)


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


def main() -> None:
    """Serve over stdio, or over streamable HTTP with ``--http PORT``."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=None)
    options = parser.parse_args()
    if options.http is None:
        server.run()
        return
    import uvicorn

    uvicorn.run(
        server.streamable_http_app(), host="127.0.0.1", port=options.http, log_level="error"
    )


if __name__ == "__main__":
    main()
