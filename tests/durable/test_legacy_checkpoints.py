"""A run paused by an earlier selectgraph, whose checkpoints name library classes by
the modules they lived in then, is continued by this one."""

from __future__ import annotations

import shutil
from pathlib import Path

from selectgraph import AgentResult, Message, SQLiteCheckpointStore
from tests.durable.legacy.graph import build
from tests.durable.legacy.make_fixture import RUN_ID

FIXTURE = Path(__file__).parent / "legacy" / "legacy.sqlite"


def test_a_run_paused_before_the_module_moves_continues(tmp_path: Path) -> None:
    copy = tmp_path / "legacy.sqlite"
    shutil.copy(FIXTURE, copy)
    store = SQLiteCheckpointStore(str(copy))
    graph = build(["unused"])

    paused = graph.get_state(RUN_ID, checkpoint_store=store)
    assert [i.prompt for i in paused.interrupts] == ["Approve the draft?"]
    messages = paused.state.messages
    assert all(isinstance(m, Message) for m in messages)
    assert messages[-1].content == "A first draft."
    written = [entry for entry in paused.state.history if entry[0] == "writer"]
    assert isinstance(written[0][1].agent_result, AgentResult)

    result = graph.resume(paused.interrupts[0].id, "yes", checkpoint_store=store)
    assert result.stop_reason == "end"
    assert result.state.data["approved"] is True
    assert result.state.data["notes"][-2:] == ["reviewed: yes", "published"]
