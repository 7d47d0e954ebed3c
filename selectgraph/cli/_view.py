"""The terminal view of a run: running nodes, steps, tokens, cost, time, the agent's words."""

from __future__ import annotations

import json
import time
from types import TracebackType

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.text import Text

from selectgraph.core._interrupts import Interrupt
from selectgraph.observe._codec import json_value
from selectgraph.observe._events import (
    GraphEvent,
    LLMCallFinished,
    NodeChunk,
    NodeFinished,
    NodeStarted,
    RunFailed,
    RunFinished,
    RunPaused,
)

__all__ = ["RunView", "interrupt_panel"]

_STREAM_TAIL = 400
"""Characters of the running agent's output kept on screen."""


class RunView:
    """A listener drawing a run live; ``with view:`` shows it, the last frame is cleared."""

    def __init__(self, console: Console, title: str) -> None:
        self.console = console
        self.title = title
        self.running: dict[str, float] = {}
        self.done: list[str] = []
        self.steps = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.cost = 0.0
        self.unpriced = 0
        self.stream = ""
        self.stream_node = ""
        self.started = time.monotonic()
        self.status = "running"
        self._live: Live | None = None

    def __call__(self, event: GraphEvent) -> None:
        """Take one event into account."""
        if isinstance(event, NodeStarted):
            self.running[" / ".join(event.node_path)] = time.monotonic()
        elif isinstance(event, NodeFinished):
            path = " / ".join(event.node_path)
            self.running.pop(path, None)
            if not event.namespace and event.outcome != "interrupted":
                # An interrupted node did not complete: its step runs again on resume,
                # so the count stays where the store and the studio put the pause.
                self.steps = max(self.steps, event.step)
                self.done.append(
                    event.node + ("" if event.outcome == "success" else f" ({event.outcome})")
                )
        elif isinstance(event, NodeChunk):
            path = " / ".join(event.node_path)
            if path != self.stream_node:
                self.stream_node, self.stream = path, ""
            self.stream = (self.stream + event.delta)[-_STREAM_TAIL:]
        elif isinstance(event, LLMCallFinished):
            self.input_tokens += event.input_tokens
            self.output_tokens += event.output_tokens
            if event.cost_usd is None:
                self.unpriced += 1
            else:
                self.cost += event.cost_usd
        elif isinstance(event, RunFinished):
            self.status = event.stop_reason
        elif isinstance(event, RunPaused):
            self.status = event.reason
        elif isinstance(event, RunFailed):
            self.status = "failed"
        if self._live is not None:
            self._live.update(self.render())

    @property
    def usage_line(self) -> str:
        """Steps, tokens, cost and time, in one line."""
        cost = f"${self.cost:.4f}" + (f" (+{self.unpriced} unpriced)" if self.unpriced else "")
        return (
            f"{self.steps} steps | {self.input_tokens} tokens in, {self.output_tokens} out | "
            f"{cost} | {time.monotonic() - self.started:.1f}s"
        )

    def render(self) -> Panel:
        """The current frame."""
        now = time.monotonic()
        running = ", ".join(f"{name} ({now - since:.1f}s)" for name, since in self.running.items())
        lines: list[Text] = [
            Text.assemble(("running: ", "bold"), running or "-"),
            Text.assemble(("done: ", "bold"), " -> ".join(self.done[-8:]) or "-"),
            Text(self.usage_line, style="dim"),
        ]
        if self.stream:
            lines.append(Text.assemble((f"{self.stream_node}: ", "bold cyan"), self.stream.strip()))
        return Panel(Group(*lines), title=f"{self.title} [{self.status}]", expand=True)

    def __enter__(self) -> RunView:
        self._live = Live(self.render(), console=self.console, refresh_per_second=8, transient=True)
        self._live.__enter__()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        live, self._live = self._live, None
        if live is not None:
            live.__exit__(kind, error, traceback)


def interrupt_panel(interrupt: Interrupt) -> Panel:
    """What a node asks, with its whole payload and answer schema, to print at any width.

    Lines wrap at words and a word wider than the panel folds onto the next line, so
    the reviewer reads all of a long draft; nothing is cropped at the border (print it
    with ``soft_wrap=False``, as the command's consoles do for panels).
    """
    body = interrupt.prompt
    if interrupt.payload is not None:
        payload = json_value(interrupt.payload)
        # A text payload (a draft) is shown as text, its newlines kept, not as a JSON string.
        body += "\n\n" + (
            payload
            if isinstance(payload, str)
            else json.dumps(payload, indent=2, ensure_ascii=False)
        )
    if interrupt.response_schema is not None:
        body += "\n\nanswer with JSON of this schema:\n" + json.dumps(
            interrupt.response_schema, indent=2, ensure_ascii=False
        )
    # Text, not markup: what a node asks is data ("[local]" is not a style).
    return Panel(
        Text(body, overflow="fold", no_wrap=False),
        title=Text(f"{interrupt.node} asks"),
        border_style="yellow",
    )
