"""An approval workflow that pauses for a human and is resumed by a second process.

draft -> review -> publish (or -> rejected). The review node is a generator: it
fact-checks the draft (slow and costly, so wrapped in ``context.once``), then
yields an ``InterruptRequest`` and the run stops, saved in a SQLite file. A
second process, started fresh, answers the interrupt; the run goes on to publish.

Every step appends a line to a work log next to the database, with the id of
the process that ran it, so the output shows what ran where: the review node
starts again in the second process (it is a new process), but the fact check
comes back from the checkpoint instead of running twice, and draft never runs
again.

Run the whole demo (two processes; the database goes in a temp dir, or at DB):

    python examples/09_approval_workflow.py [DB]

Or each half by hand, e.g. with a day between them (quote the interrupt id:
it contains ``|``):

    python examples/09_approval_workflow.py start DB
    python examples/09_approval_workflow.py resume DB 'post-42|2:review|0' yes
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

from selectgraph import (
    END,
    AgentGraph,
    GraphResult,
    GraphState,
    InterruptRequest,
    NodeContext,
    ResumeError,
    SQLiteCheckpointStore,
)

RUN_ID = "post-42"


def work_log(db: Path) -> Path:
    """The file each step appends to: ``<db>.work.log``."""
    return db.with_name(db.name + ".work.log")


def note(db: Path, step: str) -> None:
    """Record that ``step`` ran, and in which process (several processes share the log)."""
    with work_log(db).open("a", encoding="utf-8") as handle:
        handle.write(f"{step} {os.getpid()}\n")


def build(db: Path) -> AgentGraph:
    """The workflow; both processes build the same graph (the code is not saved, only state)."""

    def draft(state: GraphState) -> dict[str, Any]:
        note(db, "draft")
        return {"draft": f"Five facts about {state.data['topic']}."}

    def fact_check(text: str) -> dict[str, Any]:
        note(db, "fact-check")
        time.sleep(0.5)  # stands for a slow, paid call (a model, a search API)
        return {"claims": 5, "verified": 5, "text": text}

    def review(state: GraphState, context: NodeContext) -> Generator[InterruptRequest, str, None]:
        note(db, "review")  # plain code before the yield: runs again after a restart
        report = context.once("fact_check", fact_check, state.data["draft"])  # does not
        answer = yield InterruptRequest("Publish this post?", report)
        state.data["approved"] = answer == "yes"
        state.data["reviewer_answer"] = answer

    def publish(state: GraphState) -> dict[str, Any]:
        note(db, "publish")
        return {"status": "published"}

    def after_review(state: GraphState) -> str:
        return "publish" if state.data["approved"] else "rejected"

    def rejected(state: GraphState) -> dict[str, Any]:
        note(db, "rejected")
        return {"status": "rejected"}

    graph = AgentGraph("approval", input_field="topic")
    graph.add_node("draft", draft, next_node="review")
    graph.add_node("review", review)
    graph.add_node("publish", publish, next_node=END)
    graph.add_node("rejected", rejected, next_node=END)
    graph.add_conditional_edge("review", after_review, ["publish", "rejected"])
    graph.set_entry("draft")
    return graph


# What `selectgraph run/studio examples/09_approval_workflow.py` loads; its work log goes
# next to a database in the temp folder (the demo below builds its own).
graph = build(Path(tempfile.gettempdir()) / "selectgraph-approvals.db")


def start(db: Path) -> GraphResult:
    """Process 1: run until the review pauses."""
    with SQLiteCheckpointStore(db) as store:
        result = build(db).run({"topic": "octopuses"}, checkpoint_store=store, run_id=RUN_ID)
    question = result.interrupts[0]
    print(f"process 1 (pid {os.getpid()}): {result.stop_reason} at {question.node!r}")
    print(f"  question: {question.prompt} {question.payload}")
    print(f"  interrupt id: {question.id}")
    return result


def resume(db: Path, interrupt_id: str, answer: str) -> GraphResult:
    """Process 2 (or any later one): answer the interrupt and finish the run."""
    graph = build(db)
    with SQLiteCheckpointStore(db) as store:
        result = graph.resume(interrupt_id, answer, checkpoint_store=store)
        triggers = [
            s.metadata["trigger"]
            for s in reversed(graph.get_history(RUN_ID, checkpoint_store=store))
        ]
    print(f"process 2 (pid {os.getpid()}): answered {answer!r}, run {result.stop_reason}")
    print(f"  final state: status={result.state.data['status']!r}, ", end="")
    print(f"approved={result.state.data['approved']}")
    print(f"  checkpoints: {' -> '.join(triggers)}")
    return result


def demo(db: Path) -> None:
    """Both halves: start here, resume in a fresh Python process, then read the work log."""
    work_log(db).unlink(missing_ok=True)
    paused = start(db)
    assert paused.interrupt_id is not None
    # A new interpreter: nothing of the first run is in its memory, only in the database.
    subprocess.run(
        [sys.executable, __file__, "resume", str(db), paused.interrupt_id, "yes"], check=True
    )
    here = str(os.getpid())
    ran = [
        (step, "process 1" if pid == here else "process 2")
        for step, pid in (line.split() for line in work_log(db).read_text().splitlines())
    ]
    print("work log (step, where it ran):")
    for step, where in ran:
        print(f"  {step:<11} {where}")
    print(
        f"draft ran {sum(step == 'draft' for step, _ in ran)} time(s): completed nodes never re-run"
    )
    print(
        f"review started {sum(step == 'review' for step, _ in ran)} time(s): "
        "after a restart the paused generator node starts over"
    )
    checks = [where for step, where in ran if step == "fact-check"]
    print(f"fact-check ran {len(checks)} time(s), in {', '.join(checks)}: context.once kept it")


def main(argv: list[str]) -> None:
    try:
        dispatch(argv)
    except ResumeError as error:  # answered already, or the run exists: say so, no traceback
        raise SystemExit(f"cannot do that: {error}") from None


def dispatch(argv: list[str]) -> None:
    """Run what the command line asks for."""
    if argv[:1] == ["start"] and len(argv) == 2:
        start(Path(argv[1]))
    elif argv[:1] == ["resume"] and len(argv) == 4:
        resume(Path(argv[1]), argv[2], argv[3])
    elif len(argv) == 1:
        demo(Path(argv[0]))
    elif not argv:
        with tempfile.TemporaryDirectory() as directory:
            demo(Path(directory) / "approvals.db")
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
