from __future__ import annotations

import pytest

from selectgraph.state._layered import LayeredData


def test_reads_fall_through_and_writes_stay_on_top() -> None:
    base = {"a": 1, "b": 2}
    layer = LayeredData(base, {"b": 20})
    assert layer["a"] == 1
    assert layer["b"] == 20
    layer["c"] = 3
    assert dict(layer) == {"a": 1, "b": 20, "c": 3}
    assert base == {"a": 1, "b": 2}


def test_containers_are_copied_before_anyone_can_change_them() -> None:
    items = [1, 2]
    layer = LayeredData({"items": items})
    mine = layer["items"]
    mine.append(3)
    assert items == [1, 2]
    assert layer["items"] == [1, 2, 3]
    assert layer.get("items") is mine


def test_deletion_hides_the_base_key_until_written_again() -> None:
    layer = LayeredData({"a": 1})
    del layer["a"]
    assert "a" not in layer
    assert layer.get("a", "gone") == "gone"
    with pytest.raises(KeyError):
        layer["a"]
    with pytest.raises(KeyError):
        del layer["a"]
    assert list(layer) == []
    layer["a"] = 5
    assert layer["a"] == 5
    assert len(layer) == 1


def test_creating_a_layer_does_not_walk_the_base() -> None:
    class Exploding(dict[str, int]):
        def __iter__(self):  # type: ignore[no-untyped-def]
            raise AssertionError("iterated the base")

    layer = LayeredData(Exploding(x=1))
    assert layer["x"] == 1
    assert "x" in layer
