"""MCP test servers: ``tests/interop/mcp_server.py`` over stdio and over streamable HTTP."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from selectgraph import MCPTools

if TYPE_CHECKING:
    from collections.abc import Iterator

pytest.importorskip("mcp", reason="the MCP tests need the 'mcp' extra")

ROOT = Path(__file__).resolve().parents[2]
SERVER = ["-m", "tests.interop.mcp_server"]
"""The test server's arguments after the Python executable."""
READY_TIMEOUT = 60.0
"""Seconds the HTTP server may take to accept connections."""


def listings(log: Path) -> int:
    """How many ``tools/list`` requests the server behind ``log`` answered."""
    return len(log.read_text().splitlines()) if log.exists() else 0


@pytest.fixture
def list_log(tmp_path: Path) -> Path:
    """The file the stdio server notes each listing in."""
    return tmp_path / "lists.log"


@pytest.fixture
def stdio_tools(list_log: Path) -> Iterator[MCPTools]:
    """The test server as a stdio subprocess, closed after the test."""
    tools = MCPTools(
        command=sys.executable,
        args=SERVER,
        cwd=str(ROOT),
        env={"SG_MCP_LOG": str(list_log)},
        name="test-server",
        server_stderr=False,
        timeout=30,
    )
    yield tools
    tools.close()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for_port(process: subprocess.Popen[bytes], port: int) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the MCP HTTP server exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)  # polling for readiness, not waiting a fixed time
    raise RuntimeError(f"the MCP HTTP server did not listen on {port} in {READY_TIMEOUT} s")


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The test server on streamable HTTP (uvicorn, 127.0.0.1); yields its URL and list log."""
    port = _free_port()
    log = tmp_path_factory.mktemp("mcp-http") / "lists.log"
    env = {**os.environ, "SG_MCP_LOG": str(log)}
    process = subprocess.Popen(
        [sys.executable, *SERVER, "--http", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for_port(process, port)
        yield f"http://127.0.0.1:{port}/mcp", log
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
