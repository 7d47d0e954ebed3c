"""Pending writes as JSON: what finished branches produced, kept in a checkpoint until their join.

When one branch of a fan-out pauses at an interrupt, the branches that
finished are not merged yet (the join waits for every branch). Their writes
go into the interrupt's checkpoint, so a resume in another process joins
them instead of running those branches again.
"""

from __future__ import annotations

from typing import Any

from selectgraph.core._errors import StateDecodeError
from selectgraph.core._messages import Message
from selectgraph.core._node_result import NodeResult
from selectgraph.core._sentinels import END
from selectgraph.core._serialization import StateSerializer
from selectgraph.core._state import _decode_history_entry, _encode_history_entry
from selectgraph.core._usage import Usage
from selectgraph.runtime._join import BranchWrites
from selectgraph.state._output import NodeOutput
from selectgraph.state._views import ViewWrites

__all__ = [
    "decode_branch_writes",
    "decode_node_output",
    "encode_branch_writes",
    "encode_node_output",
]


def _history_pair(item: Any) -> tuple[str, Any]:
    if type(item) is tuple and len(item) != 2:
        result = NodeResult(*item)
        return result.node, result
    node, result = item
    return node, result


def encode_node_output(output: NodeOutput, serializer: StateSerializer, at: str) -> dict[str, Any]:
    """One node's output as JSON data; ``at`` prefixes the path a serialization error names."""
    encode = serializer.encode
    record: dict[str, Any] = {"update": encode(dict(output.update), f"{at}.update")}
    view = output.writes
    if view is not None:
        record["writes"] = {
            "assignments": encode(view.assignments, f"{at}.assignments"),
            "deletions": sorted(view.deletions),
            "messages": [m.to_dict() for m in view.messages],
            "history": [
                [n, _encode_history_entry(r, f"{at}.history[{j}]", encode)]
                for j, (n, r) in enumerate(map(_history_pair, view.history))
            ],
            "metadata": encode(view.metadata, f"{at}.metadata"),
            "metadata_deletions": sorted(view.metadata_deletions),
        }
    if output.goto is not None:
        record["goto"] = output.goto if isinstance(output.goto, str) else "__end__"
    if output.usage is not None:
        record["usage"] = output.usage.to_dict()
    if output.agent_result is not None:
        record["agent_result"] = encode(output.agent_result, f"{at}.agent_result")
    return record


def decode_node_output(record: Any, serializer: StateSerializer, at: str) -> NodeOutput:
    """The NodeOutput :func:`encode_node_output` wrote.

    Raises:
        StateDecodeError: the record is malformed (names ``at``).
    """
    if type(record) is not dict:
        raise StateDecodeError(at, "expected a node's output")
    decode = serializer.decode
    view = None
    if "writes" in record:
        w = record["writes"]
        view = ViewWrites()
        view.assignments = decode(w.get("assignments", {}), f"{at}.assignments")
        view.deletions = set(w.get("deletions", []))
        view.messages = [Message.from_dict(m) for m in w.get("messages", [])]
        view.history = [
            _decode_history_entry(e, f"{at}.history[{j}]", decode)
            for j, e in enumerate(w.get("history", []))
        ]
        view.metadata = decode(w.get("metadata", {}), f"{at}.metadata")
        view.metadata_deletions = set(w.get("metadata_deletions", []))
    goto = record.get("goto")
    usage = record.get("usage")
    return NodeOutput(
        decode(record.get("update", {}), f"{at}.update"),
        view,
        END if goto == "__end__" else goto,
        Usage.from_dict(usage) if type(usage) is dict else None,
        decode(record.get("agent_result"), f"{at}.agent_result"),
    )


def encode_branch_writes(
    writes: BranchWrites, serializer: StateSerializer, where: str
) -> dict[str, Any]:
    """``writes`` as JSON data; ``where`` prefixes the path a serialization error names."""
    encode = serializer.encode
    return {
        "index": writes.index,
        "label": writes.label,
        "outputs": [
            [node, encode_node_output(output, serializer, f"{where}.outputs[{i}]")]
            for i, (node, output) in enumerate(writes.outputs)
        ],
        "history": [
            [n, _encode_history_entry(r, f"{where}.history[{j}]", encode)]
            for j, (n, r) in enumerate(map(_history_pair, writes.history))
        ],
        "errors": [encode(e, f"{where}.errors[{j}]") for j, e in enumerate(writes.errors)],
        **({"failed": True} if writes.failed else {}),
    }


def decode_branch_writes(raw: Any, serializer: StateSerializer, where: str) -> BranchWrites:
    """The BranchWrites :func:`encode_branch_writes` wrote.

    Raises:
        StateDecodeError: the record is malformed (names ``where`` and the path in it).
    """
    decode = serializer.decode
    if type(raw) is not dict or not isinstance(raw.get("outputs"), list):
        raise StateDecodeError(where, "expected a branch's pending writes")
    outputs: list[tuple[str, NodeOutput]] = []
    for i, item in enumerate(raw["outputs"]):
        at = f"{where}.outputs[{i}]"
        if type(item) is not list or len(item) != 2 or type(item[1]) is not dict:
            raise StateDecodeError(at, "expected [node, output]")
        outputs.append((str(item[0]), decode_node_output(item[1], serializer, at)))
    return BranchWrites(
        int(raw.get("index", 0)),
        str(raw.get("label", "")),
        outputs,
        [
            _decode_history_entry(e, f"{where}.history[{j}]", decode)
            for j, e in enumerate(raw.get("history", []))
        ],
        [decode(e, f"{where}.errors[{j}]") for j, e in enumerate(raw.get("errors", []))],
        failed=raw.get("failed") is True,
    )
