"""ROUND_ROBIN (turns and verdicts) and DYNAMIC (the supervisor picks who works next)."""

from __future__ import annotations

from selectgraph import ProviderRequestError, SupervisorAgent, SupervisorStrategy
from selectgraph.testing import ScriptedProvider
from tests.supervisor._script import last_user, member, requests_of, route, verdict

RR = SupervisorStrategy.ROUND_ROBIN
DYNAMIC = SupervisorStrategy.DYNAMIC


def test_round_robin_takes_turns_until_the_verdict_says_complete() -> None:
    agents = {
        "optimist": member("optimist", "It will work.", "Even better now."),
        "skeptic": member("skeptic", "It might not.", "Fine, it works."),
    }
    boss = ScriptedProvider([verdict(False, "they disagree"), verdict(True, "they agree")])
    result = SupervisorAgent(agents=agents, provider=boss, strategy=RR).run("Will it work?")

    assert result.node_order == [
        "start",
        "optimist",
        "skeptic",
        "review",
        "optimist",
        "skeptic",
        "review",
        "finish",
    ]
    assert [t.agent for t in result.turns] == ["optimist", "skeptic", "optimist", "skeptic"]
    assert result.rounds == 2
    assert result.completed
    assert result.verdict == "they agree"
    assert result.content == "Fine, it works."
    # Members see the others' turns; the verdict sees the round.
    second_optimist = requests_of(agents["optimist"])[1]
    assert "It might not." in last_user(second_optimist)
    assert "round 2" in last_user(second_optimist)
    first_review = last_user(boss.requests[0])
    assert "It will work." in first_review
    assert "It might not." in first_review
    assert boss.requests[0].response_format is not None
    assert boss.requests[0].response_format.name == "RoundVerdict"


def test_round_robin_stops_after_max_rounds() -> None:
    agents = {"a": member("a", "a1", "a2"), "b": member("b", "b1", "b2")}
    boss = ScriptedProvider([verdict(False), verdict(False, "still not done")])
    result = SupervisorAgent(agents=agents, provider=boss, strategy=RR, max_rounds=2).run("t")

    assert [t.output for t in result.turns] == ["a1", "b1", "a2", "b2"]
    assert not result.completed
    assert result.verdict == "stopped after max_rounds=2 rounds: still not done"
    assert result.content == "b2"
    boss.assert_all_used()


def test_round_robin_records_a_failed_turn_and_goes_on() -> None:
    agents = {
        "a": member("a", ProviderRequestError("rate limited for good", provider="s")),
        "b": member("b", "b answered"),
    }
    boss = ScriptedProvider([verdict(True, "b covered it")])
    result = SupervisorAgent(agents=agents, provider=boss, strategy=RR).run("t")

    first, second = result.turns
    assert first.error is not None
    assert "rate limited for good" in first.error
    assert second.output == "b answered"
    assert "FAILED: ProviderRequestError" in last_user(boss.requests[0])
    assert result.content == "b answered"
    assert result.quality == "degraded"


def test_dynamic_routes_each_turn_until_done() -> None:
    agents = {
        "researcher": member("researcher", "Found three sources."),
        "writer": member("writer", "Here is the summary."),
    }
    boss = ScriptedProvider(
        [
            route("researcher", "find sources"),
            route("writer", "summarise the sources"),
            route(done=True),
        ]
    )
    result = SupervisorAgent(agents=agents, provider=boss, strategy=DYNAMIC).run("Summarise X")

    assert result.node_order == ["route", "researcher", "route", "writer", "route", "finish"]
    assert [(t.agent, t.instruction) for t in result.turns] == [
        ("researcher", "find sources"),
        ("writer", "summarise the sources"),
    ]
    assert result.content == "Here is the summary."
    assert result.completed
    # The writer is told its instruction and sees the researcher's turn.
    [to_writer] = requests_of(agents["writer"])
    assert "summarise the sources" in last_user(to_writer)
    assert "Found three sources." in last_user(to_writer)
    # The router is told the turns left.
    assert "Turns left: 10" in last_user(boss.requests[0])
    assert "Turns left: 9" in last_user(boss.requests[1])


def test_dynamic_falls_back_when_the_model_names_no_member() -> None:
    agents = {
        "researcher": member("researcher", "r1", "r2"),
        "writer": member("writer", "w1"),
    }
    boss = ScriptedProvider(
        [
            route("Researcher ", "look"),  # case and spaces
            route("writr", "write"),  # a typo
            route("the intern", "do something"),  # nobody: the next member in order
            route(done=True),
        ]
    )
    result = SupervisorAgent(agents=agents, provider=boss, strategy=DYNAMIC).run("t")

    assert [t.agent for t in result.turns] == ["researcher", "writer", "researcher"]
    notes = [t.note for t in result.turns]
    assert notes[0] == "the model named 'Researcher '; taken as 'researcher'"
    assert notes[1] == "the model named 'writr'; taken as the closest name 'writer'"
    assert notes[2] == (
        "the supervisor's 'route' call named 'the intern', not a team member; "
        "fell back to 'researcher', next in order"
    )
    assert result.turns[2].instruction == "do something"
    # A guessed name is a repair; a name close to no member is a fallback, and says so.
    assert result.quality == "degraded"
    assert result.fallbacks == [
        "the supervisor's 'route' call named 'the intern', not a team member; "
        "gave the turn to 'researcher', next in order"
    ]


def test_dynamic_stops_after_max_rounds_turns() -> None:
    agents = {"a": member("a", "a1", "a2")}
    boss = ScriptedProvider([route("a", "go"), route("a", "again")])
    result = SupervisorAgent(agents=agents, provider=boss, strategy=DYNAMIC, max_rounds=2).run("t")

    assert result.node_order == ["route", "a", "route", "a", "finish"]
    assert result.verdict == "stopped after max_rounds=2 turns"
    assert not result.completed
    assert result.content == "a2"
    boss.assert_all_used()


def test_dynamic_sees_a_failed_turn_and_can_route_around_it() -> None:
    agents = {
        "flaky": member("flaky", ProviderRequestError("boom", provider="s")),
        "steady": member("steady", "done right"),
    }
    boss = ScriptedProvider(
        [route("flaky", "try"), route("steady", "do it instead"), route(done=True)]
    )
    result = SupervisorAgent(agents=agents, provider=boss, strategy=DYNAMIC).run("t")

    assert "FAILED: ProviderRequestError: boom" in last_user(boss.requests[1])
    assert result.content == "done right"
