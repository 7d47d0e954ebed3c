"""A studio served by a real uvicorn server on a free local port, for streaming tests."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
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
