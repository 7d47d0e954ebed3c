"""What a forked child of the crash harness does, and how the harness forks and reaps it.

A child opens its own store (after the fork), arms one kill point on the
probe, records the committed head it found (for the checker), and runs,
continues or resumes the trial's run; or, in a race, waits for the start
signal first. The store's writes are counted as probe events by wrapping its
save/put_writes methods and, inside their transactions, the SQLite
connection (before COMMIT) or the PostgreSQL connection (after the INSERT).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import traceback
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
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


def write_json(path: str, value: Any) -> None:
    """Write JSON atomically (a reader never sees half a file)."""
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
        write_json(f"{job.out}.seen", seen)
        if job.bug:
            _buggy_head(store, job.bug)
            seen = _seen(store, job.run_id)  # what the buggy resume believes
        PROBE.attempt = job.number
        PROBE.log_fd = os.open(job.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        PROBE.on_kill = _note_death(f"{job.out}.died")
        _place_kill(job, seen)
        try:
            result = drive(store, job, seen)
        except CheckpointConflict:
            if seen["trigger"] is not None:
                raise
            # The killed attempt's first save was still committing on the server when
            # this one looked (PostgreSQL finishes a COMMIT its client died during):
            # nothing ran here yet, so look again and go on from what it saved.
            seen = _seen(store, job.run_id)
            write_json(f"{job.out}.seen", seen)
            result = drive(store, job, seen)
        PROBE.kill_at.clear()
        report: dict[str, Any] = {"counts": dict(PROBE.counts)}
        if result is None or not result.interrupted:
            report.update(_outcome(store, job.run_id))
        write_json(f"{job.out}.done", report)
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
        write_json(f"{job.out}.seen", seen)
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
        write_json(f"{job.out}.done", report)
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


def read_report(path: str) -> Any:
    """A child's JSON report, or None when it wrote none (it died first)."""
    try:
        with open(path) as handle:
            return json.load(handle)
    except FileNotFoundError:
        return None


def read_text(path: str) -> str | None:
    """A child's text note, or None."""
    try:
        return Path(path).read_text()
    except FileNotFoundError:
        return None
