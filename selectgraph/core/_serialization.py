"""Serialization: turn state values into JSON-safe data and back, without losing their types.

JSON has no tuples, sets, bytes, dates, non-finite floats, huge ints, non-string
keys, Pydantic models, dataclasses or enums. Those are written as tagged objects
(``{"__sg__": "<tag>", ...}``) so that ``decode(encode(x)) == x``. A value that
has no faithful encoding raises :class:`StateSerializationError` naming where it
sits; nothing is ever silently turned into a string.

Decoding never imports anything. A tagged model, dataclass or enum names its
class as ``module:qualname``, and that name is only looked up in the
serializer's allow-list: the library's own state types, plus whatever the caller
registered (see ``docs/security.md``). Any other name, and any malformed input,
raises :class:`StateDecodeError` naming the path; nothing else escapes.

Paths are only built when something fails: a container that sees a failure
from below adds its own step to it on the way up, so the common case pays
nothing for them.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import datetime as dt
import math
import reprlib
import sys
import types
import typing
import uuid
from collections.abc import Callable, Iterable
from decimal import Decimal
from enum import Enum
from pathlib import Path, PurePath
from typing import Any, Final, TypeVar

from pydantic import BaseModel
from typing_extensions import is_typeddict

from selectgraph.core._errors import StateDecodeError, StateSerializationError, TypeNotAllowedError
from selectgraph.core._messages import Message, Role, ToolCall
from selectgraph.core._usage import Usage

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "TAG",
    "StateSerializer",
    "brief",
    "decode",
    "default_serializer",
    "encode",
    "schema_types",
]

TAG: Final = "__sg__"
"""Key marking a tagged object; user dicts may not use it."""

DEFAULT_MAX_DEPTH: Final = 100
"""How deeply containers may nest before (de)serialization refuses: it keeps
well inside Python's recursion limit, and turns a value that contains itself
into a located error instead of a ``RecursionError``."""

_INT_LIMIT: Final = 10**4000
"""Ints at least this large are written in hex: Python refuses to print or
parse decimal ints over 4,300 digits (``sys.get_int_max_str_digits``), so
``json.dumps`` would fail later, far from the value."""

_JSON_SCALARS: Final = frozenset({type(None), bool, int, float, str})
_PLAIN: Final = frozenset({type(None), bool, str})
"""Written as they are; ints and floats need a look (huge ints, non-finite floats)."""
_NON_FINITE: Final = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}
_CLASS_TAGS: Final = ("model", "dataclass", "enum")

_T = TypeVar("_T", bound=type)


class _Fault(Exception):
    """Internal: a value failed; each container it sits in adds its step while unwinding."""

    def __init__(self, reason: str, node: Any, *, too_deep: bool = False, type_name: str = ""):
        super().__init__(reason)
        self.reason = reason
        self.node = node  # the value whose container is asked "where is this?"
        self.too_deep = too_deep
        self.type_name = type_name
        self.steps: list[tuple[str, Any]] = []  # (segment, container), innermost first
        self.cause: BaseException | None = None

    def passing(self, container: Any, segment: str) -> _Fault:
        self.steps.append((segment, container))
        self.node = container
        return self

    def located(self, root: str) -> tuple[str, str]:
        """The full path and the reason, naming a reference cycle when that is what it was."""
        steps = self.steps[::-1]
        if self.too_deep:
            seen: dict[int, str] = {}
            path = root
            for segment, container in steps:
                if id(container) in seen:
                    return path, (
                        f"is {seen[id(container)]} again: a value that contains itself "
                        "has no JSON form"
                    )
                seen[id(container)] = path
                path += segment
        return root + "".join(segment for segment, _ in steps), self.reason


_REPR: Final = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 40


def brief(value: Any) -> str:
    """A short repr for error messages; never fails (a huge int has no decimal repr)."""
    try:
        return _REPR.repr(value)
    except ValueError:
        return f"<int of {value.bit_length()} bits>" if isinstance(value, int) else "<value>"


def _index_of(items: Any, child: Any) -> str:
    for i, item in enumerate(items):
        if item is child:
            return f"[{i}]"
    return "[?]"


def _key_of(mapping: dict[Any, Any], child: Any) -> Any:
    for key, item in mapping.items():
        if item is child:
            return key
    return "?"


def _class_path(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _kind_of(cls: Any) -> str:
    if not isinstance(cls, type):
        raise TypeError(f"allowed types must be classes, got {cls!r}")
    if issubclass(cls, Enum):
        return "enum"
    if issubclass(cls, BaseModel):
        return "model"
    if dataclasses.is_dataclass(cls):
        return "dataclass"
    raise TypeError(
        f"{cls.__qualname__} cannot be allowed: only Enum subclasses, Pydantic models and "
        "dataclasses are restored from a stored state"
    )


class StateSerializer:
    """Writes state values as JSON-safe data and reads them back, restoring only allowed types.

    The allow-list is explicit and fails closed: a stored model, dataclass or
    enum whose class was not registered raises :class:`TypeNotAllowedError`;
    no module is ever imported and nothing but the registered class is called.
    The library's own state types (``Message``, ``ToolCall``, ``Role``,
    ``Usage``, ``NodeResult``, ``AgentResult``, ``Verdict``...) are always allowed.

    Args:
        allowed_types: Enum subclasses, Pydantic models and dataclasses that may
            be restored.
        state_schema: A graph's state schema (Pydantic model, TypedDict or
            dataclass); it and the models, dataclasses and enums its fields name
            are allowed.
        max_depth: How deeply containers may nest.

    Example:
        >>> from enum import Enum
        >>> class Color(Enum):
        ...     RED = "red"
        >>> stored = StateSerializer().encode(Color.RED, "data.color")
        >>> StateSerializer(allowed_types=[Color]).decode(stored, "data.color")
        <Color.RED: 'red'>
        >>> StateSerializer().decode(stored, "data.color")
        Traceback (most recent call last):
        ...
        selectgraph.core._errors.TypeNotAllowedError: cannot load state at data.color: ...
    """

    __slots__ = ("_allowed", "max_depth")

    def __init__(
        self,
        allowed_types: Iterable[type] = (),
        *,
        state_schema: Any = None,
        max_depth: int = DEFAULT_MAX_DEPTH,
    ) -> None:
        if type(max_depth) is not int or max_depth < 1:
            raise ValueError(f"max_depth must be a positive int, got {max_depth!r}")
        self.max_depth = max_depth
        """How deeply containers may nest."""
        self._allowed: dict[str, dict[str, type]] = {tag: {} for tag in _CLASS_TAGS}
        for cls in allowed_types:
            self.register_type(cls)
        if state_schema is not None:
            for cls in schema_types(state_schema):
                self.register_type(cls)

    def register_type(self, cls: _T) -> _T:
        """Allow ``cls`` to be restored; returns it, so it also works as a class decorator.

        Raises:
            TypeError: ``cls`` is not an Enum subclass, a Pydantic model or a
                dataclass, or is defined inside a function (it could not be
                named in a stored state), or another class has the same name.
        """
        _allow(self._allowed[_kind_of(cls)], _class_path(cls), cls)
        return cls

    def allowing(self, *allowed_types: type) -> StateSerializer:
        """A copy of this serializer that also allows ``allowed_types``."""
        copy = StateSerializer(max_depth=self.max_depth)
        for tag, table in self._allowed.items():
            copy._allowed[tag].update(table)
        for cls in allowed_types:
            copy.register_type(cls)
        return copy

    @property
    def allowed_types(self) -> frozenset[type]:
        """Every class this serializer restores."""
        tables = (*self._allowed.values(), *_LIBRARY.values())
        return frozenset(cls for table in tables for cls in table.values())

    # ------------------------------------------------------------------ encode

    def encode(self, value: Any, path: str) -> Any:
        """Return a JSON-safe form of ``value``; ``path`` names it in errors (e.g. ``data.items``).

        Raises:
            StateSerializationError: the value (or something inside it) has no
                JSON form, nests deeper than ``max_depth`` or contains itself.
        """
        try:
            return _encode(value, 0, self.max_depth)
        except _Fault as fault:
            where, reason = fault.located(path)
            raise StateSerializationError(where, reason) from fault.cause
        except RecursionError:
            raise StateSerializationError(path, "nested too deeply") from None

    # ------------------------------------------------------------------ decode

    def decode(self, value: Any, path: str) -> Any:
        """Inverse of :meth:`encode`; ``path`` names the value in errors.

        Raises:
            StateDecodeError: the input is malformed, nests deeper than
                ``max_depth``, or (as :class:`TypeNotAllowedError`) names a
                class this serializer does not allow.
        """
        try:
            return self._decode(value, 0)
        except _Fault as fault:
            where, reason = fault.located(path)
            if fault.type_name:
                raise TypeNotAllowedError(where, reason, type_name=fault.type_name) from None
            raise StateDecodeError(where, reason) from fault.cause
        except RecursionError:
            raise StateDecodeError(path, "nested too deeply") from None

    def _decode(self, value: Any, depth: int) -> Any:
        return _decode_value(value, depth, self)

    def _decode_tagged(self, value: dict[str, Any], depth: int) -> Any:
        tag = value[TAG]
        if type(tag) is not str:
            raise _Fault(f"the tag is {brief(tag)}, not a string", value)
        try:
            decoder = _DECODERS.get(tag)
            if decoder is not None:
                return decoder(self, value.get("v"), depth, value)
            if tag in self._allowed:
                return self._decode_class(tag, value, depth)
        except _Fault as fault:
            fault.node = value  # its container looks for the tagged object, not its "v"
            raise
        raise _Fault(f"unknown tag {brief(tag)}", value)

    def _decode_items(self, items: list[Any], depth: int) -> list[Any]:
        try:
            return [_decode_value(item, depth, self) for item in items]
        except _Fault as fault:
            raise fault.passing(items, _index_of(items, fault.node)) from None

    def _decode_dict(self, value: dict[str, Any], depth: int) -> dict[str, Any]:
        try:
            return {key: _decode_value(item, depth, self) for key, item in value.items()}
        except _Fault as fault:
            raise fault.passing(value, f".{_key_of(value, fault.node)}") from None

    def _decode_class(self, tag: str, whole: dict[str, Any], depth: int) -> Any:
        name = whole.get("cls")
        if type(name) is not str:
            raise _Fault(f"a tagged {tag} needs its class name as a string in 'cls'", whole)
        cls = self._allowed[tag].get(name) or _LIBRARY[tag].get(name)
        if cls is None:
            raise _Fault(
                f"the {tag} class {name!r} is not allowed: register it with the "
                "serializer (StateSerializer(allowed_types=[...]) or register_type) "
                "to restore it; see docs/security.md",
                whole,
                type_name=name,
            )
        raw = whole.get("v")
        if tag == "enum":
            value = self._decode(raw, depth)
            return _construct(cls, whole, lambda: cls(value))
        if type(raw) is not dict:
            raise _Fault(f"the fields of a {tag} must be an object, got {_shape(raw)}", whole)
        fields = self._decode_dict(raw, depth)
        if tag == "model":
            return _construct(cls, whole, lambda: cls.model_validate(fields))  # type: ignore[attr-defined]
        return _construct(cls, whole, lambda: _build_dataclass(cls, fields))


def _encode(value: Any, depth: int, limit: int) -> Any:
    kind = type(value)
    if kind is str or value is None or kind is bool:
        return value
    if kind is int:
        return value if -_INT_LIMIT < value < _INT_LIMIT else {TAG: "int", "v": hex(value)}
    if kind is float:
        return value if math.isfinite(value) else {TAG: "float", "v": repr(value)}
    if depth >= limit:
        raise _Fault(f"nested deeper than {limit} levels", value, too_deep=True)
    depth += 1
    if kind is list:
        return _encode_items(value, depth, limit)
    if kind is dict:
        return _encode_dict(value, depth, limit)
    if isinstance(value, Enum):
        name = _encodable_name(value)
        try:
            inner = _encode(value.value, depth, limit)
        except _Fault as fault:
            raise fault.passing(value, "") from None
        return {TAG: "enum", "cls": name, "v": inner}
    if isinstance(value, BaseModel):
        name = _encodable_name(value)
        # Keyed by alias where there is one, as model_validate expects, plus any
        # extra fields a model with extra="allow" holds.
        fields = {
            info.alias or field: getattr(value, field)
            for field, info in type(value).model_fields.items()
        }
        fields.update(value.__pydantic_extra__ or {})
        return {TAG: "model", "cls": name, "v": _encode_fields(value, fields, depth, limit)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        name = _encodable_name(value)
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return {TAG: "dataclass", "cls": name, "v": _encode_fields(value, fields, depth, limit)}
    return _encode_other(value, depth, limit)


def _encode_other(value: Any, depth: int, limit: int) -> Any:
    if isinstance(value, bool | int | str | float):  # subclasses of the JSON scalars
        return _encode(type(value).__mro__[-2](value), depth, limit)
    if isinstance(value, tuple):
        return {TAG: "tuple", "v": _encode_items(value, depth, limit)}
    if isinstance(value, set | frozenset):
        items = []
        for item in value:
            try:
                items.append(_encode(item, depth, limit))
            except _Fault as fault:
                raise fault.passing(value, f"{{{brief(item)}}}") from None
        items.sort(key=repr)  # sets have no order; sort so equal sets encode equally
        return {TAG: "frozenset" if isinstance(value, frozenset) else "set", "v": items}
    if isinstance(value, bytes):
        return {TAG: "bytes", "v": base64.b64encode(value).decode("ascii")}
    if isinstance(value, dt.datetime):
        return {TAG: "datetime", "v": value.isoformat()}
    if isinstance(value, dt.date):
        return {TAG: "date", "v": value.isoformat()}
    if isinstance(value, dt.time):
        return {TAG: "time", "v": value.isoformat()}
    if isinstance(value, dt.timedelta):
        return {TAG: "timedelta", "v": [value.days, value.seconds, value.microseconds]}
    if isinstance(value, Decimal):
        return {TAG: "decimal", "v": str(value)}
    if isinstance(value, uuid.UUID):
        return {TAG: "uuid", "v": str(value)}
    if isinstance(value, PurePath):
        return {TAG: "path", "v": str(value)}
    if isinstance(value, list):
        return _encode_items(value, depth, limit)
    if isinstance(value, dict):
        return _encode_dict(value, depth, limit)
    raise _Fault(
        f"a {type(value).__qualname__} is not JSON-serializable; store plain data "
        "(str, numbers, lists, dicts), a Pydantic model or a dataclass instead",
        value,
    )


def _encode_items(items: Any, depth: int, limit: int) -> list[Any]:
    plain = _PLAIN  # checked inline: most items are leaves
    try:
        return [item if type(item) in plain else _encode(item, depth, limit) for item in items]
    except _Fault as fault:
        raise fault.passing(items, _index_of(items, fault.node)) from None


def _encode_fields(owner: Any, fields: dict[str, Any], depth: int, limit: int) -> Any:
    try:
        return _encode_dict(fields, depth, limit)
    except _Fault as fault:
        if fault.node is fields:  # skip the temporary dict: its step names the field
            fault.node = owner
            fault.steps[-1] = (fault.steps[-1][0], owner)
        raise


def _encode_dict(value: dict[Any, Any], depth: int, limit: int) -> Any:
    if all(type(key) is str for key in value):
        if TAG in value:
            raise _Fault(f"the key {TAG!r} is reserved for tagged values", value)
        plain = _PLAIN
        try:
            return {
                key: item if type(item) in plain else _encode(item, depth, limit)
                for key, item in value.items()
            }
        except _Fault as fault:
            raise fault.passing(value, f".{_key_of(value, fault.node)}") from None
    pairs = []
    for key, item in value.items():
        try:
            encoded_key = _encode(key, depth, limit)
        except _Fault as fault:
            raise fault.passing(value, f"<key {brief(key)}>") from None
        try:
            pairs.append([encoded_key, _encode(item, depth, limit)])
        except _Fault as fault:
            raise fault.passing(value, f"[{brief(key)}]") from None
    return {TAG: "dict", "v": pairs}


def _decode_value(value: Any, depth: int, serializer: StateSerializer) -> Any:
    # The hot path, a plain function (cheaper to call than a method): plain
    # dicts and lists inline, scalar items checked without a call.
    kind = type(value)
    if kind is dict:
        if depth >= serializer.max_depth:
            raise _Fault(f"nested deeper than {serializer.max_depth} levels", value, too_deep=True)
        depth += 1
        if TAG in value:
            return serializer._decode_tagged(value, depth)
        # Keys are left as they are: JSON's are strings, and any other key was
        # already hashed into the mapping the caller passed.
        try:
            return {
                key: item if type(item) in _JSON_SCALARS else _decode_value(item, depth, serializer)
                for key, item in value.items()
            }
        except _Fault as fault:
            raise fault.passing(value, f".{_key_of(value, fault.node)}") from None
    if kind is list:
        if depth >= serializer.max_depth:
            raise _Fault(f"nested deeper than {serializer.max_depth} levels", value, too_deep=True)
        depth += 1
        try:
            return [
                item if type(item) in _JSON_SCALARS else _decode_value(item, depth, serializer)
                for item in value
            ]
        except _Fault as fault:
            raise fault.passing(value, _index_of(value, fault.node)) from None
    if kind in _JSON_SCALARS:
        return value
    raise _Fault(f"a {kind.__qualname__} is not JSON data", value)


def _encodable_name(value: Any) -> str:
    name = _class_path(type(value))
    if "<locals>" in name:
        raise _Fault(
            f"{type(value).__qualname__} is defined inside a function, so it cannot be "
            "named when the state is loaded; define it at module level",
            value,
        )
    return name


def _shape(raw: Any) -> str:
    return "null" if raw is None else f"a {type(raw).__qualname__}"


def _construct(cls: type, whole: dict[str, Any], build: Callable[[], Any]) -> Any:
    # An allowed class's own validation (Pydantic, __post_init__, Enum lookup)
    # may raise anything; report it at the value's path, cause attached.
    try:
        return build()
    except Exception as exc:  # re-raised as a located, typed error
        fault = _Fault(f"{cls.__qualname__} refused the stored fields: {exc}", whole)
        fault.cause = exc
        raise fault from None


def _build_dataclass(cls: Any, values: dict[str, Any]) -> Any:
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = values.keys() - fields.keys()
    if unknown:
        raise ValueError(f"unknown fields {sorted(unknown)}")
    instance = cls(**{k: v for k, v in values.items() if fields[k].init})
    for name, value in values.items():
        if not fields[name].init:  # init=False fields are restored after construction
            object.__setattr__(instance, name, value)
    return instance


def _expect(raw: Any, kind: type, whole: dict[str, Any], what: str) -> Any:
    if type(raw) is not kind:
        raise _Fault(f"a tagged {whole[TAG]} needs {what}, got {_shape(raw)}", whole)
    return raw


def _parse(whole: dict[str, Any], parse: Callable[[], Any]) -> Any:
    try:
        return parse()
    except (ValueError, TypeError, ArithmeticError, binascii.Error) as exc:
        fault = _Fault(f"a tagged {whole[TAG]} holds an invalid value: {exc}", whole)
        fault.cause = exc
        raise fault from None


def _decode_float(_: StateSerializer, raw: Any, depth: int, whole: dict[str, Any]) -> Any:
    value = _NON_FINITE.get(raw) if type(raw) is str else None
    if value is None:
        raise _Fault(f"a tagged float must be 'inf', '-inf' or 'nan', got {brief(raw)}", whole)
    return value


def _decode_int(_: StateSerializer, raw: Any, depth: int, whole: dict[str, Any]) -> Any:
    text = _expect(raw, str, whole, "a hex string")
    return _parse(whole, lambda: int(text, 16))


def _decode_sequence(kind: Callable[[list[Any]], Any]) -> Any:
    def decode(serializer: StateSerializer, raw: Any, depth: int, whole: dict[str, Any]) -> Any:
        items = serializer._decode_items(_expect(raw, list, whole, "a list"), depth)
        return _parse(whole, lambda: kind(items))  # a set of unhashable items fails here

    return decode


def _decode_pairs(serializer: StateSerializer, raw: Any, depth: int, whole: dict[str, Any]) -> Any:
    result: dict[Any, Any] = {}
    for i, pair in enumerate(_expect(raw, list, whole, "a list of [key, value] pairs")):
        if type(pair) is not list or len(pair) != 2:
            raise _Fault(f"entry {i} is {_shape(pair)}, not a [key, value] pair", whole)
        try:
            key = serializer._decode(pair[0], depth)
            item = serializer._decode(pair[1], depth)
        except _Fault as fault:
            raise fault.passing(whole, f"<entry {i}>") from None
        try:
            result[key] = item
        except TypeError as exc:  # an unhashable key
            unhashable = _Fault(f"entry {i} has an unhashable key: {exc}", whole)
            unhashable.cause = exc
            raise unhashable from None
    return result


def _decode_text(parse: Callable[[str], Any]) -> Any:
    def decode(_: StateSerializer, raw: Any, depth: int, whole: dict[str, Any]) -> Any:
        text = _expect(raw, str, whole, "a string")
        return _parse(whole, lambda: parse(text))

    return decode


def _parse_base64(text: str) -> bytes:
    # Only the canonical text encode writes: anything else is an error, never
    # silently b"" or a guess.
    value = base64.b64decode(text, validate=True)
    if base64.b64encode(value).decode("ascii") != text:
        raise ValueError("not canonical base64")
    return value


def _decode_timedelta(_: StateSerializer, raw: Any, depth: int, whole: dict[str, Any]) -> Any:
    parts = _expect(raw, list, whole, "[days, seconds, microseconds]")
    if len(parts) != 3 or any(type(part) is not int for part in parts):
        raise _Fault(f"a tagged timedelta needs three ints, got {brief(parts)}", whole)
    return _parse(whole, lambda: dt.timedelta(*parts))


_DECODERS: Final[dict[str, Callable[[StateSerializer, Any, int, dict[str, Any]], Any]]] = {
    "float": _decode_float,
    "int": _decode_int,
    "tuple": _decode_sequence(tuple),
    "set": _decode_sequence(set),
    "frozenset": _decode_sequence(frozenset),
    "dict": _decode_pairs,
    "bytes": _decode_text(_parse_base64),
    "datetime": _decode_text(dt.datetime.fromisoformat),
    "date": _decode_text(dt.date.fromisoformat),
    "time": _decode_text(dt.time.fromisoformat),
    "timedelta": _decode_timedelta,
    "decimal": _decode_text(Decimal),
    "uuid": _decode_text(uuid.UUID),
    "path": _decode_text(Path),
}


# ------------------------------------------------------------------- schemas


def schema_types(schema: Any) -> list[type]:
    """The models, dataclasses and enums a state schema declares, itself included.

    Walks field annotations (through ``list[...]``, ``X | None``,
    ``Annotated[...]``, ``dict[K, V]``...) and into each model or dataclass
    found, so everything a schema-typed value can hold is listed once.
    """
    found: list[type] = []
    seen: set[int] = set()
    pending: list[Any] = [schema]
    while pending:
        hint = pending.pop()
        if id(hint) in seen:
            continue
        seen.add(id(hint))
        pending.extend(typing.get_args(hint))
        if not isinstance(hint, type) or isinstance(hint, types.GenericAlias):
            continue
        if issubclass(hint, Enum):
            found.append(hint)
        elif issubclass(hint, BaseModel):
            found.append(hint)
            pending.extend(info.annotation for info in hint.model_fields.values())
        elif dataclasses.is_dataclass(hint) or is_typeddict(hint):
            if dataclasses.is_dataclass(hint):
                found.append(hint)
            try:
                pending.extend(typing.get_type_hints(hint).values())
            except Exception as exc:  # an unresolvable hint is the schema's bug
                raise TypeError(
                    f"cannot read the field types of {hint.__qualname__}: {exc}"
                ) from exc
    return [cls for cls in found if "<locals>" not in cls.__qualname__]


def named_class(cls: type) -> type:
    """The class ``cls``'s stored name restores: itself, or the class of that name it extends.

    A model built at run time from a module-level one, in its module and under its
    name (say, a ``Plan`` whose ``agent`` field is narrowed to a team's names), is
    stored under that name; the module-level class is what can be restored. Only a
    class with the same fields is taken for it (narrowed types, never added or
    removed fields), so nothing stored is lost on restore. Anything else is its
    own name's class.
    """
    module = sys.modules.get(cls.__module__)
    found = getattr(module, cls.__qualname__, None) if "." not in cls.__qualname__ else None
    if (
        isinstance(found, type)
        and found is not cls
        and issubclass(cls, found)
        and found.__module__ == cls.__module__
        and _fields_of(found) == _fields_of(cls)
    ):
        return found
    return cls


def _fields_of(cls: type) -> frozenset[str] | None:
    if issubclass(cls, BaseModel):
        return frozenset(cls.model_fields)
    if dataclasses.is_dataclass(cls):
        return frozenset(f.name for f in dataclasses.fields(cls))
    return None


def _allow(table: dict[str, type], name: str, cls: type) -> None:
    if "<locals>" in name:
        raise TypeError(f"{name} is defined inside a function; define it at module level")
    known = table.get(name)
    if known is not None and known is not cls:
        raise TypeError(f"another class named {name} is already allowed")
    table[name] = cls


_LIBRARY: Final[dict[str, dict[str, type]]] = {tag: {} for tag in _CLASS_TAGS}
"""selectgraph's own state types, which every serializer restores (see library_type)."""


def library_type(cls: _T, *, formerly: Iterable[str] = ()) -> _T:
    """Allow one of selectgraph's own types in every serializer (as the module defining it loads).

    ``formerly`` lists the modules it was stored under before it moved
    (``"selectgraph._messages"``): checkpoints written then name it so and still load.
    """
    table = _LIBRARY[_kind_of(cls)]
    _allow(table, _class_path(cls), cls)
    for module in formerly:
        _allow(table, f"{module}:{cls.__qualname__}", cls)
    return cls


for _cls in (Message, Role, ToolCall):
    library_type(_cls, formerly=["selectgraph._messages"])
library_type(Usage, formerly=["selectgraph._usage"])

_DEFAULT: list[StateSerializer] = []


def default_serializer() -> StateSerializer:
    """The shared serializer that allows only the library's own types."""
    if not _DEFAULT:
        _DEFAULT.append(StateSerializer())
    return _DEFAULT[0]


def encode(value: Any, path: str) -> Any:
    """:meth:`StateSerializer.encode` with the default serializer."""
    return default_serializer().encode(value, path)


def decode(value: Any, path: str = "value") -> Any:
    """:meth:`StateSerializer.decode` with the default serializer (library types only)."""
    return default_serializer().decode(value, path)
