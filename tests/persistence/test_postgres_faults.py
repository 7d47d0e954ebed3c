"""PostgresCheckpointStore under faults: connections killed mid-run, a database gone.

Every run here must end exactly as the same run without faults: the same final
state and history, and the same checkpoints. Kills come three ways: from inside
the save (a trigger makes the backend terminate itself on every few inserts,
updates or commits, counted by a sequence, which a rollback does not undo), from
a node between two saves, and from a killer thread on a random schedule (the slow
test). None of the assertions depends on when a kill lands.
"""

from __future__ import annotations

import contextlib
import os
import random
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from selectgraph import END, AgentGraph, CheckpointConflict, StoreUnavailable
from selectgraph.persistence import Checkpoint, PostgresCheckpointStore
from tests.persistence.conftest import POSTGRES_URL, drop_schema, postgres_or_skip
from tests.persistence.test_postgres_store import terminate_pool_connections as terminate

STEPS = 12
Outcome = tuple[Any, ...]


def cp(checkpoint_id: str, version: int) -> Checkpoint:
    return Checkpoint(
        run_id="r", checkpoint_id=checkpoint_id, version=version, step=version, values={}
    )


@dataclass
class Target:
    """A schema of its own and an application_name to find the store's backends by."""

    schema: str = field(default_factory=lambda: f"sg_test_{os.getpid()}_{secrets.token_hex(4)}")
    name: str = field(default_factory=lambda: f"sg-fault-{secrets.token_hex(4)}")

    @property
    def url(self) -> str:
        return f"{POSTGRES_URL}{'&' if '?' in POSTGRES_URL else '?'}application_name={self.name}"

    def store(self, **options: Any) -> PostgresCheckpointStore:
        return PostgresCheckpointStore(self.url, schema=self.schema, **options)


@pytest.fixture
def target() -> Iterator[Target]:
    postgres_or_skip()
    made = Target()
    yield made
    drop_schema(made.schema)


def sabotage(
    schema: str, *, every: int, table: str = "checkpoints", at_commit_only: bool = False
) -> None:
    """Make the store's backends kill themselves on every ``every``-th write of ``table``.

    Three triggers share one counter: a row's INSERT, the run head's UPDATE, and
    (a deferred constraint trigger) the COMMIT, so a save dies at each of the three.
    With ``at_commit_only`` just the last.
    """
    import psycopg
    from psycopg import sql

    statements = [
        "CREATE SEQUENCE {s}.faults",
        """CREATE FUNCTION {s}.fault() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF nextval('{s}.faults') % {every} = 0 THEN
                PERFORM pg_terminate_backend(pg_backend_pid());
            END IF;
            RETURN NEW;
        END $$""",
        "CREATE CONSTRAINT TRIGGER fault_commit AFTER INSERT OR UPDATE ON {s}.{t} "
        "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {s}.fault()",
    ]
    if not at_commit_only:
        statements += [
            "CREATE TRIGGER fault_insert BEFORE INSERT ON {s}.{t} "
            "FOR EACH ROW EXECUTE FUNCTION {s}.fault()",
            "CREATE TRIGGER fault_update BEFORE UPDATE ON {s}.runs "
            "FOR EACH ROW EXECUTE FUNCTION {s}.fault()",
        ]
    quoted = sql.Identifier(schema).as_string(None)
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        for statement in statements:
            text = statement.replace("{s}", quoted).replace("{t}", table)
            conn.execute(text.replace("{every}", str(every)).encode())


def loop_graph(pause: float = 0.0, hook: Callable[[int], None] | None = None) -> Any:
    """``STEPS`` steps of a loop; each may sleep (an LLM call) and call ``hook(n)``."""

    def tick(state: Any) -> dict[str, Any]:
        n = state["n"]
        if hook is not None:
            hook(n)
        if pause:
            time.sleep(pause)
        return {"n": n + 1, "status": f"step {n}", "seen": [*state.get("seen", []), n]}

    graph = AgentGraph("fault_loop", max_steps=None)
    graph.add_node("tick", tick)
    graph.add_edge("tick", "tick", condition=f"n < {STEPS}")
    graph.add_edge("tick", END)
    graph.set_entry("tick")
    return graph.compile()


def _history(rows: Any) -> list[Any]:
    """History without durations, which differ from run to run."""
    return [list(row[:5]) for row in rows]


def outcome(result: Any, store: PostgresCheckpointStore, run_id: str) -> Outcome:
    """What a run must leave behind, whatever failed under it on the way."""
    state = result.state
    ran = [(name, r.step, r.visit, r.outcome, r.output) for name, r in state.history]
    stored: list[Any] = []
    for cp in store.list(run_id):
        values = store.load_state(cp.checkpoint_id)
        row = (cp.version, cp.step, cp.next, cp.metadata.get("trigger"), values["data"])
        stored.append((*row, _history(values["history"])))
    return (dict(state.data), ran, stored)


def run_once(graph: Any, store: PostgresCheckpointStore, run_id: str) -> Outcome:
    result = graph.run({"n": 0}, checkpoint_store=store, run_id=run_id, durability="sync")
    return outcome(result, store, run_id)


def expected(target: Target, run_id: str) -> Outcome:
    """The same run, on a schema of its own, without faults."""
    clean = Target()
    try:
        with clean.store() as store:
            return run_once(loop_graph(), store, run_id)
    finally:
        drop_schema(clean.schema)


def test_saves_killed_mid_transaction_are_retried(target: Target) -> None:
    want = [expected(target, f"run-{i}") for i in range(3)]
    with target.store() as store:
        sabotage(target.schema, every=4)
        got = [run_once(loop_graph(), store, f"run-{i}") for i in range(3)]
        assert store._db.retries >= 3 * STEPS // 4  # the faults did land
    assert got == want


def test_connections_killed_between_saves_are_replaced(target: Target) -> None:
    killed: list[int] = []

    def kill_on_even_steps(n: int) -> None:
        if n % 2 == 0:
            killed.append(terminate(target.name))

    with target.store(min_size=2, max_size=2) as store:
        got = run_once(loop_graph(hook=kill_on_even_steps), store, "run-0")
    assert sum(killed) >= STEPS // 2
    assert got == expected(target, "run-0")


def test_a_retried_save_that_had_committed_is_success(target: Target) -> None:
    with target.store() as store:
        first = cp("c1", 1)
        store.save(first, expected_version=0)
        # What a retry sees when the first attempt committed but its answer was lost.
        store.save(first, expected_version=0)
        assert [cp.checkpoint_id for cp in store.list("r")] == ["c1"]


def test_a_save_that_dies_every_time_raises_store_unavailable(target: Target) -> None:
    with target.store(timeout=1.0) as store:
        sabotage(target.schema, every=1)
        started = time.monotonic()
        with pytest.raises(StoreUnavailable, match=r"did not answer for 1 s.*AdminShutdown"):
            store.save(cp("c1", 1), expected_version=0)
        assert time.monotonic() - started < 3
        assert store.head("r") is None  # nothing half-written


def test_a_claim_whose_commit_went_unanswered_is_not_run_again(target: Target) -> None:
    with target.store() as store:
        sabotage(target.schema, every=1, table="threads", at_commit_only=True)
        with pytest.raises(StoreUnavailable, match=r"during COMMIT.*may have been applied"):
            store.claim_thread("t", "run-1")
        assert store._db.retries == 0


def test_only_connection_failures_count_as_lost() -> None:
    import psycopg
    from psycopg_pool import PoolClosed, PoolTimeout

    from selectgraph.persistence._postgres_retry import connection_lost

    assert connection_lost(psycopg.errors.AdminShutdown())
    assert connection_lost(PoolTimeout())
    assert not connection_lost(PoolClosed())
    assert not connection_lost(psycopg.errors.UniqueViolation())
    assert not connection_lost(psycopg.errors.QueryCanceled())
    assert not connection_lost(ValueError())


def test_sync_saves_take_the_direct_connection_and_survive_its_loss(
    target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    from selectgraph.persistence import _postgres_direct

    with target.store() as store:
        store.save(cp("c1", 1), expected_version=0)  # a first save: the pool's full path
        assert store._direct._conn is None
        store.save(cp("c2", 2), expected_version=1)
        assert store._direct._conn is not None  # a later one: the direct connection
        assert terminate(target.name) == 2  # the pool's connection and the direct one
        store.save(cp("c3", 3), expected_version=2)  # the direct one fails; the pool retries
        assert store._direct._conn is None  # dropped, and resting
        assert store._db.retries >= 1
        monkeypatch.setattr(_postgres_direct, "_REST_AFTER_FAILURE", 0.0)
        store._direct._resting_until = 0.0
        store.save(cp("c4", 4), expected_version=3)
        assert store._direct._conn is not None  # back once its rest is over
        assert [c.checkpoint_id for c in store.list("r")] == ["c1", "c2", "c3", "c4"]
    assert store._direct._conn is None  # closed with the store


def test_a_direct_save_whose_answer_was_lost_is_stored_once(target: Target) -> None:
    with target.store() as store:
        store.save(cp("c1", 1), expected_version=0)
        writer = store._direct
        real = writer.quick_save

        def applied_then_lost(query: str, params: dict[str, Any]) -> bool | None:
            assert real(query, params) is True  # committed...
            return None  # ...but the answer never came: the pool's path settles it

        writer.quick_save = applied_then_lost  # type: ignore[method-assign]
        store.save(cp("c2", 2), expected_version=1)
        del writer.quick_save
        assert [(c.checkpoint_id, c.version) for c in store.list("r")] == [("c1", 1), ("c2", 2)]
        head = store.head("r")
        assert head is not None
        assert head.version == 2
        store.save(cp("c3", 3), expected_version=2)  # and the run goes on


def test_a_save_while_the_direct_connection_is_busy_takes_the_pool(target: Target) -> None:
    with target.store() as store:
        store.save(cp("c1", 1), expected_version=0)
        assert store._direct._lock.acquire()  # another thread's save in progress
        try:
            store.save(cp("c2", 2), expected_version=1)
        finally:
            store._direct._lock.release()
        assert store._direct._conn is None  # never opened: the pool saved it
        with pytest.raises(CheckpointConflict):
            store.save(cp("c2b", 2), expected_version=1)  # a stale version: refused directly
        assert [c.checkpoint_id for c in store.list("r")] == ["c1", "c2"]


class Proxy:
    """A TCP relay to the server that can be cut: the database, as the store sees it, gone."""

    def __init__(self, host: str, port: int) -> None:
        import socket

        self._upstream = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._cut = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import socket

        while True:
            try:
                client, _ = self._listener.accept()
                server = socket.create_connection(self._upstream)
            except OSError:
                return  # cut
            with self._lock:
                self._sockets += [client, server]
                if self._cut:
                    break
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()
        self._close_all()

    @staticmethod
    def _pipe(source: Any, sink: Any) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            return  # the other side, or cut()

    def _close_all(self) -> None:
        import socket

        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def cut(self) -> None:
        """Refuse new connections and drop the open ones."""
        with self._lock:
            self._cut = True
        self._listener.close()
        self._close_all()


def test_a_database_gone_mid_run_raises_store_unavailable(target: Target) -> None:
    from psycopg.conninfo import conninfo_to_dict

    settings = conninfo_to_dict(POSTGRES_URL)
    proxy = Proxy(str(settings.get("host", "127.0.0.1")), int(str(settings.get("port", 5432))))
    url = POSTGRES_URL.replace(f":{settings.get('port', 5432)}/", f":{proxy.port}/")
    assert url != POSTGRES_URL
    with PostgresCheckpointStore(url, schema=target.schema, timeout=1.0) as store:
        store.save(cp("c1", 1), expected_version=0)
        proxy.cut()
        started = time.monotonic()
        with pytest.raises(StoreUnavailable, match=r"did not answer for 1 s") as caught:
            store.save(cp("c2", 2), expected_version=1)
        assert time.monotonic() - started < 3
        with pytest.raises(StoreUnavailable):
            store.head("r")
    assert "psycopg" not in type(caught.value).__module__


# -- the figure: kills on a schedule, from another connection -------------


@dataclass
class Killer:
    """Kills the store's backends every ``low``..``high`` seconds, on a thread."""

    name: str
    low: float
    high: float
    kills: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def _loop(self) -> None:
        while not self._stop.wait(random.uniform(self.low, self.high)):
            terminate(self.name)
            self.kills += 1

    def __enter__(self) -> Killer:
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()


def runs_under_kills(target: Target, runs: int, low: float, high: float) -> tuple[int, int]:
    """``runs`` runs, each ~1 s long, under a killer; (runs that ended as without faults, kills)."""
    graph = loop_graph(pause=0.08)
    want = expected(target, "run")
    good = 0
    with target.store() as store, Killer(target.name, low, high) as killer:
        for i in range(runs):
            try:
                got = run_once(graph, store, "run")
            except Exception as exc:  # counted as a failed run, and reported
                print(f"run {i}: {type(exc).__name__}: {exc}")
            else:
                good += got == want
            store.delete_run("run")
    return good, killer.kills


@pytest.mark.slow
@pytest.mark.parametrize(("low", "high"), [(1.5, 2.5), (0.1, 0.3)])
def test_thirty_runs_under_scheduled_kills_all_end_as_without_faults(
    target: Target, low: float, high: float
) -> None:
    good, kills = runs_under_kills(target, 30, low, high)
    assert kills > 0
    assert good == 30
