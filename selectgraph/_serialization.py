"""Serialization: turn state values into JSON-safe data and back, without losing their types.

JSON has no tuples, sets, bytes, dates, non-finite floats, non-string keys,
Pydantic models or dataclasses. Those are written as tagged objects
(``{"__sg__": "<tag>", ...}``) so that ``decode(encode(x)) == x``. A value that
has no faithful encoding raises :class:`StateSerializationError` naming where it
sits; nothing is ever silently turned into a string.

Models, dataclasses and enums are restored by importing their class from its
module path, so a checkpoint is trusted input: load only checkpoints you wrote.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import importlib
import math
import uuid
from decimal import Decimal
from enum import Enum
from pathlib import Path, PurePath
from typing import Any

from pydantic import BaseModel

from selectgraph._errors import StateSerializationError

__all__ = ["TAG", "decode", "encode"]

TAG = "__sg__"
"""Key marking a tagged object; user dicts may not use it."""


def encode(value: Any, path: str) -> Any:
    """Return a JSON-safe form of ``value``; ``path`` names it in errors (e.g. ``data.items``).

    Raises:
        StateSerializationError: the value (or something inside it) has no JSON form.
    """
    kind = type(value)
    if value is None or kind is bool or kind is int or kind is str:
        return value
    if kind is float:
        return value if math.isfinite(value) else {TAG: "float", "v": repr(value)}
    if kind is list:
        return [encode(item, f"{path}[{i}]") for i, item in enumerate(value)]
    if kind is dict:
        return _encode_dict(value, path)
    if isinstance(value, Enum):
        return {TAG: "enum", "cls": _class_path(type(value), path), "v": encode(value.value, path)}
    if isinstance(value, BaseModel):
        cls = _class_path(type(value), path)
        # Keyed by alias where there is one, as model_validate expects, plus any
        # extra fields a model with extra="allow" holds.
        fields = {
            info.alias or name: getattr(value, name)
            for name, info in type(value).model_fields.items()
        }
        fields.update(value.__pydantic_extra__ or {})
        return {TAG: "model", "cls": cls, "v": _encode_dict(fields, path)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        cls = _class_path(type(value), path)
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return {TAG: "dataclass", "cls": cls, "v": _encode_dict(fields, path)}
    return _encode_scalar(value, path)


def _encode_scalar(value: Any, path: str) -> Any:
    if isinstance(value, bool | int | str | float):  # subclasses of the JSON scalars
        return encode(type(value).__mro__[-2](value), path)
    if isinstance(value, tuple):
        return {TAG: "tuple", "v": [encode(item, f"{path}[{i}]") for i, item in enumerate(value)]}
    if isinstance(value, set | frozenset):
        items = [encode(item, f"{path}{{{item!r}}}") for item in value]
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
        return [encode(item, f"{path}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, dict):
        return _encode_dict(value, path)
    raise StateSerializationError(
        path,
        f"a {type(value).__qualname__} is not JSON-serializable; store plain data "
        "(str, numbers, lists, dicts), a Pydantic model or a dataclass instead",
    )


def _encode_dict(value: dict[Any, Any], path: str) -> Any:
    if all(type(key) is str for key in value):
        if TAG in value:
            raise StateSerializationError(path, f"the key {TAG!r} is reserved for tagged values")
        return {key: encode(item, f"{path}.{key}") for key, item in value.items()}
    pairs = [
        [encode(key, f"{path}<key {key!r}>"), encode(item, f"{path}[{key!r}]")]
        for key, item in value.items()
    ]
    return {TAG: "dict", "v": pairs}


def _class_path(cls: type, path: str) -> str:
    qualname = cls.__qualname__
    if "<locals>" in qualname:
        raise StateSerializationError(
            path,
            f"{qualname} is defined inside a function, so it cannot be imported again "
            "when the state is loaded; define it at module level",
        )
    return f"{cls.__module__}:{qualname}"


def decode(value: Any) -> Any:
    """Inverse of :func:`encode`."""
    if type(value) is list:
        return [decode(item) for item in value]
    if type(value) is not dict:
        return value
    tag = value.get(TAG)
    if tag is None:
        return {key: decode(item) for key, item in value.items()}
    raw = value.get("v")
    decoder = _DECODERS.get(tag)
    if decoder is None:
        raise StateSerializationError(TAG, f"unknown tag {tag!r}")
    return decoder(raw, value)


def _import_class(spec: str) -> Any:
    module_name, _, qualname = spec.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _decode_model(raw: Any, whole: dict[str, Any]) -> Any:
    cls = _import_class(whole["cls"])
    return cls.model_validate(decode(raw))


def _decode_dataclass(raw: Any, whole: dict[str, Any]) -> Any:
    cls = _import_class(whole["cls"])
    values = decode(raw)
    init = {f.name for f in dataclasses.fields(cls) if f.init}
    instance = cls(**{k: v for k, v in values.items() if k in init})
    for name, value in values.items():
        if name not in init:  # init=False fields are restored after construction
            object.__setattr__(instance, name, value)
    return instance


def _decode_enum(raw: Any, whole: dict[str, Any]) -> Any:
    return _import_class(whole["cls"])(decode(raw))


_DECODERS: dict[str, Any] = {
    "float": lambda raw, _: float(raw),
    "tuple": lambda raw, _: tuple(decode(item) for item in raw),
    "set": lambda raw, _: {decode(item) for item in raw},
    "frozenset": lambda raw, _: frozenset(decode(item) for item in raw),
    "dict": lambda raw, _: {decode(k): decode(v) for k, v in raw},
    "bytes": lambda raw, _: base64.b64decode(raw),
    "datetime": lambda raw, _: dt.datetime.fromisoformat(raw),
    "date": lambda raw, _: dt.date.fromisoformat(raw),
    "time": lambda raw, _: dt.time.fromisoformat(raw),
    "timedelta": lambda raw, _: dt.timedelta(days=raw[0], seconds=raw[1], microseconds=raw[2]),
    "decimal": lambda raw, _: Decimal(raw),
    "uuid": lambda raw, _: uuid.UUID(raw),
    "path": lambda raw, _: Path(raw),
    "model": _decode_model,
    "dataclass": _decode_dataclass,
    "enum": _decode_enum,
}
