"""A graph run inside a node: a subgraph node, a graph an agent calls as a tool, a team member.

The child run shares the parent's run id, nests its events under the calling
node (its namespace starts with the parent's and the node's name), counts its
model calls against the same budgets (the run control is inherited through the
context), and when one of its generator nodes asks a question it pauses with
the parent: the paused child is kept in the interrupt book under the calling
task (and, for a tool, the call), so the resumed node continues it rather than
starting it over.

:data:`calling_node` is how code that has no node context of its own (a graph
tool an agent runs) finds the node it runs for; an agent node sets it.
"""

from __future__ import annotations

import asyncio
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from selectgraph.core._usage import NO_USAGE, Usage
from selectgraph.runtime._child_progress import progress_for
from selectgraph.runtime._restore import continue_child
from selectgraph.runtime._run import blocking_sleep
from selectgraph.runtime._start import start_run

if TYPE_CHECKING:
    from selectgraph.core._result import GraphResult
    from selectgraph.core._state import GraphState
    from selectgraph.nodes._spec import NodeContext
    from selectgraph.runtime._program import GraphProgram
    from selectgraph.runtime._run import Run

__all__ = ["CallingNode", "calling_node", "forget_tool_children", "run_child", "tool_slot"]


@dataclass(slots=True)
class CallingNode:
    """The node an agent runs for, as the agent's tools see it."""

    context: NodeContext
    """The node's context (its run is ``context.runtime``)."""
    memo: dict[str, Any] | None = None
    """The node's memoized model answers and tool results, when its tools may pause the run:
    after a resume the node replays them instead of asking the model again."""
    usage: Usage = field(default_factory=lambda: NO_USAGE)
    """What the graphs its tools ran spent (added to the node's usage)."""
    replayed: int = 0
    """Model answers taken from :attr:`memo` or recorded so far in this visit."""

    def add(self, usage: Usage) -> None:
        """Count what a nested run spent."""
        self.usage = self.usage + usage


calling_node: ContextVar[CallingNode | None] = ContextVar("selectgraph_calling_node", default=None)
"""The agent node whose agent is running, if any (set around the agent's answer, and
cleared around a tool that cannot pause: an agent such a tool runs is not the node's)."""

tool_slot: ContextVar[tuple[int, int] | None] = ContextVar("selectgraph_tool_slot", default=None)
"""Which call a graph tool is answering: the number of the model answer that asked for it
and its position there (stable on replay, unlike the model's call ids)."""


async def run_child(
    child: GraphProgram,
    state: GraphState,
    context: NodeContext,
    *,
    track_writes: bool = False,
    call: str | None = None,
) -> tuple[Run, GraphResult]:
    """Run ``child`` from ``state`` as a part of ``context``'s node; its run and result.

    Args:
        child: The graph to run.
        state: What it starts from.
        context: The calling node's context.
        track_writes: Record which keys the child wrote (a graph used as a node).
        call: For a graph tool, which call it answers (``call<n>-<i>``): two calls
            in one visit of the node are two children, kept apart when they pause.

    Raises:
        GraphRunError: the child failed (its state is on the error).
        NodeInterrupt: a node inside asked a question; the parent pauses too.
    """
    parent: Run = context.runtime
    sleep = parent.sleep if _in_event_loop() else blocking_sleep
    namespace = (*parent.namespace, context.node)
    key = parent.task_id(context.node, context.branch)
    if call is not None:
        namespace = (*namespace, call)
        key = f"{key}#{call}"
    paused: Any = None
    if parent.book is not None or parent._book_parent is not None:
        # The run has interrupts: this node may be one that paused inside its child.
        paused = parent.ensure_book().children.pop(key, None)
    if paused is not None:
        run, target = continue_child(child, paused, parent, namespace, sleep, track_writes)
        pending = run.walk(target)
    else:
        run = start_run(
            child,
            state,
            run_id=parent.run_id,
            namespace=namespace,
            parent=parent.recorder,
            sleep=sleep,
            track_writes=track_writes,
        )
        pending = run.execute()
    run._book_parent = parent  # a generator node inside finds the run's answers
    run.config = parent.config
    run.child_key = key
    # A tool's child keeps no crash progress of its own: after a crash the agent's
    # node starts over (its model answers are only memoized at a pause).
    in_branch = context.branch is not None
    run.progress = None if call is not None else progress_for(parent, in_branch, run)
    return run, await pending


def forget_tool_children(run: Run, task: str) -> None:
    """Drop the paused graphs of ``task``'s tools: its visit is over.

    One left by a replay that took another turn would otherwise ride in every later
    checkpoint.
    """
    book = run.book
    if book is not None:
        for key in [k for k in book.children if k.startswith(f"{task}#")]:
            del book.children[key]


def _in_event_loop() -> bool:
    """False on a branch's worker thread, where a synchronous child runs without a loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
