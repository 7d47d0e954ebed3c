"""Real PostgreSQL databases and real worker processes for the DBOS executor's tests.

Each test module gets a database of its own on the server at 127.0.0.1:5432
(dropped afterwards), so DBOS's tables and our own start empty. Workers are
``selectgraph worker`` processes, started and killed (SIGKILL) like in
production; their node executions go to an effects file the tests read.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest

ADMIN = os.environ.get("SELECTGRAPH_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
"""A database to connect to while creating and dropping the tests' own."""
SERVER = ADMIN.rsplit("/", 1)[0]
ROOT = Path(__file__).resolve().parents[2]
GRAPHS = ",".join(
    [
        *(
            f"tests.executors.graphs:{name}"
            for name in ("three", "approval", "fanout", "agents", "nested", "failing", "skipping")
        ),
        "tests.executors.thread_graphs:chat",
    ]
)


def _admin(sql: str) -> None:
    with psycopg.connect(ADMIN, autocommit=True) as connection:
        connection.execute(sql)


def _fresh_database() -> Iterator[str]:
    name = f"sg_dbos_{uuid.uuid4().hex[:12]}"
    _admin(f"create database {name}")
    try:
        yield f"{SERVER}/{name}"
    finally:
        _admin(f"drop database if exists {name} with (force)")


def step_of(task: str) -> str:
    """The step an execution ran in: ``/2:b`` in node:b, ``plan:1/2:x`` in branch:plan:1."""
    if task.startswith("/"):
        return "node:" + task.split(":", 1)[1]
    return "branch:" + task.split("/", 1)[0]


@pytest.fixture(scope="module")
def database() -> Iterator[str]:
    """A fresh PostgreSQL database's URL, dropped after the module."""
    yield from _fresh_database()


@pytest.fixture
def own_database() -> Iterator[str]:
    """A fresh PostgreSQL database for one test (its workers' leases start empty)."""
    yield from _fresh_database()


@dataclass
class Workers:
    """Worker processes of one test, all writing to one effects file."""

    url: str
    effects: Path
    logs: Path
    seconds: float = 0.0
    lease_ttl: float = 2.0
    started: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start(
        self, executor_id: str, *, wait: bool = True, **env_vars: str
    ) -> subprocess.Popen[bytes]:
        env = dict(
            os.environ,
            SG_EFFECTS=str(self.effects),
            SG_NODE_SECONDS=str(self.seconds),
            PYTHONPATH=str(ROOT),
            **env_vars,
        )
        log = self.logs / f"{executor_id}.log"
        with log.open("ab") as output:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "selectgraph",
                    "worker",
                    "--graphs",
                    GRAPHS,
                    "--database-url",
                    self.url,
                    "--executor-id",
                    executor_id,
                    "--lease-ttl",
                    str(self.lease_ttl),
                    "--poll-interval",
                    "0.05",
                ],
                cwd=ROOT,
                env=env,
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        self.started[executor_id] = process
        if wait:
            self.wait_ready(executor_id)
        return process

    def wait_ready(self, executor_id: str, timeout: float = 60.0) -> None:
        """Until the worker says it serves (its lease is written and DBOS launched)."""
        deadline = time.monotonic() + timeout
        log = self.logs / f"{executor_id}.log"
        while time.monotonic() < deadline:
            if self.started[executor_id].poll() is not None:
                raise AssertionError(f"worker {executor_id} exited:\n{log.read_text()}")
            if "selectgraph worker" in log.read_text(errors="replace") and (
                "serving queue" in log.read_text(errors="replace")
            ):
                return
            time.sleep(0.05)
        raise AssertionError(f"worker {executor_id} did not start:\n{log.read_text()}")

    def pid_of(self, executor_id: str) -> int:
        return self.started[executor_id].pid

    def kill(self, executor_id: str) -> None:
        """SIGKILL: no cleanup, no goodbye."""
        process = self.started[executor_id]
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)

    def stop_all(self) -> None:
        for process in self.started.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.started.values():
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)

    def executions(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """Every node execution recorded so far (of one run, when given)."""
        if not self.effects.exists():
            return []
        lines = [json.loads(line) for line in self.effects.read_text().splitlines() if line]
        return [line for line in lines if run_id is None or line["run"] == run_id]

    def counts(self, run_id: str | None = None) -> Counter[tuple[str, str]]:
        """How often each (run, task) started."""
        return Counter(
            (line["run"], line["task"])
            for line in self.executions(run_id)
            if line["what"] != "done"
        )

    def finished(self, pid: int) -> set[tuple[str, str]]:
        """The (run, task) pairs that process ``pid`` saw through to their end."""
        return {
            (line["run"], line["task"])
            for line in self.executions()
            if line["what"] == "done" and line["pid"] == pid
        }

    def recorded(self) -> set[tuple[str, str]]:
        """(run, step name) of every node and branch step the database has recorded."""
        with psycopg.connect(self.url) as connection:
            rows = connection.execute(
                "select workflow_uuid, function_name from dbos.operation_outputs "
                "where function_name like 'node:%' or function_name like 'branch:%'"
            ).fetchall()
        return {(str(run), str(name)) for run, name in rows}

    def started_after(self, moment: float) -> set[tuple[str, str]]:
        """(run, step name) of every execution that started after ``moment`` (time.time())."""
        return {
            (line["run"], step_of(line["task"]))
            for line in self.executions()
            if line["what"] != "done" and line["at"] > moment
        }

    def log(self, executor_id: str) -> str:
        return (self.logs / f"{executor_id}.log").read_text(errors="replace")


@pytest.fixture
def workers(own_database: str, tmp_path: Path) -> Iterator[Workers]:
    """Start workers with ``workers.start(id)``; they are stopped after the test."""
    logs = tmp_path / "logs"
    logs.mkdir()
    pool = Workers(own_database, tmp_path / "effects.jsonl", logs)
    try:
        yield pool
    finally:
        pool.stop_all()
