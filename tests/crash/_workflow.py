"""The workflow every crash trial runs, and the probe that logs its side effects and kills it.

The graph: ``start``, a loop of ``work`` (8 to 15 visits), a fan-out to
``left``, ``mid -> mid2`` and ``right`` joined at ``merge``, a generator node
``review`` that asks one question, and ``finish``. Each node appends one line
to a side-effect log (``O_APPEND`` and ``fsync``) naming the attempt (the
process) that ran it, so the checker can tell which process re-ran what.

The probe is set up in the child process after the fork; without it (the
fault-free reference) the nodes only log.
"""

from __future__ import annotations

import hashlib
import os
import signal
import threading
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import BaseModel

from selectgraph import END, AgentGraph, CompiledGraph, InterruptRequest, NodeContext, append

MODULUS = 1_000_003


class CrashState(BaseModel):
    """The workflow's state: a loop counter, a running total, branch outputs, the answer."""

    n: int = 8
    i: int = 0
    total: int = 0
    trail: Annotated[list[str], append] = []
    left: str = ""
    mid: str = ""
    right: str = ""
    answer: str = ""
    done: str = ""


def kill_self() -> None:
    """Die the way a power cut or the OOM killer ends a process: no cleanup at all."""
    os.kill(os.getpid(), signal.SIGKILL)


@dataclass
class Probe:
    """This process's side-effect log and its kill point (the harness sets it after a fork).

    ``kill_at`` maps an event kind to the 1-based count of that event at which
    the process kills itself; events are counted from the start of the attempt.
    """

    attempt: int = 0
    log_fd: int | None = None
    kill_at: dict[str, int] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    on_kill: Callable[[str], None] | None = None
    """Called with the event's name just before the kill (to note where it died)."""

    def event(self, kind: str) -> None:
        """Count an event of ``kind``; die here if this is the one the plan names."""
        with self.lock:
            count = self.counts[kind] = self.counts.get(kind, 0) + 1
            if self.kill_at.get(kind) == count:
                if self.on_kill is not None:
                    self.on_kill(kind)
                kill_self()

    def effect(self, kind: str, node: str, visit: int, step: int) -> None:
        """Append ``<attempt> <kind> <node> <visit> <step>`` to the log, durably."""
        if self.log_fd is None:
            return
        os.write(self.log_fd, f"{self.attempt} {kind} {node} {visit} {step}\n".encode())
        os.fsync(self.log_fd)


PROBE = Probe()
"""The probe of this process (one per forked child)."""


def _churn(value: int) -> int:
    """A little real work, so that a node lasts long enough for a timer to land inside it."""
    digest = str(value).encode()
    for _ in range(40):
        digest = hashlib.sha256(digest).digest()
    return int.from_bytes(digest[:4], "big")


def _node(
    name: str, body: Callable[[dict[str, Any]], dict[str, Any]], *, branch: bool = False
) -> Callable[..., Any]:
    """A node that runs ``body`` and logs its side effect, with kill points around it.

    A branch node (inside the fan-out) also counts a ``branch_enter`` event, so a
    kill can land mid-fan-out, after some branches finished and stored their writes.
    """

    def node(state: Any, context: NodeContext) -> dict[str, Any]:
        PROBE.event("node_enter")
        if branch:
            PROBE.event("branch_enter")
        out = body(state.data)
        out["trail"] = [f"{name}:{context.visit}"]
        PROBE.effect("node", name, context.visit, context.step)
        PROBE.event("node_effect")
        return out

    node.__name__ = name
    return node


def _start(data: dict[str, Any]) -> dict[str, Any]:
    return {"total": data["n"] * 7919 % MODULUS, "i": 0}


def _work(data: dict[str, Any]) -> dict[str, Any]:
    i = data["i"] + 1
    return {"i": i, "total": (data["total"] * 31 + i * i + _churn(i) % 7) % MODULUS}


def _review(state: Any, context: NodeContext) -> Generator[InterruptRequest, Any, dict[str, Any]]:
    """Draft (memoized: survives restarts), ask once, then record the answer."""
    PROBE.event("node_enter")

    def draft() -> str:
        PROBE.effect("once", "review", context.visit, context.step)
        PROBE.event("once_effect")
        return f"draft-{state.data['total']}"

    text = context.once("draft", draft)
    answer = yield InterruptRequest("approve?", {"draft": text})
    PROBE.effect("node", "review", context.visit, context.step)
    PROBE.event("node_effect")
    return {"answer": f"{answer}:{text}", "trail": [f"review:{context.visit}"]}


def build_graph() -> CompiledGraph:
    """The compiled crash workflow."""
    graph = AgentGraph("crash", state_schema=CrashState)
    graph.add_node("start", _node("start", _start))
    graph.add_node("work", _node("work", _work))
    graph.add_node("fan", _node("fan", lambda data: {}))
    graph.add_node("left", _node("left", lambda d: {"left": f"L{d['total'] % 1000}"}, branch=True))
    graph.add_node("mid", _node("mid", lambda d: {"mid": f"M{d['total'] % 97}"}, branch=True))
    graph.add_node(
        "mid2", _node("mid2", lambda d: {"mid": f"{d['mid']}/{_churn(d['i'])}"}, branch=True)
    )
    graph.add_node(
        "right", _node("right", lambda d: {"right": f"R{_churn(d['total'])}"}, branch=True)
    )
    graph.add_node(
        "merge",
        _node("merge", lambda d: {"total": (d["total"] + len(d["left"] + d["mid"] + d["right"]))}),
    )
    graph.add_node("review", _review)
    graph.add_node(
        "finish",
        _node("finish", lambda d: {"done": f"{d['answer']}|{d['total']}|{d['left']}{d['right']}"}),
    )
    graph.set_entry("start")
    graph.add_edge("start", "work")
    graph.add_conditional_edge("work", lambda s: "work" if s.data["i"] < s.data["n"] else "fan")
    graph.add_edge("fan", ["left", "mid", "right"])
    graph.add_edge("left", "merge")
    graph.add_edge("mid", "mid2")
    graph.add_edge("mid2", "merge")
    graph.add_edge("right", "merge")
    graph.add_edge("merge", "review")
    graph.add_edge("review", "finish")
    graph.add_edge("finish", END)
    return graph.compile()
