"""The terminal shows what a run asks whole: wrapped inside its panel, never cropped."""

from __future__ import annotations

import io
from collections.abc import Generator

import pytest
from rich.table import Table
from rich.text import Text

from selectgraph.cli._common import _Console
from selectgraph.cli._view import interrupt_panel
from selectgraph.core._interrupts import Interrupt

DRAFT = (
    "Owls are nocturnal birds of prey with large forward-facing eyes, silent flight "
    "and a head that turns 270 degrees; this draft runs well past any terminal width "
    "so that the reviewer must be able to read every word of it before approving. "
    "https://example.org/a-very-long-unbroken-address-that-no-panel-is-wide-enough-for"
)


def _letters(text: str) -> str:
    """The text without box drawing, spaces or line breaks: what wrapping must keep."""
    return "".join(ch for ch in text if ch.isalnum() or ch in ".,;:/-'\"{}")


@pytest.mark.parametrize("width", [40, 80])
@pytest.mark.parametrize("payload", [DRAFT, {"draft": DRAFT}], ids=["text", "object"])
def test_an_interrupt_shows_its_whole_payload_at_any_width(width: int, payload: object) -> None:
    console = _Console(record=True, width=width, soft_wrap=True, file=io.StringIO())
    interrupt = Interrupt(id="r|t|0", node="editor", prompt="Publish this draft?", payload=payload)

    console.print(interrupt_panel(interrupt))
    shown = console.export_text()

    assert all(len(line) <= width for line in shown.splitlines())
    assert _letters(DRAFT) in _letters(shown)
    assert "Publish this draft?" in shown


@pytest.mark.parametrize("width", [40, 80])
def test_a_long_value_in_a_table_is_wrapped_whole(width: int) -> None:
    # runs show prints its checkpoints and timeline as tables on this console.
    console = _Console(record=True, width=width, soft_wrap=True, file=io.StringIO())
    table = Table("at", "detail")
    table.add_row(Text("+0.1s"), Text(DRAFT))  # its last word is wider than the column

    console.print(table)

    assert _letters(DRAFT) in _letters(console.export_text())


def test_plain_text_still_soft_wraps() -> None:
    console = _Console(record=True, width=40, soft_wrap=True, file=io.StringIO())

    console.print(DRAFT, markup=False, highlight=False)

    assert DRAFT in console.export_text()  # one line: the terminal wraps it


def test_the_live_view_counts_a_pause_at_the_step_the_store_records() -> None:
    from selectgraph import END, AgentGraph, InMemoryCheckpointStore, InterruptRequest
    from selectgraph.cli._view import RunView

    def ask(state: object) -> Generator[object, object, dict[str, object]]:
        answer = yield InterruptRequest(prompt="Publish?", payload={"draft": "— é"})
        return {"answer": answer}

    graph = AgentGraph("g")
    graph.add_node("first", lambda state: {"a": 1}, next_node="ask")
    graph.add_node("ask", ask, next_node=END)
    store = InMemoryCheckpointStore()
    view = RunView(_Console(file=io.StringIO()), "g")

    paused = graph.run({}, observers=[view], checkpoint_store=store, run_id="r")

    assert paused.stop_reason == "interrupted"
    head = store.head("r")
    assert head is not None
    assert view.steps == head.step == 1
    shown = _Console(record=True, width=60, file=io.StringIO())
    shown.print(interrupt_panel(paused.interrupts[0]))
    assert "— é" in shown.export_text()
