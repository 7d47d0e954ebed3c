"""Suite-wide fixtures: every test runs offline, with no credentials from the host."""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

import pytest

from selectgraph.providers import _tokens

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

_ENV_TO_CLEAR = (
    "OPENAI_API_KEY",
    "OPENAI_ADMIN_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
    "OPENAI_CUSTOM_HEADERS",
    "OPENAI_LOG",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_CUSTOM_HEADERS",
    "ANTHROPIC_PROFILE",
    "ANTHROPIC_IDENTITY_TOKEN",
    "ANTHROPIC_IDENTITY_TOKEN_FILE",
    "ANTHROPIC_FEDERATION_RULE_ID",
    "ANTHROPIC_ORGANIZATION_ID",
    "ANTHROPIC_CONFIG_DIR",
    "ANTHROPIC_LOG",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
    "DATA_GYM_CACHE_DIR",
)


@pytest.fixture
def refusing_port() -> Iterator[int]:
    """A loopback port that refuses connections: bound, so nobody else takes it, never listening."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, refusing_port: int) -> None:
    """No credentials or proxies from the host, and no way for tiktoken to reach the internet.

    tiktoken downloads over HTTPS with ``requests``, which honours ``HTTPS_PROXY``; a
    proxy that refuses connections makes every download fail at once, without a DNS
    lookup of a public host. The SDK clients talk plain HTTP to 127.0.0.1 and are not
    affected. Token-encoding state starts empty in every test.
    """
    for name in _ENV_TO_CLEAR:
        monkeypatch.delenv(name, raising=False)
    # Agents without a provider use the echo test double, not the embedded model: tests
    # that want a real model (tests/real_models) say so.
    monkeypatch.setenv("SELECTGRAPH_PROVIDER", "local")
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{refusing_port}")
    monkeypatch.setenv("https_proxy", f"http://127.0.0.1:{refusing_port}")
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    # The Anthropic SDK looks for credential profiles under ~/.config; there are none here.
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(_tokens, "_loads", {})
    monkeypatch.setattr(_tokens, "_registered", {})
