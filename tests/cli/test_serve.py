"""``selectgraph serve``: the real command in a subprocess, talked to with the openai client."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import openai
import pytest

from tests.cli.test_cli import ROOT, selectgraph
from tests.serve.server import free_port

pytestmark = pytest.mark.slow

READY_TIMEOUT = 60.0
"""Seconds the command may take to import, load its graphs and answer."""


class Running:
    """A running ``selectgraph serve``: its URL, and what it printed once stopped."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.stderr = ""


@contextmanager
def served(*args: str, token: str | None = None) -> Iterator[Running]:
    """``selectgraph serve ARGS`` on a free port, stopped at the end."""
    port = free_port()
    found = shutil.which("selectgraph", path=str(Path(sys.executable).parent))
    command = [found] if found else [sys.executable, "-m", "selectgraph.cli"]
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(SELECTGRAPH_PROVIDER="local", COLUMNS="200")
    env.pop("SELECTGRAPH_SERVE_TOKEN", None)
    process = subprocess.Popen(
        [*command, "serve", *args, "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    running = Running(f"http://127.0.0.1:{port}")
    url = running.url
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            if process.poll() is not None:
                _, printed = process.communicate()
                raise RuntimeError(f"selectgraph serve exited: {printed}")
            try:
                if httpx.get(f"{url}/v1/models", headers=headers, timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("selectgraph serve did not answer in time")
            time.sleep(0.1)
        yield running
    finally:
        process.terminate()
        try:
            _, running.stderr = process.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            _, running.stderr = process.communicate()


def test_the_command_serves_its_graphs_to_the_openai_client(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'threads.db'}"
    with (
        served(
            "tests.cli.graphs:asker", "tests.cli.graphs:approval", "--name", "ask", "--store", store
        ) as running,
        openai.OpenAI(base_url=f"{running.url}/v1", api_key="unused", max_retries=0) as client,
    ):
        names = [model.id for model in client.models.list()]
        answered = client.chat.completions.create(
            model="ask", messages=[{"role": "user", "content": "why?"}]
        )
        asked = client.responses.create(model="approval", input="ship version 2")
        shipped = client.responses.create(
            model="approval", input="yes", previous_response_id=asked.id
        )

    assert names == ["ask", "approval"]
    assert answered.choices[0].message.content == "you asked: why?"
    assert (asked.model_extra or {})["selectgraph"]["question"]["prompt"] == "Ship it?"
    assert shipped.output_text == "answered 'yes'"


def test_a_token_is_required_on_every_request_when_given() -> None:
    with served("tests.cli.graphs:asker", "--token", "s3cret", token="s3cret") as running:
        refused = httpx.get(f"{running.url}/v1/models")
        with openai.OpenAI(base_url=f"{running.url}/v1", api_key="s3cret", max_retries=0) as client:
            answered = client.chat.completions.create(
                model="asker", messages=[{"role": "user", "content": "hi"}]
            )

    assert refused.status_code == 401
    assert answered.choices[0].message.content == "you asked: hi"


def test_the_command_prints_the_urls_it_serves_and_mounts_every_protocol() -> None:
    with served("tests.cli.graphs:asker") as running:
        card = httpx.get(f"{running.url}/.well-known/agent-card.json")

    assert f"{running.url}/v1" in running.stderr
    assert f"{running.url}/mcp" in running.stderr
    assert f"{running.url}/a2a/asker/" in running.stderr
    assert "'asker'" in running.stderr
    assert card.status_code == 200
    assert card.json()["name"] == "asker"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["tests.cli.graphs:asker", "--host", "0.0.0.0"], "reachable from other machines"),
        (["tests.cli.graphs:not_a_graph"], "not_a_graph"),
        (["tests.cli.graphs:asker", "--name", "a", "--name", "b"], "one per GRAPH"),
        (["tests.cli.graphs:asker", "--store", "nosuch://x"], "--store nosuch://x"),
        (["tests.cli.graphs:asker", "--max-body", "0"], "--max-body"),
    ],
)
def test_bad_invocations_exit_2_with_one_line_saying_why(args: list[str], says: str) -> None:
    done = selectgraph("serve", *args)

    assert done.returncode == 2, done.stderr
    assert says in done.stderr
    assert "Traceback" not in done.stderr
