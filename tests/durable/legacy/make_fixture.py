"""Write ``legacy.sqlite``: a run of ``graph.build`` paused at its review question.

Run once, with the version of selectgraph whose stored format the fixture pins:
``python -m tests.durable.legacy.make_fixture``.
"""

from __future__ import annotations

from pathlib import Path

from selectgraph import GraphState, SQLiteCheckpointStore
from tests.durable.legacy.graph import build

HERE = Path(__file__).parent
RUN_ID = "legacy-run"


def main() -> None:
    target = HERE / "legacy.sqlite"
    target.unlink(missing_ok=True)
    store = SQLiteCheckpointStore(str(target))
    start = GraphState.from_prompt("Write about graph engines")
    start.data["topic"] = "graph engines"
    result = build(["A first draft."]).run(start, run_id=RUN_ID, checkpoint_store=store)
    assert result.interrupted, result.stop_reason
    print(result.interrupt_id)


if __name__ == "__main__":
    main()
