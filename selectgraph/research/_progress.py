"""A live terminal view of a research run, built from its events alone.

``ResearchProgress`` is a plain listener of GraphEvents: it reads the outline
from the planner's ``NodeFinished`` update, each loop's iterations from the
``research`` CustomEvents, section failures from ``ParallelFinished``, and
tokens and cost from ``LLMCallFinished``. Anything that can receive the events
(a web page through the studio's event stream, say) can show the same.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from selectgraph.observe._events import (
    CustomEvent,
    GraphEvent,
    LLMCallFinished,
    NodeFinished,
    NodeStarted,
    ParallelFinished,
    RunFailed,
    RunFinished,
)

__all__ = ["ResearchProgress", "SectionStatus"]

_INDEX = re.compile(r"\[(\d+)\]$")


@dataclass(slots=True)
class SectionStatus:
    """What the view knows of one section."""

    title: str
    """The section's title (the question, for a single loop)."""
    status: str = "queued"
    """Where the section is: queued, thinking, searching (iteration n), writing (why),
    done, writer failed or failed."""
    iteration: int = 0
    """The research loop's current iteration."""
    sources: int = 0
    """Sources found so far."""
    tokens: int = 0
    """Tokens the section's model calls used so far."""


class ResearchProgress:
    """Sections, iterations, sources, tokens and cost of a research run, live in a terminal.

    Use it as a listener (``observers=[progress]`` or ``progress(event)`` for each
    event of ``astream``), inside ``with progress:`` to draw it live.
    """

    def __init__(self, console: Console | None = None, *, title: str = "Research") -> None:
        """Create the view.

        Args:
            console: Where to draw (default: a rich Console on stdout).
            title: The table's title.
        """
        self.console = console or Console()
        self.title = title
        self.sections: dict[int, SectionStatus] = {}
        """Each section's status, by its index in the outline."""
        self.phase = "starting"
        """Where the run is: starting, planning, researching, writing the report,
        done (its stop reason) or failed."""
        self.input_tokens = 0
        """Prompt tokens of every model call so far."""
        self.output_tokens = 0
        """Answer tokens of every model call so far."""
        self.cost_usd = 0.0
        """Cost of the priced model calls so far, in US dollars."""
        self.unpriced_calls = 0
        """Model calls of a model with no known price (not in ``cost_usd``)."""
        self.calls = 0
        """Model calls so far."""
        self.started = time.monotonic()
        """When the view was created (``time.monotonic()``)."""
        self._live: Live | None = None

    # ---------------------------------------------------------------- events
    def __call__(self, event: GraphEvent) -> None:
        """Take one event into account and redraw."""
        self.update(event)

    def update(self, event: GraphEvent) -> None:
        """Take one event into account and redraw."""
        if isinstance(event, LLMCallFinished):
            self._count(event)
        elif isinstance(event, CustomEvent) and isinstance(event.data, dict):
            self._research(event.data)
        elif isinstance(event, NodeFinished):
            self._finished(event)
        elif isinstance(event, NodeStarted):
            self._started(event)
        elif isinstance(event, ParallelFinished):
            for label in event.failed:
                self._section(_index(label)).status = "failed"
        elif isinstance(event, RunFinished):
            self.phase = f"done ({event.stop_reason})"
        elif isinstance(event, RunFailed):
            self.phase = "failed"
        if self._live is not None:
            self._live.update(self.render())

    def _count(self, event: LLMCallFinished) -> None:
        self.calls += 1
        self.input_tokens += event.input_tokens
        self.output_tokens += event.output_tokens
        if event.cost_usd is None:
            self.unpriced_calls += 1
        else:
            self.cost_usd += event.cost_usd
        if event.branch is not None or event.namespace:
            section = self._section(_branch_index(event))
            section.tokens += event.input_tokens + event.output_tokens

    def _research(self, data: dict[str, Any]) -> None:
        if data.get("research") not in ("decision", "search"):
            return
        section = self._section(int(data.get("section_index", 0)), str(data.get("section", "")))
        section.iteration = int(data.get("iteration", section.iteration))
        if data["research"] == "decision":
            section.sources = int(data.get("sources", section.sources))
            if data.get("next") == "write":
                section.status = f"writing ({data.get('reason', '')})"
            else:
                section.status = f"searching (iteration {section.iteration + 1})"

    def _started(self, event: NodeStarted) -> None:
        if not event.namespace and event.node == "plan":
            self.phase = "planning"
        elif not event.namespace and event.node == "synthesize":
            self.phase = "writing the report"
        elif event.node == "think":
            section = self._section(_branch_index(event))
            if section.status == "queued":
                section.status = "thinking"
            self.phase = "researching"

    def _finished(self, event: NodeFinished) -> None:
        if event.node == "plan" and not event.namespace and event.update:
            plan = event.update.get("plan")
            for index, section in enumerate(getattr(plan, "sections", None) or ()):
                self._section(index, section.title)
        elif event.node == "report":
            self._section(_branch_index(event)).status = "done"
        elif event.node == "write" and event.outcome != "success":
            self._section(_branch_index(event)).status = "writer failed"
        elif event.node == "research" and event.outcome != "success":
            self._section(_branch_index(event)).status = "failed"

    def _section(self, index: int, title: str = "") -> SectionStatus:
        section = self.sections.get(index)
        if section is None:
            section = self.sections[index] = SectionStatus(title or f"section {index + 1}")
        elif title and section.title.startswith("section "):
            section.title = title
        return section

    # ---------------------------------------------------------------- drawing
    def render(self) -> Group:
        """The view as a rich renderable."""
        table = Table(title=self.title, expand=False)
        table.add_column("#", justify="right")
        table.add_column("section")
        table.add_column("status")
        table.add_column("iteration", justify="right")
        table.add_column("sources", justify="right")
        table.add_column("tokens", justify="right")
        for index in sorted(self.sections):
            s = self.sections[index]
            table.add_row(
                str(index + 1), s.title, s.status, str(s.iteration), str(s.sources), str(s.tokens)
            )
        cost = f"${self.cost_usd:.4f}" + (
            f" (+{self.unpriced_calls} unpriced calls)" if self.unpriced_calls else ""
        )
        footer = Text(
            f"{self.phase} | {self.calls} model calls | tokens {self.input_tokens} in, "
            f"{self.output_tokens} out | cost {cost} | "
            f"{time.monotonic() - self.started:.1f}s"
        )
        return Group(table, footer)

    def __enter__(self) -> ResearchProgress:
        self.started = time.monotonic()
        self._live = Live(self.render(), console=self.console, refresh_per_second=8)
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
            live.update(self.render())
            live.__exit__(kind, error, traceback)
            if not self.console.is_terminal:
                self.console.line()  # the last frame, printed once, ends its line


def _index(label: str) -> int:
    found = _INDEX.search(label)
    return int(found.group(1)) if found else 0


def _branch_index(event: GraphEvent) -> int:
    """The section an event belongs to: its fan-out branch's index (0 outside any)."""
    branch = event.branch
    while branch is not None and branch.parent is not None:
        branch = branch.parent
    return branch.index if branch is not None else 0
