"""Counts the commits and SQL statements a DBOS run makes, in a process of its own.

``python -m tests.executors.commit_probe <database url> <steps>`` serves one
run of a loop of ``steps`` trivial nodes in this process (DBOS allows one
instance per process) and prints, as JSON, the commits and statements on
DBOS's engine that write for the run (a transaction counts when one of its
statements changes a row and carries the run's id). So neither the queue
polling of the worker, which names no run, nor the reads of the caller
waiting for the result, whose number depends on time, is counted.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from typing import Any

import sqlalchemy as sa

from selectgraph import END, AgentGraph

loop = AgentGraph("loop", max_steps=None, enable_loop_detection=False, stall_threshold=None)
loop.add_node("tick", lambda state: {"i": state["i"] + 1})
loop.add_conditional_edge("tick", lambda state: "tick" if state["i"] < state["steps"] else END)


class RunCounter:
    """Commits and statements of the transactions on an engine that write for one run."""

    def __init__(self, engine: sa.Engine, run_id: str) -> None:
        self.run_id = run_id
        self.statements = 0
        self.commits = 0
        self.stream_writes = 0
        sa.event.listen(engine, "before_cursor_execute", self._statement)
        sa.event.listen(engine, "commit", self._commit)
        sa.event.listen(engine, "rollback", self._rollback)

    def _statement(self, conn: Any, cursor: Any, sql: str, params: Any, *_: Any) -> None:
        if self.run_id not in repr(params):
            return
        conn.info["run_statements"] = conn.info.get("run_statements", 0) + 1
        if not sql.lstrip().upper().startswith("SELECT"):
            conn.info["writes_run"] = True
        if sql.startswith("INSERT INTO dbos.streams"):
            conn.info["run_stream_writes"] = conn.info.get("run_stream_writes", 0) + 1

    def _commit(self, conn: Any) -> None:
        statements = conn.info.pop("run_statements", 0)
        stream_writes = conn.info.pop("run_stream_writes", 0)
        # A read-only transaction (the caller polling the run's status) is not
        # the run's cost, and how many there are depends on the clock.
        if conn.info.pop("writes_run", False):
            self.commits += 1
            self.statements += statements
            self.stream_writes += stream_writes

    def _rollback(self, conn: Any) -> None:
        for key in ("run_statements", "run_stream_writes", "writes_run"):
            conn.info.pop(key, None)


async def probe(url: str, steps: int) -> dict[str, int]:
    """One run of ``steps`` nodes served here: what it committed and executed."""
    from dbos import _dbos

    from selectgraph.executors import DBOSExecutor

    executor = DBOSExecutor(url, graphs={"loop": loop.compile()}, poll_interval=0.05)
    ready, stop = asyncio.Event(), asyncio.Event()
    serving = asyncio.create_task(executor.aserve(stop=stop, on_ready=ready.set))
    await asyncio.wait_for(ready.wait(), timeout=120)
    instance = _dbos._dbos_global_instance
    assert instance is not None
    run_id = f"probe-{uuid.uuid4().hex}"
    counter = RunCounter(instance._sys_db.engine, run_id)
    handle = await executor.astart("loop", {"i": 0, "steps": steps}, run_id=run_id)
    result = await handle.aresult(timeout=600)
    assert result.state["i"] == steps, result.state
    stop.set()
    await serving
    executor.close()
    return {
        "steps": steps,
        "commits": counter.commits,
        "statements": counter.statements,
        "stream_writes": counter.stream_writes,
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(probe(sys.argv[1], int(sys.argv[2])))))
