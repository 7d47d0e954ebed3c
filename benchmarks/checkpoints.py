"""Durable execution (issue 9): a loop checkpointed after every step, in both libraries.

One node loops ``steps`` times over a state holding a counter ``n``, a small
``status`` string that changes every step, and a ~10 KB ``context`` dict (a
document with its sources) that changes only every :data:`NOTE_EVERY` steps,
when a note is added to it. Every step is checkpointed, and each contender
gets a fresh database per run, so the size it leaves is the size of one run's
full history (or, where the durability mode keeps less, of what it kept).

Contenders: selectgraph's SQLite store (``sync``, ``async``, ``exit``) and
Postgres store (``sync``, ``async``); LangGraph's ``SqliteSaver`` (``sync``, ``async``,
``exit``) and ``PostgresSaver`` (``sync``, ``async``); and, as the floor of this disk, a
bare SQLite commit (WAL, ``synchronous=FULL``) and a bare Postgres commit of a
small row, once per step. The clock covers ``run()``/``invoke()`` only: opening
the store, creating its tables and closing it are not timed.

Postgres rows need a server at ``$SELECTGRAPH_TEST_POSTGRES_URL`` (default
:data:`POSTGRES_DEFAULT`); each run gets a schema of its own, dropped after its
size is read. Without a server the rows are skipped with the reason printed.
"""

from __future__ import annotations

import gc
import inspect
import os
import random
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypedDict

from benchmarks.workloads import NotAvailable
from selectgraph import END, AgentGraph

STEPS = 1000
QUICK_STEPS = 100
NOTE_EVERY = 100
"""The big ``context`` field changes (a note is appended) once every this many steps."""
CONTEXT_BYTES = 10_000
RUN_ID = "bench-1"
POSTGRES_ENV = "SELECTGRAPH_TEST_POSTGRES_URL"
POSTGRES_DEFAULT = "postgresql://postgres@127.0.0.1:5432/test"

STEP_TARGETS_US = {
    ("selectgraph", "SQLite", "sync"): 200.0,
    ("selectgraph", "SQLite", "exit"): 40.0,
}
SIZE_TARGETS_KIB = {("selectgraph", "SQLite", "sync"): 100.0}
"""The issue's targets; the size target is for STEPS steps with full history."""

Library = Literal["selectgraph", "langgraph", "bare"]
Backend = Literal["SQLite", "Postgres", "none"]
"""Where checkpoints go; "none" runs the same loop with no store, for reference."""


@dataclass(frozen=True, slots=True)
class Sample:
    """One timed run on a fresh database."""

    us_per_step: float
    size_bytes: int | None
    checkpoints: int | None
    """Checkpoints (rows, for the bare baselines) the run left in its database."""


Trial = Callable[[int], Sample]
"""``(steps) -> Sample``: one run of ``steps`` steps on a fresh database, timed."""


# ---------------------------------------------------------------- the state
_VOCABULARY = (
    "agent graph state node edge router checkpoint store durable resume step "
    "message tool call result plan review draft answer source cite context "
    "model token budget retry error branch join scatter gather record replay"
)
_WORDS = _VOCABULARY.split()


def make_context(size: int = CONTEXT_BYTES) -> dict[str, Any]:
    """A ~``size``-byte document as an agent would carry it: text, sources, notes.

    Pseudo-English from a fixed seed, so it compresses like prose (about 3:1),
    not like a run of one repeated character.
    """
    rng = random.Random(9)
    words: list[str] = []
    length = 0
    while length < size - 400:
        word = rng.choice(_WORDS)
        words.append(word)
        length += len(word) + 1
    sources = [f"https://example.org/papers/{rng.randrange(10**6):06d}" for _ in range(8)]
    return {"title": "Checkpoint benchmark brief", "body": " ".join(words), "sources": sources,
            "notes": []}  # fmt: skip


CONTEXT = make_context()


def tick(state: Any) -> dict[str, Any]:
    """The loop's node, for both libraries: count, report, and now and then add a note."""
    n = state["n"] + 1
    update: dict[str, Any] = {"n": n, "status": f"step {n} done"}
    if n % NOTE_EVERY == 0:
        context = state["context"]
        update["context"] = {**context, "notes": [*context["notes"], f"reviewed at step {n}"]}
    return update


def _start() -> dict[str, Any]:
    return {"n": 0, "status": "start", "context": CONTEXT}


def _check(n: int, steps: int, what: str) -> None:
    if n != steps:
        raise RuntimeError(f"{what}: the loop counted to {n}, expected {steps}")


def _check_kept(count: int, steps: int, durability: str, what: str) -> None:
    """A store that lost checkpoints must fail the run, not be timed as a fast one."""
    least = 1 if durability == "exit" else steps
    if count < least:
        raise RuntimeError(
            f"{what}: {count} checkpoints stored after {steps} steps, expected at least {least}"
        )


# ---------------------------------------------------------------- scratch space
@dataclass
class Scratch:
    """Fresh places for databases: SQLite files under a temp dir, Postgres schemas.

    Everything made here is removed by :meth:`close` (SQLite) or right after
    its size is read (Postgres schemas).
    """

    postgres_url: str
    postgres_down: str | None = None
    """Why Postgres rows are skipped, or None when the server answered."""
    _root: tempfile.TemporaryDirectory[str] = field(
        default_factory=lambda: tempfile.TemporaryDirectory(prefix="sg-bench-ckpt-")
    )
    _serial: int = 0

    @classmethod
    def open(cls) -> Scratch:
        url = os.environ.get(POSTGRES_ENV, POSTGRES_DEFAULT)
        scratch = cls(url)
        scratch.postgres_down = _postgres_down(url)
        return scratch

    def close(self) -> None:
        self._root.cleanup()

    def _name(self, prefix: str) -> str:
        self._serial += 1
        return f"{prefix}_{os.getpid()}_{self._serial}"

    @contextmanager
    def sqlite_file(self) -> Iterator[Path]:
        """A path in an empty directory of its own, so the size counts every file there."""
        folder = Path(self._root.name) / self._name("db")
        folder.mkdir()
        try:
            yield folder / "checkpoints.sqlite"
        finally:
            for path in folder.iterdir():
                path.unlink()
            folder.rmdir()

    @contextmanager
    def postgres_schema(self) -> Iterator[str]:
        """A new, empty schema; dropped (with everything in it) on the way out."""
        import psycopg
        from psycopg import sql

        schema = self._name("sg_bench")
        with psycopg.connect(self.postgres_url, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        try:
            yield schema
        finally:
            with psycopg.connect(self.postgres_url, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))

    def postgres_url_in(self, schema: str) -> str:
        """The server URL with ``schema`` first on the search path (for unqualified tables)."""
        separator = "&" if "?" in self.postgres_url else "?"
        return f"{self.postgres_url}{separator}options=-csearch_path%3D{schema}"

    def postgres_size(self, schema: str) -> int:
        """Bytes of every table in ``schema``, with its indexes and TOAST data."""
        import psycopg

        query = (
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace s ON s.oid = c.relnamespace "
            "WHERE s.nspname = %s AND c.relkind IN ('r', 'p')"
        )
        with psycopg.connect(self.postgres_url, autocommit=True) as conn:
            row = conn.execute(query, (schema,)).fetchone()
        return int(row[0]) if row else 0


def _postgres_down(url: str) -> str | None:
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed (pip install -e '.[bench]')"
    try:
        with psycopg.connect(url, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        reason = " ".join(str(exc).split())[:160]
        return f"no PostgreSQL at {url} ({type(exc).__name__}: {reason})"
    return None


def _folder_size(path: Path) -> int:
    """The database file and whatever WAL or journal files it left beside it."""
    return sum(entry.stat().st_size for entry in path.parent.iterdir())


def _timed(run: Callable[[], Any]) -> tuple[Any, float]:
    gc.collect()
    start = time.perf_counter()
    result = run()
    return result, time.perf_counter() - start


# ---------------------------------------------------------------- selectgraph
def _require_runner() -> None:
    parameters = inspect.signature(_selectgraph_loop(1).run).parameters
    missing = [name for name in ("checkpoint_store", "durability") if name not in parameters]
    if missing:
        raise NotAvailable(f"selectgraph's run() takes no {', '.join(missing)} yet (issue 9)")


def _selectgraph_loop(steps: int) -> Any:
    graph = AgentGraph("checkpoint_loop", max_steps=None)
    graph.add_node("tick", tick)
    graph.add_edge("tick", "tick", condition=f"n < {steps}")
    graph.add_edge("tick", END)
    graph.set_entry("tick")
    return graph.compile()


def selectgraph_trial(backend: Backend, durability: str, scratch: Scratch) -> Trial:
    """selectgraph: one ``run()`` with ``checkpoint_store=`` and ``durability=``."""
    _require_runner()
    from selectgraph import PostgresCheckpointStore, SQLiteCheckpointStore

    graphs: dict[int, Any] = {}

    what = f"selectgraph {backend} {durability}"

    def run(store: Any, steps: int) -> tuple[float, int]:
        compiled = graphs.get(steps) or graphs.setdefault(steps, _selectgraph_loop(steps))
        result, seconds = _timed(
            lambda: compiled.run(
                _start(), checkpoint_store=store, run_id=RUN_ID, durability=durability
            )
        )
        _check(result.state["n"], steps, what)
        count = len(store.list(RUN_ID))
        _check_kept(count, steps, durability, what)
        return seconds, count

    def no_store(steps: int) -> Sample:
        compiled = graphs.get(steps) or graphs.setdefault(steps, _selectgraph_loop(steps))
        result, seconds = _timed(lambda: compiled.run(_start()))
        _check(result.state["n"], steps, what)
        return Sample(seconds / steps * 1e6, None, None)

    def sqlite(steps: int) -> Sample:
        with scratch.sqlite_file() as path:
            store = SQLiteCheckpointStore(path)
            try:
                seconds, count = run(store, steps)
            finally:
                store.close()
            return Sample(seconds / steps * 1e6, _folder_size(path), count)

    def postgres(steps: int) -> Sample:
        with scratch.postgres_schema() as schema:
            store = PostgresCheckpointStore(scratch.postgres_url, schema=schema)
            try:
                seconds, count = run(store, steps)
            finally:
                store.close()
            return Sample(seconds / steps * 1e6, scratch.postgres_size(schema), count)

    return {"SQLite": sqlite, "Postgres": postgres, "none": no_store}[backend]


# ---------------------------------------------------------------- LangGraph
class LGLoop(TypedDict):
    n: int
    status: str
    context: dict[str, Any]


def _langgraph_builder(steps: int) -> Any:
    from langgraph.graph import END as LG_END
    from langgraph.graph import START, StateGraph

    builder = StateGraph(LGLoop)
    builder.add_node("tick", tick)
    builder.add_edge(START, "tick")
    builder.add_conditional_edges("tick", lambda s: "tick" if s["n"] < steps else LG_END)
    return builder


def langgraph_trial(backend: Backend, durability: str, scratch: Scratch) -> Trial:
    """LangGraph: one ``invoke(..., durability=)`` on a graph compiled with its saver."""
    from langchain_core.runnables import RunnableConfig

    builders: dict[int, Any] = {}
    what = f"LangGraph {backend} {durability}"

    def run(saver: Any, steps: int) -> tuple[float, int]:
        builder = builders.get(steps) or builders.setdefault(steps, _langgraph_builder(steps))
        graph = builder.compile(checkpointer=saver)
        config: RunnableConfig = {
            "configurable": {"thread_id": RUN_ID},
            "recursion_limit": steps + 10,
        }
        result, seconds = _timed(lambda: graph.invoke(_start(), config, durability=durability))
        _check(result["n"], steps, what)
        count = sum(1 for _ in saver.list(config))
        _check_kept(count, steps, durability, what)
        return seconds, count

    def no_saver(steps: int) -> Sample:
        builder = builders.get(steps) or builders.setdefault(steps, _langgraph_builder(steps))
        graph = builder.compile()
        config: RunnableConfig = {"recursion_limit": steps + 10}
        result, seconds = _timed(lambda: graph.invoke(_start(), config))
        _check(result["n"], steps, what)
        return Sample(seconds / steps * 1e6, None, None)

    def sqlite(steps: int) -> Sample:
        from langgraph.checkpoint.sqlite import SqliteSaver

        with scratch.sqlite_file() as path:
            # The saver serializes access with its own lock; durability="async"
            # writes from another thread, hence check_same_thread=False.
            conn = sqlite3.connect(path, check_same_thread=False)
            try:
                saver = SqliteSaver(conn)
                saver.setup()
                seconds, count = run(saver, steps)
            finally:
                conn.close()
            return Sample(seconds / steps * 1e6, _folder_size(path), count)

    def postgres(steps: int) -> Sample:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row

        with scratch.postgres_schema() as schema:
            # The connection settings PostgresSaver.from_conn_string uses.
            with psycopg.connect(
                scratch.postgres_url_in(schema),
                autocommit=True,
                prepare_threshold=0,
                row_factory=dict_row,
            ) as conn:
                saver = PostgresSaver(conn)
                saver.setup()
                seconds, count = run(saver, steps)
            return Sample(seconds / steps * 1e6, scratch.postgres_size(schema), count)

    return {"SQLite": sqlite, "Postgres": postgres, "none": no_saver}[backend]


# ---------------------------------------------------------------- bare commits
_ROW = b"x" * 100


def bare_trial(backend: Backend, durability: str, scratch: Scratch) -> Trial:
    """The disk's floor: one small-row insert and commit per step, nothing else."""

    def sqlite(steps: int) -> Sample:
        with scratch.sqlite_file() as path:
            conn = sqlite3.connect(path, isolation_level=None)
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=FULL")
                conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB NOT NULL)")

                def commits() -> None:
                    for _ in range(steps):
                        conn.execute("BEGIN")
                        conn.execute("INSERT INTO t (body) VALUES (?)", (_ROW,))
                        conn.execute("COMMIT")

                _, seconds = _timed(commits)
                count = conn.execute("SELECT count(*) FROM t").fetchone()[0]
            finally:
                conn.close()
            return Sample(seconds / steps * 1e6, _folder_size(path), count)

    def postgres(steps: int) -> Sample:
        import psycopg

        with (
            scratch.postgres_schema() as schema,
            psycopg.connect(scratch.postgres_url_in(schema), autocommit=True) as conn,
        ):
            conn.execute("CREATE TABLE t (id bigserial PRIMARY KEY, body bytea NOT NULL)")

            def commits() -> None:
                for _ in range(steps):
                    conn.execute("INSERT INTO t (body) VALUES (%s)", (_ROW,))

            _, seconds = _timed(commits)
            row = conn.execute("SELECT count(*) FROM t").fetchone()
            count = int(row[0]) if row else 0
            return Sample(seconds / steps * 1e6, scratch.postgres_size(schema), count)

    if backend == "none":
        raise ValueError("a bare commit needs a database: SQLite or Postgres")
    return sqlite if backend == "SQLite" else postgres


# ---------------------------------------------------------------- the harness
@dataclass(frozen=True, slots=True)
class Contender:
    """One row of the table: a library, a database, a durability mode."""

    library: Library
    backend: Backend
    durability: str
    build: Callable[[Backend, str, Scratch], Trial]

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.library, self.backend, self.durability)

    @property
    def label(self) -> str:
        names = {
            ("selectgraph", "none"): "selectgraph, no store",
            ("langgraph", "none"): "LangGraph, no saver",
            ("selectgraph", "SQLite"): "selectgraph SQLite",
            ("selectgraph", "Postgres"): "selectgraph Postgres",
            ("langgraph", "SQLite"): "LangGraph SqliteSaver",
            ("langgraph", "Postgres"): "LangGraph PostgresSaver",
            ("bare", "SQLite"): "bare SQLite commit",
            ("bare", "Postgres"): "bare Postgres commit",
        }
        return names[(self.library, self.backend)]


CONTENDERS = [
    Contender("selectgraph", "none", "-", selectgraph_trial),
    Contender("langgraph", "none", "-", langgraph_trial),
    Contender("bare", "SQLite", "sync", bare_trial),
    Contender("selectgraph", "SQLite", "sync", selectgraph_trial),
    Contender("selectgraph", "SQLite", "async", selectgraph_trial),
    Contender("selectgraph", "SQLite", "exit", selectgraph_trial),
    Contender("langgraph", "SQLite", "sync", langgraph_trial),
    Contender("langgraph", "SQLite", "async", langgraph_trial),
    Contender("langgraph", "SQLite", "exit", langgraph_trial),
    Contender("bare", "Postgres", "sync", bare_trial),
    Contender("selectgraph", "Postgres", "sync", selectgraph_trial),
    Contender("selectgraph", "Postgres", "async", selectgraph_trial),
    Contender("langgraph", "Postgres", "sync", langgraph_trial),
    Contender("langgraph", "Postgres", "async", langgraph_trial),
]


@dataclass(frozen=True, slots=True)
class CheckpointRow:
    """Figures of one contender (medians over repetitions)."""

    label: str
    library: str
    backend: str
    durability: str
    steps: int
    us_per_step: float | None
    size_kib: float | None
    checkpoints: int | None
    over_selectgraph: float | None
    """This row's µs/step over selectgraph's with the same database and durability."""
    above_bare_us: float | None
    """µs/step above the bare commit on the same database (median of the per-repetition
    differences; sync and async rows, which commit once a step). The disk's fsync time
    varies from run to run by 2x or more here; this difference varies much less."""
    targets: list[str]
    """Each target with its verdict, e.g. ``<= 200 µs/step (met)``."""
    skipped: str | None
    samples_us: list[float]


def measure(
    repeats: int, steps: int, with_langgraph: bool, contenders: list[Contender] | None = None
) -> list[CheckpointRow]:
    """Run every contender ``repeats`` times, interleaved, each run on a fresh database."""
    scratch = Scratch.open()
    try:
        return _measure(scratch, contenders or CONTENDERS, repeats, steps, with_langgraph)
    finally:
        scratch.close()


def _measure(
    scratch: Scratch, contenders: list[Contender], repeats: int, steps: int, with_langgraph: bool
) -> list[CheckpointRow]:
    trials: dict[tuple[str, str, str], Trial] = {}
    skipped: dict[tuple[str, str, str], str] = {}
    if scratch.postgres_down:
        print(f"checkpoints: Postgres rows skipped: {scratch.postgres_down}")
    for contender in contenders:
        if contender.library == "langgraph" and not with_langgraph:
            skipped[contender.key] = "LangGraph not run"
        elif contender.backend == "Postgres" and scratch.postgres_down:
            skipped[contender.key] = "no PostgreSQL server"
        else:
            try:
                trials[contender.key] = contender.build(
                    contender.backend, contender.durability, scratch
                )
            except NotAvailable as exc:
                skipped[contender.key] = "not available"
                print(f"checkpoints: {contender.label} {contender.durability}: {exc}")
    for trial in trials.values():
        trial(min(steps, 20))  # warm up: imports, table creation paths, first-call caches
    samples: dict[tuple[str, str, str], list[Sample]] = {key: [] for key in trials}
    for _ in range(repeats):
        for key, trial in trials.items():
            samples[key].append(trial(steps))
    return _rows(contenders, samples, skipped, steps)


def _rows(
    contenders: list[Contender],
    samples: dict[tuple[str, str, str], list[Sample]],
    skipped: dict[tuple[str, str, str], str],
    steps: int,
) -> list[CheckpointRow]:
    medians = {
        key: statistics.median(sample.us_per_step for sample in runs)
        for key, runs in samples.items()
    }
    rows = []
    for contender in contenders:
        key = contender.key
        runs = samples.get(key, [])
        us = medians.get(key)
        sizes = [s.size_bytes for s in runs if s.size_bytes is not None]
        size = statistics.median(sizes) / 1024 if sizes else None
        ours = medians.get(("selectgraph", contender.backend, contender.durability))
        bare = samples.get(("bare", contender.backend, "sync"), [])
        above = None
        if contender.library != "bare" and contender.durability != "exit" and runs and bare:
            above = statistics.median(
                mine.us_per_step - floor.us_per_step for mine, floor in zip(runs, bare, strict=True)
            )
        over = us / ours if contender.library == "langgraph" and us and ours else None
        # The targets are for STEPS steps: a shorter run spreads its fixed costs thinner.
        judged = steps == STEPS
        targets = []
        if key in STEP_TARGETS_US:
            limit = STEP_TARGETS_US[key]
            verdict = f" ({_verdict(us <= limit)})" if us is not None and judged else ""
            targets.append(f"<= {limit:g} µs/step{verdict}")
        if key in SIZE_TARGETS_KIB:
            limit = SIZE_TARGETS_KIB[key]
            verdict = f" ({_verdict(size <= limit)})" if size is not None and judged else ""
            targets.append(f"<= {limit:g} KiB{verdict}")
        rows.append(
            CheckpointRow(
                label=contender.label,
                library=contender.library,
                backend=contender.backend,
                durability=contender.durability,
                steps=steps,
                us_per_step=us,
                size_kib=size,
                checkpoints=runs[-1].checkpoints if runs else None,
                over_selectgraph=over,
                above_bare_us=above,
                targets=targets,
                skipped=skipped.get(key),
                samples_us=[s.us_per_step for s in runs],
            )
        )
    return rows


def _verdict(met: bool) -> str:
    return "met" if met else "MISSED"


def print_table(rows: list[CheckpointRow], repeats: int) -> None:
    """The checkpoint table, in the style of the harness's other tables."""
    steps = rows[0].steps
    print(
        f"\ncheckpoints: a {steps}-step loop, a checkpoint after every step, a fresh database "
        f"per run; median of {repeats}\n(state: n, a status string changing every step, a "
        f"{len(str(CONTEXT)) / 1000:.1f} KB context dict changing every {NOTE_EVERY} steps;\n"
        "size: SQLite's files incl. WAL after close, Postgres's tables with indexes and TOAST;\n"
        "+bare: µs/step above the bare commit on the same database, same repetition)"
    )
    header = (
        f"{'store':<24} {'durability':<10} {'µs/step':>9} {'+bare':>7} {'size KiB':>9} "
        f"{'ckpts':>6} {'x sg':>6}  target"
    )
    print(header)
    print("-" * len(header))
    if steps != STEPS:
        print(f"(targets are for {STEPS} steps: not judged on a {steps}-step run)")
    for row in rows:
        if row.skipped is not None or row.us_per_step is None:
            print(f"{row.label:<24} {row.durability:<10} {'-':>9}  ({row.skipped})")
            continue
        over = f"{row.over_selectgraph:5.1f}x" if row.over_selectgraph else f"{'':>6}"
        size = f"{row.size_kib:9.1f}" if row.size_kib is not None else f"{'-':>9}"
        kept = "-" if row.checkpoints is None else str(row.checkpoints)
        above = f"{row.above_bare_us:+7.1f}" if row.above_bare_us is not None else f"{'':>7}"
        text = (
            f"{row.label:<24} {row.durability:<10} {row.us_per_step:9.1f} {above} {size} "
            f"{kept:>6} {over}  {', '.join(row.targets)}"
        )
        print(text.rstrip())
