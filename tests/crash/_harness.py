"""The crash harness: one process per store that forks a child per attempt and kills it.

Run as ``python -m tests.crash._harness <config.json>`` (the tests do). The
process imports selectgraph once and starts no thread, so ``os.fork()`` is
safe; each child opens its own store (SQLite file, PostgreSQL connections)
after the fork, runs or continues its trial's run, and either finishes or is
killed with SIGKILL: by itself at a planned point (inside a node, after a
node's side effect and before its checkpoint, mid-fan-out, inside the
checkpoint's transaction, just after the commit, while paused at the
interrupt, just after the answer was stored) or by this process on a timer.
Then a new child continues the run, and so on until it ends; the checker
compares the outcome with a fault-free run of the same seed. A seed also
picks the durability (sync, async, exit) and the driver (``run``/``resume``
or ``arun``/``aresume``). Results go to the JSON file the config names.

Races: two children answer one interrupt at once (both fresh processes, or
the process that paused against a fresh one), or both carry on one crashed
run; sometimes one of them is killed too.

Config keys: ``store`` (``{"kind": "sqlite", "target": path}`` or
``{"kind": "postgres", "target": url, "schema": name}``), ``workdir``,
``mode`` (``"kills"``, ``"race"`` or ``"stale"``: a deliberate re-run the
checker must flag), ``seeds`` (a list) or ``base`` and ``min_kills`` (trials
from ``base`` on until that many kills happened), ``result``.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import random
import select
import signal
import sys
import threading
import time
import traceback
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from selectgraph import CheckpointConflict, CompiledGraph, ResumeError
from selectgraph.persistence import (
    Checkpoint,
    CheckpointStore,
    InMemoryCheckpointStore,
    PostgresCheckpointStore,
    SQLiteCheckpointStore,
)
from tests.crash import _check
from tests.crash._workflow import PROBE, build_graph

GRAPH: CompiledGraph = build_graph()

NODE_KILLS = ("node_enter", "node_effect")
SAVE_KILLS = ("save_before", "save_insert", "save_after")
KILL_KINDS = (
    *NODE_KILLS,
    *SAVE_KILLS,
    "branch_enter",
    "writes_insert",
    "writes_after",
    "once_effect",
    "paused",
    "saved_answer",
    "timer",
)
"""Where a child dies: self-inflicted at a counted event, or by the parent on a timer.

``branch_enter`` dies entering the second, third or fourth node of the fan-out
(some branches finished and stored their writes); ``writes_insert`` and
``writes_after`` inside and just after the transaction that stores a finished
branch's pending writes; ``save_insert`` inside a save's transaction (rows
written, no COMMIT); ``save_after`` just after the COMMIT (before the runner
hears of it); ``paused`` with the run paused at its interrupt;
``saved_answer`` just after a resume stored the answer.
"""


# ------------------------------------------------------------------ the store


def open_store(spec: dict[str, str]) -> CheckpointStore:
    """The store a config names (opened in the child, after the fork)."""
    if spec["kind"] == "sqlite":
        return SQLiteCheckpointStore(spec["target"])
    return PostgresCheckpointStore(spec["target"], schema=spec["schema"], max_size=2)


class _SQLiteConn:
    """The SQLite store's connection, with a kill point just before a write commits."""

    def __init__(self, real: Any, writing: Callable[[], str | None]) -> None:
        self._real = real
        self._writing = writing

    def execute(self, sql: str, *args: Any) -> Any:
        if sql == "COMMIT":
            what = self._writing()
            if what is not None:
                PROBE.event(f"{what}_insert")  # the rows are written, the transaction is open
        return self._real.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class _PostgresConn:
    """A pooled PostgreSQL connection with kill points after a write's INSERT (before COMMIT)."""

    def __init__(self, real: Any, inserts: dict[str, str]) -> None:
        self._real = real
        self._inserts = inserts

    async def execute(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        cursor = await self._real.execute(query, *args, **kwargs)
        what = self._inserts.get(query) if type(query) is str else None
        if what is not None:
            PROBE.event(f"{what}_insert")
        return cursor

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def install_kill_points(store: Any) -> None:
    """Count the store's writes as events: ``save_before``, ``save_insert`` (in the
    transaction), ``save_after`` and ``saved_<trigger>`` for checkpoints; ``writes_insert``
    and ``writes_after`` for a finished branch's pending writes."""
    writing = threading.local()

    def marked(what: str, call: Callable[[], None]) -> None:
        writing.what = what
        try:
            call()
        finally:
            writing.what = None

    save, put_writes = store.save, store.put_writes

    def counted_save(checkpoint: Checkpoint, *, expected_version: int) -> None:
        PROBE.event("save_before")
        marked("save", lambda: save(checkpoint, expected_version=expected_version))
        PROBE.event("save_after")  # committed; the runner has not heard yet
        PROBE.event(f"saved_{checkpoint.metadata.get('trigger')}")

    def counted_put_writes(run_id: str, checkpoint_id: str, task_id: str, writes: Any) -> None:
        marked("writes", lambda: put_writes(run_id, checkpoint_id, task_id, writes))
        PROBE.event("writes_after")

    store.save, store.put_writes = counted_save, counted_put_writes
    if isinstance(store, SQLiteCheckpointStore):
        store._conn = _SQLiteConn(store._conn, lambda: getattr(writing, "what", None))  # type: ignore[assignment]
        return
    if not isinstance(store, PostgresCheckpointStore):
        return  # the in-memory store of the fault-free run: no transaction to die in
    asave, aput_writes = store.asave, store.aput_writes

    async def counted_asave(checkpoint: Checkpoint, *, expected_version: int) -> None:
        PROBE.event("save_before")
        await asave(checkpoint, expected_version=expected_version)
        PROBE.event("save_after")
        PROBE.event(f"saved_{checkpoint.metadata.get('trigger')}")

    async def counted_aput_writes(
        run_id: str, checkpoint_id: str, task_id: str, writes: Any
    ) -> None:
        await aput_writes(run_id, checkpoint_id, task_id, writes)
        PROBE.event("writes_after")

    store.asave = counted_asave  # type: ignore[method-assign]
    store.aput_writes = counted_aput_writes  # type: ignore[method-assign]
    pool = store._pool
    connection = pool.connection
    inserts = {store._q["insert"]: "save", store._q["put_writes"]: "writes"}

    @asynccontextmanager
    async def wrapped(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        async with connection(*args, **kwargs) as conn:
            yield _PostgresConn(conn, inserts)

    pool.connection = wrapped  # type: ignore[method-assign]


# ---------------------------------------------------------------- the child


@dataclass
class Attempt:
    """What one child is told to do."""

    number: int
    run_id: str
    n: int
    answer: str
    durability: str
    driver: str
    """``"sync"`` (run/resume) or ``"async"`` (arun/aresume in asyncio.run)."""
    log: str
    out: str
    """Prefix of the child's report files (``.seen``, ``.done``, ``.died``, ``.error``)."""
    kill: str | None = None
    fraction: float = 0.0
    """Where in the remaining work the planned kill falls (0 to 1)."""
    kill_index: int = 0
    """Self-test only: die at exactly this count of the ``kill`` event instead."""
    reference: dict[str, int] = field(default_factory=dict)
    """Event counts of the fault-free run, to place a kill among the events left."""
    stop_at_pause: bool = False
    in_memory: bool = False
    """Run on a fresh in-memory store (the fault-free reference run)."""
    bug: str = ""
    """Self-test only: how this attempt's resume is broken (see ``_buggy_head``)."""
    role: str = ""
    """In a race: ``"live"`` (runs to the interrupt itself, then answers from memory),
    ``"fresh"`` (a new process answering from the store), ``"continue"`` (carries on a
    crashed run) or ``"stale"`` (answers after the race is over)."""
    interrupt_id: str = ""
    race_number: int = 0
    """The attempt number the racer logs under once the race starts."""
    ready_fd: int = -1
    go_fd: int = -1


def _write_json(path: str, value: Any) -> None:
    temporary = f"{path}.tmp"
    with open(temporary, "w") as handle:
        json.dump(value, handle)
    os.replace(temporary, path)


def _pending_visits(head: Checkpoint) -> list[tuple[str, int]]:
    """Node visits that finished branches recorded as pending writes under ``head``.

    Under sync durability a fan-out stores each finished branch's writes at
    once, so those branch nodes count as completed: a resume must reuse them.
    """
    found = []
    for records in head.pending_writes.values():
        for record in records:
            history = record.get("history", []) if type(record) is dict else []
            for entry in history:
                node, raw = entry[0], entry[1:]
                # A [node, {fields}] pair, or the compact [node, step, visit, ...] list.
                one = len(raw) == 1 and type(raw[0]) is dict
                visit: Any = raw[0]["visit"] if one else raw[1]
                found.append((node, int(visit)))
    return found


def _seen(store: CheckpointStore, run_id: str) -> dict[str, Any]:
    """The committed head, as the checker needs it.

    Completed visits come from the history the head's state holds (the last
    visit of each node recorded there), from finished branches' pending
    writes, and from ``metadata["visits"]`` when the checkpoint carries it;
    the memoized steps from ``metadata["memo"]``.
    """
    head = store.head(run_id)
    if head is None:
        return {
            "visits": {},
            "memo": [],
            "version": 0,
            "trigger": None,
            "next": None,
            "pending": [],
        }
    visits: dict[str, int] = dict(head.metadata.get("visits", {}))
    state = GRAPH.get_state(run_id, checkpoint_store=store).state
    done = [(node, result.visit) for node, result in state.history]
    done += _pending_visits(head)
    for node, visit in done:
        visits[node] = max(visits.get(node, 0), visit)
    return {
        "visits": visits,
        "memo": sorted(head.metadata.get("memo", {})),
        "version": head.version,
        "trigger": head.metadata.get("trigger"),
        "next": head.next,
        "pending": sorted(k for k, v in head.interrupts.items() if not v.get("answered")),
    }


def _outcome(store: CheckpointStore, run_id: str) -> dict[str, Any]:
    """The finished run: its state, and the nodes its node_complete checkpoints say finished."""
    checkpoints = store.list(run_id)
    order = [
        c.next[0]["after"]
        for c in checkpoints
        if c.metadata.get("trigger") == "node_complete" and c.next and type(c.next[0]) is dict
    ]
    return {
        "data": GRAPH.get_state(run_id, checkpoint_store=store).values,
        "order": order,
        "triggers": [c.metadata.get("trigger") for c in checkpoints],
    }


def _place_kill(job: Attempt, seen: dict[str, Any]) -> None:
    """Arm the probe: the planned kill falls among the events this attempt has left.

    A kill that can no longer happen (the memoized step or the pause are behind
    the run) becomes a kill on entering a node, so every plan kills something.
    """
    kill = job.kill
    if kill is None or kill == "timer":
        return
    if job.kill_index:
        PROBE.kill_at[kill] = job.kill_index
        return
    reviewed = "review" in seen["visits"]
    if kill == "once_effect" and (reviewed or seen["memo"]):
        kill = "node_enter"
    if kill == "paused" and (reviewed or seen["pending"] or seen["memo"]):
        kill = "node_enter"
    if kill == "saved_answer" and (reviewed or seen["trigger"] == "answer"):
        kill = "node_enter"
    if kill in ("branch_enter", "writes_insert", "writes_after") and "merge" in seen["visits"]:
        kill = "node_enter"
    if kill in ("writes_insert", "writes_after") and job.durability != "sync":
        kill = "branch_enter"  # only sync durability stores branches' writes at once
    if kill == "branch_enter":
        PROBE.kill_at[kill] = 2 + int(job.fraction * 3)
        return
    if kill in ("writes_insert", "writes_after"):
        PROBE.kill_at[kill] = 1 + int(job.fraction * 3)
        return
    if kill in ("once_effect", "paused", "saved_answer"):
        PROBE.kill_at[kill] = 1
        return
    total = max(1, job.reference["nodes"])
    nodes_left = max(1, total - sum(seen["visits"].values()))
    if kill in NODE_KILLS:
        PROBE.kill_at[kill] = 1 + int(job.fraction * nodes_left)
    else:
        saves_left = max(1, round(job.reference["saves"] * nodes_left / total))
        PROBE.kill_at[kill] = 1 + int(job.fraction * saves_left)


def _call(job: Attempt, method: str, *args: Any, **kwargs: Any) -> Any:
    """``GRAPH.<method>(...)``, or with the async driver ``asyncio.run(GRAPH.a<method>(...))``."""
    if job.driver == "async":
        return asyncio.run(getattr(GRAPH, f"a{method}")(*args, **kwargs))
    return getattr(GRAPH, method)(*args, **kwargs)


def drive(store: CheckpointStore, job: Attempt, seen: dict[str, Any]) -> Any:
    """Start, continue or resume the run until it ends (or pauses, when told to stop there)."""
    kwargs: dict[str, Any] = {"checkpoint_store": store, "durability": job.durability}
    if seen["trigger"] is None:
        result = _call(job, "run", {"n": job.n}, run_id=job.run_id, **kwargs)
    elif seen["pending"]:
        result = _call(job, "resume", dict.fromkeys(seen["pending"], job.answer), **kwargs)
    elif not seen["next"]:
        return None  # it ended before the last child could report it
    else:
        result = _call(job, "run", None, run_id=job.run_id, **kwargs)
    while result.interrupted:
        if job.stop_at_pause:
            return result
        PROBE.event("paused")
        result = _call(job, "resume", result.interrupt_id, job.answer, **kwargs)
    if result.stop_reason != "end":
        raise AssertionError(f"run {job.run_id} stopped with {result.stop_reason!r}")
    return result


def _buggy_head(store: Any, bug: str) -> None:
    """Self-test only: make ``head`` lie the way a broken resume would.

    ``"older_head"``: answer with the head's parent (the last checkpoint is
    forgotten). ``"no_pending"``: drop the head's pending writes (finished
    branches are forgotten).
    """
    head = store.head

    def lying(run_id: str) -> Checkpoint | None:
        current: Checkpoint | None = head(run_id)
        if current is None:
            return None
        if bug == "no_pending":
            return current.replace(pending_writes={})
        if current.parent_id is None:
            return current
        parent: Checkpoint = store.load(current.parent_id)
        return parent

    store.head = lying


def _note_death(path: str) -> Callable[[str], None]:
    """What a child does just before killing itself: write down where (for the report)."""

    def note(kind: str) -> None:
        Path(path).write_text(kind)

    return note


def attempt_child(spec: dict[str, str], job: Attempt) -> None:
    """The body of a forked child: one attempt at the trial's run."""
    store = InMemoryCheckpointStore() if job.in_memory else open_store(spec)
    try:
        install_kill_points(store)
        seen = _seen(store, job.run_id)
        _write_json(f"{job.out}.seen", seen)
        if job.bug:
            _buggy_head(store, job.bug)
            seen = _seen(store, job.run_id)  # what the buggy resume believes
        PROBE.attempt = job.number
        PROBE.log_fd = os.open(job.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        PROBE.on_kill = _note_death(f"{job.out}.died")
        _place_kill(job, seen)
        result = drive(store, job, seen)
        PROBE.kill_at.clear()
        report: dict[str, Any] = {"counts": dict(PROBE.counts)}
        if result is None or not result.interrupted:
            report.update(_outcome(store, job.run_id))
        _write_json(f"{job.out}.done", report)
    finally:
        PROBE.kill_at.clear()
        store.close()


def racer_child(spec: dict[str, str], job: Attempt) -> None:
    """A racer: get ready, wait for the start, then answer the interrupt, or (role
    ``"continue"``) carry on the crashed run to its end (see ``race_trial``)."""
    store = open_store(spec)
    try:
        install_kill_points(store)
        seen = _seen(store, job.run_id)
        _write_json(f"{job.out}.seen", seen)
        PROBE.attempt = job.number
        PROBE.log_fd = os.open(job.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        PROBE.on_kill = _note_death(f"{job.out}.died")
        kwargs: dict[str, Any] = {"checkpoint_store": store, "durability": job.durability}
        if job.role == "live":
            paused = drive(store, job, seen)
            if paused is None or paused.interrupt_id != job.interrupt_id:
                raise AssertionError(f"the live racer paused at {paused!r}")
        os.write(job.ready_fd, b"r")
        if os.read(job.go_fd, 1) != b"g":
            raise AssertionError("the race never started")
        before = store.head(job.run_id)
        PROBE.attempt = job.race_number
        PROBE.counts.clear()
        if job.kill is not None:
            left = 2 if job.kill in NODE_KILLS else 4  # review and finish; their saves
            PROBE.kill_at[job.kill] = 1 + int(job.fraction * left)
        try:
            if job.role == "continue":
                result = drive(store, job, _seen(store, job.run_id))
            else:
                result = _call(job, "resume", job.interrupt_id, job.answer, **kwargs)
            if result is None:
                outcome = "found it finished"
            else:
                outcome = "won" if result.stop_reason == "end" else f"stopped: {result.stop_reason}"
        except CheckpointConflict:
            outcome = "conflict"
        except ResumeError:
            outcome = "resume_error"
        PROBE.kill_at.clear()
        after = store.head(job.run_id)
        report = {
            "outcome": outcome,
            "answer": job.answer,
            "version_before": None if before is None else before.version,
            "version_after": None if after is None else after.version,
        }
        if job.role == "stale":
            try:
                GRAPH.run(None, run_id=job.run_id, **kwargs)
                report["continue"] = "ran"
            except ResumeError:
                report["continue"] = "resume_error"
            last = store.head(job.run_id)
            report["version_last"] = None if last is None else last.version
        _write_json(f"{job.out}.done", report)
    finally:
        PROBE.kill_at.clear()
        store.close()


def fork(body: Callable[[], None], error_path: str) -> int:
    """Run ``body`` in a forked child; the child exits 0, or 1 with its traceback written."""
    pid = os.fork()
    if pid:
        return pid
    code = 0
    try:
        body()
    except BaseException:
        code = 1
        with suppress(BaseException):
            Path(error_path).write_text(traceback.format_exc())
    finally:
        os._exit(code)
    return 0  # never reached


HANG_SECONDS = 60.0
"""A child still running after this long is stuck (a lock a dead child left, say)."""


class Hung(Exception):
    """A child did not finish within HANG_SECONDS (it was killed)."""


def _too_long(signum: int, frame: Any) -> None:
    raise Hung(f"a child still ran after {HANG_SECONDS:.0f} s")


def reap(pid: int) -> tuple[bool, int]:
    """Wait for a child: (killed by SIGKILL, exit code). Raises Hung for a stuck child."""
    previous = signal.signal(signal.SIGALRM, _too_long)
    signal.setitimer(signal.ITIMER_REAL, HANG_SECONDS)
    try:
        _, status = os.waitpid(pid, 0)
    except Hung:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    if os.WIFSIGNALED(status):
        return os.WTERMSIG(status) == signal.SIGKILL, -os.WTERMSIG(status)
    return False, os.WEXITSTATUS(status)


def _read(path: str) -> Any:
    try:
        with open(path) as handle:
            return json.load(handle)
    except FileNotFoundError:
        return None


def _text(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except FileNotFoundError:
        return None


# ---------------------------------------------------------------- the trials


@dataclass
class Trial:
    """One seeded trial: a run killed a few times, then carried to its end."""

    seed: int
    run_id: str
    n: int
    answer: str
    durability: str
    driver: str = "sync"
    kills: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0
    notes: dict[str, Any] = field(default_factory=dict)
    """What else happened (a race's roles and outcomes)."""


class Harness:
    """Runs trials against one store."""

    def __init__(self, spec: dict[str, str], workdir: Path) -> None:
        self.spec = spec
        self.workdir = workdir
        self.tag = uuid.uuid4().hex[:8]
        self.attempts = 0
        self.seen: list[_check.Seen] = []
        """The heads each attempt of the current trial found (for ``_check.reruns``)."""
        self.finished: list[float] = []
        """Seconds taken by attempts that ran to the end: the window for timer kills."""

    def _job(self, trial: Trial, kind: str, **overrides: Any) -> Attempt:
        self.attempts += 1
        base = f"{self.workdir}/{self.tag}-{trial.seed}-{self.attempts}"
        fields: dict[str, Any] = {
            "number": self.attempts,
            "run_id": trial.run_id,
            "n": trial.n,
            "answer": trial.answer,
            "durability": trial.durability,
            "driver": trial.driver,
            "log": f"{self.workdir}/{self.tag}-{trial.seed}.{kind}.log",
            "out": base,
        }
        fields.update(overrides)
        return Attempt(**fields)

    def run_child(self, job: Attempt, timer: float | None = None) -> dict[str, Any]:
        """Fork one attempt, maybe kill it on a timer, and collect what it reported."""
        started = time.perf_counter()
        pid = fork(lambda: attempt_child(self.spec, job), f"{job.out}.error")
        if timer is not None:
            time.sleep(timer)
            os.kill(pid, signal.SIGKILL)
        killed, code = reap(pid)
        if not killed and not job.in_memory:
            self.finished = [*self.finished[-19:], time.perf_counter() - started]
        return {
            "killed": killed,
            "code": code,
            "seen": _read(f"{job.out}.seen"),
            "done": _read(f"{job.out}.done"),
            "died": _text(f"{job.out}.died"),
            "error": _text(f"{job.out}.error"),
        }

    def reference(self, trial: Trial, answer: str | None = None) -> dict[str, Any]:
        """The fault-free run of the trial's seed, with the same durability.

        It runs on an in-memory store (in a child, like the others): an
        independent oracle, and it spends no time in fsync.
        """
        answer = answer or trial.answer
        job = self._job(trial, f"reference-{answer}", answer=answer, in_memory=True)
        started = time.perf_counter()
        report = self.run_child(job)
        if report["done"] is None:
            raise RuntimeError(f"the fault-free run of seed {trial.seed} failed: {report}")
        done: dict[str, Any] = report["done"]
        done["seconds"] = time.perf_counter() - started
        effects = _check.parse_effects(Path(job.log).read_text())
        done["keys"] = sorted({e.key for e in effects})
        trial.problems += [f"fault-free run: {p}" for p in _check.exactly_once(effects)]
        counts = done["counts"]
        done["events"] = {
            "nodes": counts.get("node_enter", 0),
            "saves": counts.get("save_before", 0),
        }
        return done

    def check(self, trial: Trial, reference: dict[str, Any], final: dict[str, Any] | None) -> None:
        """Compare the trial's log, heads and outcome with the fault-free run."""
        log = Path(f"{self.workdir}/{self.tag}-{trial.seed}.trial.log")
        effects = _check.parse_effects(log.read_text() if log.exists() else "")
        trial.problems += _check.reruns(effects, self.seen)
        trial.problems += _check.coverage(effects, [tuple(k) for k in reference["keys"]])
        if final is None:
            trial.problems.append("the run never reported its end")
        else:
            trial.problems += _check.same_outcome(final, reference)

    def continue_until_done(
        self, trial: Trial, rng: random.Random, kills: int, reference: dict[str, Any]
    ) -> dict[str, Any] | None:
        """Attempts until the run ends, the first ``kills`` of them with a planned kill.

        Under sync durability the pending-writes kill points are drawn three times
        as often: only there do they exist, and only while the fan-out is ahead.
        """
        kinds = list(KILL_KINDS)
        if trial.durability == "sync":
            kinds += ["writes_insert", "writes_after"] * 2
        else:
            kinds = [k for k in kinds if not k.startswith("writes_")]
        for _ in range(kills + 20):
            kill = rng.choice(kinds) if len(trial.kills) < kills else None
            job = self._job(
                trial,
                "trial",
                kill=kill,
                fraction=rng.random(),
                reference=reference["events"],
            )
            timer = rng.random() * self._window(reference) if kill == "timer" else None
            report = self.run_child(job, timer)
            if report["seen"] is not None:
                seen = report["seen"]
                self.seen.append(_check.Seen(job.number, seen["visits"], frozenset(seen["memo"])))
            if report["killed"]:
                where = "timer" if kill == "timer" else report["died"]
                trial.kills.append({"attempt": job.number, "planned": kill, "at": where})
                continue
            if report["error"] is not None or report["code"] != 0:
                trial.problems.append(f"attempt {job.number} failed: {report['error']}")
                return None
            if report["done"] is not None and "data" in report["done"]:
                return report["done"]  # type: ignore[no-any-return]
        trial.problems.append("the run did not end after 20 attempts without a planned kill")
        return None

    def clean(self, seed: int) -> None:
        """Delete a trial's side-effect logs and child reports."""
        for path in self.workdir.glob(f"{self.tag}-{seed}[.-]*"):
            path.unlink()

    def _window(self, reference: dict[str, Any]) -> float:
        """How long after its fork a timer kill may come: about as long as an attempt lasts."""
        if not self.finished:
            return 3 * float(reference["seconds"])
        return 1.2 * sum(self.finished) / len(self.finished)

    def kills_trial(self, seed: int) -> Trial:
        """A run killed 3 to 8 times at seeded points, continued to its end, and checked."""
        rng = random.Random(seed)
        trial = Trial(
            seed=seed,
            run_id=f"crash-{self.tag}-{seed}",
            n=rng.randint(8, 15),
            answer=f"ok{seed}",
            durability=rng.choices(["sync", "async", "exit"], [6, 2, 2])[0],
        )
        trial.driver = rng.choice(["sync", "sync", "async"])
        started = time.perf_counter()
        self.seen = []
        reference = self.reference(trial)
        final = self.continue_until_done(trial, rng, rng.randint(3, 8), reference)
        self.check(trial, reference, final)
        trial.seconds = time.perf_counter() - started
        return trial

    def race_trial(self, seed: int) -> Trial:
        """Two processes answer one interrupted run at once; exactly one may win.

        Seeded variations: the same answer or two different ones; two fresh
        processes, or the process that paused (answering from memory) against a
        fresh one; and sometimes a kill of one racer after the start. Afterwards
        the run is carried to its end, a stale worker tries to answer again, and
        the outcome is compared with a fault-free run given the stored answer.
        """
        rng = random.Random(seed)
        trial = Trial(seed, f"race-{self.tag}-{seed}", rng.randint(8, 15), f"A{seed}", "sync")
        answers = [f"A{seed}", f"A{seed}" if rng.random() < 0.3 else f"B{seed}"]
        live = rng.random() < 0.5
        victim = rng.choice([None, None, 0, 1])
        trial.driver = rng.choice(["sync", "sync", "async"])
        crashed = rng.random() < 0.35
        if crashed:  # the run was killed; two workers pick it up, with the same answer
            answers[1] = answers[0]
            live = False
            trial.durability = rng.choice(["sync", "sync", "async", "exit"])
        trial.notes["kind"] = "crashed" if crashed else "interrupt"
        self.seen = []
        reference = self.reference(trial)
        started = time.perf_counter()
        step = next(
            e.step for e in self._effects(trial, f"reference-{trial.answer}") if e.kind == "once"
        )
        interrupt_id = f"{trial.run_id}|{step}:review|0"
        if crashed:
            kill = rng.choice((*NODE_KILLS, *SAVE_KILLS, "branch_enter", "paused"))
            first_job = self._job(
                trial, "trial", kill=kill, fraction=rng.random(), reference=reference["events"]
            )
            first = self.run_child(first_job)
            self._note_seen(first, first_job.number)
            if first["killed"]:
                trial.kills.append(
                    {"attempt": first_job.number, "planned": kill, "at": first["died"]}
                )
        elif not live:
            first = self.run_child(self._job(trial, "trial", stop_at_pause=True))
            self._note_seen(first, self.attempts)
        if not live and first["error"] is not None:
            trial.problems.append(f"the first attempt failed: {first['error']}")
            return trial
        ready_r, ready_w = os.pipe()
        go_r, go_w = os.pipe()
        racers = []
        for index, answer in enumerate(answers):
            job = self._job(
                trial,
                "trial",
                role="continue" if crashed else "live" if live and index == 0 else "fresh",
                answer=answer,
                interrupt_id=interrupt_id,
                ready_fd=ready_w,
                go_fd=go_r,
                stop_at_pause=not crashed,
                kill=rng.choice((*NODE_KILLS, *SAVE_KILLS)) if victim == index else None,
                fraction=rng.random(),
            )
            racers.append(job)
        for job in racers:  # attempt numbers above both racers' start: see _check.reruns
            job.race_number = self.attempts + 1 + racers.index(job)
        self.attempts += 2
        pids = [
            fork(functools.partial(racer_child, self.spec, job), f"{job.out}.error")
            for job in racers
        ]
        ready = b""
        while len(ready) < 2:
            readable, _, _ = select.select([ready_r], [], [], 60)
            if not readable:
                break
            ready += os.read(ready_r, 2 - len(ready))
        os.write(go_w, b"gg")
        reports = []
        for pid, job in zip(pids, racers, strict=True):
            killed, code = reap(pid)
            reports.append(
                {
                    "killed": killed,
                    "code": code,
                    "role": job.role,
                    "answer": job.answer,
                    "number": job.race_number,
                    "done": _read(f"{job.out}.done"),
                    "error": _text(f"{job.out}.error"),
                    "seen": _read(f"{job.out}.seen"),
                }
            )
            self._note_seen(reports[-1], job.number)
            if killed:
                trial.kills.append(
                    {
                        "attempt": job.race_number,
                        "planned": job.kill,
                        "at": _text(f"{job.out}.died"),
                    }
                )
        for fd in (ready_r, ready_w, go_r, go_w):
            os.close(fd)
        if len(ready) < 2:
            trial.problems.append(f"the racers never both got ready: {reports}")
            return trial
        final = self.continue_until_done(trial, rng, 0, reference)
        stale = self._stale(trial, interrupt_id)
        self._judge_race(trial, reports, stale, final, answers, crashed)
        if final is not None:
            stored = str(final["data"]["answer"]).split(":")[0]
            if stored != trial.answer:
                reference = self.reference(trial, stored)
        self.check(trial, reference, final)
        trial.notes["race"] = [
            f"{r['role']}:{r['answer']}:"
            + ("killed" if r["killed"] else str((r["done"] or {}).get("outcome")))
            for r in reports
        ]
        trial.seconds = time.perf_counter() - started
        return trial

    def _effects(self, trial: Trial, kind: str) -> list[_check.Effect]:
        log = Path(f"{self.workdir}/{self.tag}-{trial.seed}.{kind}.log")
        return _check.parse_effects(log.read_text() if log.exists() else "")

    def _note_seen(self, report: dict[str, Any], number: int) -> None:
        seen = report["seen"]
        if seen is not None:
            self.seen.append(_check.Seen(number, seen["visits"], frozenset(seen["memo"])))

    def _stale(self, trial: Trial, interrupt_id: str) -> dict[str, Any]:
        """A worker that answers the interrupt after the race and the run are over."""
        ready_r, ready_w = os.pipe()
        go_r, go_w = os.pipe()
        os.write(go_w, b"g")
        job = self._job(
            trial,
            "trial",
            role="stale",
            answer=f"stale{trial.seed}",
            interrupt_id=interrupt_id,
            ready_fd=ready_w,
            go_fd=go_r,
        )
        job.race_number = job.number
        pid = fork(lambda: racer_child(self.spec, job), f"{job.out}.error")
        killed, code = reap(pid)
        for fd in (ready_r, ready_w, go_r, go_w):
            os.close(fd)
        self._note_seen({"seen": _read(f"{job.out}.seen")}, job.number)
        return {
            "killed": killed,
            "code": code,
            "done": _read(f"{job.out}.done"),
            "error": _text(f"{job.out}.error"),
            "number": job.number,
        }

    def _judge_race(
        self,
        trial: Trial,
        reports: list[dict[str, Any]],
        stale: dict[str, Any],
        final: dict[str, Any] | None,
        answers: list[str],
        crashed: bool,
    ) -> None:
        """Exactly one winner, losers that ran nothing, and a stored answer nobody overwrote.

        After a crash (``crashed``) a loser may have run the node it was on before
        its save was refused (the winner ran it too, and only one completion is
        stored: the history check sees to that), so "ran nothing" is not asked.
        """
        problems = trial.problems
        for report in reports:
            if report["error"] is not None:
                problems.append(
                    f"racer {report['number']} ({report['role']}) failed: {report['error']}"
                )
        finished = [r for r in reports if not r["killed"] and r["done"] is not None]
        outcomes = [r["done"]["outcome"] for r in finished]
        winners = [r for r in finished if r["done"]["outcome"] == "won"]
        if len(winners) > 1:
            problems.append(f"both racers won: {outcomes}")
        # A crash after the run's end (its last save committed): nothing left to race for.
        ended = all(r["seen"] and r["seen"]["trigger"] and not r["seen"]["next"] for r in reports)
        both_saw_end = ended and outcomes == ["found it finished"] * 2
        if (
            len(finished) == 2
            and not both_saw_end
            and sorted(outcomes)
            not in (
                ["conflict", "won"],
                ["resume_error", "won"],
                ["found it finished", "won"],
            )
        ):
            problems.append(f"two racers, outcomes {outcomes}: expected one win and one refusal")
        log = self._effects(trial, "trial")
        for report in finished if not crashed else []:
            if report["done"]["outcome"] != "won":
                ran = [e for e in log if e.attempt == report["number"]]
                if ran:
                    problems.append(f"racer {report['number']} lost but ran {ran}")
        if final is not None:
            stored = str(final["data"]["answer"]).split(":")[0]
            if winners and stored != winners[0]["answer"]:
                problems.append(
                    f"the winner answered {winners[0]['answer']!r}, the run kept {stored!r}"
                )
            if stored not in answers:
                problems.append(f"the run kept {stored!r}, which no racer answered")
            for report in finished:
                refused = report["done"]["outcome"] != "won"
                if refused and stored == report["answer"] and answers[0] != answers[1]:
                    problems.append(f"the run kept the answer of refused racer {report['number']}")
        self._judge_stale(trial, stale)

    @staticmethod
    def _judge_stale(trial: Trial, stale: dict[str, Any]) -> None:
        """The worker that answers after everything is over is refused and writes nothing."""
        problems = trial.problems
        done = stale["done"]
        if done is None:
            problems.append(f"the stale worker failed: {stale['error']}")
        else:
            if done["outcome"] != "resume_error" or done["continue"] != "resume_error":
                problems.append(f"the stale worker was not refused: {done}")
            if not done["version_before"] == done["version_after"] == done["version_last"]:
                problems.append(f"the stale worker moved the head: {done}")

    def stale_trial(self, seed: int) -> Trial:
        """Self-test: an attempt resumes wrongly; the checker must report what it ran again.

        By ``seed % 3``: 0 dies inside the loop, then continues from the checkpoint
        before the head (a completed ``work`` visit runs again); 1 pauses at the
        interrupt, then does the same (the memoized draft is made again); 2 dies
        entering the join, then ignores the finished branches' pending writes (the
        branches run again). ``notes["flaggable"]`` says whether the wrong resume
        had completed work to repeat.
        """
        rng = random.Random(seed)
        trial = Trial(seed, f"stale-{self.tag}-{seed}", rng.randint(8, 15), f"ok{seed}", "sync")
        started = time.perf_counter()
        self.seen = []
        reference = self.reference(trial)
        variant = seed % 3
        events = reference["events"]
        if variant == 0:
            first = self._job(trial, "trial", kill="node_enter", fraction=0.3, reference=events)
        elif variant == 1:
            first = self._job(trial, "trial", stop_at_pause=True)
        else:  # entering "merge": every branch has finished and stored its writes
            first = self._job(trial, "trial", kill="node_enter", kill_index=trial.n + 7)
        self._note_seen(self.run_child(first), first.number)
        bug = "no_pending" if variant == 2 else "older_head"
        job = self._job(trial, "trial", bug=bug)
        report = self.run_child(job)
        self._note_seen(report, job.number)
        trial.notes["bug"] = bug
        trial.notes["flaggable"] = (
            variant != 2 or "left" in self.seen[-1].visits or ("mid2" in self.seen[-1].visits)
        )
        if report["error"] is not None:
            trial.notes["stale_attempt"] = report["error"].strip().splitlines()[-1]
        final = report["done"] if report["done"] and "data" in report["done"] else None
        self.check(trial, reference, final)
        trial.seconds = time.perf_counter() - started
        return trial


def main() -> None:
    """Entry point: ``python -m tests.crash._harness <config.json>``."""
    config = json.loads(Path(sys.argv[1]).read_text())
    workdir = Path(config["workdir"])
    workdir.mkdir(parents=True, exist_ok=True)
    if threading.active_count() != 1:
        raise RuntimeError("the harness must not start threads before it forks")
    if config["store"]["kind"] == "postgres":
        import psycopg_pool  # noqa: F401  (imported once here, not in every child)
    if threading.active_count() != 1:
        raise RuntimeError("importing the PostgreSQL client started a thread: forking is unsafe")
    harness = Harness(config["store"], workdir)
    mode = config["mode"]
    started = time.perf_counter()
    trials: list[Trial] = []

    def seeds() -> Iterator[int]:
        if "seeds" in config:
            yield from config["seeds"]
            return
        seed = config["base"]
        while sum(len(t.kills) for t in trials) < config["min_kills"]:
            yield seed
            seed += 1

    run = {"kills": harness.kills_trial, "race": harness.race_trial, "stale": harness.stale_trial}
    for seed in seeds():
        try:
            trial = run[mode](seed)
        except Hung as exc:
            trial = Trial(seed, "", 0, "", "")
            trial.problems.append(f"an attempt hung: {exc}")
        trials.append(trial)
        print(f"seed {seed}: {len(trial.kills)} kills, {len(trial.problems)} problems", flush=True)
        if not trial.problems and mode != "stale":
            harness.clean(seed)  # a failing trial's logs and reports stay for a look
    by_kind: dict[str, int] = {}
    for trial in trials:
        for kill in trial.kills:
            by_kind[str(kill["at"])] = by_kind.get(str(kill["at"]), 0) + 1
    _write_json(
        config["result"],
        {
            "store": config["store"]["kind"],
            "mode": mode,
            "seconds": time.perf_counter() - started,
            "kills": sum(len(t.kills) for t in trials),
            "by_kind": by_kind,
            "trials": [asdict(t) for t in trials],
        },
    )


if __name__ == "__main__":
    main()
