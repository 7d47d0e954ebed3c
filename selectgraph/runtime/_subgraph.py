"""Subgraphs: run a compiled graph as one node of another.

Two ways to nest a graph:

- ``add_node("name", graph)`` — the graph is callable, so it is a node like any
  other: it starts from the parent's data and the keys it writes come back as
  whole values (the child already applied its reducers).
- ``add_subgraph("name", graph, ...)`` — an explicit boundary (OpenArmature's
  semantics): by default nothing is copied in (the child starts from its own
  defaults) and every child field whose name matches a parent field is merged
  back through the *parent's* reducers. ``input_map`` / ``output_map`` rename
  fields across the boundary; ``projects_in`` / ``projects_out`` name exactly
  which same-named fields cross, with no name-matching fallback.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from selectgraph.core._errors import Diagnostic
from selectgraph.core._run_errors import GraphRunError, NodeError
from selectgraph.core._state import LAST_OUTPUT, GraphState
from selectgraph.nodes._spec import NodeContext
from selectgraph.runtime._nested import run_child
from selectgraph.state._output import NodeOutput
from selectgraph.state._schema import StateSchema
from selectgraph.state._views import StateView, ViewWrites

if TYPE_CHECKING:
    from selectgraph.runtime._program import GraphProgram
    from selectgraph.runtime._run import Run

__all__ = ["GraphAdapter", "Projection", "SubgraphAdapter", "check_projection"]

ProjectionForm = Literal["default", "maps", "sets"]
"""How a subgraph's boundary is declared.

- ``"default"``: nothing declared; no projection in, name-matching out.
- ``"maps"``: ``input_map`` / ``output_map`` (renaming allowed).
- ``"sets"``: ``projects_in`` / ``projects_out`` (same names, nothing else crosses).
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Projection:
    """What crosses a subgraph boundary, oriented as destination -> source."""

    form: ProjectionForm
    """How the boundary was declared."""
    inputs: Mapping[str, str]
    """Child field -> parent field copied in at entry."""
    outputs: Mapping[str, str] | None
    """Parent field -> child field merged out; ``None`` means name matching."""


def _child_input(live: GraphState, data: Mapping[str, Any]) -> GraphState:
    return GraphState(messages=list(live.messages), data=dict(data), metadata=dict(live.metadata))


async def _run_child(
    child: GraphProgram, state: GraphState, context: NodeContext | None, track_writes: bool
) -> tuple[Run, GraphState, Any]:
    assert context is not None
    try:
        run, result = await run_child(child, state, context, track_writes=track_writes)
    except GraphRunError as error:
        # Fail as this node, so the caller gets the parent's state at failure;
        # the child's error (with the child's state) stays on __cause__.
        raise NodeError(
            f"subgraph node {context.node!r} failed: {error}", node=context.node
        ) from error
    return run, result.state, result.total_usage


def _new_messages(live: GraphState, final: GraphState) -> list[Any]:
    return list(final.messages)[len(live.messages) :]


class GraphAdapter:
    """A compiled graph used directly as a node: full state in, written keys back."""

    kind = "graph"
    executor_retries = True
    wants_context = True

    def __init__(self, child: GraphProgram) -> None:
        self.child = child
        self.is_async = child.is_async

    async def __call__(self, state: StateView, context: NodeContext | None) -> Any:
        live = state._live
        fields = self.child.schema.fields
        data = (
            live.data
            if fields is None
            else {k: v for k, v in live.data.items() if k in fields or k == LAST_OUTPUT}
        )
        run, final, usage = await _run_child(self.child, _child_input(live, data), context, True)
        written = run.written_keys or set()
        writes = ViewWrites(
            assignments={k: final.data[k] for k in written if k in final.data},
            deletions={k for k in written if k not in final.data and k in live.data},
            messages=_new_messages(live, final),
            metadata={
                k: v
                for k, v in final.metadata.items()
                if k not in live.metadata or live.metadata[k] != v
            },
        )
        return NodeOutput(writes=writes, usage=usage)


class SubgraphAdapter:
    """A compiled graph behind an explicit projection boundary."""

    kind = "subgraph"
    executor_retries = True
    wants_context = True

    def __init__(
        self, child: GraphProgram, projection: Projection, parent_fields: frozenset[str] | None
    ) -> None:
        self.child = child
        self.projection = projection
        self.parent_fields = parent_fields
        self.is_async = child.is_async

    async def __call__(self, state: StateView, context: NodeContext | None) -> Any:
        live = state._live
        inputs = {
            child_field: live.data[parent_field]
            for child_field, parent_field in self.projection.inputs.items()
            if parent_field in live.data
        }
        _, final, usage = await _run_child(self.child, _child_input(live, inputs), context, False)
        update = self._project_out(final.data)
        return NodeOutput(
            update=update, writes=ViewWrites(messages=_new_messages(live, final)), usage=usage
        )

    def _project_out(self, final: Mapping[str, Any]) -> dict[str, Any]:
        outputs = self.projection.outputs
        if outputs is not None:
            return {parent: final[child] for parent, child in outputs.items() if child in final}
        child_fields = self.child.schema.fields
        names = child_fields | {LAST_OUTPUT} if child_fields is not None else final.keys()
        parent_fields = self.parent_fields
        return {
            name: final[name]
            for name in names
            if name in final
            and (parent_fields is None or name in parent_fields or name == LAST_OUTPUT)
        }


def check_projection(
    node: str,
    projection: Projection,
    parent: StateSchema,
    child: StateSchema,
    diagnostics: list[Diagnostic],
) -> None:
    """Report undeclared fields and reducer round-trips of a subgraph boundary."""
    for child_field, parent_field in projection.inputs.items():
        _check_field(node, parent_field, parent, "parent", diagnostics)
        _check_field(node, child_field, child, "subgraph", diagnostics)
    for parent_field, child_field in (projection.outputs or {}).items():
        _check_field(node, parent_field, parent, "parent", diagnostics)
        _check_field(node, child_field, child, "subgraph", diagnostics)
    for parent_field in sorted(_round_trips(projection)):
        reducer = parent.reducer_for(parent_field)
        if not reducer.round_trip_idempotent:
            diagnostics.append(
                Diagnostic(
                    category="projection_reducer_round_trip",
                    severity="warning",
                    node=node,
                    message=(
                        f"subgraph node {node!r} copies {parent_field!r} in and merges it back "
                        f"out through reducer {reducer.name}, which is not idempotent: the "
                        "value that went in is merged a second time (e.g. a list doubles). "
                        "Use a replace reducer for it or do not project it both ways"
                    ),
                )
            )


def _check_field(
    node: str, name: str, schema: StateSchema, side: str, diagnostics: list[Diagnostic]
) -> None:
    if schema.fields is not None and name not in schema.fields and not schema.allow_extra:
        diagnostics.append(
            Diagnostic(
                category="mapping_references_undeclared_field",
                node=node,
                message=(
                    f"subgraph node {node!r} maps {name!r}, which is not a field of the "
                    f"{side} state ({schema.source}; fields: {', '.join(sorted(schema.fields))})"
                ),
            )
        )


def _round_trips(projection: Projection) -> set[str]:
    """Parent fields copied in and merged back out through the same subgraph field."""
    found: set[str] = set()
    if projection.outputs is None:
        # Name matching merges a same-named child field straight back.
        found.update(p for c, p in projection.inputs.items() if c == p)
        return found
    for child_field, parent_field in projection.inputs.items():
        if projection.outputs.get(parent_field) == child_field:
            found.add(parent_field)
    return found
