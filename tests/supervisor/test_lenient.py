"""Lenient JSON: the supervisor's answers parsed the way small models write them."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from selectgraph.supervisor import RouteDecision, TaskLedger
from selectgraph.supervisor._lenient import lenient_json


def _raw_control_characters(value: object) -> str:
    """JSON for ``value`` with control characters written raw, as small models write them."""
    text = json.dumps(value)
    for char in ("\n", "\t", "\r"):
        text = text.replace(json.dumps(char)[1:-1], char)
    return text


@settings(derandomize=True, max_examples=200)  # replayable: the same examples every run
@given(
    facts=st.lists(st.text(alphabet=st.sampled_from("ab \n\t\r.")), max_size=3),
    plan=st.lists(st.text(alphabet=st.sampled_from("xy \n\t")), max_size=3),
)
def test_raw_control_characters_in_strings_parse_to_the_same_ledger(
    facts: list[str], plan: list[str]
) -> None:
    value = {"facts": facts, "guesses": [], "plan": plan}
    parsed = TaskLedger.model_validate_json(_raw_control_characters(value))
    assert parsed == TaskLedger.model_validate(value)


@pytest.mark.parametrize(
    ("text", "instruction"),
    [
        ('{"done": false, "next_agent": "a", "instruction": "go\non"}', "go\non"),
        ('{"done": false, "next_agent": "a", "instruction": "cut sh', "cut sh"),
        ('{"done": false, "next_agent": "a", "instruction": "x",}', "x"),
        ("{'done': false, 'next_agent': 'a', 'instruction': 'quoted'}", "quoted"),
    ],
)
def test_broken_json_is_repaired(text: str, instruction: str) -> None:
    assert RouteDecision.model_validate_json(text).instruction == instruction


def test_valid_json_that_breaks_the_schema_still_fails() -> None:
    with pytest.raises(ValidationError) as caught:
        RouteDecision.model_validate_json('{"done": "perhaps"}')
    assert {error["loc"][0] for error in caught.value.errors()} >= {"done", "next_agent"}


def test_text_with_no_json_object_keeps_the_strict_error() -> None:
    with pytest.raises(ValidationError) as caught:
        RouteDecision.model_validate_json("I would ask the poet.")
    assert caught.value.errors()[0]["type"] == "json_invalid"


def test_lenient_json_returns_none_when_nothing_can_be_read() -> None:
    assert lenient_json("plain words") is None
    assert lenient_json(b'{"a": "b\nc"}') == {"a": "b\nc"}
