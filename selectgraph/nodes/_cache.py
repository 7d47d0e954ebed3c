"""Node caching: a node given an input it has already run on returns its recorded output.

:class:`CachingAdapter` wraps any node's adapter (function, agent, graph). On a
miss it runs the node and records everything the node wrote — the update it
returned, its writes through the view (whole-value assignments, deletions,
messages, metadata), a goto() target, an agent's result — encoded with the
library serializer. On a hit it hands the runner that same output without
running the node, so reducers, declared writes and routing behave exactly as
they did the first time, and emits :class:`~selectgraph.observe.NodeCacheHit`.

What is not cached, and why:

- a run that raised (nothing to replay; the next visit tries again);
- an output the serializer cannot encode, or encodes into something this
  graph's serializer cannot restore (logged; the node's result is still used);
- an input the default key cannot encode (logged; the node simply runs).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from typing import Any, Final

from selectgraph.core._callables import callable_name, is_generator_callable
from selectgraph.core._errors import StateDecodeError, StateSerializationError
from selectgraph.core._sentinels import END
from selectgraph.core._serialization import StateSerializer, default_serializer
from selectgraph.nodes._output import read_output
from selectgraph.nodes._spec import NodeAdapter, NodeContext, NodeSpec
from selectgraph.observe._events import NodeCacheHit
from selectgraph.persistence._node_cache import CachePolicy, NodeCache
from selectgraph.state._output import NodeOutput
from selectgraph.state._views import StateView, ViewWrites

__all__ = ["CachingAdapter", "check_cacheable", "serializer_for"]

logger = logging.getLogger("selectgraph")

_FORMAT: Final = 1
"""Version of the stored entry layout; an entry of another version is a miss."""

_SET_FIELDS: Final = ("deletions", "metadata_deletions")
_LIST_FIELDS: Final = ("messages", "history")
_DICT_FIELDS: Final = ("assignments", "metadata")


def check_cacheable(name: str, node: Any) -> None:
    """Refuse a cache on a node that may pause for human input.

    Raises:
        TypeError: ``node`` is a generator function (a human-in-the-loop node):
            replaying its output would skip the question it asks.
    """
    if is_generator_callable(node):
        raise TypeError(
            f"node {name!r}: {callable_name(node)} is a generator function (it may pause "
            "for human input), and a cached output would skip its questions; remove "
            "cache=, or cache the expensive work in a separate function node"
        )


def serializer_for(state_schema: Any) -> StateSerializer:
    """The serializer that restores cached outputs: library types plus the schema's own."""
    if state_schema is None:
        return default_serializer()
    try:
        return StateSerializer(state_schema=state_schema)
    except TypeError:  # a schema type defined in a function: restore library types only
        return default_serializer()


class CachingAdapter:
    """Runs ``inner`` on a cache miss; on a hit returns the output recorded for the input.

    Args:
        inner: The node's own adapter.
        node: The node's name.
        graph: The graph's name (part of every store key, so graphs sharing a
            store never see each other's entries).
        policy: The node's TTL and key function.
        store: Where entries live.
        serializer: Encodes outputs (and the default key) and restores them.
        reads: The node's declared reads: the default key covers only those.
        writes: The node's required outputs, checked before anything is cached.
        optional_writes: The node's optional outputs.

    Raises:
        TypeError: ``inner`` is a generator node.
    """

    def __init__(
        self,
        inner: NodeAdapter,
        *,
        node: str,
        graph: str,
        policy: CachePolicy,
        store: NodeCache,
        serializer: StateSerializer | None = None,
        reads: frozenset[str] | None = None,
        writes: frozenset[str] | None = None,
        optional_writes: frozenset[str] = frozenset(),
    ) -> None:
        fn = getattr(inner, "fn", None)
        if fn is not None:
            check_cacheable(node, fn)
        self.inner = inner
        """The wrapped adapter."""
        self.kind = inner.kind
        self.is_async = inner.is_async
        self.executor_retries = inner.executor_retries
        self.wants_context = True  # a hit is emitted through the context
        self.node = node
        self.graph = graph
        self.policy = policy
        self.store = store
        self.serializer = serializer or default_serializer()
        self.reads = reads
        # The agent's prompt is built from the conversation, so its key covers it.
        self._keys_messages = inner.kind == "agent"
        # Checked on a miss, so an output breaking the node's contract is never cached.
        self._spec = NodeSpec(
            name=node, adapter=inner, reads=reads, writes=writes, optional_writes=optional_writes
        )

    def __repr__(self) -> str:
        return f"CachingAdapter({self.inner!r}, ttl={self.policy.ttl!r})"

    async def __call__(self, state: StateView, context: NodeContext | None) -> Any:
        key = self.key_for(state)
        store_key = None if key is None else json.dumps([self.graph, self.node, key])
        if store_key is not None:
            cached = self._lookup(store_key)
            if cached is not None:
                if context is not None:
                    context.publish(NodeCacheHit, node=self.node, key=key or "")
                return cached
        inner = self.inner
        raw = await inner(state, context if inner.wants_context else None)
        # Normalised here, with the view the node wrote through, so that what is
        # cached is exactly what the runner merges.
        output = read_output(raw, state, self._spec)
        if store_key is not None:
            self._remember(store_key, output)
        return output

    # ------------------------------------------------------------------ keys
    def key_for(self, state: StateView) -> str | None:
        """The cache key of ``state`` for this node; ``None`` when the input cannot be keyed.

        Raises:
            TypeError: the policy's key function returned something other than a str.
        """
        live = state._live  # the engine's state: read without building copies
        custom = self.policy.key
        if custom is not None:
            # A read-only view: a key function must not write the node's state.
            key = custom(StateView(live, self.node, reads=self.reads, readonly=True))
            if not isinstance(key, str):
                raise TypeError(
                    f"node {self.node!r}: the cache key function {callable_name(custom)} "
                    f"returned {type(key).__name__} {key!r}; it must return a str"
                )
            return key
        data: Mapping[str, Any] = live.data
        if self.reads is not None:
            data = {name: data[name] for name in sorted(self.reads) if name in data}
        payload: dict[str, Any] = {"data": dict(data)}
        if self._keys_messages:
            payload["messages"] = list(live.messages)
        try:
            encoded = self.serializer.encode(payload, "state")
        except StateSerializationError as exc:
            logger.warning("selectgraph: node %r runs uncached: %s", self.node, exc)
            return None
        text = json.dumps(encoded, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        digest = hashlib.sha256(self.node.encode())
        digest.update(b"\0")
        digest.update(text.encode())
        return digest.hexdigest()

    # ---------------------------------------------------------------- entries
    def _lookup(self, store_key: str) -> NodeOutput | None:
        stored = self.store.get(store_key)
        if not isinstance(stored, dict) or stored.get("format") != _FORMAT:
            return None
        try:
            entry = self.serializer.decode(stored["entry"], f"cached output of {self.node!r}")
            return _output_from(entry)
        except (StateDecodeError, KeyError, TypeError, ValueError) as exc:
            # Written by another version, or naming a type this graph does not allow.
            logger.warning("selectgraph: ignoring cached output of node %r: %s", self.node, exc)
            return None

    def _remember(self, store_key: str, output: NodeOutput) -> None:
        where = f"output of node {self.node!r}"
        try:
            encoded = self.serializer.encode(_entry_of(output), where)
            # Cache only what this graph can restore: an entry naming a type the
            # serializer does not allow would be a miss every time.
            self.serializer.decode(encoded, where)
        except (StateSerializationError, StateDecodeError) as exc:
            logger.warning("selectgraph: node %r output not cached: %s", self.node, exc)
            return
        self.store.set(store_key, {"format": _FORMAT, "entry": encoded}, self.policy.ttl)


def _entry_of(output: NodeOutput) -> dict[str, Any]:
    """What is kept of ``output``: plain containers the serializer encodes."""
    entry: dict[str, Any] = {"update": dict(output.update)}
    goto = output.goto
    if goto is END:
        entry["end"] = True
    elif goto is not None:
        entry["goto"] = goto
    writes = output.writes
    if writes is not None and not writes.is_empty():
        stored: dict[str, Any] = {}
        for name in _DICT_FIELDS:
            value = getattr(writes, name)
            if value:
                stored[name] = dict(value)
        for name in _SET_FIELDS:
            value = getattr(writes, name)
            if value:
                stored[name] = sorted(value)
        for name in _LIST_FIELDS:
            value = getattr(writes, name)
            if value:
                stored[name] = list(value)
        entry["writes"] = stored
    if output.agent_result is not None:
        entry["agent_result"] = output.agent_result
    return entry


def _output_from(entry: dict[str, Any]) -> NodeOutput:
    """The NodeOutput recorded in ``entry``; no usage, since nothing was spent this time."""
    writes = None
    stored = entry.get("writes")
    if stored:
        writes = ViewWrites(
            assignments=dict(stored.get("assignments", {})),
            deletions=set(stored.get("deletions", ())),
            messages=list(stored.get("messages", ())),
            history=list(stored.get("history", ())),
            metadata=dict(stored.get("metadata", {})),
            metadata_deletions=set(stored.get("metadata_deletions", ())),
        )
    goto = END if entry.get("end") else entry.get("goto")
    return NodeOutput(dict(entry["update"]), writes, goto, agent_result=entry.get("agent_result"))
