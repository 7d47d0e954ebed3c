"""Threads on the DBOS executor: who runs next on a conversation, and what it starts from.

A thread's runs are DBOS workflows like any other; what makes them a
conversation lives in two tables of the executor's database
(``selectgraph_threads``, ``selectgraph_thread_runs``):

- **Admission** (the client, :meth:`ThreadBook.admit`). Starting a run on a
  thread records it there before it is queued, in one transaction. A busy
  thread (a run queued, running or paused on it) refuses the run under
  ``"reject"``; under ``"enqueue"`` it waits its turn; ``"interrupt"`` marks
  the running run ``stopping`` and ``"rollback"`` marks it ``rolled_back``
  (the client then cancels it), and the new run goes before any queued one.
- **Turns** (a workflow step, :meth:`take_turn`). A run starts when no run of
  its thread is running or stopping and no run is queued before it; it then
  reads the thread's state. Until then it waits for a wake-up message
  (:data:`TURN`) that every run sends its thread's waiters when it ends.
- **Stops** (a node step, :meth:`stopping`). A run marked ``stopping`` stops at
  its next node, keeping what it completed.
- **Ends** (a workflow step, :meth:`finish`). A run that ends, fails or is
  stopped writes its last state as the thread's, unless it was rolled back.

Every change bumps the thread row's ``version`` under a ``WHERE version = seen``,
so concurrent clients and workers serialize on it (on PostgreSQL and SQLite
alike) and exactly one of two racing inputs wins.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import sqlalchemy as sa

from selectgraph.core._errors import ThreadBusy
from selectgraph.executors.dbos._database import THREAD_RUNS_TABLE, THREADS_TABLE, create_tables
from selectgraph.persistence._thread_base import check_ttl
from selectgraph.persistence._threads import (
    MULTITASK_STRATEGIES,
    Thread,
    ThreadRun,
    check_thread_id,
)

__all__ = ["ACTIVE", "TURN", "Admission", "ThreadBook", "ThreadGraphMismatch"]

TURN: Final = "selectgraph.turn"
"""The topic a run waiting for its thread is woken on."""
ACTIVE: Final = ("queued", "running", "stopping")
"""A thread run's statuses while it holds or waits for its thread."""
_HOLDING: Final = ("running", "stopping")
_RETRIES: Final = 50

T = THREADS_TABLE
R = THREAD_RUNS_TABLE


class ThreadGraphMismatch(ValueError):
    """A run names a thread that belongs to another graph."""


@dataclass(frozen=True, slots=True)
class Admission:
    """What :meth:`ThreadBook.admit` did."""

    seq: int
    """The run's place in its thread (1 for the first)."""
    superseded: tuple[str, ...] = ()
    """Runs it interrupted or rolled back."""
    existed: bool = False
    """The run was admitted before (a repeated start): nothing changed."""


class _Lost(Exception):
    """Another transaction changed the thread first: read it again."""


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _aware(value: dt.datetime | None) -> dt.datetime | None:
    """SQLite hands datetimes back naive; they were written in UTC."""
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)
    return value


class ThreadBook:
    """The executor's thread tables, through one engine."""

    def __init__(self, engine: sa.Engine) -> None:
        self._engine = engine
        self._ready = False

    def close(self) -> None:
        self._engine.dispose()

    def _begin(self) -> Any:
        if not self._ready:
            create_tables(self._engine)
            self._ready = True
        return self._engine.begin()

    def _retried(self, attempt: Any) -> Any:
        """``attempt()`` until it is not overtaken by another transaction."""
        for _ in range(_RETRIES):
            try:
                return attempt()
            except (_Lost, sa.exc.IntegrityError):
                continue
            except sa.exc.OperationalError as exc:
                if "locked" not in str(exc):  # SQLite's writer lock: try again
                    raise
        raise RuntimeError("a thread changed too often to be updated; try again")

    # ----------------------------------------------------------------- client
    def admit(
        self,
        thread_id: str,
        run_id: str,
        graph: str,
        strategy: str,
        *,
        metadata: Mapping[str, Any] | None = None,
        ttl: float | None = None,
    ) -> Admission:
        """Record run ``run_id`` on thread ``thread_id`` (created if new) under ``strategy``.

        Raises:
            ThreadBusy: ``"reject"`` and the thread is busy; nothing changed.
            ThreadIdError: a thread id no store can hold.
            ThreadGraphMismatch: the thread belongs to another graph.
            ValueError: an unknown strategy or a bad ttl.
        """
        check_thread_id(thread_id)
        check_ttl(ttl)
        if strategy not in MULTITASK_STRATEGIES:
            raise ValueError(
                "multitask_strategy must be one of "
                f"{', '.join(map(repr, MULTITASK_STRATEGIES))}, got {strategy!r}"
            )
        extra = json.loads(json.dumps(dict(metadata or {})))  # JSON data, refused early if not

        def attempt() -> Admission:
            with self._begin() as conn:
                mine = conn.execute(sa.select(R).where(R.c.run_id == run_id)).first()
                if mine is not None:
                    if mine.thread_id != thread_id:
                        raise ValueError(
                            f"run {run_id!r} exists on thread {mine.thread_id!r}, not {thread_id!r}"
                        )
                    return Admission(mine.seq, existed=True)
                now = _now()
                row = conn.execute(sa.select(T).where(T.c.thread_id == thread_id)).first()
                if row is None:
                    conn.execute(
                        T.insert().values(
                            thread_id=thread_id,
                            graph=graph,
                            version=0,
                            runs=0,
                            metadata="{}",
                            created_at=now,
                            updated_at=now,
                        )
                    )
                    row = conn.execute(sa.select(T).where(T.c.thread_id == thread_id)).one()
                if row.graph != graph:
                    raise ThreadGraphMismatch(
                        f"thread {thread_id!r} is a conversation with graph {row.graph!r}, "
                        f"not {graph!r}"
                    )
                active = conn.execute(
                    sa.select(R.c.run_id, R.c.status)
                    .where(R.c.thread_id == thread_id, R.c.status.in_(ACTIVE))
                    .order_by(R.c.jumps.desc(), R.c.seq)
                ).all()
                holding = [r.run_id for r in active if r.status in _HOLDING]
                superseded: tuple[str, ...] = ()
                if active and strategy == "reject":
                    raise ThreadBusy(thread_id, holding[0] if holding else active[0].run_id)
                if holding and strategy in ("interrupt", "rollback"):
                    superseded = tuple(holding)
                    mark = "stopping" if strategy == "interrupt" else "rolled_back"
                    conn.execute(
                        R.update()
                        .where(R.c.run_id.in_(holding), R.c.status.in_(_HOLDING))
                        .values(status=mark)
                    )
                seq = row.runs + 1
                conn.execute(
                    R.insert().values(
                        run_id=run_id,
                        thread_id=thread_id,
                        seq=seq,
                        strategy=strategy if active else "new",
                        jumps=bool(superseded),
                        status="queued",
                        superseded=superseded[0] if superseded else None,
                        created_at=now,
                    )
                )
                ttl_now = ttl if ttl is not None else row.ttl
                self._bump(
                    conn,
                    row,
                    runs=seq,
                    metadata=json.dumps({**json.loads(row.metadata), **extra}),
                    ttl=ttl_now,
                    expires_at=now + dt.timedelta(seconds=ttl_now) if ttl_now else None,
                )
                return Admission(seq, superseded)

        result: Admission = self._retried(attempt)
        return result

    def abandon(self, run_id: str) -> None:
        """Forget an admitted run that could not be queued."""
        with self._begin() as conn:
            conn.execute(R.update().where(R.c.run_id == run_id).values(status="cancelled"))

    def cancelled(self, run_id: str) -> list[str]:
        """Run ``run_id`` was cancelled: it no longer holds its thread. Returns the waiters."""

        def attempt() -> list[str]:
            with self._begin() as conn:
                mine = conn.execute(sa.select(R).where(R.c.run_id == run_id)).first()
                if mine is None or mine.status not in ACTIVE:
                    return []
                row = conn.execute(sa.select(T).where(T.c.thread_id == mine.thread_id)).one()
                conn.execute(R.update().where(R.c.run_id == run_id).values(status="cancelled"))
                self._bump(conn, row)
                return self._waiters(conn, mine.thread_id)

        waiters: list[str] = self._retried(attempt)
        return waiters

    # ----------------------------------------------------------------- worker
    def take_turn(self, run_id: str) -> dict[str, Any]:
        """Start run ``run_id`` if its turn came (JSON data: a workflow step's record).

        ``{"wait": True}`` while another run holds the thread or is queued before it;
        ``{"gone": status}`` for a run cancelled or rolled back before its turn;
        else ``{"state": ...}``, the thread's state (``None`` for a new thread)
        as the last run left it: ``{"state": encoded, "checkpoint": record}``.
        """

        def attempt() -> dict[str, Any]:
            with self._begin() as conn:
                mine = conn.execute(sa.select(R).where(R.c.run_id == run_id)).one()
                if mine.status not in ACTIVE:
                    return {"gone": mine.status}
                row = conn.execute(sa.select(T).where(T.c.thread_id == mine.thread_id)).one()
                if mine.status == "queued":
                    first = conn.execute(
                        sa.select(R.c.run_id, R.c.status)
                        .where(R.c.thread_id == mine.thread_id, R.c.status.in_(ACTIVE))
                        .order_by(R.c.status.in_(_HOLDING).desc(), R.c.jumps.desc(), R.c.seq)
                        .limit(1)
                    ).one()
                    if first.run_id != run_id:
                        return {"wait": True}
                    conn.execute(R.update().where(R.c.run_id == run_id).values(status="running"))
                    self._bump(conn, row)
                state = json.loads(row.state) if row.state is not None else None
                return {"state": state, "seq": mine.seq}

        turn: dict[str, Any] = self._retried(attempt)
        return turn

    def stopping(self, run_id: str) -> bool:
        """Whether run ``run_id`` should stop now (a newer input interrupted or rolled it back)."""
        with self._engine.connect() as conn:
            status = conn.execute(sa.select(R.c.status).where(R.c.run_id == run_id)).scalar()
        return status in ("stopping", "rolled_back", "cancelled")

    def finish(self, run_id: str, outcome: str, state: Mapping[str, Any] | None) -> list[str]:
        """Run ``run_id`` ended (``done``, ``failed`` or ``superseded``); hand its thread on.

        ``state`` (its last state and checkpoint) becomes the thread's, unless the
        run was rolled back. Returns the runs waiting for the thread, to wake.
        """
        body = json.dumps(state, separators=(",", ":")) if state is not None else None

        def attempt() -> list[str]:
            with self._begin() as conn:
                mine = conn.execute(sa.select(R).where(R.c.run_id == run_id)).one()
                row = conn.execute(sa.select(T).where(T.c.thread_id == mine.thread_id)).one()
                if mine.status in _HOLDING:
                    conn.execute(R.update().where(R.c.run_id == run_id).values(status=outcome))
                    if body is not None:
                        self._bump(conn, row, state=body, last_run=run_id)
                    else:
                        self._bump(conn, row)
                return self._waiters(conn, mine.thread_id)

        waiters: list[str] = self._retried(attempt)
        return waiters

    # ------------------------------------------------------------------ reads
    def get_thread(self, thread_id: str) -> Thread | None:
        """Thread ``thread_id`` as the executor keeps it, or None."""
        with self._begin() as conn:
            row = conn.execute(sa.select(T).where(T.c.thread_id == thread_id)).first()
            if row is None:
                return None
            owner = conn.execute(
                sa.select(R.c.run_id)
                .where(R.c.thread_id == thread_id, R.c.status.in_(ACTIVE))
                .order_by(R.c.status.in_(_HOLDING).desc(), R.c.jumps.desc(), R.c.seq)
                .limit(1)
            ).scalar()
        return _thread(row, owner)

    def list_threads(
        self, *, metadata: Mapping[str, Any] | None = None, limit: int = 100
    ) -> list[Thread]:
        """The threads, most recently updated first, whose metadata has ``metadata``'s items."""
        wanted = dict(metadata or {})
        found: list[Thread] = []
        with self._begin() as conn:
            rows = conn.execute(sa.select(T).order_by(T.c.updated_at.desc())).all()
        for row in rows:
            if len(found) >= limit:
                break
            stored = json.loads(row.metadata)
            if all(stored.get(key) == value for key, value in wanted.items()):
                found.append(self.get_thread(row.thread_id) or _thread(row, None))
        return found

    def thread_runs(self, thread_id: str) -> list[ThreadRun]:
        """The runs of thread ``thread_id``, oldest first."""
        with self._begin() as conn:
            rows = conn.execute(
                sa.select(R).where(R.c.thread_id == thread_id).order_by(R.c.seq)
            ).all()
        return [
            ThreadRun(
                thread_id=row.thread_id,
                run_id=row.run_id,
                seq=row.seq,
                created_at=_aware(row.created_at) or _now(),
                strategy=row.strategy,
                superseded=row.superseded,
            )
            for row in rows
        ]

    def run_status(self, run_id: str) -> str | None:
        """Where run ``run_id`` stands on its thread (``queued``, ``running``, ``done``...)."""
        with self._begin() as conn:
            status: str | None = conn.execute(
                sa.select(R.c.status).where(R.c.run_id == run_id)
            ).scalar()
        return status

    def graph_of(self, thread_id: str) -> str | None:
        """The graph thread ``thread_id`` is a conversation with, or None."""
        with self._begin() as conn:
            name: str | None = conn.execute(
                sa.select(T.c.graph).where(T.c.thread_id == thread_id)
            ).scalar()
        return name

    def thread_state(self, thread_id: str) -> dict[str, Any] | None:
        """The thread's state as its last run left it (``{"state", "checkpoint"}``), or None."""
        with self._begin() as conn:
            body = conn.execute(sa.select(T.c.state).where(T.c.thread_id == thread_id)).scalar()
        return json.loads(body) if body is not None else None

    # -------------------------------------------------------------- internals
    @staticmethod
    def _bump(conn: sa.Connection, row: Any, **values: Any) -> None:
        """Write ``values`` to the thread, if nobody changed it since ``row`` was read."""
        changed = conn.execute(
            T.update()
            .where(T.c.thread_id == row.thread_id, T.c.version == row.version)
            .values(version=row.version + 1, updated_at=_now(), **values)
        )
        if changed.rowcount != 1:
            raise _Lost

    @staticmethod
    def _waiters(conn: sa.Connection, thread_id: str) -> list[str]:
        rows: Sequence[Any] = conn.execute(
            sa.select(R.c.run_id)
            .where(R.c.thread_id == thread_id, R.c.status == "queued")
            .order_by(R.c.jumps.desc(), R.c.seq)
        ).all()
        return [row.run_id for row in rows]


def _thread(row: Any, owner: str | None) -> Thread:
    return Thread(
        thread_id=row.thread_id,
        created_at=_aware(row.created_at) or _now(),
        updated_at=_aware(row.updated_at) or _now(),
        metadata=json.loads(row.metadata),
        runs=row.runs,
        last_run=row.last_run,
        owner=owner,
        expires_at=_aware(row.expires_at),
        ttl=row.ttl,
    )
