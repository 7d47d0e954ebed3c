"""Deltas between encoded states: diff two, apply one, and rebuild a state from a chain.

Deltas keep a run's storage linear in the number of steps instead of
quadratic. A delta is ``{"set": [[path, value], ...], "unset": [path, ...],
"append": [[path, items], ...]}`` (empty parts left out), where a path is a
JSON Pointer (RFC 6901, e.g. ``"/data/notes"``) into the encoded state. Sets
are applied first, then unsets, then appends.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Mapping, Sequence
from typing import Any, Final

from selectgraph.core._errors import CheckpointDecodeError
from selectgraph.core._serialization import TAG, brief
from selectgraph.persistence._checkpoint import Checkpoint

__all__ = ["apply_delta", "apply_delta_in_place", "copy_encoded", "diff_state", "materialize"]

_DIFF_DEPTH: Final = 2
"""How deep :func:`diff_state` looks into dicts (the state, then ``data``/``metadata``);
below that a changed value is stored whole, which is cheaper than long paths."""


def diff_state(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The delta that turns encoded state ``old`` into ``new``.

    Dicts are compared key by key (so one changed ``data`` key costs one
    entry); a list that only grew is stored as its appended tail (messages,
    history, errors); anything else that changed is stored whole.

    Example:
        >>> diff_state({"data": {"a": 1, "b": 2}, "messages": ["hi"]},
        ...            {"data": {"a": 1, "b": 3}, "messages": ["hi", "yo"]})
        {'set': [['/data/b', 3]], 'append': [['/messages', ['yo']]]}
    """
    sets: list[Any] = []
    unsets: list[Any] = []
    appends: list[Any] = []
    _diff(old, new, "", 1, sets, unsets, appends)
    delta: dict[str, Any] = {}
    if sets:
        delta["set"] = sets
    if unsets:
        delta["unset"] = unsets
    if appends:
        delta["append"] = appends
    return delta


def _pointer(prefix: str, key: str) -> str:
    return f"{prefix}/{key.replace('~', '~0').replace('/', '~1')}"


def _diff(
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    prefix: str,
    depth: int,
    sets: list[Any],
    unsets: list[Any],
    appends: list[Any],
) -> None:
    for key, value in new.items():
        if key not in old:
            sets.append([_pointer(prefix, key), value])
            continue
        before = old[key]
        # == is fast (it stops at the first difference or length) but takes True for
        # 1, 1.0 and True alike; those must not be lost, so equal values have their
        # types compared too.
        if before == value and _same_types(before, value):
            continue
        if (
            type(value) is dict
            and type(before) is dict
            and depth < _DIFF_DEPTH
            and TAG not in value
            and TAG not in before
        ):
            _diff(before, value, _pointer(prefix, key), depth + 1, sets, unsets, appends)
        elif (
            type(value) is list
            and type(before) is list
            and len(before) < len(value)
            and value[: len(before)] == before
            # The conversation and history logs are only ever appended to, and checking
            # their types every step would make a long run's diffs quadratic.
            and ((depth == 1 and key in _LOGS) or _same_types(value[: len(before)], before))
        ):
            appends.append([_pointer(prefix, key), value[len(before) :]])
        else:
            sets.append([_pointer(prefix, key), value])
    unsets.extend(_pointer(prefix, key) for key in old if key not in new)


_LOGS: Final = frozenset({"messages", "history"})


def _same_types(a: Any, b: Any) -> bool:
    """Whether two values that compare equal also have the same JSON types throughout."""
    kind = type(a)
    if kind is not type(b):
        return False
    if kind is dict:
        for key, item in a.items():
            other = b[key]
            if type(item) is not type(other) or (
                type(item) in _CONTAINERS and not _same_types(item, other)
            ):
                return False
    elif kind is list:
        for item, other in zip(a, b, strict=True):
            if type(item) is not type(other) or (
                type(item) in _CONTAINERS and not _same_types(item, other)
            ):
                return False
    return True


_CONTAINERS: Final = (dict, list)


def apply_delta(base: Mapping[str, Any], delta: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``delta`` applied; ``base`` itself is not changed.

    Raises:
        CheckpointDecodeError: the delta is malformed (names the part of it).
    """
    state = copy.deepcopy(dict(base))
    _apply(state, delta, "?")
    return state


def apply_delta_in_place(state: dict[str, Any], delta: Any, checkpoint_id: str) -> None:
    """Apply ``delta`` to ``state`` itself (no copy); errors name ``checkpoint_id``.

    Raises:
        CheckpointDecodeError: the delta is malformed (names the part of it).
    """
    _apply(state, delta, checkpoint_id)


def _apply(state: dict[str, Any], delta: Any, checkpoint_id: str) -> None:
    def fail(where: str, reason: str) -> CheckpointDecodeError:
        return CheckpointDecodeError(checkpoint_id, f"values{where}", reason)

    if type(delta) is not dict:
        raise fail("", f"a delta must be an object, got {brief(delta)}")
    unknown = delta.keys() - {"set", "unset", "append"}
    if unknown:
        raise fail("", f"a delta has only set, unset and append, not {sorted(unknown)}")

    def container(pointer: Any, where: str) -> tuple[dict[str, Any], str]:
        if type(pointer) is not str or not pointer.startswith("/"):
            raise fail(
                where, f"a path must be a JSON Pointer like '/data/key', got {brief(pointer)}"
            )
        keys = [k.replace("~1", "/").replace("~0", "~") for k in pointer[1:].split("/")]
        target = state
        for i, key in enumerate(keys[:-1]):
            inner = target.get(key)
            if type(inner) is not dict:
                raise fail(where, f"{'/'.join(['', *keys[: i + 1]])} is not an object")
            target = inner
        return target, keys[-1]

    for part in ("set", "append"):
        entries = delta.get(part, [])
        if type(entries) is not list:
            raise fail(f".{part}", f"expected a list, got {brief(entries)}")
        for i, entry in enumerate(entries):
            where = f".{part}[{i}]"
            if type(entry) is not list or len(entry) != 2:
                raise fail(where, f"expected [path, value], got {brief(entry)}")
            target, key = container(entry[0], where)
            if part == "set":
                target[key] = entry[1]
            elif type(target.get(key)) is not list or type(entry[1]) is not list:
                raise fail(where, f"cannot append to {entry[0]}: not a list")
            else:
                target[key].extend(entry[1])
        if part == "set":  # unset goes between: a key is removed after sets, before appends
            unsets = delta.get("unset", [])
            if type(unsets) is not list:
                raise fail(".unset", f"expected a list, got {brief(unsets)}")
            for i, path in enumerate(unsets):
                target, key = container(path, f".unset[{i}]")
                target.pop(key, None)


def materialize(chain: Sequence[Checkpoint], *, owned: bool = False) -> dict[str, Any]:
    """The full encoded state at the last checkpoint of ``chain``.

    Args:
        chain: A snapshot followed by the deltas that come after it, in order
            (each one's ``parent_id`` the previous one's id).
        owned: The chain was just loaded and nobody else holds it, so its
            values may become part of the result instead of being copied.

    Raises:
        CheckpointDecodeError: the chain does not start with a snapshot, a link
            is broken, or a delta is malformed.
    """
    if not chain:
        raise ValueError("materialize needs at least one checkpoint")
    first = chain[0]
    if first.kind != "snapshot":
        raise CheckpointDecodeError(
            first.checkpoint_id,
            "parent_id",
            f"its parent {first.parent_id!r} is missing",
            run_id=first.run_id,
        )

    def take(values: dict[str, Any]) -> dict[str, Any]:
        return values if owned else copy.deepcopy(values)

    state = take(first.values)
    for before, checkpoint in itertools.pairwise(chain):
        if checkpoint.parent_id != before.checkpoint_id:
            raise CheckpointDecodeError(
                checkpoint.checkpoint_id,
                "parent_id",
                f"expected {before.checkpoint_id!r}, found {checkpoint.parent_id!r}",
                run_id=checkpoint.run_id,
            )
        if checkpoint.kind == "delta" and before.run_id != checkpoint.run_id:
            # A delta is only ever written against its own run's previous state (a fork
            # starts with a snapshot): a parent in another run is a record moved or edited.
            raise CheckpointDecodeError(
                checkpoint.checkpoint_id,
                "parent_id",
                f"a delta's parent {before.checkpoint_id!r} belongs to run {before.run_id!r}",
                run_id=checkpoint.run_id,
            )
        if checkpoint.kind == "snapshot":
            state = take(checkpoint.values)
        else:
            _apply(state, take(checkpoint.values), checkpoint.checkpoint_id)
    return state


def copy_encoded(state: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of an encoded state that later changes to ``state`` cannot reach.

    Encoded values are replaced, never changed in place, by whoever keeps a
    live encoded state; only its containers (``data``, ``history``...) need
    copying, which is far cheaper than a deep copy.
    """
    return {
        key: dict(value) if type(value) is dict else list(value) if type(value) is list else value
        for key, value in state.items()
    }
