"""Leases: each worker's heartbeat, and the takeover of the runs of a worker that stopped beating.

DBOS resumes a process's own unfinished workflows when that process starts
again with the same executor id, but nothing takes over the workflows of an
executor that never comes back. So each worker beats a row in
``selectgraph_executors`` every ``ttl / 5`` seconds (the database's clock
decides), and each worker's janitor looks for rows older than ``ttl``: their
runs are put back on the queue, where any live worker picks them up and
replays them from their recorded steps.

During a database outage every lease ages, including the live ones. A
janitor therefore judges others only once its own beats have succeeded for
a whole ``ttl`` since its last error; otherwise the first worker back would
take over runs its peers are still running. (If it happened anyway, DBOS's
ownership check would let only one execution record each outcome; the node
in flight would run twice.)

PostgreSQL only: a SQLite database serves one machine, and a worker that
restarts there recovers its own runs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import sqlalchemy as sa

from selectgraph.executors.dbos._database import create_engine, create_tables

__all__ = ["Leases", "recover_executor"]

logger = logging.getLogger("selectgraph.executors")


def recover_executor(executor_id: str) -> list[str]:
    """Put the unfinished runs of dead executor ``executor_id`` back on their queues.

    The one place that calls DBOS's recovery of another executor's workflows,
    which is internal API (hence ``dbos>=3.4,<3.5``). Idempotent: a run a live
    worker already took is no longer that executor's.
    """
    from dbos import DBOS

    handles = DBOS._recover_pending_workflows([executor_id])
    return [handle.get_workflow_id() for handle in handles]


class Leases:
    """This worker's heartbeat and janitor, on a thread of its own."""

    def __init__(
        self,
        url: str,
        executor_id: str,
        *,
        ttl: float,
        recover: Callable[[str], list[str]] = recover_executor,
        on_takeover: Callable[[str, list[str]], None] | None = None,
    ) -> None:
        if ttl <= 0:
            raise ValueError(f"lease_ttl must be positive, got {ttl!r}")
        self.executor_id = executor_id
        self.ttl = ttl
        self._engine = create_engine(url, pool_size=1)
        self._recover = recover
        self._on_takeover = on_takeover
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._healthy_since: float | None = None

    def start(self) -> None:
        """Create the table, beat once (so this worker is known before it takes work), go on."""
        create_tables(self._engine)
        self._beat()
        self._healthy_since = time.monotonic()
        self._thread = threading.Thread(
            target=self._loop, name=f"selectgraph-lease-{self.executor_id}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop beating. The row stays: when it expires, another worker takes over what is left."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.ttl)
        self._engine.dispose()

    def _loop(self) -> None:
        while not self._stop.wait(self.ttl / 5):
            try:
                self._beat()
                if self._healthy_since is None:
                    self._healthy_since = time.monotonic()
                if time.monotonic() - self._healthy_since >= self.ttl:
                    self._take_over()
            except Exception as exc:  # the database is away: beat again later
                self._healthy_since = None
                logger.warning("executor %s: lease beat failed: %s", self.executor_id, exc)

    def _beat(self) -> None:
        with self._engine.begin() as connection:
            connection.execute(
                sa.text(
                    "insert into selectgraph_executors (executor_id, heartbeat_at) "
                    "values (:me, now()) on conflict (executor_id) "
                    "do update set heartbeat_at = now()"
                ),
                {"me": self.executor_id},
            )

    def _take_over(self) -> None:
        with self._engine.begin() as connection:
            dead = [
                row[0]
                for row in connection.execute(
                    sa.text(
                        "select executor_id from selectgraph_executors "
                        "where heartbeat_at < now() - make_interval(secs => :ttl) "
                        "and executor_id <> :me"
                    ),
                    {"ttl": self.ttl, "me": self.executor_id},
                )
            ]
        for executor_id in dead:
            runs = self._recover(executor_id)
            with self._engine.begin() as connection:
                connection.execute(
                    sa.text(
                        "delete from selectgraph_executors where executor_id = :dead "
                        "and heartbeat_at < now() - make_interval(secs => :ttl)"
                    ),
                    {"dead": executor_id, "ttl": self.ttl},
                )
            logger.warning(
                "executor %s took over %d run(s) of executor %s, whose lease expired: %s",
                self.executor_id,
                len(runs),
                executor_id,
                ", ".join(runs) or "-",
            )
            if self._on_takeover is not None:
                self._on_takeover(executor_id, runs)
