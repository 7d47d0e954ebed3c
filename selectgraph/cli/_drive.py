"""Driving a run from the terminal: the live view, its questions asked here, its outcome printed.

``run``, ``runs resume``, ``runs fork`` and ``threads send`` all go through
:func:`drive`: it runs, asks the questions a run stops on (again when an answer does
not fit the question's schema), resumes, and prints how the run ended.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any

from rich.text import Text

from selectgraph.cli._common import EXIT_FAILED, EXIT_PAUSED, err, fail, loose, out
from selectgraph.cli._load import Target
from selectgraph.cli._view import RunView, interrupt_panel
from selectgraph.core._errors import AnswerInvalid, ResumeError, SelectGraphError
from selectgraph.core._event import GraphEvent
from selectgraph.core._interrupts import Interrupt
from selectgraph.core._result import GraphResult
from selectgraph.core._run_errors import GraphRunError
from selectgraph.observe._codec import json_value
from selectgraph.persistence._protocol import CheckpointStore

__all__ = ["Start", "ask", "drive", "report"]

Start = Callable[[list[Any]], Coroutine[Any, Any, GraphResult]]
"""Starts (or continues) the run with these listeners."""


def _listening(event: GraphEvent) -> None:
    """A listener that does nothing.

    A run nobody listens to leaves its model calls unrecorded, so they would be
    missing from its stored event log (``runs show`` reads them there); with a
    listener every event is recorded.
    """


async def _watch(view: RunView | None, start: Start) -> GraphResult:
    if view is None:
        return await start([_listening])
    with view:
        result = await start([view])
    err.print(Text(view.usage_line, style="dim"))
    return result


def ask(interrupts: Sequence[Interrupt], no_input: bool) -> dict[str, Any] | None:
    """Answers to ``interrupts`` from the terminal, or None when none can be given."""
    if no_input:
        return None
    answers: dict[str, Any] = {}
    for interrupt in interrupts:
        err.print(interrupt_panel(interrupt))
        err.print("[bold]answer>[/] ", end="")
        line = sys.stdin.readline()
        if not line:  # end of input: nobody to answer
            err.print()
            return None
        answers[interrupt.id] = loose(line.rstrip("\n"))
    return answers


def _explain_invalid(error: AnswerInvalid) -> None:
    err.print(Text(f"that answer does not fit the question: {error}", style="bold red"))
    for path, problem in error.errors.items():
        err.print(Text(f"  {path or '(the answer)'}: {problem}"))


def drive(
    target: Target,
    start: Start,
    *,
    store: CheckpointStore | None,
    store_url: str | None,
    no_input: bool,
    quiet: bool,
    as_json: bool,
    extra: Mapping[str, Any] | None = None,
) -> int:
    """Run, ask and resume until the run ends or pauses; print the outcome; the exit code.

    ``extra`` is added to the ``--json`` outcome (a thread's id).
    """
    view = None if quiet else RunView(err, target.graph.name)  # one view across resumes

    async def main() -> GraphResult:
        result = await _watch(view, start)
        while result.interrupted:
            answers = ask(result.interrupts, no_input)
            if answers is None:
                return result

            def resume(listeners: list[Any], answers: dict[str, Any] = answers) -> Any:
                return target.graph.aresume(answers, checkpoint_store=store, observers=listeners)

            try:
                result = await _watch(view, resume)
            except AnswerInvalid as error:  # nothing ran: ask the same questions again
                _explain_invalid(error)
        return result

    try:
        result = asyncio.run(main())
    except GraphRunError as error:
        where = f" at node {error.node!r}" if error.node else ""
        err.print(
            Text.assemble((f"run failed{where}", "bold red"), f" ({error.category}): {error}"),
            highlight=False,
        )
        failed = error.result
        if store_url and failed is not None:
            err.print(
                f"its state is saved: selectgraph runs show {failed.run_id} --store {store_url}",
                highlight=False,
                markup=False,
            )
        return EXIT_FAILED
    except (ResumeError, SelectGraphError, ValueError, TypeError) as error:
        fail(f"{type(error).__name__}: {error}")
    report(result, as_json, extra)
    if result.paused:
        _explain_pause(target, result, store_url)
        return EXIT_PAUSED
    return 0


def report(result: GraphResult, as_json: bool, extra: Mapping[str, Any] | None = None) -> None:
    """Print how ``result`` ended: its content, or (``as_json``) the whole outcome."""
    if as_json:
        out.print_json(
            data={
                "run_id": result.run_id,
                **(extra or {}),
                "stop_reason": result.stop_reason,
                "quality": result.quality,
                "content": json_value(result.content),
                "interrupts": [
                    {"id": i.id, "node": i.node, "prompt": i.prompt} for i in result.interrupts
                ],
                "checkpoint_id": result.checkpoint_id,
            }
        )
        return
    if result.paused:
        return
    content = result.content
    if isinstance(content, str):
        out.print(content, markup=False, highlight=False)
    elif content is not None:
        out.print_json(data=json_value(content))


def _explain_pause(target: Target, result: GraphResult, store_url: str | None) -> None:
    what = "waits for an answer" if result.interrupted else f"is paused ({result.stop_reason})"
    err.print(Text(f"run {result.run_id} {what}", style="bold yellow"), highlight=False)
    for interrupt in result.interrupts:
        err.print(f"  {interrupt.node} asks: {interrupt.prompt}", highlight=False, markup=False)
    if store_url is None:
        err.print(
            "it was not saved (no --store), so it ends with this command; "
            "pass --store sqlite:///runs.db to keep runs you can resume later",
            highlight=False,
        )
        return
    answer = " --answer <answer>" if result.interrupted else ""
    err.print(
        f"resume it with: selectgraph runs resume {target.spec} {result.run_id} "
        f"--store {store_url}{answer}",
        highlight=False,
        markup=False,
    )
