"""Checkpoint records: ids, deltas, chains and the stored format."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from selectgraph.core._errors import StateSerializationError
from selectgraph.persistence import (
    Checkpoint,
    CheckpointChain,
    CheckpointDecodeError,
    apply_delta,
    diff_state,
    make_checkpoint,
    materialize,
    new_checkpoint_id,
)
from selectgraph.persistence._checkpoint import _base32, id_time
from selectgraph.persistence._codec import (
    decode_body,
    decode_record,
    decode_writes,
    encode_body,
    encode_record,
    encode_writes,
    header_of,
)

json_leaf = (
    st.none()
    | st.booleans()
    | st.integers(-2, 2)
    | st.floats(-2, 2, allow_nan=False).map(round)
    | st.sampled_from([0.0, 1.0, -1.0])
    | st.text(max_size=5)
)
json_value = st.recursive(
    json_leaf,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=12,
)
# The conversation is a log of encoded messages, which diff_state takes for
# append-only without comparing the types of its entries (a long run's diffs would
# be quadratic otherwise): entries are drawn as messages are encoded, so an old
# entry never equals a new one of another type (False == 0).
encoded_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool"]), "content": st.text(max_size=6)}
)
state_shape = st.fixed_dictionaries(
    {
        "messages": st.lists(encoded_message, max_size=4),
        "data": st.dictionaries(st.text(max_size=6), json_value, max_size=5),
    },
    optional={"metadata": st.dictionaries(st.sampled_from(["a", "/", "~", "~1"]), json_value)},
)


def check_apply_of_diff(old: dict[str, Any], new: dict[str, Any]) -> None:
    delta = diff_state(old, new)
    assert json.loads(json.dumps(delta)) == delta  # stored as JSON as it is
    # Compared as JSON text: == would take 1, 1.0 and True as the same value.
    assert json.dumps(apply_delta(old, delta), sort_keys=True) == json.dumps(new, sort_keys=True)


@settings(max_examples=100, deadline=None)
@given(state_shape, state_shape)
def test_apply_of_diff_gives_the_new_state(old: dict[str, Any], new: dict[str, Any]) -> None:
    check_apply_of_diff(old, new)


@pytest.mark.slow
@settings(max_examples=1000, deadline=None)
@given(state_shape, state_shape)
def test_apply_of_diff_gives_the_new_state_long(old: dict[str, Any], new: dict[str, Any]) -> None:
    check_apply_of_diff(old, new)


def test_diff_stores_changed_keys_and_appended_tails_only() -> None:
    old = {"messages": [1, 2], "data": {"a": 1, "b": [1], "c": 3, "d/e": 0}, "x": 1}
    new = {"messages": [1, 2, 3], "data": {"a": 1, "b": [1, 2], "d/e": 1}, "x": 1, "y": 2}
    assert diff_state(old, new) == {
        "set": [["/data/d~1e", 1], ["/y", 2]],
        "unset": ["/data/c"],
        "append": [["/messages", [3]], ["/data/b", [2]]],
    }
    assert diff_state(new, new) == {}
    # A list that changed other than at its end is stored whole.
    assert diff_state({"m": [1, 2]}, {"m": [9, 2, 3]}) == {"set": [["/m", [9, 2, 3]]]}
    # Below data's keys, and inside tagged values, a changed value is stored whole.
    deep_old = {"data": {"k": {"inner": 1, "other": 2}}}
    deep_new = {"data": {"k": {"inner": 5, "other": 2}}}
    assert diff_state(deep_old, deep_new) == {"set": [["/data/k", {"inner": 5, "other": 2}]]}
    tagged_old = {"t": {"__sg__": "tuple", "v": [1]}}
    tagged_new = {"t": {"__sg__": "tuple", "v": [2]}}
    assert diff_state(tagged_old, tagged_new) == {"set": [["/t", {"__sg__": "tuple", "v": [2]}]]}


def test_equal_values_of_another_type_are_changes() -> None:
    # 1 == 1.0 == True in Python, but they load back as different values.
    old = {"data": {"a": 1, "b": [1, {"c": 0}], "d": [1]}, "messages": [{"n": 1}]}
    new = {"data": {"a": True, "b": [1, {"c": 0.0}], "d": [1.0, 2]}, "messages": [{"n": 1}]}
    delta = diff_state(old, new)
    assert delta == {
        "set": [["/data/a", True], ["/data/b", [1, {"c": 0.0}]], ["/data/d", [1.0, 2]]]
    }
    restored = apply_delta(old, delta)
    assert json.dumps(restored) == json.dumps(new)


def test_apply_leaves_its_input_alone() -> None:
    base = {"messages": [1], "data": {"a": 1}}
    apply_delta(base, {"append": [["/messages", [2]]], "set": [["/data/a", 2]]})
    assert base == {"messages": [1], "data": {"a": 1}}


@pytest.mark.parametrize(
    ("delta", "path", "reason"),
    [
        ([], "values", "must be an object"),
        ({"replace": []}, "values", "not ['replace']"),
        ({"set": {}}, "values.set", "expected a list"),
        ({"set": [["/a"]]}, "values.set[0]", "expected [path, value]"),
        ({"set": [[["a"], 1]]}, "values.set[0]", "JSON Pointer"),
        ({"set": [["/missing/a", 1]]}, "values.set[0]", "/missing is not an object"),
        ({"unset": "x"}, "values.unset", "expected a list"),
        ({"unset": [7]}, "values.unset[0]", "JSON Pointer"),
        ({"append": [["/data", [1]]]}, "values.append[0]", "not a list"),
        ({"append": [["/messages", 1]]}, "values.append[0]", "not a list"),
    ],
)
def test_a_malformed_delta_is_a_located_error(delta: Any, path: str, reason: str) -> None:
    with pytest.raises(CheckpointDecodeError) as caught:
        apply_delta({"data": {}, "messages": []}, delta)
    assert caught.value.path == path
    assert reason in str(caught.value)


def snapshot(checkpoint_id: str, values: dict[str, Any], parent: str | None = None) -> Checkpoint:
    return Checkpoint(
        run_id="r", checkpoint_id=checkpoint_id, version=1, step=0, values=values, parent_id=parent
    )


def delta(checkpoint_id: str, parent: str, values: dict[str, Any]) -> Checkpoint:
    return Checkpoint(
        run_id="r",
        checkpoint_id=checkpoint_id,
        version=2,
        step=1,
        kind="delta",
        parent_id=parent,
        values=values,
    )


def test_materialize_follows_the_chain() -> None:
    chain = [
        snapshot("a", {"data": {"n": 0}}),
        delta("b", "a", {"set": [["/data/n", 1]]}),
        snapshot("c", {"data": {"n": 7}}, parent="b"),
        delta("d", "c", {"set": [["/data/m", 2]]}),
    ]
    assert materialize(chain) == {"data": {"n": 7, "m": 2}}
    assert chain[0].values == {"data": {"n": 0}}  # not changed in place
    with pytest.raises(ValueError, match="at least one"):
        materialize([])
    with pytest.raises(CheckpointDecodeError, match="parent 'a' is missing"):
        materialize(chain[1:2])
    with pytest.raises(CheckpointDecodeError, match="expected 'a', found 'c'") as caught:
        materialize([chain[0], chain[3]])
    assert caught.value.checkpoint_id == "d"


def test_make_checkpoint_snapshots_every_n_versions_and_on_forks() -> None:
    parent = snapshot("p", {"data": {"n": 0}})
    kwargs: dict[str, Any] = {
        "run_id": "r",
        "step": 1,
        "state": {"data": {"n": 1}},
        "parent": parent,
        "parent_state": {"data": {"n": 0}},
    }
    assert make_checkpoint(version=2, **kwargs).kind == "delta"
    assert make_checkpoint(version=51, **kwargs).kind == "snapshot"
    assert make_checkpoint(version=4, snapshot_every=3, **kwargs).kind == "snapshot"
    assert make_checkpoint(version=2, **{**kwargs, "run_id": "fork"}).kind == "snapshot"
    assert make_checkpoint(version=2, **{**kwargs, "parent_state": None}).kind == "snapshot"
    made = make_checkpoint(version=2, checkpoint_id="mine", metadata={"m": 1}, **kwargs)
    assert (made.checkpoint_id, made.parent_id, made.values, made.metadata) == (
        "mine",
        "p",
        {"set": [["/data/n", 1]]},
        {"m": 1},
    )
    with pytest.raises(ValueError, match="snapshot_every"):
        make_checkpoint(version=2, snapshot_every=0, **kwargs)


def test_chain_takes_a_snapshot_once_deltas_cost_as_much() -> None:
    chain = CheckpointChain("r")
    kinds = []
    for step in range(40):
        state = {"data": {"pad": "p" * 200, "n": step * 1_000_001}}
        kinds.append(chain.next(step=step, state=state).kind)
    # The snapshot is ~240 bytes and each delta ~30: about eight deltas per snapshot.
    assert kinds[0] == "snapshot"
    assert 3 <= kinds.count("snapshot") <= 6
    assert kinds.count("delta") >= 30
    head = chain.head
    assert head is not None
    assert (head.version, head.step) == (40, 39)
    with pytest.raises(ValueError, match="ratio"):
        CheckpointChain("r", ratio=0)
    with pytest.raises(ValueError, match="max_deltas"):
        CheckpointChain("r", max_deltas=-1)


def test_chain_resumed_from_a_head_starts_with_a_snapshot() -> None:
    parent = snapshot("p", {"data": {}})
    chain = CheckpointChain("r", parent=parent, parent_state={"data": {}})
    made = chain.next(step=1, state={"data": {"a": 1, "pad": "x" * 100}}, metadata={"node": "n"})
    assert (made.kind, made.version, made.parent_id, made.metadata) == (
        "snapshot",
        2,
        "p",
        {"node": "n"},
    )
    assert chain.next(step=2, state={"data": {"a": 2, "pad": "x" * 100}}).kind == "delta"


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=2**100), st.integers(min_value=1, max_value=20))
def test_base32_digits_are_the_numbers_low_digits(number: int, width: int) -> None:
    digits = "".join(
        "0123456789abcdefghjkmnpqrstvwxyz"[(number >> 5 * (width - 1 - i)) & 31]
        for i in range(width)
    )
    assert _base32(number, width) == digits


def test_ids_are_unique_and_sort_by_creation() -> None:
    made = [new_checkpoint_id() for _ in range(2000)]
    assert len(set(made)) == len(made)
    assert sorted(made) == made
    when = id_time(made[0])
    assert when is not None
    assert abs(when - dt.datetime.now(dt.UTC)) < dt.timedelta(minutes=1)
    assert id_time("short") is None
    assert id_time("!" * 18) is None
    assert id_time("ilou" + made[0][4:]) is None  # letters Crockford base32 leaves out
    assert id_time("Z" * 18) is None


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"run_id": ""}, "run_id"),
        ({"checkpoint_id": 5}, "checkpoint_id"),
        ({"parent_id": ""}, "parent_id"),
        ({"version": 0}, "version"),
        ({"step": -1}, "step"),
        ({"kind": "full"}, "kind"),
        ({"kind": "delta"}, "without a parent_id"),
        ({"created_at": dt.datetime(2026, 1, 1)}, "timezone-aware"),
        ({"created_at": "2026-01-01"}, "timezone-aware"),
        ({"next": {}}, "next must be a list"),
        ({"values": []}, "values must be a dict"),
    ],
)
def test_checkpoint_checks_its_fields(changes: dict[str, Any], message: str) -> None:
    fields: dict[str, Any] = {
        "run_id": "r",
        "checkpoint_id": "c",
        "version": 1,
        "step": 0,
        "values": {},
    }
    with pytest.raises((ValueError, TypeError), match=message):
        Checkpoint(**{**fields, **changes})


def test_bodies_and_records_round_trip() -> None:
    small = snapshot("s", {"data": {"n": 1}})
    big = snapshot("b", {"data": {"text": "abc " * 500}}).replace(
        next=["n"],
        pending_writes={"t": [1]},
        interrupts={"i": {"answer": "yes"}},
        metadata={"m": True},
    )
    step = Checkpoint(
        run_id="r",
        checkpoint_id="d",
        version=2,
        step=1,
        kind="delta",
        parent_id="s",
        values={
            "set": [["/data/n", 500]],
            "append": [["/history", [["tick", 500, 500, "success", {"n": 500}, 0.01]]]],
        },
        next=[{"after": "tick"}],
        metadata={"trigger": "node_complete"},
    )
    # Each body starts with "c" and its CRC-32 (4 bytes), then its own marker.
    assert encode_body(small)[5:6] in (b"v", b"d")  # values only, bare or deflated
    assert encode_body(big)[5:6] == b"z"  # large: compressed
    assert len(encode_body(big)) < 205
    # A step's small body is deflated against a preset dictionary: a third of its size.
    assert encode_body(step)[5:6] == b"d"
    assert len(encode_body(step)) < 75
    for cp in (small, big, step):
        assert encode_body(cp)[:1] == b"c"
        body = decode_body(encode_body(cp), header_of(cp))
        assert body == {
            "values": cp.values,
            "next": cp.next,
            "pending_writes": cp.pending_writes,
            "interrupts": cp.interrupts,
            "metadata": cp.metadata,
        }
        assert decode_record(encode_record(cp), cp.checkpoint_id) == cp


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        (b"z\x00garbage", "<record>"),
        (b"d\xff\xfe", "<record>"),
        (b'{"values": []}', "values"),
        (b'{"values": {}, "next": {}}', "next"),
        (b'{"values": {}, "pending_writes": {"t": 1}}', "pending_writes.t"),
        (b'{"values": {}, "interrupts": {"i": []}}', "interrupts.i"),
    ],
)
def test_a_malformed_body_is_a_located_error(raw: bytes, path: str) -> None:
    with pytest.raises(CheckpointDecodeError) as caught:
        decode_body(raw, {"checkpoint_id": "cp-1"}, location="somewhere")
    assert (caught.value.checkpoint_id, caught.value.path, caught.value.location) == (
        "cp-1",
        path,
        "somewhere",
    )
    assert "cp-1" in str(caught.value)
    assert "somewhere" in str(caught.value)


@pytest.mark.parametrize(
    ("header", "path"),
    [
        ({"created_at": 5.5}, "created_at"),
        ({"created_at": "yesterday"}, "created_at"),
        ({"version": "1"}, "<header>"),
        ({"kind": 3}, "<header>"),
    ],
)
def test_a_malformed_record_header_is_a_located_error(header: dict[str, Any], path: str) -> None:
    record = json.loads(encode_record(snapshot("c", {})))
    del record["crc"]  # an unsealed record, as written before checksums: read unchecked
    record.update(header)
    with pytest.raises(CheckpointDecodeError) as caught:
        decode_record(json.dumps(record).encode(), "c")
    assert caught.value.path == path


def test_writes_codec() -> None:
    assert decode_writes(b"[1]", "c", "t") == [1]  # written before checksums
    assert decode_writes(encode_writes([1], "c", "t"), "c", "t") == [1]
    with pytest.raises(CheckpointDecodeError, match="checksum"):
        decode_writes(encode_writes([1], "c", "t"), "c", "other task")
    for raw in (b"{", b"{}"):
        with pytest.raises(CheckpointDecodeError, match=r"pending_writes\.t"):
            decode_writes(raw, "c", "t")


def test_a_non_json_value_names_its_path() -> None:
    for bad, where in (
        ({"data": {"k": [1, float("nan")]}}, r"values\.data\.k\[1\]"),
        ({"data": {1: "int key"}}, r"values\.data\[1\]"),
        ({"data": {"s": {1, 2}}}, r"values\.data\.s"),
        ({"data": {"t": (1, 2)}}, r"values\.data\.t"),
    ):
        with pytest.raises(StateSerializationError, match=where):
            encode_body(snapshot("c", bad))
