"""Token counting: exact with tiktoken when its encoding is available, else an estimate.

Which encoding
    OpenAI models are counted with the BPE encoding tiktoken maps them to
    (``tiktoken.encoding_name_for_model``): ``o200k_base`` for gpt-4o, gpt-4.1,
    gpt-5 and the o-series, ``cl100k_base`` for gpt-4 and gpt-3.5. ``model=None``
    means the current OpenAI family, ``o200k_base``. Models tiktoken does not know
    (Claude, Llama, ...) have no public local tokenizer and are always estimated.

Where encodings come from, and what happens offline
    tiktoken does not ship its encoding files: the first ``get_encoding`` downloads
    one (a few MB) with ``requests`` and keeps it in ``TIKTOKEN_CACHE_DIR`` (or
    ``DATA_GYM_CACHE_DIR``, else ``<tempdir>/data-gym-cache``). Without network
    access the download raises ``requests.exceptions.ConnectionError`` (a subclass of
    ``OSError``); when DNS fails that takes well under a second, but tiktoken sets no
    timeout, so behind a firewall that silently drops packets it can block for
    minutes. tiktoken also remembers nothing about a failure, so a naive caller
    would pay for it again on every count.

    Here each encoding is therefore loaded at most once per process, in a daemon
    thread. Callers wait for it at most five seconds in total and estimate
    meanwhile; a failed load is remembered and never retried. A machine
    that has the files in tiktoken's cache gets exact counts with no network, and
    :func:`register_encoding` installs an encoding built some other way (for example
    from a ``.tiktoken`` file shipped with an application).

The estimate
    ``ceil(utf8_bytes / 4)`` per text: about four characters a token for English
    (OpenAI's rule of thumb), and closer than a character count for scripts whose
    characters take several bytes and usually several tokens.

Chat overhead
    Messages are counted the way OpenAI's cookbook recipe counts chat prompts for
    gpt-3.5-turbo-0613, gpt-4 and later: 3 tokens of framing per message, the tokens
    of each field sent (role, content, name, tool call id), 1 more when a name is
    given, and 3 for the reply's own framing. Tool calls add the tokens of each
    call's id, name and JSON arguments; OpenAI documents no exact rule for them,
    so counts that include tool calls are close rather than exact.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import tiktoken

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from selectgraph._messages import Message

__all__ = [
    "count_message_tokens",
    "count_text_tokens",
    "encoding_for",
    "encoding_name_for",
    "estimate_message_tokens",
    "estimate_text_tokens",
    "register_encoding",
]

# Generous, so a machine whose cache holds the files (a ~0.3 s load) counts exactly
# from the first call; it bounds the one-time stall when a download hangs.
_LOAD_TIMEOUT_S = 5.0

_DEFAULT_ENCODING = "o200k_base"
_BYTES_PER_TOKEN = 4
_TOKENS_PER_MESSAGE = 3
_TOKENS_PER_NAME = 1
_TOKENS_PER_REPLY = 3

_log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Load:
    """One background load of a tiktoken encoding, shared by every caller."""

    deadline: float
    done: threading.Event = field(default_factory=threading.Event)
    encoding: tiktoken.Encoding | None = None
    thread: threading.Thread | None = None
    warned: bool = False


_lock = threading.Lock()
_registered: dict[str, tiktoken.Encoding] = {}
_loads: dict[str, _Load] = {}


def register_encoding(name: str, encoding: tiktoken.Encoding) -> None:
    """Use ``encoding`` whenever encoding ``name`` is needed, without downloading it.

    This is the hook for machines without network access whose encoding files are
    not in tiktoken's cache, e.g.
    ``register_encoding("cl100k_base", tiktoken.Encoding(name="cl100k_base", ...))``
    with mergeable ranks read by ``tiktoken.load.load_tiktoken_bpe(local_path)``.

    Args:
        name: The encoding name models map to, e.g. ``"o200k_base"``.
        encoding: The encoding to count with.
    """
    with _lock:
        _registered[name] = encoding


def encoding_name_for(model: str | None) -> str | None:
    """The tiktoken encoding ``model`` uses, or ``None`` if tiktoken does not know it."""
    if model is None:
        return _DEFAULT_ENCODING
    try:
        return tiktoken.encoding_name_for_model(model)
    except KeyError:
        return None


def encoding_for(model: str | None) -> tiktoken.Encoding | None:
    """The loaded encoding for ``model``, or ``None`` when counts must be estimated.

    The first call for an encoding may wait up to five seconds while it loads;
    later calls never block on a load that failed or is stuck.
    """
    name = encoding_name_for(model)
    return None if name is None else _encoding(name)


def estimate_text_tokens(text: str) -> int:
    """A tokenizer-free estimate of the tokens in ``text`` (see the module docstring)."""
    return math.ceil(len(text.encode("utf-8")) / _BYTES_PER_TOKEN)


def count_text_tokens(text: str, model: str | None = None) -> int:
    """Tokens in ``text`` for ``model``: exact when its encoding loads, else estimated."""
    return _text_counter(encoding_for(model))(text)


def count_message_tokens(messages: Sequence[Message], model: str | None = None) -> int:
    """Prompt tokens a conversation would use for ``model``, chat framing included."""
    return _count_messages(messages, _text_counter(encoding_for(model)))


def estimate_message_tokens(messages: Sequence[Message]) -> int:
    """Prompt tokens of a conversation by the estimate, for models with no local tokenizer."""
    return _count_messages(messages, estimate_text_tokens)


def _count_messages(messages: Sequence[Message], count: Callable[[str], int]) -> int:
    total = _TOKENS_PER_REPLY
    for message in messages:
        total += _TOKENS_PER_MESSAGE + count(message.role.value) + count(message.text)
        if message.name:
            total += count(message.name) + _TOKENS_PER_NAME
        if message.tool_call_id:
            total += count(message.tool_call_id)
        for call in message.tool_calls:
            arguments = call.raw_arguments
            if arguments is None:
                arguments = json.dumps(call.arguments, ensure_ascii=False, separators=(",", ":"))
            total += count(call.id) + count(call.name) + count(arguments)
    return total


def _text_counter(encoding: tiktoken.Encoding | None) -> Callable[[str], int]:
    if encoding is None:
        return estimate_text_tokens

    def count(text: str) -> int:
        # Text that spells a special token ("<|endoftext|>") is ordinary text in a
        # prompt, so it is counted as such rather than rejected.
        return len(encoding.encode_ordinary(text))

    return count


def _encoding(name: str) -> tiktoken.Encoding | None:
    with _lock:
        registered = _registered.get(name)
        if registered is not None:
            return registered
        load = _loads.get(name)
        if load is None:
            load = _start_load(name)
    remaining = load.deadline - time.monotonic()
    if not load.done.wait(timeout=max(remaining, 0.0)):
        with _lock:
            warn, load.warned = not load.warned, True
        if warn:
            _log.warning(
                "tiktoken encoding %r is still loading after %.1f s; estimating token counts",
                name,
                _LOAD_TIMEOUT_S,
            )
        return None
    return load.encoding


def _start_load(name: str) -> _Load:
    load = _Load(deadline=time.monotonic() + _LOAD_TIMEOUT_S)

    def run() -> None:
        try:
            load.encoding = tiktoken.get_encoding(name)
        except Exception as exc:
            # Remembered by leaving ``encoding`` unset: a load is never attempted
            # twice, so an offline process pays for the failure once.
            _log.warning(
                "tiktoken encoding %r is unavailable (%s: %s); estimating token counts. "
                "Put its file in TIKTOKEN_CACHE_DIR or call register_encoding() for exact counts.",
                name,
                type(exc).__name__,
                exc,
            )
        finally:
            load.done.set()

    # A daemon thread, because tiktoken's download has no timeout and must not be
    # able to keep the interpreter from exiting.
    load.thread = threading.Thread(target=run, name=f"tiktoken-load-{name}", daemon=True)
    _loads[name] = load
    load.thread.start()
    return load
