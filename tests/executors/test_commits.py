"""What a node step costs the database on the DBOS executor: counted, not timed.

A run of quick nodes, served in a process of its own (``commit_probe``), must
commit its step record and nothing else per node: one transaction per step
(DBOS's own ``run_step_async`` makes two, a look-up and the record).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.executors.conftest import ROOT

STEPS = 60


def test_a_node_step_of_a_fresh_run_is_one_commit(own_database: str) -> None:
    found = subprocess.run(
        [sys.executable, "-m", "tests.executors.commit_probe", own_database, str(STEPS)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert found.returncode == 0, found.stderr[-3000:]
    counts = json.loads(found.stdout.strip().splitlines()[-1])
    # Stream writes of events and checkpoints: at most one per node step (one every
    # 0.2 s: how many depends on time, so they are counted apart), each one commit.
    writes = counts["stream_writes"]
    assert writes <= STEPS, counts
    # Besides one commit per node: the run's start and its end, a handful in all.
    assert STEPS <= counts["commits"] - writes <= STEPS + 8, counts
    # Per step: the ownership check and the record's insert (and a few reads per run);
    # a stream write is three statements (ownership, insert, notify).
    assert counts["statements"] - 3 * writes <= 2 * STEPS + 20, counts
