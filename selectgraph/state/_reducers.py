"""Reducers: how a node's update to one state field combines with the field's current value.

Each reducer is a plain callable ``reducer(current, update) -> new`` that never
mutates its inputs. Built-in reducers also implement a two-phase engine path:
``plan`` validates the update and prepares the change without touching state
(so a failure leaves the state exactly as it was), and ``apply`` commits it in
place on the engine's own containers, so appending to a 10,000-item list costs
as much as appending to an empty one.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from selectgraph.core._errors import ReducerConfigurationError
from selectgraph.state._fingerprint import (
    dict_merge_fingerprint,
    fingerprint,
    list_drop_front_fingerprint,
    list_extend_fingerprint,
    list_replace_fingerprint,
)

__all__ = [
    "MISSING",
    "Reducer",
    "append",
    "as_reducer",
    "bounded_append",
    "concat_flatten",
    "dedupe_append",
    "last_write_wins",
    "merge",
    "merge_all",
    "merge_by_key",
    "reducer",
]

F = TypeVar("F", bound=Callable[[Any, Any], Any])


class _Missing:
    """Marks a field that has no value yet."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()
"""``current`` for a field that has no value yet (the engine passes ``None`` to custom reducers)."""


class Reducer:
    """A named merge rule for one state field.

    Subclasses implement :meth:`__call__`; built-ins override the engine hooks
    ``plan`` / ``apply`` / ``fingerprint_after`` for O(update) merges.
    """

    name: str = "reducer"
    """Shown in errors, diagrams and diagnostics."""
    round_trip_idempotent: bool = False
    """Merging a value that is already merged in changes nothing (see subgraph projection)."""
    concatenates: bool = False
    """Merging list updates one after another equals merging their concatenation once
    (a join merges many branches' updates of such a field in one go)."""
    merges_dicts: bool = False
    """An update is a dict whose items are merged into the field's dict."""

    def __call__(self, current: Any, update: Any) -> Any:
        """Return the merged value; never mutates ``current`` or ``update``."""
        raise NotImplementedError

    def plan(self, current: Any, update: Any, scratch: Any) -> Any:
        """Validate ``update`` and prepare the change; must not mutate anything.

        The default computes the whole new value with :meth:`__call__`.
        """
        return self(None if current is MISSING else current, update)

    def apply(self, current: Any, plan: Any, scratch: Any) -> tuple[Any, Any]:
        """Commit a plan, returning ``(new_value, new_scratch)``.

        May mutate ``current``, which the engine owns.
        """
        return plan, None

    def fingerprint_after(self, old: int, current: Any, plan: Any) -> int:
        """The field's fingerprint once ``plan`` is applied; called before :meth:`apply`."""
        return fingerprint(plan)

    def starting_from(self, start: Callable[[], Any]) -> Reducer:
        """This reducer for a field that, with no value yet, starts from ``start()``.

        Built-in reducers already know where they start; a user function gets
        ``start()`` instead of ``None`` (see :class:`_FunctionReducer`).
        """
        return self

    def __repr__(self) -> str:
        return self.name


class _FunctionReducer(Reducer):
    """A user function ``(current, update) -> new`` used as a reducer."""

    def __init__(
        self,
        fn: Callable[[Any, Any], Any],
        name: str,
        idempotent: bool,
        start: Callable[[], Any] | None = None,
    ) -> None:
        self._fn = fn
        self.name = name
        self.round_trip_idempotent = idempotent
        self._start = start

    def starting_from(self, start: Callable[[], Any]) -> _FunctionReducer:
        """This reducer, given ``start()`` instead of ``None`` for a field with no value yet.

        How a typed field with a binary-operator reducer begins, as in LangGraph:
        ``Annotated[list, operator.add]`` starts from ``[]``.
        """
        return _FunctionReducer(self._fn, self.name, self.round_trip_idempotent, start)

    def __call__(self, current: Any, update: Any) -> Any:
        if current is None and self._start is not None:
            current = self._start()
        return self._fn(current, update)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _FunctionReducer) and other._fn is self._fn

    def __hash__(self) -> int:
        return hash(self._fn)


def reducer(fn: F | None = None, *, name: str | None = None, idempotent: bool = False) -> Any:
    """Turn a function ``(current, update) -> new`` into a named reducer.

    Usable bare (``@reducer``) or with arguments (``@reducer(idempotent=True)``).
    ``current`` is ``None`` when the field has no value yet. The function must
    not mutate ``current``.

    Args:
        fn: The merge function.
        name: Display name; defaults to the function's name.
        idempotent: Merging an already-merged value is a no-op (silences the
            subgraph round-trip warning).
    """

    def wrap(function: Callable[[Any, Any], Any]) -> Reducer:
        label = name or str(getattr(function, "__name__", type(function).__name__))
        return _FunctionReducer(function, label, idempotent)

    return wrap(fn) if fn is not None else wrap


_OPERATOR_NAMES: Final = {operator.add: "add", operator.or_: "or_", operator.concat: "concat"}


def as_reducer(candidate: Any) -> Reducer | None:
    """The reducer ``candidate`` stands for, or ``None`` if it is not one."""
    if isinstance(candidate, Reducer):
        return candidate
    if callable(candidate) and not isinstance(candidate, type):
        name = _OPERATOR_NAMES.get(candidate) or getattr(candidate, "__name__", None)
        return _FunctionReducer(candidate, name or repr(candidate), idempotent=False)
    return None


def _describe(value: Any) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


def _require_list(value: Any, role: str, reducer_name: str) -> list[Any]:
    if type(value) is list:
        return value  # no copy: callers only read it
    if isinstance(value, list | tuple):
        return list(value)
    raise TypeError(
        f"{reducer_name} needs a list as the {role}, got {_describe(value)}"
        + ("; wrap a single item in a list: [item]" if role == "update" else "")
    )


def _require_mapping(value: Any, role: str, reducer_name: str) -> Mapping[Any, Any]:
    if isinstance(value, Mapping):
        return value
    raise TypeError(f"{reducer_name} needs a mapping as the {role}, got {_describe(value)}")


class _LastWriteWins(Reducer):
    name = "last_write_wins"
    round_trip_idempotent = True

    def __call__(self, current: Any, update: Any) -> Any:
        return update


class _ListExtend(Reducer):
    """Shared engine path of the reducers whose plan is "extend the list by these items"."""

    concatenates = True

    def _current_list(self, current: Any) -> list[Any]:
        if current is MISSING or current is None:
            return []
        return _require_list(current, "current value", self.name)

    def apply(self, current: Any, plan: Any, scratch: Any) -> tuple[Any, Any]:
        if current is MISSING or current is None:
            return list(plan), None
        if type(current) is not list:  # e.g. a tuple from a checkpoint: own a list
            current = list(current)
        current.extend(plan)
        return current, None

    def fingerprint_after(self, old: int, current: Any, plan: Any) -> int:
        if current is MISSING or current is None:
            return fingerprint(list(plan))
        if type(current) is not list:
            return fingerprint([*current, *plan])
        return list_extend_fingerprint(old, plan)


class _Append(_ListExtend):
    name = "append"

    def __call__(self, current: Any, update: Any) -> Any:
        items = _require_list(update, "update", self.name)
        return [*self._current_list(MISSING if current is None else current), *items]

    def plan(self, current: Any, update: Any, scratch: Any) -> Any:
        if type(update) is list and (current is MISSING or type(current) is list):
            return update  # the usual case, checked without the helpers below
        self._current_list(current)
        return _require_list(update, "update", self.name)


class _ConcatFlatten(_ListExtend):
    name = "concat_flatten"

    def __call__(self, current: Any, update: Any) -> Any:
        return [*self._current_list(MISSING if current is None else current), *self._flat(update)]

    def _flat(self, update: Any) -> list[Any]:
        groups = _require_list(update, "update", self.name)
        flat: list[Any] = []
        for i, group in enumerate(groups):
            if not isinstance(group, list | tuple):
                raise TypeError(
                    f"concat_flatten needs a list of lists; update[{i}] is {_describe(group)}"
                )
            flat.extend(group)
        return flat

    def plan(self, current: Any, update: Any, scratch: Any) -> Any:
        self._current_list(current)
        return self._flat(update)


@dataclass(frozen=True, slots=True)
class _BoundedPlan:
    items: list[Any]
    drop: int


class _BoundedAppend(_ListExtend):
    def __init__(self, max_len: int) -> None:
        if isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < 1:
            raise ReducerConfigurationError(
                f"bounded_append(max_len={max_len!r}): max_len must be an integer >= 1"
            )
        self.max_len = max_len
        self.name = f"bounded_append(max_len={max_len})"

    def __call__(self, current: Any, update: Any) -> Any:
        prior = self._current_list(MISSING if current is None else current)
        items = _require_list(update, "update", self.name)
        if not items:
            return prior
        return [*prior, *items][-self.max_len :]

    def plan(self, current: Any, update: Any, scratch: Any) -> Any:
        prior = self._current_list(current)
        items = _require_list(update, "update", self.name)
        drop = max(0, len(prior) + len(items) - self.max_len) if items else 0
        return _BoundedPlan(items, drop)

    def apply(self, current: Any, plan: Any, scratch: Any) -> tuple[Any, Any]:
        value, _ = super().apply(current, plan.items, scratch)
        if plan.drop:
            del value[: plan.drop]
        return value, None

    def fingerprint_after(self, old: int, current: Any, plan: Any) -> int:
        prior = [] if current is MISSING or current is None else current
        extended = super().fingerprint_after(old, current, plan.items)
        if not plan.drop:
            return extended
        head = prior[: plan.drop]
        if len(head) < plan.drop:
            head = [*head, *plan.items[: plan.drop - len(head)]]
        return list_drop_front_fingerprint(extended, head, len(prior) + len(plan.items))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _BoundedAppend) and other.max_len == self.max_len

    def __hash__(self) -> int:
        return hash(("bounded_append", self.max_len))


def _itself(item: Any) -> Hashable:
    return item  # type: ignore[no-any-return]


def _item_key(key_of: Callable[[Any], Hashable], item: Any, role: str, index: int) -> Hashable:
    """``key_of(item)``, checked hashable; a failure names the item (``update[3]``)."""
    try:
        key = key_of(item)
        hash(key)
    except KeyError as exc:
        missing = exc.args[0] if exc.args else None
        raise LookupError(f"{role}[{index}] has no key {missing!r}: {_describe(item)}") from exc
    except TypeError as exc:
        raise TypeError(f"the key of {role}[{index}] is unhashable or invalid: {exc}") from exc
    except Exception as exc:
        raise ValueError(
            f"the key function failed on {role}[{index}]: {type(exc).__name__}: {exc}"
        ) from exc
    return key


def _key_function(key: Any, reducer_name: str) -> Callable[[Any], Hashable]:
    if isinstance(key, str):
        field_name = key

        def by_field(item: Any) -> Hashable:
            if isinstance(item, Mapping):
                return item[field_name]  # type: ignore[no-any-return]
            try:
                return getattr(item, field_name)  # type: ignore[no-any-return]
            except AttributeError:
                raise KeyError(field_name) from None

        return by_field
    if callable(key):
        return key  # type: ignore[no-any-return]
    raise ReducerConfigurationError(
        f"{reducer_name}: key must be a callable or a field name, got {key!r}"
    )


@dataclass(slots=True)
class _SeenKeys:
    """Per-run index of the keys already in a list field (for dedupe_append)."""

    target: list[Any]
    length: int
    keys: set[Hashable] = field(default_factory=set)


class _DedupeAppend(_ListExtend):
    def __init__(self, key: Any = None) -> None:
        self._key_spec = key
        self._key = None if key is None else _key_function(key, "dedupe_append")
        self.name = "dedupe_append" if key is None else f"dedupe_append(key={key!r})"

    round_trip_idempotent = True

    def _key_of(self, item: Any, role: str, index: int) -> Hashable:
        # Checked hashable here: a clear error now beats a confusing one inside a set.
        return _item_key(_itself if self._key is None else self._key, item, role, index)

    def _seen(self, current: list[Any], scratch: Any) -> set[Hashable]:
        if (
            isinstance(scratch, _SeenKeys)
            and scratch.target is current
            and scratch.length == len(current)
        ):
            return scratch.keys
        return {self._key_of(item, "current value", i) for i, item in enumerate(current)}

    def __call__(self, current: Any, update: Any) -> Any:
        prior = self._current_list(MISSING if current is None else current)
        items, _ = self._filter(self._seen(prior, None), update)
        return [*prior, *items]

    def _filter(self, seen: set[Hashable], update: Any) -> tuple[list[Any], list[Hashable]]:
        new_items: list[Any] = []
        new_keys: list[Hashable] = []
        fresh: set[Hashable] = set()
        for index, item in enumerate(_require_list(update, "update", self.name)):
            key = self._key_of(item, "update", index)
            if key in seen or key in fresh:
                continue
            fresh.add(key)
            new_items.append(item)
            new_keys.append(key)
        return new_items, new_keys

    def plan(self, current: Any, update: Any, scratch: Any) -> Any:
        prior = self._current_list(current)
        seen = self._seen(prior, scratch)
        items, keys = self._filter(seen, update)
        return (items, keys, seen)

    def apply(self, current: Any, plan: Any, scratch: Any) -> tuple[Any, Any]:
        items, keys, seen = plan
        value, _ = super().apply(current, items, scratch)
        seen.update(keys)
        return value, _SeenKeys(value, len(value), seen)

    def fingerprint_after(self, old: int, current: Any, plan: Any) -> int:
        return super().fingerprint_after(old, current, plan[0])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _DedupeAppend) and other._key_spec == self._key_spec

    def __hash__(self) -> int:
        return hash(("dedupe_append", repr(self._key_spec)))


@dataclass(slots=True)
class _KeyIndex:
    """Per-run index from record key to position (for merge_by_key)."""

    target: list[Any]
    length: int
    positions: dict[Hashable, int]


@dataclass(frozen=True, slots=True)
class _KeyedPlan:
    replacements: dict[int, Any]
    appended: list[Any]
    appended_keys: list[Hashable]
    positions: dict[Hashable, int]


class _MergeByKey(Reducer):
    round_trip_idempotent = True

    def __init__(self, key: Any) -> None:
        if key is None:
            raise ReducerConfigurationError(
                "merge_by_key(key=None): a keyed merge needs a key (a callable or a field name)"
            )
        self._key_spec = key
        self._key = _key_function(key, "merge_by_key")
        self.name = f"merge_by_key(key={key!r})"

    def _key_of(self, item: Any, role: str, index: int) -> Hashable:
        return _item_key(self._key, item, role, index)

    def _positions(self, current: list[Any], scratch: Any) -> dict[Hashable, int]:
        if (
            isinstance(scratch, _KeyIndex)
            and scratch.target is current
            and scratch.length == len(current)
        ):
            return scratch.positions
        positions: dict[Hashable, int] = {}
        for index, item in enumerate(current):  # explicit loop: the LAST duplicate wins
            positions[self._key_of(item, "current value", index)] = index
        return positions

    def _prior(self, current: Any) -> list[Any]:
        if current is MISSING or current is None:
            return []
        return _require_list(current, "current value", self.name)

    def plan(self, current: Any, update: Any, scratch: Any) -> Any:
        prior = self._prior(current)
        positions = self._positions(prior, scratch)
        replacements: dict[int, Any] = {}
        appended: list[Any] = []
        appended_keys: list[Hashable] = []
        novel: dict[Hashable, int] = {}
        for index, item in enumerate(_require_list(update, "update", self.name)):
            key = self._key_of(item, "update", index)
            if key in positions:
                replacements[positions[key]] = item
            elif key in novel:
                appended[novel[key]] = item  # duplicate within the update: last wins
            else:
                novel[key] = len(appended)
                appended.append(item)
                appended_keys.append(key)
        return _KeyedPlan(replacements, appended, appended_keys, positions)

    def __call__(self, current: Any, update: Any) -> Any:
        prior = self._prior(current)
        plan = self.plan(prior, update, None)
        merged = list(prior)
        for index, item in plan.replacements.items():
            merged[index] = item
        merged.extend(plan.appended)
        return merged

    def apply(self, current: Any, plan: Any, scratch: Any) -> tuple[Any, Any]:
        value = [] if current is MISSING or current is None else current
        if type(value) is not list:
            value = list(value)
        for index, item in plan.replacements.items():
            value[index] = item
        positions = plan.positions
        for offset, key in enumerate(plan.appended_keys):
            positions[key] = len(value) + offset
        value.extend(plan.appended)
        return value, _KeyIndex(value, len(value), positions)

    def fingerprint_after(self, old: int, current: Any, plan: Any) -> int:
        if current is MISSING or current is None:
            return fingerprint(list(plan.appended))
        if type(current) is not list:
            return fingerprint(self(current, [*plan.replacements.values(), *plan.appended]))
        result = old
        for index, item in plan.replacements.items():
            result = list_replace_fingerprint(result, index, current[index], item, len(current))
        return list_extend_fingerprint(result, plan.appended)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _MergeByKey) and other._key_spec == self._key_spec

    def __hash__(self) -> int:
        return hash(("merge_by_key", repr(self._key_spec)))


class _DictMerge(Reducer):
    """Shared engine path of the reducers whose plan is "update the dict with these items"."""

    merges_dicts = True

    def _prior(self, current: Any) -> Mapping[Any, Any]:
        if current is MISSING or current is None:
            return {}
        return _require_mapping(current, "current value", self.name)

    def apply(self, current: Any, plan: Any, scratch: Any) -> tuple[Any, Any]:
        if current is MISSING or current is None:
            return dict(plan), None
        if type(current) is not dict:  # e.g. a mappingproxy: own a dict
            current = dict(current)
        current.update(plan)
        return current, None

    def fingerprint_after(self, old: int, current: Any, plan: Any) -> int:
        if current is MISSING or current is None:
            return fingerprint(dict(plan))
        if type(current) is not dict:
            return fingerprint({**current, **plan})
        return dict_merge_fingerprint(old, current, plan)


class _Merge(_DictMerge):
    name = "merge"
    round_trip_idempotent = True

    def __call__(self, current: Any, update: Any) -> Any:
        return {**self._prior(current), **_require_mapping(update, "update", self.name)}

    def plan(self, current: Any, update: Any, scratch: Any) -> Any:
        self._prior(current)
        return dict(_require_mapping(update, "update", self.name))


class _MergeAll(_DictMerge):
    name = "merge_all"

    def _fold(self, update: Any) -> dict[Any, Any]:
        folded: dict[Any, Any] = {}
        for i, part in enumerate(_require_list(update, "update", self.name)):
            if not isinstance(part, Mapping):
                raise TypeError(
                    f"merge_all needs a list of mappings; update[{i}] is {_describe(part)}"
                )
            folded.update(part)
        return folded

    def __call__(self, current: Any, update: Any) -> Any:
        return {**self._prior(current), **self._fold(update)}

    def plan(self, current: Any, update: Any, scratch: Any) -> Any:
        self._prior(current)
        return self._fold(update)


last_write_wins: Final[Reducer] = _LastWriteWins()
"""The default: the update replaces the current value."""

append: Final[Reducer] = _Append()
"""Extend a list with the update's items (the update must be a list)."""

merge: Final[Reducer] = _Merge()
"""Shallow dict merge; the update's keys win."""

concat_flatten: Final[Reducer] = _ConcatFlatten()
"""Extend a list with the items of each list in the update (a list of lists)."""

merge_all: Final[Reducer] = _MergeAll()
"""Fold a list of dicts into the current dict, later dicts winning."""


def bounded_append(max_len: int) -> Reducer:
    """Append, then drop the oldest items so at most ``max_len`` remain.

    The bound is applied when items are added: an empty update leaves the list
    as it is, even if it was already longer (OpenArmature's rule).

    Raises:
        ReducerConfigurationError: ``max_len`` is not an integer >= 1.
    """
    return _BoundedAppend(max_len)


def dedupe_append(key: Callable[[Any], Hashable] | str | None = None) -> Reducer:
    """Append only items whose key is not already present (first occurrence wins).

    Args:
        key: Maps an item to its identity: a callable, or the name of a
            dict key / attribute. ``None`` uses the item itself.
    """
    return _DedupeAppend(key)


def merge_by_key(key: Callable[[Any], Hashable] | str) -> Reducer:
    """Merge a list of records: same key replaces in place, new keys are appended.

    Args:
        key: Maps a record to its key: a callable, or the name of a dict key / attribute.

    Raises:
        ReducerConfigurationError: ``key`` is ``None``.
    """
    return _MergeByKey(key)


def owned(value: Any) -> Any:
    """A container the engine may change in place: plain list/dict/set copies of ``value``.

    Subclasses and read-only mappings (a tuple, an OrderedDict, a mappingproxy)
    become the plain type, so in-place reducers always work on an object that
    nobody outside the engine holds.
    """
    if isinstance(value, list | tuple):
        return list(value)
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, set | frozenset):
        return set(value)
    return value


def reducers_equal(a: Reducer, b: Reducer) -> bool:
    """Whether two reducer declarations mean the same merge."""
    return a is b or a == b
