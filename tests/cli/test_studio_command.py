"""``selectgraph studio --reload``: the real command reloads a changed graph module."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.serve.server import free_port

pytestmark = pytest.mark.slow

READY_TIMEOUT = 60.0

GRAPH = """
from selectgraph import END, AgentGraph

graph = AgentGraph("hot")
graph.add_node("{name}", lambda state: {{"x": 1}}, next_node=END)
"""


def _nodes(url: str) -> list[str]:
    shown = httpx.get(f"{url}/api/graph", timeout=5).json()
    return list(shown["nodes"])


def test_reload_picks_up_a_changed_node(tmp_path: Path) -> None:
    module = tmp_path / "hot.py"
    module.write_text(GRAPH.format(name="first"))
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "selectgraph",
            "studio",
            str(module),
            "--reload",
            "--capture-content",
            "--port",
            str(port),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            assert process.poll() is None, process.communicate()[1]
            try:
                if "first" in _nodes(url):
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the studio did not answer in time"
            time.sleep(0.1)
        module.write_text(GRAPH.format(name="second") + "\n# changed\n")
        deadline = time.monotonic() + READY_TIMEOUT
        while "second" not in _nodes(url):
            assert time.monotonic() < deadline, f"not reloaded: {_nodes(url)}"
            time.sleep(0.2)
    finally:
        process.terminate()
        process.communicate(timeout=20)
