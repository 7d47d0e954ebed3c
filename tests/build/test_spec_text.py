"""A spec's text that cannot be read is a GraphSpecError saying why, never another exception."""

from __future__ import annotations

from pathlib import Path

import pytest

from selectgraph import GraphSpec, GraphSpecError

LONG_INT = "9" * 5000


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: g\ndescription: !!timestamp 2001-13-45", "cannot read timestamp value"),
        ("name: g\nmax_steps: !!int abc", "cannot read int value"),
        ("name: !!float abc", "cannot read float value"),
        ("name: g\nmax_steps: !!int abc", "line 2, column 12"),
        (f"max_steps: {LONG_INT}", "an integer of 5,000 digits"),
        ("name: \x00", "unacceptable character #x0000"),
        ("name: a\ud800", "unacceptable character #xd800"),
        ('name: "a\\0b"', "name: a NUL character"),
        ('name: "\\uD800"', "name: a lone surrogate"),
        ("nodes:\n  \"\\uD800\": {call: 'x:y'}", "nodes.\\ud800: a lone surrogate"),
        ("name: " + "[" * 5000 + "]" * 5000, "nested too deeply"),
        ("".join("  " * i + "a:\n" for i in range(3000)), "nested too deeply"),
    ],
)
def test_unreadable_yaml_is_a_spec_error_naming_the_problem(text: str, message: str) -> None:
    with pytest.raises(GraphSpecError) as caught:
        GraphSpec.from_yaml(text)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (f'{{"max_steps": {LONG_INT}}}', "invalid JSON: an integer of 5,000 digits"),
        ('{"name": ' + "[" * 100_000 + "]" * 100_000 + "}", "invalid JSON: nested too deeply"),
        ('{"name": "a\\u0000b"}', "name: a NUL character"),
        ('{"nodes": {"a": {"call": "\\ud800"}}}', "nodes.a.call: a lone surrogate"),
    ],
)
def test_unreadable_json_is_a_spec_error_naming_the_problem(text: str, message: str) -> None:
    with pytest.raises(GraphSpecError) as caught:
        GraphSpec.from_json(text)
    assert message in str(caught.value)


def test_a_date_like_value_is_text_not_a_timestamp() -> None:
    assert GraphSpec.from_yaml("name: g\ndescription: 2001-13-45").description == "2001-13-45"
    assert GraphSpec.from_yaml("name: g\ndescription: 2001-12-14").description == "2001-12-14"


def test_a_dict_with_a_nul_is_refused_with_its_place() -> None:
    with pytest.raises(GraphSpecError, match=r"goal: a NUL character"):
        GraphSpec.from_dict({"goal": "a\x00"})


def test_a_spec_file_that_is_not_utf8_is_a_spec_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(b"name: \xff\xfe")
    with pytest.raises(GraphSpecError, match="not UTF-8 text"):
        GraphSpec.from_yaml(path)
