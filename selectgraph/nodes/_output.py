"""Reading a node's output: what it returned and what it wrote to its view, as one NodeOutput.

A node may return a partial update, a GraphState, None or a directive.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from selectgraph.core._run_errors import NodeContractError
from selectgraph.core._state import LAST_OUTPUT, GraphState
from selectgraph.nodes._spec import NodeSpec
from selectgraph.routing._directives import Directive
from selectgraph.state._output import NO_UPDATE as _NO_UPDATE
from selectgraph.state._output import NodeOutput
from selectgraph.state._views import StateView, ViewWrites

__all__ = ["read_output"]


def read_output(raw: Any, view: StateView, spec: NodeSpec) -> NodeOutput:
    """Normalise ``raw`` (what the node returned) together with what it wrote to ``view``.

    Raises:
        NodeContractError: the return value is of a kind a node may not return,
            or it breaks the node's declared writes.
    """
    if type(raw) is dict:
        output = NodeOutput(raw, view.collect())
    elif raw is None or raw is view:
        output = NodeOutput(_NO_UPDATE, view.collect())
    elif isinstance(raw, Directive):
        output = NodeOutput(raw.values, view.collect(), raw.target)
    elif isinstance(raw, NodeOutput):
        # Built-in node kinds (graphs, agents) prepare their output themselves,
        # view writes included.
        output = raw
    elif isinstance(raw, Mapping):
        output = NodeOutput(raw, view.collect())
    elif isinstance(raw, GraphState) and not isinstance(raw, StateView):
        output = NodeOutput(_NO_UPDATE, _writes_from_state(raw, view, spec.name))
    else:
        raise NodeContractError(
            f"node {spec.name!r} returned {type(raw).__name__} {_short(raw)}; a node returns "
            "a mapping of updates, a GraphState, None, or goto()/update()",
            node=spec.name,
        )
    if spec.writes is not None:
        _check_declared_writes(output, spec)
    return output


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _writes_from_state(returned: GraphState, view: StateView, node: str) -> ViewWrites:
    """Whole-value writes implied by a node returning a GraphState of its own making.

    Only ``data``, ``metadata`` and ``messages`` are read from the returned
    state, each relative to this run's state. Its ``history`` and ``errors``
    are the engine's record of *a* run, and the returned state may come from
    another run (``return other_graph.run(...).state``): splicing them in would
    list nodes this run never executed, so they are ignored. A node records
    nothing in history; the engine records the node itself.
    """
    writes = view.collect() or ViewWrites()
    live = view._live  # the engine's state: compare against it without copying
    for key, value in returned.data.items():
        if key not in live.data or (live.data[key] is not value and live.data[key] != value):
            writes.assignments[key] = value
    for key, value in returned.metadata.items():
        if key not in live.metadata or live.metadata[key] != value:
            writes.metadata[key] = value
    writes.messages = _appended(returned.messages, live.messages, writes.messages, node, "messages")
    return writes


def _appended(returned: Any, live: Any, via_view: list[Any], node: str, what: str) -> list[Any]:
    """Entries to append, given the returned state's list, the live one, and the view's appends.

    A returned state that leaves the list out (or repeats a prefix of it) adds
    nothing; one that extends it adds the extension. Appends already made
    through the view and repeated in the returned state (``state.snapshot()``)
    count once.
    """
    returned_list = list(returned)
    live_list = list(live)
    known = len(live_list)
    if len(returned_list) <= known and returned_list == live_list[: len(returned_list)]:
        return via_view
    if returned_list[:known] != live_list:
        raise NodeContractError(
            f"node {node!r} returned a GraphState whose {what} rewrite earlier entries; "
            f"nodes may only append to {what}. If it is the state of another run, return "
            "the updates to keep instead (e.g. its data, or the messages it added)",
            node=node,
        )
    extension = returned_list[known:]
    if via_view and extension[: len(via_view)] == via_view:
        return extension
    return [*via_view, *extension]


def _check_declared_writes(output: NodeOutput, spec: NodeSpec) -> None:
    declared = spec.declared_outputs or frozenset()
    written = output.written_keys()
    written.discard(LAST_OUTPUT)
    undeclared = sorted(written - declared)
    if undeclared:
        raise NodeContractError(
            f"node {spec.name!r} wrote {', '.join(map(repr, undeclared))} but declares "
            f"writes=[{', '.join(sorted(declared))}]; declare every key it writes",
            node=spec.name,
        )
    missing = sorted((spec.writes or frozenset()) - written)
    if missing:
        raise NodeContractError(
            f"node {spec.name!r} did not write required output "
            f"{', '.join(map(repr, missing))}; write it, or list it in optional_writes",
            node=spec.name,
        )
