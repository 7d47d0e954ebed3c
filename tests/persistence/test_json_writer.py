"""The compact JSON a store writes: orjson where it can, the standard encoder where it cannot."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import given, seed
from hypothesis import strategies as st

from selectgraph.core._errors import StateSerializationError
from selectgraph.core._json_object import JSONObject
from selectgraph.persistence._codec import encode_events
from selectgraph.persistence._json_data import json_bytes, json_size

_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@seed(2611)
@given(_JSON)
def test_what_is_written_loads_back_equal(value: Any) -> None:
    assert json.loads(json_bytes(value, "state")) == value


def test_ints_past_64_bits_and_deep_nesting_fall_back_to_the_standard_encoder() -> None:
    big = {"n": 2**70, "m": -(2**64)}
    assert json_bytes(big, "state") == b'{"n":1180591620717411303424,"m":-18446744073709551616}'
    deep: Any = "leaf"
    for _ in range(300):  # past orjson's nesting limit, within the standard encoder's
        deep = [deep]
    assert json.loads(json_bytes(deep, "state")) == deep
    assert json_size(deep) == len(json.dumps(deep, separators=(",", ":")))


def test_a_nan_in_an_event_log_entry_is_refused_not_written_as_null() -> None:
    # A JSONObject's maker promises finite floats; a plain dict is checked and refused.
    with pytest.raises(StateSerializationError, match="event 0"):
        encode_events([{"x": float("nan")}], "r")
    entry = JSONObject(x=1.5, y=[None, "é"])
    assert encode_events([entry], "r") == ['{"x":1.5,"y":[null,"é"]}'.encode()]


def test_tuples_and_int_keys_are_refused_before_writing() -> None:
    with pytest.raises(StateSerializationError):
        json_bytes({"t": (1, 2)}, "state")
    with pytest.raises(StateSerializationError):
        json_bytes({1: "a"}, "state")


def test_sizes_are_estimated_for_anything() -> None:
    rng = random.Random(5)
    value = {"items": [rng.random() for _ in range(10)], "obj": object(), "t": (1, 2)}
    assert json_size(value) > 100
