"""Conversations: which thread an OpenAI-style request continues.

Chat Completions clients keep no conversation id: each request resends the whole
history. So after each turn the server records, in the thread's metadata, a digest
of the conversation so far (the messages, then the reply as the client received
it); a request whose earlier messages digest to a recorded conversation continues
that thread, with only its last user message as the new input. A thread named
explicitly wins (the ``X-Thread-Id`` header, ``metadata.thread_id``, the Responses
API's ``conversation`` or ``previous_response_id``). Anything else starts a thread.

Digests are kept in the store (so a restarted server, or another one on the same
store, finds them), which is the source of truth: memory remembers which thread a
digest named, to read that one thread instead of searching, and a thread whose
stored digest moved on (another server went on with it) is not continued.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from typing import Final

from selectgraph.persistence._threads import ThreadStore
from selectgraph.serve._http import ApiError
from selectgraph.serve._turns import ServedGraph

__all__ = [
    "DIGEST_KEY",
    "Conversations",
    "Exchange",
    "digest",
    "response_id",
    "thread_of_response",
]

DIGEST_KEY: Final = "openai_conversation"
"""The thread metadata key holding the digest of its conversation so far."""
_REMEMBERED: Final = 10_000
"""Digests remembered in memory (the store keeps them all)."""
_RESPONSE_PREFIX: Final = "resp_"

Exchange = Sequence[tuple[str, str]]
"""A conversation as (role, text) pairs, oldest first."""


def digest(graph: str, messages: Exchange) -> str:
    """The digest of a conversation with the graph named ``graph``."""
    roles = [("system" if role == "developer" else role, text) for role, text in messages]
    data = json.dumps([graph, roles], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(data.encode()).hexdigest()


def response_id(thread_id: str) -> str:
    """A fresh Responses API id that names its thread, so a follow-up can find it."""
    encoded = base64.urlsafe_b64encode(thread_id.encode()).decode().rstrip("=")
    return f"{_RESPONSE_PREFIX}{uuid.uuid4().hex}{encoded}"


def thread_of_response(value: str) -> str:
    """The thread of a response id :func:`response_id` made.

    Raises:
        ApiError: 400, the id is not one this server gave.
    """
    start = len(_RESPONSE_PREFIX) + 32
    encoded = value[start:]
    try:
        if not value.startswith(_RESPONSE_PREFIX) or not encoded:
            raise ValueError(value)
        padded = encoded + "=" * (-len(encoded) % 4)
        return base64.urlsafe_b64decode(padded.encode()).decode()
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise ApiError(
            400,
            f"previous_response_id {value[:80]!r} is not the id of a response from this server",
            param="previous_response_id",
        ) from None


class Conversations:
    """The threads of one served graph's conversations, found by their digests."""

    def __init__(self, served: ServedGraph) -> None:
        self.served = served
        self._known: OrderedDict[str, str] = OrderedDict()
        self._latest: dict[str, str] = {}  # thread -> its digest in _known

    async def thread_for(self, history: Exchange) -> str | None:
        """The thread whose recorded conversation is ``history``, or None."""
        if not history:
            return None
        key = digest(self.served.name, history)
        store = self.served.store
        assert isinstance(store, ThreadStore)  # ServedGraph refuses stores without threads
        found = self._known.get(key)
        if found is not None:
            # The store has the last word: another server on it may have gone on with
            # the thread since, and then this history is an older one.
            thread = await store.aget_thread(found)
            if thread is not None and thread.metadata.get(DIGEST_KEY) == key:
                return found
            self._forget(found)
        threads = await store.alist_threads(metadata={DIGEST_KEY: key}, limit=1)
        if not threads:
            return None
        self._remember(key, threads[0].thread_id)
        return threads[0].thread_id

    async def record(self, thread_id: str, conversation: Exchange) -> None:
        """Remember that ``thread_id`` holds ``conversation`` (its reply included)."""
        key = digest(self.served.name, conversation)
        store = self.served.store
        assert isinstance(store, ThreadStore)
        if await store.aget_thread(thread_id) is None:
            return  # no run claimed it (a cancelled turn): nothing to continue
        await store.aupdate_thread(thread_id, metadata={DIGEST_KEY: key})
        # The thread holds only its latest conversation, in memory as in the store: an
        # older history (a client retrying an earlier turn) starts a thread of its own.
        self._remember(key, thread_id)

    def _remember(self, key: str, thread_id: str) -> None:
        """Note that ``thread_id`` holds the conversation ``key`` (and no older one)."""
        self._forget(thread_id)
        self._known[key] = thread_id
        self._latest[thread_id] = key
        while len(self._known) > _REMEMBERED:
            _, dropped = self._known.popitem(last=False)
            self._latest.pop(dropped, None)

    def _forget(self, thread_id: str) -> None:
        previous = self._latest.pop(thread_id, None)
        if previous is not None:
            self._known.pop(previous, None)
