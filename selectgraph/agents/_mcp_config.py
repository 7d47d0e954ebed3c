"""MCP settings and errors: where a server is, how long to wait, and how a request failed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from selectgraph.core._errors import SelectGraphError

__all__ = ["MCPFailure", "MCPServerConfig", "MCPServerError"]

MCPFailure = Literal["unavailable", "crashed", "timeout", "protocol"]
"""Why an MCP request failed.

- ``unavailable``: the server could not be started or reached (no such command,
  nobody listening at the URL, a failed handshake).
- ``crashed``: the server went away while a request was in flight; the next
  request starts (or reconnects to) it again.
- ``timeout``: no answer within the timeout; the session is kept.
- ``protocol``: the server answered with an MCP error or a result the SDK
  could not read.
"""


class MCPServerError(SelectGraphError):
    """An MCP server failed a request; the message names the server, the tool and why."""

    def __init__(
        self, message: str, *, server: str, reason: MCPFailure, tool: str | None = None
    ) -> None:
        super().__init__(message)
        self.server = server
        """The server's name (``MCPTools(name=...)``, else its command or URL)."""
        self.reason: MCPFailure = reason
        """Why the request failed; see :data:`MCPFailure`."""
        self.tool = tool
        """The tool being called, or ``None`` for the handshake or listing."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MCPServerConfig:
    """Where an MCP server is and how long to wait for it."""

    name: str
    """How errors and logs name the server."""
    command: str | None = None
    """The executable of a stdio server."""
    args: tuple[str, ...] = ()
    """Its arguments."""
    env: Mapping[str, str] | None = None
    """Extra environment variables for it (over the SDK's safe default set)."""
    cwd: str | None = None
    """Its working directory."""
    server_stderr: bool = True
    """Let the server's stderr through to ours (else it is discarded)."""
    url: str | None = None
    """The endpoint of a streamable HTTP server."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """HTTP headers sent with every request (authorisation...)."""
    timeout: float = 60.0
    """Seconds a tool call or listing may take."""
    connect_timeout: float = 30.0
    """Seconds to start the server (or connect) and finish the MCP handshake."""
