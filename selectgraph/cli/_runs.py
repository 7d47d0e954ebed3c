"""``selectgraph runs``: the runs a checkpoint store keeps; list, show, resume and fork them."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from selectgraph.cli._common import (
    EXIT_FAILED,
    EXIT_PAUSED,
    MAX_LIMIT,
    AllowOpt,
    GraphArg,
    JsonOpt,
    NoInputOpt,
    QuietOpt,
    StoreOpt,
    checked_run_id,
    err,
    fail,
    load,
    loose,
    open_checkpoints,
    out,
)
from selectgraph.cli._drive import Start, ask, drive
from selectgraph.cli._timeline import moments, rows, totals
from selectgraph.core._errors import ResumeError, SelectGraphError
from selectgraph.core._state import LAST_OUTPUT
from selectgraph.observe._codec import json_value
from selectgraph.persistence._checkpoint import Checkpoint
from selectgraph.persistence._protocol import CheckpointStore
from selectgraph.persistence._threads import ThreadStore
from selectgraph.runtime._resume import run_status

__all__ = ["runs_app"]

runs_app = typer.Typer(help="Runs kept in a checkpoint store.", no_args_is_help=True)


@runs_app.command("list")
def runs_list(
    store: StoreOpt = None,
    limit: Annotated[
        int, typer.Option(min=1, max=MAX_LIMIT, help="Runs to show, newest first.")
    ] = 20,
) -> None:
    """List the runs a store holds, newest first.

    A run that cannot be read (a corrupt checkpoint) is listed as ``unreadable``
    and its error printed after the table; the command then exits 2.
    """
    checkpoints = open_checkpoints(store, required=True)
    assert checkpoints is not None
    table = Table("run", "status", "step", "at", "last checkpoint", "thread")
    unreadable: list[str] = []
    for run_id in checkpoints.runs(limit=limit):
        try:
            head = checkpoints.head(run_id)
        except SelectGraphError as error:  # one bad run must not hide the others
            table.add_row(run_id, "unreadable", "", "", "", "")
            unreadable.append(f"run {run_id!r} cannot be read: {error}")
            continue
        if head is None:
            continue
        trigger = str(head.metadata.get("trigger", ""))
        table.add_row(
            run_id,
            run_status(head.metadata),
            str(head.step),
            head.node_name or "",
            f"{head.created_at:%Y-%m-%d %H:%M:%S} ({trigger})",
            str(head.metadata.get("thread_id") or ""),
        )
    out.print(table)
    for problem in unreadable[:-1]:
        err.print(Text.assemble(("error:", "bold red"), " ", problem), highlight=False)
    if unreadable:
        fail(unreadable[-1])


def _stored_view(
    checkpoints: CheckpointStore, head: Checkpoint, graph: str | None, allow: list[str] | None
) -> tuple[Any, list[dict[str, Any]], list[str], Any]:
    """(state data, pending questions, next nodes, the last output) of a stored run."""
    if graph is not None:
        target = load(graph, allow)
        try:
            snapshot = target.graph.get_state(head.run_id, checkpoint_store=checkpoints)
        except SelectGraphError as error:
            fail(f"{type(error).__name__}: {error}", EXIT_FAILED)
        pending = [{"id": i.id, "node": i.node, "prompt": i.prompt} for i in snapshot.interrupts]
        output = snapshot.state.last_output
        return json_value(snapshot.values), pending, list(snapshot.next), json_value(output)
    # Without the graph, the state is shown as stored: JSON with type tags.
    data = checkpoints.load_state(head.checkpoint_id).get("data", {})
    pending = [
        {"id": key, **{k: v for k, v in record.items() if k in ("node", "prompt")}}
        for key, record in head.interrupts.items()
    ]
    output = data.pop(LAST_OUTPUT, None) if isinstance(data, dict) else None
    return data, pending, [str(n) for n in head.next], output


@runs_app.command("show")
def runs_show(
    run_id: Annotated[str, typer.Argument(help="The run.", callback=checked_run_id)],
    store: StoreOpt = None,
    graph: Annotated[
        str | None,
        typer.Option("--graph", help="The run's GRAPH, to read its state as the graph's types."),
    ] = None,
    all_events: Annotated[
        bool,
        typer.Option("--all-events", help="Timeline: also checkpoints, edges and text chunks."),
    ] = False,
    allow: AllowOpt = None,
) -> None:
    """Show a run: its state, questions, checkpoints, and its timeline from the event log."""
    checkpoints = open_checkpoints(store, required=True)
    assert checkpoints is not None
    try:
        head = checkpoints.head(run_id)
        kept = checkpoints.list(run_id)
    except SelectGraphError as error:  # a corrupt checkpoint: say so, not a traceback
        fail(f"run {run_id!r} cannot be read: {error}")
    if head is None:
        fail(f"no run {run_id!r} in {store}")
    values, pending, upcoming, output = _stored_view(checkpoints, head, graph, allow)
    status = run_status(head.metadata)
    thread = head.metadata.get("thread_id")
    on_thread = f" (thread {thread})" if thread else ""
    out.print(
        Text.assemble((f"run {run_id}", "bold"), f"{on_thread}: {status} at step {head.step}")
    )
    if upcoming:
        out.print(f"next: {', '.join(upcoming)}", highlight=False, markup=False)
    for question in pending:
        out.print(f"waiting: {question}", highlight=False, markup=False)
    out.print_json(data={"state": values})
    table = Table("checkpoint", "step", "trigger", "node", "at", title="checkpoints")
    for cp in reversed(kept):
        table.add_row(
            cp.checkpoint_id,
            str(cp.step),
            str(cp.metadata.get("trigger", "")),
            cp.node_name or "",
            f"{cp.created_at:%Y-%m-%d %H:%M:%S}",
        )
    out.print(table)
    _print_timeline(checkpoints, run_id, all_events)
    if status == "done" and output is not None:
        text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
        out.print(Text.assemble(("result: ", "bold"), text))


def _print_timeline(checkpoints: CheckpointStore, run_id: str, everything: bool) -> None:
    if not isinstance(checkpoints, ThreadStore):
        out.print(f"({type(checkpoints).__name__} keeps no event log: no timeline)")
        return
    events = [stored.event for stored in checkpoints.read_events(run_id)]
    if not events:
        out.print("(no events stored for this run: it ran with event_log=False, or before logs)")
        return
    table = Table("at", "step", "what", "detail", title="timeline")
    for row in rows(moments(events, everything=everything)):
        table.add_row(*(Text(cell) for cell in row))
    out.print(table)
    out.print(totals(events).line(), highlight=False, markup=False)


@runs_app.command("resume")
def runs_resume(
    graph: GraphArg,
    run_id: Annotated[str, typer.Argument(help="The run to continue.", callback=checked_run_id)],
    store: StoreOpt = None,
    answer: Annotated[
        list[str] | None,
        typer.Option(
            "--answer", "-a", help="An answer (JSON or text), one per pending question, in order."
        ),
    ] = None,
    no_input: NoInputOpt = False,
    allow: AllowOpt = None,
    quiet: QuietOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Continue a run from its store: answer its questions, or go on after a pause or crash."""
    target = load(graph, allow)
    checkpoints = open_checkpoints(store, required=True)
    assert checkpoints is not None
    if checkpoints.head(run_id) is None:
        fail(f"no run {run_id!r} in {store}")
    try:
        snapshot = target.graph.get_state(run_id, checkpoint_store=checkpoints)
    except (ResumeError, SelectGraphError) as error:
        fail(str(error), EXIT_FAILED)
    given = [loose(a) for a in answer or ()]
    if len(given) > len(snapshot.interrupts):
        fail(
            f"{len(given)} answers for {len(snapshot.interrupts)} pending question(s) of run "
            f"{run_id!r}"
        )
    start: Start
    if snapshot.interrupts:
        answers = {i.id: a for i, a in zip(snapshot.interrupts, given, strict=False)}
        missing = [i for i in snapshot.interrupts if i.id not in answers]
        if missing:
            asked = ask(missing, no_input)
            if asked is None:
                fail(
                    f"run {run_id!r} waits for {len(missing)} answer(s): pass --answer", EXIT_PAUSED
                )
            answers.update(asked)

        def start(listeners: list[Any]) -> Any:
            return target.graph.aresume(answers, checkpoint_store=checkpoints, observers=listeners)

    else:

        def start(listeners: list[Any]) -> Any:
            return target.graph.arun(
                None, run_id=run_id, checkpoint_store=checkpoints, observers=listeners
            )

    code = drive(
        target,
        start,
        store=checkpoints,
        store_url=store,
        no_input=no_input,
        quiet=quiet,
        as_json=as_json,
    )
    raise typer.Exit(code)


@runs_app.command("fork")
def runs_fork(
    graph: GraphArg,
    run_id: Annotated[str, typer.Argument(help="The run to fork.", callback=checked_run_id)],
    checkpoint: Annotated[
        str, typer.Option("--checkpoint", "-c", help="The checkpoint to fork from.")
    ],
    store: StoreOpt = None,
    new_id: Annotated[
        str | None,
        typer.Option(
            "--run-id", help="The new run's id (default: generated).", callback=checked_run_id
        ),
    ] = None,
    no_input: NoInputOpt = False,
    allow: AllowOpt = None,
    quiet: QuietOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Start a new run from an earlier checkpoint of RUN_ID (the original is left as it is)."""
    target = load(graph, allow)
    checkpoints = open_checkpoints(store, required=True)
    assert checkpoints is not None
    known = [cp.checkpoint_id for cp in checkpoints.list(run_id)]
    if not known:
        fail(f"no run {run_id!r} in {store}")
    if checkpoint not in known:
        fail(f"run {run_id!r} has no checkpoint {checkpoint!r}")

    def start(listeners: list[Any]) -> Any:
        return target.graph.arun(
            None,
            checkpoint_id=checkpoint,
            run_id=new_id,
            checkpoint_store=checkpoints,
            observers=listeners,
        )

    code = drive(
        target,
        start,
        store=checkpoints,
        store_url=store,
        no_input=no_input,
        quiet=quiet,
        as_json=as_json,
    )
    raise typer.Exit(code)
