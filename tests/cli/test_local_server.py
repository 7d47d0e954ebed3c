"""``selectgraph local-server``: llama.cpp's server with settings under which requests queue."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner

from selectgraph.cli import EXIT_USAGE, app
from selectgraph.cli._local_server import base_url, build_settings
from tests.real_models.conftest import SERVER_READY_TIMEOUT, _free_port, _missing

if TYPE_CHECKING:
    from pathlib import Path


def test_the_settings_queue_requests_instead_of_interrupting_them(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp.server.settings")
    server, served = build_settings(
        model=tmp_path / "m.gguf", host="127.0.0.1", port=8123, n_ctx=512, model_alias="m"
    )
    assert server.interrupt_requests is False
    assert (server.host, server.port) == ("127.0.0.1", 8123)
    assert (served.model, served.model_alias, served.n_ctx) == (str(tmp_path / "m.gguf"), "m", 512)


def test_the_base_url_is_one_a_client_can_reach() -> None:
    assert base_url("127.0.0.1", 8080) == "http://127.0.0.1:8080/v1"
    assert base_url("0.0.0.0", 9000) == "http://127.0.0.1:9000/v1"
    assert base_url("::1", 8080) == "http://[::1]:8080/v1"


def test_a_missing_server_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp.server.app", None)  # import fails

    result = CliRunner().invoke(app, ["local-server"])

    assert result.exit_code == EXIT_USAGE
    assert 'pip install "llama-cpp-python[server]"' in result.output


def test_a_missing_model_file_is_a_usage_error(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp.server.app")

    result = CliRunner().invoke(app, ["local-server", "--model", str(tmp_path / "none.gguf")])

    assert result.exit_code == EXIT_USAGE
    assert "no such file" in result.output


@pytest.mark.real_model
def test_it_prints_the_url_and_answers_until_stopped() -> None:
    reason = _missing()
    if reason is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and {reason}", pytrace=False)
        pytest.skip(reason)
    port = _free_port()
    command = [sys.executable, "-m", "selectgraph", "local-server", "--port", str(port)]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    assert process.stderr is not None
    stderr: list[bytes] = []
    drain = threading.Thread(target=lambda: stderr.extend(process.stderr or ()), daemon=True)
    drain.start()
    try:
        url = process.stdout.readline().decode().strip()
        assert url == f"http://127.0.0.1:{port}/v1", b"".join(stderr).decode(errors="replace")
        assert _wait_for_models(url, process) == ["smollm2"]
        body = {
            "model": "smollm2",
            "messages": [{"role": "user", "content": "Say hello."}],
            "max_tokens": 16,
        }
        request = urllib.request.Request(
            f"{url}/chat/completions",
            data=json.dumps(body).encode(),
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as reply:
            answer = json.load(reply)
        assert answer["choices"][0]["message"]["content"].strip()
        assert "OpenAIProvider(base_url=" in b"".join(stderr).decode(errors="replace")
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        drain.join(timeout=5)
        process.stdout.close()
        process.stderr.close()


def _wait_for_models(url: str, process: subprocess.Popen[bytes]) -> list[str]:
    deadline = time.monotonic() + SERVER_READY_TIMEOUT
    while time.monotonic() < deadline:
        assert process.poll() is None, f"local-server exited with {process.returncode}"
        with (
            contextlib.suppress(urllib.error.URLError, ConnectionError, TimeoutError),
            urllib.request.urlopen(f"{url}/models", timeout=1.0) as reply,
        ):
            return [model["id"] for model in json.load(reply)["data"]]
        time.sleep(0.1)
    pytest.fail(f"local-server was not ready after {SERVER_READY_TIMEOUT} s")
