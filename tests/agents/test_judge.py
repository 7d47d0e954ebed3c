"""LLMJudge replies: validated as a verdict, leniently where models vary harmlessly."""

from __future__ import annotations

import pytest

from selectgraph.agents._judge import (
    _VERDICT_SCHEMA,
    InvalidReplyError,
    JudgeRequest,
    LLMJudge,
    _VerdictReply,
    parse_json_reply,
)
from selectgraph.agents._result import AgentResult
from selectgraph.agents._verdict import JudgeDecision, Verdict
from selectgraph.testing import ScriptedProvider


async def judge_reply(reply: str) -> Verdict:
    judge = LLMJudge("The answer is a city.", provider=ScriptedProvider([reply]))
    request = JudgeRequest(
        task="Capital of France?", answer=AgentResult(content="Paris"), attempt=1
    )
    return await judge.evaluate(request)


@pytest.mark.parametrize(
    ("reply", "decision", "feedback"),
    [
        ('{"decision": "accept", "feedback": "Right."}', JudgeDecision.ACCEPT, "Right."),
        ('{"decision": "RETRY", "feedback": "Name it."}', JudgeDecision.RETRY, "Name it."),
        (
            '{"decision": "Escalate", "feedback": "Off topic."}',
            JudgeDecision.ESCALATE,
            "Off topic.",
        ),
        ('{"decision": "accept"}', JudgeDecision.ACCEPT, ""),
        ('{"decision": "accept", "feedback": null}', JudgeDecision.ACCEPT, ""),
        ('{"decision": "accept", "feedback": "", "score": 9}', JudgeDecision.ACCEPT, ""),
        ('```json\n{"decision": "retry", "feedback": "More."}\n```', JudgeDecision.RETRY, "More."),
        ('```{"decision": "accept", "feedback": ""}```', JudgeDecision.ACCEPT, ""),
    ],
    ids=[
        "accept",
        "upper case",
        "mixed case",
        "no feedback",
        "null feedback",
        "extra keys",
        "fenced",
        "fenced on one line",
    ],
)
async def test_a_valid_verdict_is_taken_as_given(
    reply: str, decision: JudgeDecision, feedback: str
) -> None:
    verdict = await judge_reply(reply)

    assert verdict.decision is decision
    assert verdict.feedback == feedback


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        ("Looks fine to me.", "Invalid JSON: expected value at line 1 column 1"),
        ('{"decision": "maybe", "feedback": ""}', "decision: Input should be 'accept', 'retry'"),
        ('{"feedback": "x"}', "decision: Field required"),
        ('{"decision": "retry", "feedback": 3}', "feedback: Input should be a valid string"),
        ('{"decision": ["accept"]}', "decision: Input should be 'accept', 'retry'"),
        ("[1, 2]", "Input should be an object"),
    ],
    ids=[
        "prose",
        "unknown decision",
        "no decision",
        "feedback not text",
        "decision not text",
        "not an object",
    ],
)
async def test_an_invalid_verdict_escalates_naming_what_is_wrong(reply: str, problem: str) -> None:
    verdict = await judge_reply(reply)

    assert verdict.decision is JudgeDecision.ESCALATE
    assert verdict.feedback.startswith(f"the judge's reply was not a valid verdict ({problem}")
    assert repr(reply[:20])[1:-1] in verdict.feedback


def test_every_error_of_a_reply_is_named_on_one_line() -> None:
    with pytest.raises(InvalidReplyError) as caught:
        parse_json_reply('{"decision": "maybe", "feedback": 3}', _VerdictReply)

    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("decision: Input should be")
    assert "; feedback: Input should be a valid string" in message


def test_the_schema_asked_for_offers_exactly_the_decisions_accepted() -> None:
    assert _VERDICT_SCHEMA["properties"]["decision"]["enum"] == [d.value for d in JudgeDecision]
