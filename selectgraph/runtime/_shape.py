"""A graph's shape: what a paused run needs of its graph, recorded with its checkpoints.

The shape is the graph's node names, each node's kind and the nodes its edges
can lead to, the state schema's fields with their JSON-schema types, and the
state version. It is made once per compiled graph (on first use) and hashed:
every checkpoint names the graph it was written under by that short hash, and
the first checkpoint a run writes under a graph holds the whole record. A run
continued under a graph with another hash is checked against the record it
was saved under (``runtime/_compat.py``).

A node's code is not part of its shape: changing what a node does never blocks
a paused run; renaming, removing or rewiring what the run needs does.
"""

from __future__ import annotations

import hashlib
import json
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Self

from pydantic import BaseModel, TypeAdapter
from typing_extensions import is_typeddict

from selectgraph.core._sentinels import END
from selectgraph.nodes._generator import GeneratorAdapter
from selectgraph.nodes._spec import NodeSpec
from selectgraph.routing._edges import Edge
from selectgraph.routing._reach import possible_targets

__all__ = [
    "SHAPE_FORMAT",
    "GraphShape",
    "describe_type",
    "graph_shape",
    "is_generator",
    "node_kind",
]

SHAPE_FORMAT: Final = 1
"""The version of the shape record's own layout."""

_NOISE: Final = frozenset({"title", "description", "default", "examples", "deprecated"})
"""JSON-schema keys that say nothing about what values fit: left out of a field's type."""


@dataclass(frozen=True, slots=True)
class GraphShape:
    """What a checkpoint records of the graph it was written under.

    Example:
        >>> shape = GraphShape.of({"nodes": {"a": {"kind": "function", "to": ["__end__"]}}})
        >>> len(shape.hash), shape.nodes["a"]["kind"]
        (16, 'function')
    """

    hash: str
    """A short digest of ``record`` (16 hex digits): equal hashes, same shape."""
    record: Mapping[str, Any]
    """The shape as JSON data: ``graph``, ``format``, ``state_version``, ``nodes``
    (name -> ``kind``, ``to``, and a nested graph's ``graph`` hash), ``fields``
    (name -> JSON-schema type)."""
    field_types: Mapping[str, Any] = field(default_factory=dict)
    """Each field's annotation, to check a stored value against (not stored)."""

    @classmethod
    def of(cls, record: Mapping[str, Any], field_types: Mapping[str, Any] | None = None) -> Self:
        """The shape of ``record``, hashed (the graph's name is not part of the hash)."""
        hashed = {key: value for key, value in record.items() if key != "graph"}
        text = json.dumps(hashed, sort_keys=True, separators=(",", ":"), default=repr)
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
        return cls(digest, record, dict(field_types or {}))

    @property
    def nodes(self) -> Mapping[str, Mapping[str, Any]]:
        """Each node's kind and targets, by name."""
        nodes = self.record.get("nodes")
        return nodes if isinstance(nodes, Mapping) else {}

    @property
    def fields(self) -> Mapping[str, Any]:
        """Each state field's JSON-schema type, by name (empty without a schema)."""
        fields = self.record.get("fields")
        return fields if isinstance(fields, Mapping) else {}

    @property
    def state_version(self) -> int:
        """The state schema's version."""
        version = self.record.get("state_version", 1)
        return version if type(version) is int else 1


def is_generator(spec: NodeSpec | None) -> bool:
    """Whether ``spec`` is a generator node (one that may ask questions), cached or not."""
    adapter: Any = None if spec is None else spec.adapter
    while adapter is not None:
        if isinstance(adapter, GeneratorAdapter):
            return True
        adapter = getattr(adapter, "inner", None)
    return False


def node_kind(spec: NodeSpec) -> str:
    """The node's kind: ``"generator"``, ``"function"``, ``"agent"``, ``"graph"``... .

    ``"subgraph"`` and ``"parallel"`` (a parallel group) too.
    """
    if is_generator(spec):
        return "generator"
    if spec.group is not None:
        return "parallel"
    return str(getattr(spec.adapter, "kind", "function"))


def graph_shape(
    name: str,
    nodes: Mapping[str, NodeSpec],
    edges: Iterable[Edge],
    state_type: type[Any] | None,
    state_version: int,
) -> GraphShape:
    """The shape of a compiled graph (its nodes, edges, state schema and state version)."""
    edges = tuple(edges)
    node_records: dict[str, dict[str, Any]] = {}
    for node, spec in nodes.items():
        targets = possible_targets(edges, nodes, node)
        record: dict[str, Any] = {
            "kind": node_kind(spec),
            "to": ["__end__" if target is END else str(target) for target in targets],
        }
        child = getattr(spec.adapter, "child", None)
        child_shape = getattr(child, "shape", None)
        if isinstance(child_shape, GraphShape):
            record["graph"] = child_shape.hash
        node_records[node] = record
    types = _field_types(state_type)
    return GraphShape.of(
        {
            "graph": name,
            "format": SHAPE_FORMAT,
            "state_version": state_version,
            "nodes": node_records,
            "fields": _field_schemas(state_type, types),
        },
        types,
    )


def _field_types(state_type: type[Any] | None) -> dict[str, Any]:
    """Each field's annotation (without ``Annotated`` extras), for a model or a TypedDict."""
    if state_type is None:
        return {}
    if isinstance(state_type, type) and issubclass(state_type, BaseModel):
        return {name: info.annotation for name, info in state_type.model_fields.items()}
    if is_typeddict(state_type):
        try:
            return dict(typing.get_type_hints(state_type))
        except Exception:  # unresolvable forward references: no types to compare
            return {}
    return {}


def _field_schemas(state_type: type[Any] | None, types: Mapping[str, Any]) -> dict[str, Any]:
    """Each field's JSON-schema type, references resolved and titles, defaults... left out."""
    if state_type is None:
        return {}
    properties: Mapping[str, Any] = {}
    defs: Mapping[str, Any] = {}
    if isinstance(state_type, type) and issubclass(state_type, BaseModel):
        try:
            schema = state_type.model_json_schema()
            properties, defs = schema.get("properties", {}), schema.get("$defs", {})
        except Exception:  # a type without a JSON schema: each field on its own below
            properties = {}
    found: dict[str, Any] = {}
    for name, annotation in types.items():
        if name in properties:
            found[name] = _type_of(properties[name], defs, ())
            continue
        try:
            schema = TypeAdapter(annotation).json_schema()
            found[name] = _type_of(schema, schema.get("$defs", {}), ())
        except Exception:
            found[name] = {"python": _annotation_name(annotation)}
    return found


def _type_of(schema: Any, defs: Mapping[str, Any], seen: tuple[str, ...]) -> Any:
    """``schema`` with ``$ref`` replaced by its definition (once per path) and noise left out."""
    if isinstance(schema, list):
        return [_type_of(item, defs, seen) for item in schema]
    if not isinstance(schema, dict):
        return schema
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        name = ref.removeprefix("#/$defs/")
        if name in seen or name not in defs:
            return {"ref": name}
        return _type_of(defs[name], defs, (*seen, name))
    return {
        key: _type_of(value, defs, seen)
        for key, value in schema.items()
        if key not in _NOISE and key != "$defs"
    }


def _annotation_name(annotation: Any) -> str:
    if isinstance(annotation, type):
        return f"{annotation.__module__}.{annotation.__qualname__}"
    return repr(annotation)


def describe_type(schema: Any) -> str:
    """A field's JSON-schema type in a few words: ``integer``, ``array of string``..."""
    if not isinstance(schema, Mapping) or not schema:
        return "any value"
    if "python" in schema:
        return str(schema["python"])
    if "ref" in schema:
        return str(schema["ref"])
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list):
            return " | ".join(describe_type(option) for option in options)
    if "enum" in schema:
        return "one of " + ", ".join(map(repr, schema["enum"]))
    if "const" in schema:
        return repr(schema["const"])
    kind = schema.get("type")
    if kind == "array":
        return f"array of {describe_type(schema.get('items'))}"
    if kind == "object" and isinstance(schema.get("properties"), Mapping):
        return "object with " + ", ".join(schema["properties"])
    if kind == "object" and isinstance(schema.get("additionalProperties"), Mapping):
        return f"object of {describe_type(schema['additionalProperties'])}"
    if isinstance(kind, list):
        return " | ".join(map(str, kind))
    return str(kind) if kind is not None else "any value"
