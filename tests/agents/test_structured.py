"""Structured answers whose JSON a small model wrote badly are repaired, then validated."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from selectgraph import Agent, AgentConfig
from selectgraph.agents._structured import lenient_json, parse_answer, strip_fences
from selectgraph.testing import ScriptedProvider


class Answer(BaseModel):
    title: str
    score: int


BROKEN = [
    '{"title": "line one\nline two", "score": 3}',  # a raw newline inside a string
    '{"title": "cut", "score": 3',  # stopped before the closing brace
    "{'title': 'quoted', 'score': 3,}",  # single quotes and a trailing comma
    '```json\n{"title": "fenced", "score": 3}\n```',
    'Here it is: {"title": "prose", "score": 3}',
]


@pytest.mark.parametrize("text", BROKEN)
def test_broken_json_is_repaired_before_validation(text: str) -> None:
    assert parse_answer(Answer, text).score == 3


def test_a_value_that_breaks_the_schema_still_fails() -> None:
    with pytest.raises(ValidationError):
        parse_answer(Answer, '{"title": "x", "score": "many"}')


def test_text_with_no_json_fails_with_the_strict_error() -> None:
    with pytest.raises(ValidationError, match=r"json_invalid|Invalid JSON"):
        parse_answer(Answer, "no json here at all")
    assert lenient_json("no json here at all") is None


def test_an_unclosed_fence_is_dropped() -> None:
    assert strip_fences('```json\n{"a": 1}') == '{"a": 1}'


def test_an_agent_takes_a_repairable_answer_without_asking_again() -> None:
    provider = ScriptedProvider(['{"title": "tides\nand moons", "score": 7,}'])
    agent = Agent(AgentConfig(name="rater", output_schema=Answer), provider=provider)

    result = agent.run("Rate it.")

    assert result.output == Answer(title="tides\nand moons", score=7)
    assert len(provider.requests) == 1  # no re-ask was needed
