"""Scale-out on the DBOS executor: throughput over worker processes, a kill pass, per-step cost.

``python -m benchmarks scaleout`` (``--quick`` for 200 runs instead of 1,000).

1. **Throughput.** N runs of a 3-node graph whose nodes await 0.2 s, queued at
   once on a fresh database, served by 1, 2, 4 and 8 worker processes
   (``selectgraph worker``, each executing up to ``CONCURRENCY`` runs). The
   clock runs from the first enqueue to the last run's end; the baseline is
   the same runs in one process with plain ``arun()`` (no durability).
2. **Kill pass.** The same runs on 4 workers while a random worker is
   SIGKILLed every few seconds and restarted under its id. Every node
   writes a start and an end line to its worker's file; afterwards the
   benchmark counts steps the database had recorded when a worker was killed
   that started again afterwards (must be 0), runs that never finished (lost:
   must be 0), and nodes that ran twice because they were in flight at a kill
   (allowed: at-least-once for the node in flight; some had finished their
   work and were waiting for their record to be written).
3. **Per-step cost.** A 500-step loop of trivial nodes run in process and as
   a DBOS workflow in one worker: µs per step above the in-process step, and
   the SQL statements and commits per step on the worker's engine (those of
   the transactions that carry the run's id: the worker's queue polling,
   which names no run, is left out; the stream writes of events are in).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

SERVER = os.environ.get("SG_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432")
RUNS = 1_000
QUICK_RUNS = 200
WORKER_COUNTS = (1, 2, 4, 8)
CONCURRENCY = 100
KILL_WORKERS = 4
KILL_EVERY = 3.0
LOOP_STEPS = 500
ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True, slots=True)
class Pass:
    """One pass of N runs over some workers."""

    workers: int
    runs: int
    seconds: float
    kills: int = 0
    started_twice: int = 0
    finished_twice: int = 0
    recorded_ran_again: int = 0
    lost: int = 0

    @property
    def runs_per_second(self) -> float:
        return self.runs / self.seconds


@dataclass(frozen=True, slots=True)
class StepCost:
    """What a DBOS step costs over an in-process step."""

    in_process_us: float
    dbos_us: float
    statements: float
    commits: float

    @property
    def overhead_us(self) -> float:
        return self.dbos_us - self.in_process_us


# ------------------------------------------------------------------ helpers
def _admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as connection:
        connection.execute(sql)


@contextmanager
def _database() -> Iterator[str]:
    name = f"sg_scaleout_{uuid.uuid4().hex[:10]}"
    _admin(f"create database {name}")
    try:
        yield f"{SERVER}/{name}"
    finally:
        _admin(f"drop database if exists {name} with (force)")


class _Pool:
    """Worker processes on one database, each with its own effects file."""

    def __init__(self, url: str, folder: Path) -> None:
        self.url = url
        self.folder = folder
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.generation = Counter[str]()

    def start(self, executor_id: str) -> None:
        self.generation[executor_id] += 1
        effects = self.folder / f"{executor_id}.{self.generation[executor_id]}.effects"
        log = self.folder / f"{executor_id}.log"
        env = dict(os.environ, SG_BENCH_EFFECTS=str(effects), PYTHONPATH=str(ROOT))
        with log.open("ab") as output:
            self.processes[executor_id] = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "selectgraph",
                    "worker",
                    "--graphs",
                    "benchmarks.scaleout_graph:chain3,benchmarks.scaleout_graph:loop",
                    "--database-url",
                    self.url,
                    "--executor-id",
                    executor_id,
                    "--concurrency",
                    str(CONCURRENCY),
                    "--lease-ttl",
                    "3",
                    "--poll-interval",
                    "0.05",
                    "--pool-size",
                    "6",
                ],
                cwd=ROOT,
                env=env,
                stdout=output,
                stderr=subprocess.STDOUT,
            )

    def wait_ready(self, executor_id: str, timeout: float = 90.0) -> None:
        log = self.folder / f"{executor_id}.log"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = log.read_text(errors="replace")
            if text.count("serving queue") >= self.generation[executor_id]:
                return
            if self.processes[executor_id].poll() is not None:
                raise RuntimeError(f"worker {executor_id} exited:\n{text}")
            time.sleep(0.05)
        raise RuntimeError(f"worker {executor_id} did not start")

    def kill(self, executor_id: str) -> None:
        process = self.processes[executor_id]
        process.send_signal(signal.SIGKILL)
        process.wait()

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()

    def executions(
        self, recorded: list[tuple[float, set[tuple[str, str]]]]
    ) -> tuple[int, int, int]:
        """Nodes that started twice or more; of them, those that finished twice or more;
        and nodes whose step was recorded before a kill yet started again after it.

        ``recorded`` holds, for each kill, its time and the (run, node) steps the
        database had recorded once the killed process was gone.
        """
        starts: Counter[tuple[str, str]] = Counter()
        ends: Counter[tuple[str, str]] = Counter()
        started_at: dict[tuple[str, str], list[float]] = {}
        for path in self.folder.glob("*.effects"):
            for line in path.read_text().splitlines():
                run, node, what, at = line.split(" ")
                key = (run, node)
                if what == "start":
                    starts[key] += 1
                    started_at.setdefault(key, []).append(float(at))
                else:
                    ends[key] += 1
        again = {
            key
            for killed_at, steps in recorded
            for key in steps
            if any(at > killed_at for at in started_at.get(key, ()))
        }
        return (
            sum(1 for n in starts.values() if n > 1),
            sum(1 for n in ends.values() if n > 1),
            len(again),
        )


def _recorded_steps(connection: Any) -> set[tuple[str, str]]:
    """(run, node) of every node step the database has recorded."""
    rows = connection.execute(
        "select workflow_uuid, function_name from dbos.operation_outputs "
        "where function_name like 'node:%'"
    ).fetchall()
    return {(str(run), str(name)[len("node:") :]) for run, name in rows}


def _finished(connection: Any) -> int:
    row = connection.execute(
        "select count(*) from dbos.workflow_status where status = 'SUCCESS'"
    ).fetchone()
    return int(row[0]) if row else 0


def _run_pass(workers: int, runs: int, *, kill: bool = False) -> Pass:
    import psycopg

    from selectgraph.executors import DBOSExecutor

    with _database() as url, tempfile.TemporaryDirectory() as folder:
        pool = _Pool(url, Path(folder))
        ids = [f"w{i}" for i in range(workers)]
        executor = DBOSExecutor(url)
        try:
            for executor_id in ids:
                pool.start(executor_id)
            for executor_id in ids:
                pool.wait_ready(executor_id)
            started = time.monotonic()
            for i in range(runs):
                executor.start("chain3", {}, run_id=f"run-{i}")
            kills = 0
            next_kill = started + KILL_EVERY
            deadline = started + 600
            done = 0
            watcher = psycopg.connect(url, autocommit=True)
            recorded: list[tuple[float, set[tuple[str, str]]]] = []
            while time.monotonic() < deadline:
                done = _finished(watcher)
                if done >= runs:
                    break
                if kill and time.monotonic() >= next_kill:
                    victim = random.choice(ids)
                    pool.kill(victim)
                    recorded.append((time.time(), _recorded_steps(watcher)))
                    pool.start(victim)  # a supervisor restarts it under its id
                    kills += 1
                    next_kill = time.monotonic() + KILL_EVERY
                time.sleep(0.05)
            seconds = time.monotonic() - started
            watcher.close()
            started_twice, finished_twice, again = pool.executions(recorded)
            return Pass(
                workers, runs, seconds, kills, started_twice, finished_twice, again, runs - done
            )
        finally:
            executor.close()
            pool.stop()


def _in_process(runs: int) -> float:
    """The same runs in one process with plain arun(): wall seconds."""
    from benchmarks.scaleout_graph import chain3

    graph = chain3.compile()

    async def all_runs() -> float:
        started = time.monotonic()
        await asyncio.gather(*(graph.arun({}) for _ in range(runs)))
        return time.monotonic() - started

    return asyncio.run(all_runs())


# ---------------------------------------------------------------- step cost
class RunCounter:
    """Commits and SQL statements on an engine in the transactions that name one run."""

    def __init__(self, engine: Any, run_id: str) -> None:
        import sqlalchemy as sa

        self.engine = engine
        self.run_id = run_id
        self.statements = 0
        self.commits = 0
        self._listeners: list[tuple[str, Callable[..., None]]] = [
            ("before_cursor_execute", self._statement),
            ("commit", self._commit),
            ("rollback", self._rollback),
        ]
        for name, listener in self._listeners:
            sa.event.listen(engine, name, listener)

    def _statement(self, conn: Any, cursor: Any, sql: str, params: Any, *_: Any) -> None:
        if self.run_id in repr(params):
            self.statements += 1
            conn.info["names_run"] = True

    def _commit(self, conn: Any) -> None:
        if conn.info.pop("names_run", False):
            self.commits += 1

    def _rollback(self, conn: Any) -> None:
        conn.info.pop("names_run", None)

    def close(self) -> None:
        import sqlalchemy as sa

        for name, listener in self._listeners:
            sa.event.remove(self.engine, name, listener)


def _step_cost_probe(url: str) -> dict[str, float]:
    """In a process of its own (one DBOS per process): a loop in process and on DBOS."""
    from dbos import _dbos

    from benchmarks.scaleout_graph import loop
    from selectgraph.executors import DBOSExecutor

    graph = loop.compile()

    async def probe() -> dict[str, float]:
        here = []
        for _ in range(5):
            result = await graph.arun({"i": 0, "steps": LOOP_STEPS})
            here.append(result.duration_ms * 1000 / LOOP_STEPS)
        executor = DBOSExecutor(url, graphs={"loop": graph}, poll_interval=0.05)
        ready = asyncio.Event()
        stop = asyncio.Event()
        serving = asyncio.create_task(executor.aserve(stop=stop, on_ready=ready.set))
        await ready.wait()
        engine = _dbos._dbos_global_instance._sys_db.engine  # type: ignore[union-attr]
        there = []
        statements = []
        commits = []
        for _ in range(3):
            # Counted on the worker's engine: the transactions that name the run (the
            # queue polling names none), stream writes of events included.
            counter = RunCounter(engine, f"loop-{uuid.uuid4().hex}")
            handle = await executor.astart(
                "loop", {"i": 0, "steps": LOOP_STEPS}, run_id=counter.run_id
            )
            result = await handle.aresult(timeout=600)
            there.append(result.duration_ms * 1000 / LOOP_STEPS)
            statements.append(counter.statements / LOOP_STEPS)
            commits.append(counter.commits / LOOP_STEPS)
            counter.close()
        stop.set()
        await serving
        executor.close()
        return {
            "in_process_us": statistics.median(here),
            "dbos_us": statistics.median(there),
            "statements": statistics.median(statements),
            "commits": statistics.median(commits),
        }

    return asyncio.run(probe())


def _step_cost() -> StepCost:
    with _database() as url:
        found = subprocess.run(
            [sys.executable, "-m", "benchmarks.scaleout", "--probe", url],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
        )
    return StepCost(**json.loads(found.stdout.strip().splitlines()[-1]))


# ------------------------------------------------------------------- report
def measure(quick: bool) -> dict[str, Any]:
    """Every pass, printed as it completes; returns the figures."""
    runs = QUICK_RUNS if quick else RUNS
    print(
        f"scale-out: {runs} runs of a 3-node graph, each node awaiting 0.2 s; "
        f"workers are `selectgraph worker` processes (--concurrency {CONCURRENCY}) "
        f"on PostgreSQL at {SERVER}; this machine has {os.cpu_count()} cores"
    )
    baseline = _in_process(runs)
    print(f"\n{'setup':<26}{'wall s':>8}{'runs/s':>9}{'x 1 worker':>12}")
    print("-" * 55)
    print(f"{'in process (arun, no DB)':<26}{baseline:>8.2f}{runs / baseline:>9.1f}{'-':>12}")
    passes = []
    for count in WORKER_COUNTS:
        found = _run_pass(count, runs)
        passes.append(found)
        ratio = found.runs_per_second / passes[0].runs_per_second
        label = f"DBOS, {count} worker{'s' if count > 1 else ''}"
        print(f"{label:<26}{found.seconds:>8.2f}{found.runs_per_second:>9.1f}{ratio:>11.2f}x")
    killed = _run_pass(KILL_WORKERS, runs, kill=True)
    print(
        f"\nkill pass: {KILL_WORKERS} workers, a random one SIGKILLed every {KILL_EVERY:g} s and "
        f"restarted ({killed.kills} kills): {killed.seconds:.2f} s, "
        f"{killed.runs_per_second:.1f} runs/s"
    )
    print(
        f"  completed (recorded) steps run again: {killed.recorded_ran_again}; "
        f"runs lost: {killed.lost}"
    )
    print(
        f"  nodes run twice because they were in flight at a kill: {killed.started_twice} "
        f"(of them, {killed.finished_twice} had finished their work but not yet been recorded)"
    )
    cost = _step_cost()
    print(
        f"\nper step ({LOOP_STEPS}-step loop of trivial nodes): in process "
        f"{cost.in_process_us:.1f} µs, on DBOS {cost.dbos_us:.0f} µs "
        f"(+{cost.overhead_us:.0f} µs); {cost.statements:.1f} SQL statements and "
        f"{cost.commits:.1f} commits per step on the worker's PostgreSQL connection"
    )
    return {
        "runs": runs,
        "in_process_seconds": baseline,
        "passes": [asdict(p) | {"runs_per_second": p.runs_per_second} for p in passes],
        "kill_pass": asdict(killed) | {"runs_per_second": killed.runs_per_second},
        "step_cost": asdict(cost) | {"overhead_us": cost.overhead_us},
    }


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--probe":
        print(json.dumps(_step_cost_probe(sys.argv[2])))
    else:
        measure("--quick" in sys.argv)
