"""The ``selectgraph`` command: run graphs, answer their questions, inspect runs, serve the studio.

Exit codes: 0 the run finished; 1 it failed; 2 the command was wrong (a bad GRAPH,
input or store); 3 the run is paused, waiting for an answer or a continue.
Progress and questions go to stderr, the run's output to stdout.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from selectgraph.cli._load import LoadError, Target, load_target
from selectgraph.cli._stores import StoreURLError, open_store
from selectgraph.cli._view import RunView
from selectgraph.core._errors import ResumeError, SelectGraphError
from selectgraph.core._interrupts import Interrupt
from selectgraph.core._result import GraphResult
from selectgraph.core._run_errors import GraphRunError
from selectgraph.observe._codec import json_value
from selectgraph.persistence._protocol import CheckpointStore
from selectgraph.runtime._resume import run_status

__all__ = ["EXIT_FAILED", "EXIT_PAUSED", "EXIT_USAGE", "app"]

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_PAUSED = 3

app = typer.Typer(
    name="selectgraph",
    help="Run selectgraph graphs, answer their questions, inspect runs, serve the studio.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
runs_app = typer.Typer(help="Runs kept in a checkpoint store.", no_args_is_help=True)
app.add_typer(runs_app, name="runs")

err = Console(stderr=True, soft_wrap=True)
out = Console(soft_wrap=True)

GraphArg = Annotated[
    str,
    typer.Argument(
        metavar="GRAPH",
        help="A GraphSpec file (.yaml/.json), or module:attribute naming an AgentGraph "
        "(or a SupervisorAgent, DeepResearch...); module may be a path/to/file.py.",
    ),
]
StoreOpt = Annotated[
    str | None,
    typer.Option(
        "--store", help="Checkpoint store: sqlite:///runs.db, postgresql://..., file:///dir"
    ),
]
AllowOpt = Annotated[
    list[str] | None,
    typer.Option("--allow", help="A module a spec file's references may import (repeat it)."),
]
NoInputOpt = Annotated[
    bool,
    typer.Option("--no-input", help="Do not ask at the terminal: leave the run paused."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the outcome as one JSON object.")]


def _fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    err.print(f"[bold red]error:[/] {message}", highlight=False)
    raise typer.Exit(code)


def _target(graph: str, allow: Sequence[str] | None) -> Target:
    try:
        return load_target(graph, allow=allow or ())
    except LoadError as error:
        _fail(str(error))


def _store(url: str | None, *, required: bool = False) -> CheckpointStore | None:
    if url is None:
        if required:
            _fail("this command needs --store (e.g. --store sqlite:///runs.db)")
        return None
    try:
        return open_store(url)
    except (StoreURLError, ImportError, OSError) as error:
        _fail(f"--store {url}: {error}")


def _parse_input(raw: str | None) -> Any:
    """The ``--input`` value as the run's input.

    JSON (an object is the state's data, a string a prompt), ``@file`` for a file of
    JSON, anything else a prompt.
    """
    if raw is None:
        return None
    if raw.startswith("@"):
        path = Path(raw[1:])
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as error:
            _fail(f"--input {raw}: {error}")
        try:
            return json.loads(text)
        except ValueError as error:
            _fail(f"--input {raw}: the file is not valid JSON: {error}")
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _loose(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


# ------------------------------------------------------------------ driving a run
Start = Callable[[list[Any]], Coroutine[Any, Any, GraphResult]]


async def _watch(view: RunView | None, start: Start) -> GraphResult:
    if view is None:
        return await start([])
    with view:
        result = await start([view])
    err.print(Text(view.usage_line, style="dim"))
    return result


def _ask(interrupts: Sequence[Interrupt], no_input: bool) -> dict[str, Any] | None:
    """Answers to ``interrupts`` from the terminal, or None when none can be given."""
    if no_input:
        return None
    answers: dict[str, Any] = {}
    for interrupt in interrupts:
        body = interrupt.prompt
        if interrupt.payload is not None:
            body += "\n\n" + json.dumps(json_value(interrupt.payload), indent=2)
        # Text, not markup: what a node asks is data ("[local]" is not a style).
        err.print(Panel(Text(body), title=f"{interrupt.node} asks", border_style="yellow"))
        err.print("[bold]answer>[/] ", end="")
        line = sys.stdin.readline()
        if not line:  # end of input: nobody to answer
            err.print()
            return None
        answers[interrupt.id] = _loose(line.rstrip("\n"))
    return answers


def _drive(
    target: Target,
    start: Start,
    *,
    store: CheckpointStore | None,
    store_url: str | None,
    no_input: bool,
    quiet: bool,
    as_json: bool,
) -> int:
    """Run, ask and resume until the run ends or pauses; print the outcome; the exit code."""
    view = None if quiet else RunView(err, target.graph.name)  # one view across resumes

    async def main() -> tuple[GraphResult, bool]:
        result = await _watch(view, start)
        while result.interrupted:
            answers = _ask(result.interrupts, no_input)
            if answers is None:
                return result, False

            def resume(listeners: list[Any], answers: dict[str, Any] = answers) -> Any:
                return target.graph.aresume(answers, checkpoint_store=store, observers=listeners)

            result = await _watch(view, resume)
        return result, True

    try:
        result, answered = asyncio.run(main())
    except GraphRunError as error:
        where = f" at node {error.node!r}" if error.node else ""
        err.print(f"[bold red]run failed{where}[/] ({error.category}): {error}", highlight=False)
        failed = error.result
        if store_url and failed is not None:
            err.print(
                f"its state is saved: selectgraph runs show {failed.run_id} --store {store_url}",
                highlight=False,
            )
        return EXIT_FAILED
    except (ResumeError, SelectGraphError, ValueError, TypeError) as error:
        _fail(f"{type(error).__name__}: {error}")
    _report(result, as_json)
    if result.paused:
        _explain_pause(target, result, store_url, answered)
        return EXIT_PAUSED
    return 0


def _report(result: GraphResult, as_json: bool) -> None:
    if as_json:
        out.print_json(
            data={
                "run_id": result.run_id,
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


def _explain_pause(
    target: Target, result: GraphResult, store_url: str | None, answered: bool
) -> None:
    what = "waits for an answer" if result.interrupted else f"is paused ({result.stop_reason})"
    err.print(f"[bold yellow]run {result.run_id} {what}[/]", highlight=False)
    for interrupt in result.interrupts:
        err.print(f"  {interrupt.node} asks: {interrupt.prompt}", highlight=False)
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
    )


# ------------------------------------------------------------------ commands
@app.command()
def run(
    graph: GraphArg,
    input: Annotated[
        str | None,
        typer.Option(
            "--input", "-i", help="JSON (an object: the state's data), @file.json, or a prompt."
        ),
    ] = None,
    store: StoreOpt = None,
    run_id: Annotated[str | None, typer.Option("--run-id", help="The run's id.")] = None,
    no_input: NoInputOpt = False,
    allow: AllowOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No live display.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Run GRAPH, showing it live; questions it asks are asked here."""
    target = _target(graph, allow)
    value = _parse_input(input)
    checkpoints = _store(store)
    try:
        start_from = target.input(value)
    except (ValueError, TypeError) as error:
        _fail(f"--input: {error}")

    def start(listeners: list[Any]) -> Any:
        return target.graph.arun(
            start_from, run_id=run_id, checkpoint_store=checkpoints, observers=listeners
        )

    code = _drive(
        target,
        start,
        store=checkpoints,
        store_url=store,
        no_input=no_input,
        quiet=quiet,
        as_json=as_json,
    )
    raise typer.Exit(code)


@app.command("graph")
def graph_command(
    graph: GraphArg,
    format: Annotated[str, typer.Option("--format", "-f", help="ascii or mermaid.")] = "ascii",
    allow: AllowOpt = None,
) -> None:
    """Print GRAPH's diagram."""
    if format not in ("ascii", "mermaid"):
        _fail(f"--format must be ascii or mermaid, got {format!r}")
    target = _target(graph, allow)
    try:
        text = target.graph.visualize("mermaid" if format == "mermaid" else "ascii")
    except SelectGraphError as error:
        _fail(str(error))
    out.print(text, markup=False, highlight=False)


@app.command()
def studio(
    graph: GraphArg,
    store: StoreOpt = None,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8400,
    token: Annotated[
        str | None,
        typer.Option(help="A secret every request must carry (needed beyond 127.0.0.1)."),
    ] = None,
    allow: AllowOpt = None,
) -> None:
    """Serve the studio for GRAPH: watch runs live, answer questions, fork runs."""
    try:
        from selectgraph.studio import TOKEN_ENV, serve, studio_url
    except ImportError as error:
        _fail(f'the studio needs its extra: pip install "selectgraph[studio]" ({error})')
    target = _target(graph, allow)
    checkpoints = _store(store)
    token = token or os.environ.get(TOKEN_ENV) or None
    err.print(f"selectgraph studio for {target.graph.name!r}: {studio_url(host, port, token)}")
    try:
        serve(target.graph, host=host, port=port, store=checkpoints, token=token)
    except ValueError as error:
        _fail(str(error))


@app.command()
def worker(
    graphs: Annotated[
        str,
        typer.Option(
            "--graphs",
            help="The graphs this worker runs: module:attr or NAME=module:attr, comma-separated.",
        ),
    ],
    database_url: Annotated[
        str,
        typer.Option(
            "--database-url",
            envvar="SELECTGRAPH_DATABASE_URL",
            help="The executor's database: postgresql://... (several workers) or sqlite:///...",
        ),
    ],
    executor: Annotated[str, typer.Option("--executor", help="The executor: dbos.")] = "dbos",
    executor_id: Annotated[
        str | None,
        typer.Option("--executor-id", help="This worker's id: unique, stable across restarts."),
    ] = None,
    queue: Annotated[
        str, typer.Option("--queue", help="The queue runs come from.")
    ] = "selectgraph",
    concurrency: Annotated[
        int, typer.Option("--concurrency", help="Runs this worker executes at once.")
    ] = 64,
    lease_ttl: Annotated[
        float, typer.Option("--lease-ttl", help="Seconds of silence before a worker is dead.")
    ] = 10.0,
    poll_interval: Annotated[
        float, typer.Option("--poll-interval", help="Seconds between polls of the queue.")
    ] = 0.1,
    pool_size: Annotated[
        int, typer.Option("--pool-size", help="Database connections the worker keeps.")
    ] = 10,
    allow: AllowOpt = None,
) -> None:
    """Serve runs from an executor's queue until stopped (SIGINT or SIGTERM)."""
    from selectgraph.cli._worker import parse_graphs, serve_worker

    if executor != "dbos":
        _fail(f"--executor must be dbos (the one executor there is), got {executor!r}")
    try:
        from selectgraph.executors.dbos import DatabaseUnavailableError, DBOSExecutor
    except ImportError as error:
        _fail(str(error))
    try:
        named = parse_graphs(graphs, allow or ())
        chosen = DBOSExecutor(
            database_url,
            graphs=named,
            queue=queue,
            worker_concurrency=concurrency,
            executor_id=executor_id,
            lease_ttl=lease_ttl,
            poll_interval=poll_interval,
            pool_size=pool_size,
        )
    except (LoadError, ValueError, SelectGraphError) as error:
        _fail(str(error))
    # Takeovers of dead workers' runs and lost connections are worth seeing in its log.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logging.getLogger("selectgraph.executors").addHandler(handler)
    logging.getLogger("selectgraph.executors").setLevel(logging.INFO)

    def ready() -> None:
        err.print(
            f"selectgraph worker {chosen.executor_id}: serving queue {queue!r} "
            f"with graphs {', '.join(sorted(named))}"
        )

    try:
        serve_worker(chosen, ready)
    except DatabaseUnavailableError as error:
        _fail(str(error), EXIT_FAILED)
    except ValueError as error:
        _fail(str(error))


# ------------------------------------------------------------------ runs


@runs_app.command("list")
def runs_list(
    store: StoreOpt = None,
    limit: Annotated[int, typer.Option(help="Runs to show, newest first.")] = 20,
) -> None:
    """List the runs a store holds, newest first."""
    checkpoints = _store(store, required=True)
    assert checkpoints is not None
    table = Table("run", "status", "step", "at", "last checkpoint")
    for run_id in checkpoints.runs(limit=limit):
        head = checkpoints.head(run_id)
        if head is None:
            continue
        trigger = str(head.metadata.get("trigger", ""))
        table.add_row(
            run_id,
            run_status(head.metadata),
            str(head.step),
            head.node_name or "",
            f"{head.created_at:%Y-%m-%d %H:%M:%S} ({trigger})",
        )
    out.print(table)


@runs_app.command("show")
def runs_show(
    run_id: Annotated[str, typer.Argument(help="The run.")],
    store: StoreOpt = None,
    graph: Annotated[
        str | None,
        typer.Option("--graph", help="The run's GRAPH, to read its state as the graph's types."),
    ] = None,
    allow: AllowOpt = None,
) -> None:
    """Show a run: its state, what runs next, its questions and its checkpoints."""
    checkpoints = _store(store, required=True)
    assert checkpoints is not None
    head = checkpoints.head(run_id)
    if head is None:
        _fail(f"no run {run_id!r} in {store}", EXIT_FAILED)
    if graph is not None:
        target = _target(graph, allow)
        snapshot = target.graph.get_state(run_id, checkpoint_store=checkpoints)
        values: Any = json_value(snapshot.values)
        pending = [{"id": i.id, "node": i.node, "prompt": i.prompt} for i in snapshot.interrupts]
        upcoming: list[str] = list(snapshot.next)
    else:
        # Without the graph, the state is shown as stored: JSON with type tags.
        values = checkpoints.load_state(head.checkpoint_id).get("data", {})
        pending = [
            {"id": key, **{k: v for k, v in record.items() if k in ("node", "prompt")}}
            for key, record in head.interrupts.items()
        ]
        upcoming = [str(n) for n in head.next]
    out.print(
        f"[bold]run {run_id}[/]: {run_status(head.metadata)} at step {head.step}",
        highlight=False,
    )
    if upcoming:
        out.print(f"next: {', '.join(upcoming)}", highlight=False)
    for question in pending:
        out.print(f"waiting: {question}", highlight=False)
    out.print_json(data={"state": values})
    table = Table("checkpoint", "step", "trigger", "node", "at")
    for cp in reversed(checkpoints.list(run_id)):
        table.add_row(
            cp.checkpoint_id,
            str(cp.step),
            str(cp.metadata.get("trigger", "")),
            cp.node_name or "",
            f"{cp.created_at:%Y-%m-%d %H:%M:%S}",
        )
    out.print(table)


@runs_app.command("resume")
def runs_resume(
    graph: GraphArg,
    run_id: Annotated[str, typer.Argument(help="The run to continue.")],
    store: StoreOpt = None,
    answer: Annotated[
        list[str] | None,
        typer.Option(
            "--answer", "-a", help="An answer (JSON or text), one per pending question, in order."
        ),
    ] = None,
    no_input: NoInputOpt = False,
    allow: AllowOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No live display.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Continue a run from its store: answer its questions, or go on after a pause or crash."""
    target = _target(graph, allow)
    checkpoints = _store(store, required=True)
    assert checkpoints is not None
    try:
        snapshot = target.graph.get_state(run_id, checkpoint_store=checkpoints)
    except SelectGraphError as error:
        _fail(str(error), EXIT_FAILED)
    given = [_loose(a) for a in answer or ()]
    if len(given) > len(snapshot.interrupts):
        _fail(
            f"{len(given)} answers for {len(snapshot.interrupts)} pending question(s) of run "
            f"{run_id!r}"
        )
    start: Start
    if snapshot.interrupts:
        answers = {i.id: a for i, a in zip(snapshot.interrupts, given, strict=False)}
        missing = [i for i in snapshot.interrupts if i.id not in answers]
        if missing:
            asked = _ask(missing, no_input)
            if asked is None:
                _fail(
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

    code = _drive(
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
    run_id: Annotated[str, typer.Argument(help="The run to fork.")],
    checkpoint: Annotated[
        str, typer.Option("--checkpoint", "-c", help="The checkpoint to fork from.")
    ],
    store: StoreOpt = None,
    new_id: Annotated[
        str | None, typer.Option("--run-id", help="The new run's id (default: generated).")
    ] = None,
    no_input: NoInputOpt = False,
    allow: AllowOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No live display.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Start a new run from an earlier checkpoint of RUN_ID (the original is left as it is)."""
    target = _target(graph, allow)
    checkpoints = _store(store, required=True)
    assert checkpoints is not None
    known = [cp.checkpoint_id for cp in checkpoints.list(run_id)]
    if checkpoint not in known:
        _fail(f"run {run_id!r} has no checkpoint {checkpoint!r}", EXIT_FAILED)

    def start(listeners: list[Any]) -> Any:
        return target.graph.arun(
            None,
            checkpoint_id=checkpoint,
            run_id=new_id,
            checkpoint_store=checkpoints,
            observers=listeners,
        )

    code = _drive(
        target,
        start,
        store=checkpoints,
        store_url=store,
        no_input=no_input,
        quiet=quiet,
        as_json=as_json,
    )
    raise typer.Exit(code)
