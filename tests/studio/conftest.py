"""A studio served by a real uvicorn server on a free local port, for streaming tests."""

from __future__ import annotations

import importlib
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from selectgraph import AgentGraph
from selectgraph.studio import create_app


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Served:
    """A running studio: its base URL and its app."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.port = free_port()
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Served:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the studio server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)


@pytest.fixture
def serve() -> Iterator[Callable[..., Served]]:
    """``serve(graph, **create_app_options)`` starts a studio; all are stopped at the end."""
    started: list[Served] = []

    def start(graph: AgentGraph, **options: Any) -> Served:
        served = Served(create_app(graph, **options)).__enter__()
        started.append(served)
        return served

    yield start
    for served in started:
        served.__exit__()


GRAPH_MODULE = """
from selectgraph import END, AgentGraph

graph = AgentGraph("hot")
graph.add_node("first", lambda state: {{"seen": "first"}}, next_node={follower})
{more}
"""
SECOND = 'graph.add_node("second", lambda state: {"seen": "second"}, next_node=END)'


def write_module(path: Path, *, second: bool, broken: bool = False) -> None:
    """The graph module: ``first`` alone, or ``first`` then ``second``; or a syntax error."""
    text = GRAPH_MODULE.format(
        follower='"second"' if second else "END", more=SECOND if second else ""
    )
    # Written aside and moved in whole, so a watcher never reads it half written; its
    # time moved on, so it looks changed within the file system's time resolution.
    draft = path.with_suffix(".draft")
    draft.write_text(text + ("def broken(:\n" if broken else ""))
    stamp = (path.stat().st_mtime if path.exists() else time.time()) + 2
    os.utime(draft, (stamp, stamp))
    draft.replace(path)


@pytest.fixture
def hot_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Any]]:
    """A graph module written to ``tmp_path`` and imported, under a name of its own."""
    name = f"hot_{tmp_path.name.replace('-', '_')}"
    path = tmp_path / f"{name}.py"
    write_module(path, second=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module(name)
    yield path, module
    sys.modules.pop(name, None)
