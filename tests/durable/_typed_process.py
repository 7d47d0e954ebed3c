"""A graph asking a typed question, and a command line to answer it from a new process.

``python -m tests.durable._typed_process resume DB LOG INTERRUPT_ID ANSWER_JSON``
opens the SQLite store at DB, builds the graph afresh and answers the
interrupt; it prints one JSON line: the outcome (``done`` with the final data,
or ``invalid`` with the error's interrupt id and field errors). Every node
appends its name to LOG when it runs, so a test counts what ran in every
process.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from selectgraph import (
    END,
    AgentGraph,
    AnswerInvalid,
    GraphState,
    InterruptRequest,
    SQLiteCheckpointStore,
)


class Verdict(BaseModel):
    """What the reviewer answers."""

    approved: bool
    score: int = Field(ge=0, le=10)


def log(path: Path, name: str) -> None:
    """Append one node run to the log (opened per write: several processes share it)."""
    with path.open("a", encoding="utf-8") as handle:
        handle.write(name + "\n")


def counts(path: Path) -> dict[str, int]:
    """How many times each node ran so far, across processes."""
    found: dict[str, int] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").split():
            found[line] = found.get(line, 0) + 1
    return found


def build(log_path: Path) -> AgentGraph:
    """draft -> review (asks for a Verdict) -> publish."""

    def draft(state: GraphState) -> dict[str, Any]:
        log(log_path, "draft")
        return {"draft": "on tides"}

    def review(state: GraphState) -> Iterator[Any]:
        log(log_path, "review")
        verdict = yield InterruptRequest("Verdict?", response_schema=Verdict)
        assert isinstance(verdict, Verdict)
        log(log_path, "answered")
        return {"approved": verdict.approved, "score": verdict.score}

    def publish(state: GraphState) -> dict[str, Any]:
        log(log_path, "publish")
        return {"published": state.data["approved"]}

    graph = AgentGraph("typed")
    graph.add_node("draft", draft, next_node="review")
    graph.add_node("review", review, next_node="publish")
    graph.add_node("publish", publish, next_node=END)
    return graph


def main(argv: list[str]) -> int:
    """``resume DB LOG INTERRUPT_ID ANSWER_JSON``: print the outcome as one JSON line."""
    command, database, log_path, interrupt_id, answer = argv
    assert command == "resume"
    with SQLiteCheckpointStore(database) as store:
        graph = build(Path(log_path))
        try:
            result = graph.resume(interrupt_id, json.loads(answer), checkpoint_store=store)
        except AnswerInvalid as error:
            outcome = {
                "outcome": "invalid",
                "interrupt_id": error.interrupt_id,
                "errors": error.errors,
            }
        else:
            outcome = {"outcome": "done", "data": dict(result.state.data)}
    print(json.dumps(outcome))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
