"""Pending writes: a finished branch's output survives a trip through JSON intact."""

from __future__ import annotations

import json
from typing import Any

import pytest

from selectgraph import END, Message, StateDecodeError, Usage
from selectgraph.core._node_result import NodeResult
from selectgraph.core._serialization import default_serializer
from selectgraph.runtime._join import BranchWrites
from selectgraph.runtime._pending import decode_branch_writes, encode_branch_writes
from selectgraph.state._output import NodeOutput
from selectgraph.state._views import ViewWrites


def test_branch_writes_round_trip_through_json() -> None:
    view = ViewWrites()
    view.assignments = {"notes": ["a"]}
    view.deletions = {"old"}
    view.messages = [Message.assistant("done")]
    view.metadata = {"m": 1}
    view.metadata_deletions = {"x"}
    raw_entry: tuple[Any, ...] = ("work", 2, 1, "success", {"n": 1}, "out")
    raw_entry += (None, 1, 0.5, None, None)
    writes = BranchWrites(
        1,
        "work[1]",
        [
            ("work", NodeOutput({"n": 1}, view, None, Usage(input_tokens=3, output_tokens=4))),
            ("next", NodeOutput({"k": (1, 2)}, None, END)),
        ],
        [raw_entry],
        [{"node": "w", "error": "boom"}],
    )
    serializer = default_serializer()
    stored = json.loads(json.dumps(encode_branch_writes(writes, serializer, "w")))
    back = decode_branch_writes(stored, serializer, "w")
    assert (back.index, back.label, back.errors) == (1, "work[1]", writes.errors)
    (node, first), (_, second) = back.outputs
    assert node == "work"
    assert first.update == {"n": 1}
    assert first.usage == Usage(input_tokens=3, output_tokens=4)
    assert first.writes is not None
    assert first.writes.assignments == {"notes": ["a"]}
    assert first.writes.deletions == {"old"}
    assert first.writes.messages == [Message.assistant("done")]
    assert (first.writes.metadata, first.writes.metadata_deletions) == ({"m": 1}, {"x"})
    assert second.update == {"k": (1, 2)}
    assert second.goto is END
    assert back.history == [("work", NodeResult(*raw_entry))]


def test_a_malformed_record_names_where_it_is() -> None:
    with pytest.raises(StateDecodeError, match=r"pending_writes\['k'\]"):
        decode_branch_writes({"outputs": 3}, default_serializer(), "pending_writes['k']")
