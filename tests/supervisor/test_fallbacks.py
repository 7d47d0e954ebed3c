"""Supervisors that finish: unusable supervisor answers are repaired or fall back, never raise.

Each test reproduces a failure seen on a small real model (issue 22) with a
scripted one: control characters inside JSON strings, an answer cut off by its
token limit, two invalid answers in a row, a member name that is nobody's, a
call that never returns, a provider that fails, and a budget stop after members
answered.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from selectgraph import (
    Agent,
    AgentConfig,
    ProviderRequestError,
    SupervisorAgent,
    SupervisorStrategy,
)
from selectgraph.providers import LocalReply
from selectgraph.providers._base import Completion, CompletionRequest
from selectgraph.testing import ScriptedProvider
from tests.supervisor._script import ledger, member, plan, progress, route

PE = SupervisorStrategy.PLAN_AND_EXECUTE
RR = SupervisorStrategy.ROUND_ROBIN
DYNAMIC = SupervisorStrategy.DYNAMIC
MAGENTIC = SupervisorStrategy.MAGENTIC

# What SmolLM2 wrote for a progress ledger: raw newlines and a tab inside strings.
CONTROL_CHARACTERS = (
    '{"is_request_satisfied": {"reason": "not yet,\nthe poem is missing", "answer": false},'
    ' "is_in_loop": {"reason": "no", "answer": false},'
    ' "is_progress_being_made": {"reason": "yes\tjust started", "answer": true},'
    ' "next_speaker": {"reason": "writes", "answer": "poet"},'
    ' "instruction_or_question": {"reason": "go", "answer": "Write one line\nabout the sea."}}'
)


class BlockingProvider(ScriptedProvider):
    """Answers from its script, except that calls whose prompt holds ``block_on`` never return.

    A blocked call waits on an ``asyncio.Event`` nobody sets, so only a timeout or a
    cancellation ends it; ``blocked`` counts the calls that started waiting.
    """

    def __init__(self, script: list[Any], block_on: str) -> None:
        super().__init__(script)
        self.block_on = block_on
        self.blocked = 0

    async def complete(self, request: CompletionRequest) -> Completion:
        if any(self.block_on in message.text for message in request.messages):
            self.blocked += 1
            await asyncio.Event().wait()
        return await super().complete(request)


def test_control_characters_in_a_ledger_are_parsed_without_a_re_ask() -> None:
    agents = {"poet": member("poet", "The sea breathes."), "critic": member("critic", "Fine.")}
    boss = ScriptedProvider(
        [
            ledger("poet: write", "critic: check"),
            LocalReply(text=CONTROL_CHARACTERS),
            progress(satisfied=True),
            "The sea breathes.",
        ]
    )
    result = SupervisorAgent(agents=agents, provider=boss, strategy=MAGENTIC).run("A line.")

    assert result.stop_reason == "end"
    assert result.quality == "clean"
    assert result.fallbacks == []
    [turn] = result.turns
    assert turn.agent == "poet"
    assert turn.instruction == "Write one line\nabout the sea."
    assert result.content == "The sea breathes."
    boss.assert_all_used()  # four calls: no re-ask was needed


def test_an_answer_cut_off_by_its_token_limit_is_repaired() -> None:
    agents = {"a": member("a", "done by a")}
    cut = '{"done": false, "next_agent": "a", "instruction": "do the wh'
    boss = ScriptedProvider([LocalReply(text=cut), route(done=True)])
    result = SupervisorAgent(agents=agents, provider=boss, strategy=DYNAMIC).run("t")

    assert [(t.agent, t.instruction) for t in result.turns] == [("a", "do the wh")]
    assert result.quality == "clean"
    boss.assert_all_used()


def test_two_unusable_routing_answers_fall_back_to_the_next_member_in_order() -> None:
    agents = {"poet": member("poet", "Waves."), "critic": member("critic", "Good waves.")}
    boss = ScriptedProvider(
        [
            "I think the poet should go.",  # not JSON
            "Sure! The poet.",  # the re-ask: still not JSON
            route(done=True),
        ]
    )
    result = SupervisorAgent(agents=agents, provider=boss, strategy=DYNAMIC).run("A line.")

    assert result.stop_reason == "end"
    assert result.quality == "degraded"
    [turn] = result.turns
    assert (turn.agent, turn.instruction, turn.output) == ("poet", "A line.", "Waves.")
    assert "did not validate" in turn.note
    [entry] = result.fallbacks
    assert entry.startswith("the supervisor's 'route' call: its answer did not validate")
    assert entry.endswith("gave the turn to 'poet', next in order")
    assert result.degraded_reasons == [entry]
    assert result.content == "Waves."
    assert result.completed


def test_a_dynamic_supervisor_that_never_answers_usably_still_finishes() -> None:
    agents = {"poet": member("poet", "p1", "p2"), "critic": member("critic", "c1")}
    boss = ScriptedProvider(["no", "no", "nope", "nope", "still no", "still no"])
    result = SupervisorAgent(agents=agents, provider=boss, strategy=DYNAMIC, max_rounds=3).run("t")

    assert [t.agent for t in result.turns] == ["poet", "critic", "poet"]
    assert result.content == "p2"
    assert result.quality == "degraded"
    assert len(result.fallbacks) == 3
    assert not result.completed
    boss.assert_all_used()


def test_done_before_any_member_answered_is_not_taken() -> None:
    agents = {"poet": member("poet", "Waves.")}
    boss = ScriptedProvider([route(done=True), route(done=True)])
    result = SupervisorAgent(agents=agents, provider=boss, strategy=DYNAMIC).run("t")

    assert [t.agent for t in result.turns] == ["poet"]
    assert result.content == "Waves."
    assert result.fallbacks == [
        "the supervisor's 'route' call said the task is done before any member answered; "
        "gave the turn to 'poet', next in order"
    ]


def test_magentic_falls_back_at_every_call_and_answers_with_the_best_member_answer() -> None:
    agents = {"poet": member("poet", "Waves roll."), "critic": member("critic", "")}
    # Every supervisor answer is unusable, twice (the agent re-asks once).
    boss = ScriptedProvider([ProviderRequestError("model gone", provider="scripted")] * 12)
    supervisor = SupervisorAgent(agents=agents, provider=boss, strategy=MAGENTIC, max_rounds=2)
    result = supervisor.run("A line about the sea.")

    assert result.stop_reason == "end"
    assert result.quality == "degraded"
    assert [t.agent for t in result.turns] == ["poet", "critic"]
    assert result.ledger is not None
    assert result.ledger.plan[0].startswith("poet: ")
    # The critic answered nothing: the best answer is the last one with text.
    assert result.content == "Waves roll."
    whats = [entry.split(": ", 1)[0] for entry in result.fallbacks]
    assert whats == [
        "the supervisor's 'ledger' call",
        "the supervisor's 'progress' call",
        "the supervisor's 'progress' call",
        "the supervisor's 'progress' call",
        "the supervisor's 'final' call",
    ]
    assert all("ProviderRequestError: model gone" in entry for entry in result.fallbacks)
    assert result.fallbacks[-1].endswith("answered with the best member answer so far")


def test_an_unusable_review_starts_the_next_round_then_finishes() -> None:
    agents = {"a": member("a", "a1", "a2"), "b": member("b", "b1", "b2")}
    boss = ScriptedProvider(["?", "?", "??", "??"])
    result = SupervisorAgent(agents=agents, provider=boss, strategy=RR, max_rounds=2).run("t")

    assert [t.output for t in result.turns] == ["a1", "b1", "a2", "b2"]
    assert result.content == "b2"
    assert [entry.rsplit("; ", 1)[1] for entry in result.fallbacks] == [
        "went on with the next round",
        "finished with the best answer so far",
    ]


def test_a_supervisor_call_that_never_returns_is_cut_at_its_timeout() -> None:
    agents = {"poet": member("poet", "Waves."), "critic": member("critic", "Nice.")}
    # Only the ledger blocks; progress and the final answer come from the script.
    boss = BlockingProvider(
        [progress("poet", "write"), progress(satisfied=True), "Waves."],
        block_on="Fill in the task ledger",
    )
    supervisor = SupervisorAgent(
        agents=agents,
        provider=boss,
        strategy=MAGENTIC,
        max_rounds=1,
        call_timeout=0.2,
        call_retries=1,
    )
    started = time.perf_counter()
    result = supervisor.run("A line.")
    elapsed = time.perf_counter() - started

    assert boss.blocked == 2  # the first try and one retry
    assert elapsed < 30  # generous: two 0.2 s timeouts, not a hang
    assert result.stop_reason == "end"
    assert result.fallbacks[0] == (
        "the supervisor's 'ledger' call: no answer within call_timeout=0.2 s; "
        "fell back to a plan of every member in order"
    )
    assert result.content


@pytest.mark.parametrize("strategy", [RR, PE])
def test_a_budget_stop_keeps_the_last_member_answer(strategy: SupervisorStrategy) -> None:
    # The second member asks for more tokens than the budget has left: refused.
    greedy = Agent(
        AgentConfig(name="b", max_tokens=50_000), provider=ScriptedProvider(["never sent"])
    )
    agents = {"a": member("a", "the answer of a"), "b": greedy}
    boss = ScriptedProvider([plan(("a", "go"), ("b", "go"))])
    supervisor = SupervisorAgent(
        agents=agents, provider=boss, strategy=strategy, max_total_tokens=5_000
    )
    result = supervisor.run("t")

    assert result.stop_reason == "token_budget"
    assert result.quality == "degraded"
    assert [t.agent for t in result.turns] == ["a"]
    assert result.content == "the answer of a"
    assert "the run stopped early: token_budget" in result.degraded_reasons


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("call_max_tokens", 0, "call_max_tokens must be an integer >= 1 or None, got 0"),
        ("call_max_tokens", 1.5, "call_max_tokens must be an integer >= 1 or None, got 1.5"),
        ("call_timeout", 0, "call_timeout must be a number of seconds > 0 or None, got 0"),
        ("call_timeout", "60", "call_timeout must be a number of seconds > 0 or None, got '60'"),
        ("call_retries", -1, "call_retries must be an integer >= 0, got -1"),
        ("call_retries", True, "call_retries must be an integer >= 0, got True"),
    ],
)
def test_call_settings_out_of_range_are_refused_by_name(
    option: str, value: object, message: str
) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        SupervisorAgent(agents={"a": member("a")}, provider=ScriptedProvider(), **{option: value})  # type: ignore[arg-type]


def test_supervisor_calls_are_bounded_by_default() -> None:
    agents = {"a": member("a", "a1")}
    boss = ScriptedProvider([plan(("a", "go"))])
    supervisor = SupervisorAgent(agents=agents, provider=boss, strategy=PE)
    supervisor.run("t")

    assert boss.requests[0].max_tokens == 512
    assert supervisor.graph is not None
