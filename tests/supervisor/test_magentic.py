"""MAGENTIC: task ledger, progress ledger every round, replan after max_stalls stalls."""

from __future__ import annotations

from selectgraph import AgentObserver, SupervisorAgent, SupervisorStrategy
from selectgraph.observe import SupervisorReplanned
from selectgraph.testing import ScriptedProvider
from tests.supervisor._script import last_user, ledger, member, progress, requests_of

MAGENTIC = SupervisorStrategy.MAGENTIC


class Replans(AgentObserver):
    def __init__(self) -> None:
        self.calls: list[tuple[str, int, str]] = []

    def on_supervisor_replan(self, run_id: str, stall_count: int, new_plan: str) -> None:
        self.calls.append((run_id, stall_count, new_plan))


def test_the_ledgers_drive_the_team_to_a_final_answer() -> None:
    agents = {
        "web": member("web", "The tower is 330 m tall."),
        "coder": member("coder", "330 / 3 = 110"),
    }
    boss = ScriptedProvider(
        [
            ledger("web: look up the height", "coder: divide by 3", facts=("a tower",)),
            progress("web", "Look up the height of the tower"),
            progress("coder", "Divide 330 by 3"),
            progress(satisfied=True),
            "A third of the tower is 110 m.",
        ]
    )
    result = SupervisorAgent(agents=agents, provider=boss, strategy=MAGENTIC).run(
        "How tall is a third of the tower?"
    )

    assert result.node_order == [
        "ledger",
        "progress",
        "web",
        "progress",
        "coder",
        "progress",
        "final",
    ]
    assert result.content == "A third of the tower is 110 m."
    assert result.state["final_answer"] == result.content
    assert result.completed
    assert result.ledger is not None
    assert result.ledger.facts == ["a tower"]
    assert [(t.agent, t.instruction) for t in result.turns] == [
        ("web", "Look up the height of the tower"),
        ("coder", "Divide 330 by 3"),
    ]
    # The progress ledger sees the task ledger and the work; the coder sees the web's turn.
    second_progress = last_user(boss.requests[2])
    assert "web: look up the height" in second_progress
    assert "The tower is 330 m tall." in second_progress
    [to_coder] = requests_of(agents["coder"])
    assert "The tower is 330 m tall." in last_user(to_coder)
    assert "Divide 330 by 3" in last_user(to_coder)
    # The final answer is asked in text, from the whole record.
    final = boss.requests[-1]
    assert final.response_format is None
    assert "330 / 3 = 110" in last_user(final)
    names = [r.response_format.name if r.response_format else None for r in boss.requests]
    assert names == ["TaskLedger", "ProgressLedger", "ProgressLedger", "ProgressLedger", None]


def test_max_stalls_rounds_without_progress_remake_the_ledger() -> None:
    observer = Replans()
    events: list[object] = []
    agents = {"web": member("web", "nothing found", "still nothing", "found it")}
    boss = ScriptedProvider(
        [
            ledger("web: search"),
            progress("web", "search", progressing=False),  # stall 1
            progress("web", "search again", loop=True),  # stall 2
            progress("web", "search once more", progressing=False),  # stall 3: replan
            ledger("web: search the archive instead", facts=("the index is empty",)),
            progress("web", "search the archive"),
            progress(satisfied=True),
            "It was in the archive.",
        ]
    )
    supervisor = SupervisorAgent(
        agents=agents, provider=boss, strategy=MAGENTIC, observers=[observer, events.append]
    )
    result = supervisor.run("Find it")

    assert result.node_order == [
        "ledger",
        "progress",
        "web",
        "progress",
        "web",
        "progress",
        "replan",
        "progress",
        "web",
        "progress",
        "final",
    ]
    assert result.replans == 1
    assert result.state["stall_count"] == 0
    assert result.ledger is not None
    assert result.ledger.plan == ["web: search the archive instead"]
    assert observer.calls == [(result.run_id, 3, "1. web: search the archive instead")]
    [event] = [e for e in events if isinstance(e, SupervisorReplanned)]
    assert (event.reason, event.node, event.stall_count) == ("stalled", "replan", 3)
    # The revision prompt says the team stalled and shows the old ledger.
    revision = last_user(boss.requests[4])
    assert "no progress for 3 rounds" in revision
    assert "web: search" in revision
    assert result.content == "It was in the archive."


def test_a_round_with_progress_takes_a_stall_off() -> None:
    agents = {"web": member("web", "a", "b", "c", "d")}
    boss = ScriptedProvider(
        [
            ledger("search"),
            progress("web", "1", progressing=False),  # 1
            progress("web", "2", progressing=False),  # 2
            progress("web", "3"),  # progress: 1
            progress("web", "4", progressing=False),  # 2
            progress(satisfied=True),
            "done",
        ]
    )
    result = SupervisorAgent(agents=agents, provider=boss, strategy=MAGENTIC).run("t")
    assert result.replans == 0
    assert result.state["stall_count"] == 2
    assert len(result.turns) == 4


def test_max_rounds_ends_with_a_final_answer() -> None:
    agents = {"web": member("web", "a", "b")}
    boss = ScriptedProvider(
        [
            ledger("search"),
            progress("web", "1"),
            progress("web", "2"),
            progress("web", "3"),
            "best effort",
        ]
    )
    result = SupervisorAgent(agents=agents, provider=boss, strategy=MAGENTIC, max_rounds=2).run("t")

    assert result.node_order == [
        "ledger",
        "progress",
        "web",
        "progress",
        "web",
        "progress",
        "final",
    ]
    assert result.verdict == "stopped after max_rounds=2 rounds"
    assert not result.completed
    assert result.content == "best effort"


def test_a_made_up_speaker_falls_back_to_a_member() -> None:
    agents = {"web": member("web", "w"), "coder": member("coder", "c")}
    boss = ScriptedProvider(
        [
            ledger("x"),
            progress("Coder", "run it"),
            progress("nobody", "?"),
            progress(satisfied=True),
            "ok",
        ]
    )
    result = SupervisorAgent(agents=agents, provider=boss, strategy=MAGENTIC).run("t")
    assert [t.agent for t in result.turns] == ["coder", "web"]
    assert "fell back to 'web'" in result.turns[1].note
