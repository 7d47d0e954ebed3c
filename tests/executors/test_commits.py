"""What a node step costs the database on the DBOS executor: counted, not timed.

A run of quick nodes, served in a process of its own (``commit_probe``), must
commit its step record and nothing else per node: one transaction per step,
the run's stream writes included (DBOS's own ``run_step_async`` makes two, a
look-up and the record, and a stream write was a third).
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
    # The run's events and checkpoints go to its stream in the transaction of the
    # step that carries them: at most one stream write per node step, no commit more.
    assert counts["stream_writes"] <= STEPS + 2, counts
    # Besides one commit per node: the run's start, its end and its last stream
    # write, a handful in all (the previous step made two commits: 120 and more).
    assert STEPS <= counts["commits"] <= STEPS + 8, counts
    # Per step: the ownership check and the record's insert; a stream write adds
    # its insert and a notification (and a run makes a few reads).
    assert counts["statements"] - 2 * counts["stream_writes"] <= 2 * STEPS + 20, counts
