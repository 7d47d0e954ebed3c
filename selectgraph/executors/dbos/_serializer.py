"""What DBOS stores for selectgraph: JSON only, never pickle.

DBOS writes every workflow input, step output, message, event and stream value
through a serializer, and its default is pickle. Ours writes plain JSON (the
step records are already JSON data, built by ``_records``), turns an exception
into a tagged record of its type name and message, and reads the same back.

A stored row also names the serializer that wrote it, and DBOS dispatches on
that name: a row marked ``py_pickle`` would be unpickled whatever serializer
the process configured. :func:`refuse_pickle` closes that door in every process
that uses the executor, so a row nobody here wrote can never run code.
"""

from __future__ import annotations

import json
from typing import Any, Final

from dbos import Serializer

__all__ = ["SERIALIZATION", "JsonSerializer", "RemoteError", "refuse_pickle"]

SERIALIZATION: Final = "selectgraph_json"
"""The name stored with every row this serializer writes."""


class RemoteError(Exception):
    """An exception DBOS stored, read back: its type's name and its message, nothing to run."""

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(f"{type_name}: {message}" if message else type_name)
        self.type_name = type_name
        self.message = message


class JsonSerializer(Serializer):
    """DBOS's serializer for selectgraph: JSON in, JSON out."""

    def name(self) -> str:
        return SERIALIZATION

    def serialize(self, data: Any) -> str:
        if isinstance(data, BaseException):
            data = _exception(data)
        return json.dumps(data, separators=(",", ":"), ensure_ascii=False, default=_default)

    def deserialize(self, serialized_data: str) -> Any:
        value = json.loads(serialized_data)
        if type(value) is dict:
            if "$exception" in value:
                return RemoteError(str(value["$exception"]), str(value.get("message", "")))
            if set(value) == {"args", "kwargs"} and type(value["args"]) is list:
                value["args"] = tuple(value["args"])  # a workflow's inputs
        return value


def _exception(exc: BaseException) -> dict[str, str]:
    if isinstance(exc, RemoteError):
        return {"$exception": exc.type_name, "message": exc.message}
    return {"$exception": type(exc).__name__, "message": str(exc)}


def _default(value: Any) -> Any:
    if isinstance(value, BaseException):
        return _exception(value)
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON data; the DBOS executor stores JSON only")


def _refused(serialized_data: str) -> Any:
    raise RuntimeError(
        "a DBOS row is marked as pickled data; selectgraph never writes pickle and does not "
        "unpickle rows (a client created without serializer=JsonSerializer() may have written it)"
    )


def refuse_pickle() -> None:
    """Make DBOS's pickle serializer refuse to read, in this process (idempotent)."""
    from dbos import _serialization

    # The module-level instance DBOS dispatches to for rows marked "py_pickle".
    _serialization.DBOSDefaultSerializer.deserialize = _refused  # type: ignore[method-assign]
