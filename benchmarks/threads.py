"""Threads: what continuing a conversation costs as it grows long (issue 21).

A one-node chat graph answers N turns on one thread. For selectgraph each turn is a
run on the thread (``run(input, thread_id=...)``); for LangGraph, ``invoke`` on the
same ``thread_id`` with a SQLite saver. The question is whether turn 1,001 costs what
turn 2 costs: the median time of a window of turns early and late, and for
selectgraph the bytes of stored state each turn reads to start.

Two states: a **fixed** one (the turn writes a counter and the last thing said, so
what a turn reads stays the same size) shows the engine's cost of continuing a
thread; a **growing** one (every turn's message kept in ``state.messages``) shows
what a real conversation adds: its own size, read once per turn.
"""

from __future__ import annotations

import json
import operator
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypedDict

from selectgraph import END, AgentGraph, InMemoryCheckpointStore, SQLiteCheckpointStore

TURNS = 1_000
QUICK_TURNS = 200
WINDOW = 20
"""Turns averaged at each end: turns 2..21 and the last 20."""


class Fixed(TypedDict):
    turns: int
    said: str


class LGFixed(TypedDict):
    turns: int
    said: str


class LGGrowing(TypedDict):
    turns: int
    messages: Annotated[list[str], operator.add]


def _answer_fixed(state: Any) -> dict[str, Any]:
    return {"turns": state.get("turns", 0) + 1, "said": f"heard {state['said']}"}


def _answer_growing(state: Any) -> dict[str, Any]:
    return {"turns": state.get("turns", 0) + 1}


def _selectgraph_graph(growing: bool) -> AgentGraph:
    if growing:
        graph = AgentGraph("chat")
        graph.add_node("answer", _answer_growing, next_node=END)
    else:
        graph = AgentGraph("chat", state_schema=Fixed)
        graph.add_node("answer", _answer_fixed, next_node=END)
    return graph


class _Counting(SQLiteCheckpointStore):
    """A SQLite store that counts the bytes of state its loads return."""

    read = 0

    def load_state(self, checkpoint_id: str) -> dict[str, Any]:
        state = super().load_state(checkpoint_id)
        self.read += len(json.dumps(state, separators=(",", ":")))
        return state


@dataclass(frozen=True, slots=True)
class ThreadFigures:
    """One library and state kind: early and late turns."""

    name: str
    early_us: float
    """Median µs per turn over turns 2..WINDOW+1."""
    late_us: float
    """Median µs per turn over the last WINDOW turns."""
    early_bytes: float | None = None
    """Median bytes of stored state read to start a turn, early."""
    late_bytes: float | None = None

    @property
    def ratio(self) -> float:
        """Late over early: 1.0 means a long thread costs what a short one does."""
        return self.late_us / self.early_us


def _turns(turn: Callable[[int], int], turns: int) -> tuple[list[float], list[int]]:
    times: list[float] = []
    read: list[int] = []
    for index in range(turns):
        started = time.perf_counter()
        read.append(turn(index))
        times.append((time.perf_counter() - started) * 1e6)
    return times, read


def _figures(name: str, times: list[float], read: list[int] | None) -> ThreadFigures:
    early, late = slice(1, 1 + WINDOW), slice(-WINDOW, None)
    return ThreadFigures(
        name,
        statistics.median(times[early]),
        statistics.median(times[late]),
        None if read is None else statistics.median(read[early]),
        None if read is None else statistics.median(read[late]),
    )


def selectgraph_thread(growing: bool, turns: int, scratch: Path, memory: bool) -> ThreadFigures:
    """``turns`` turns of one thread on selectgraph (SQLite, or in memory)."""
    graph = _selectgraph_graph(growing).compile()
    store: Any = InMemoryCheckpointStore() if memory else _Counting(str(scratch / "sg.db"))

    def turn(index: int) -> int:
        before = getattr(store, "read", 0)
        said = f"message {index}"
        value: Any = said if growing else {"said": said}
        graph.run(value, thread_id="chat", checkpoint_store=store)
        return int(getattr(store, "read", 0) - before)

    times, read = _turns(turn, turns)
    store.close()
    kind = "growing" if growing else "fixed"
    where = "memory" if memory else "SQLite"
    return _figures(f"selectgraph, {where}, {kind}", times, None if memory else read)


def langgraph_thread(growing: bool, turns: int, scratch: Path) -> ThreadFigures | None:
    """The same turns as LangGraph ``invoke`` calls on one thread with a SqliteSaver."""
    try:
        import sqlite3

        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.graph import StateGraph
    except ImportError:
        return None
    builder: Any = StateGraph(LGGrowing if growing else LGFixed)
    if growing:
        builder.add_node("answer", lambda s: {"turns": s.get("turns", 0) + 1})
    else:
        builder.add_node("answer", _answer_fixed)
    builder.set_entry_point("answer")
    builder.set_finish_point("answer")
    connection = sqlite3.connect(str(scratch / "lg.db"), check_same_thread=False)
    graph = builder.compile(checkpointer=SqliteSaver(connection))
    config = {"configurable": {"thread_id": "chat"}}

    def turn(index: int) -> int:
        value: Any = {"messages": [f"message {index}"]} if growing else {"said": f"message {index}"}
        graph.invoke(value, config)
        return 0

    times, _ = _turns(turn, turns)
    connection.close()
    return _figures(f"LangGraph, SQLite, {'growing' if growing else 'fixed'}", times, None)


def measure(quick: bool, with_langgraph: bool) -> list[ThreadFigures]:
    """Every library and state kind, each on a fresh database."""
    turns = QUICK_TURNS if quick else TURNS
    found: list[ThreadFigures] = []
    for growing in (False, True):
        with tempfile.TemporaryDirectory() as scratch:
            found.append(selectgraph_thread(growing, turns, Path(scratch), memory=True))
        with tempfile.TemporaryDirectory() as scratch:
            found.append(selectgraph_thread(growing, turns, Path(scratch), memory=False))
        if with_langgraph:
            with tempfile.TemporaryDirectory() as scratch:
                lg = langgraph_thread(growing, turns, Path(scratch))
            if lg is not None:
                found.append(lg)
    return found


def print_table(found: list[ThreadFigures], turns: int) -> None:
    """The figures as a table."""
    print(
        f"\nthreads: {turns} turns of a one-node chat on one thread; median of turns "
        f"2..{WINDOW + 1} (early) and of the last {WINDOW} (late)"
    )
    print(
        f"{'':32} {'early µs':>9} {'late µs':>9} {'late/early':>10} {'bytes read, early→late':>24}"
    )
    for row in found:
        read = (
            f"{row.early_bytes:,.0f} → {row.late_bytes:,.0f}" if row.early_bytes is not None else ""
        )
        print(f"{row.name:32} {row.early_us:9.0f} {row.late_us:9.0f} {row.ratio:9.2f}x {read:>24}")


def main(quick: bool = False, with_langgraph: bool = True) -> list[ThreadFigures]:
    """Measure and print."""
    found = measure(quick, with_langgraph)
    print_table(found, QUICK_TURNS if quick else TURNS)
    return found
