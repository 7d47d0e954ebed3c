"""The ``selectgraph`` command: run graphs, answer their questions, inspect runs, serve the studio.

Exit codes: 0 the run finished; 1 it failed; 2 the command was wrong (a bad GRAPH,
input, store, or an unknown run or thread); 3 the run is paused, waiting for an
answer or a continue. Progress and questions go to stderr, the run's output to stdout.

The commands live by group: ``runs`` in ``_runs.py``, ``threads`` in ``_threads.py``,
``eval`` and ``experiments`` in ``_eval.py``;
what they share (options, stores, the live run) in ``_common.py`` and ``_drive.py``.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Annotated, Any

import typer
from rich.text import Text

from selectgraph.cli._common import (
    EXIT_FAILED,
    EXIT_PAUSED,
    EXIT_USAGE,
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
    open_checkpoints,
    out,
    parse_input,
)
from selectgraph.cli._drive import drive
from selectgraph.cli._eval import eval_command, experiments_app
from selectgraph.cli._load import LoadError
from selectgraph.cli._local_server import local_server
from selectgraph.cli._mcp_command import mcp_command
from selectgraph.cli._runs import runs_app
from selectgraph.cli._serve import serve
from selectgraph.cli._threads import threads_app
from selectgraph.core._errors import SelectGraphError
from selectgraph.core._run_errors import GraphRunError

__all__ = ["EXIT_FAILED", "EXIT_PAUSED", "EXIT_USAGE", "app"]


class _Commands(typer.Typer):
    """The command group, with one last answer for a selectgraph error no command caught.

    Commands catch what they expect and say it in their own words; anything else
    selectgraph raises on purpose (a store that cannot be opened or read, a
    corrupt checkpoint) still ends as one line and an exit code, not a traceback.
    """

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().__call__(*args, **kwargs)
        except SelectGraphError as error:
            code = EXIT_FAILED if isinstance(error, GraphRunError) else EXIT_USAGE
            err.print(Text.assemble(("error:", "bold red"), " ", str(error)), highlight=False)
            raise SystemExit(code) from None


app = _Commands(
    name="selectgraph",
    help="Run selectgraph graphs, answer their questions, inspect runs and threads, "
    "serve the studio.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(runs_app, name="runs")
app.add_typer(threads_app, name="threads")
app.command("local-server")(local_server)
app.command("eval")(eval_command)
app.command("serve")(serve)
app.command("mcp")(mcp_command)
app.add_typer(experiments_app, name="experiments")


@app.command()
def run(
    graph: GraphArg,
    text: Annotated[
        str | None,
        typer.Argument(
            metavar="[TEXT]",
            help="Text input: it goes to the graph's input field (or is the user's message).",
        ),
    ] = None,
    input: Annotated[
        str | None,
        typer.Option(
            "--input", "-i", help="JSON (an object: the state's data), @file.json, or text."
        ),
    ] = None,
    store: StoreOpt = None,
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="The run's id.", callback=checked_run_id)
    ] = None,
    no_input: NoInputOpt = False,
    allow: AllowOpt = None,
    quiet: QuietOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Run GRAPH, showing it live; questions it asks are asked here."""
    if text is not None and input is not None:
        fail("give the input once: TEXT or --input, not both")
    target = load(graph, allow)
    value = text if text is not None else parse_input(input)
    checkpoints = open_checkpoints(store)
    try:
        start_from = target.input(value)
    except (ValueError, TypeError) as error:
        fail(f"--input: {error}")
    if (
        start_from is None
        and run_id is not None
        and (checkpoints is None or checkpoints.head(run_id) is None)
    ):
        start_from = {}  # a new run under that id: None would mean "continue it"

    def start(listeners: list[Any]) -> Any:
        return target.graph.arun(
            start_from, run_id=run_id, checkpoint_store=checkpoints, observers=listeners
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


@app.command("graph")
def graph_command(
    graph: GraphArg,
    format: Annotated[str, typer.Option("--format", "-f", help="ascii or mermaid.")] = "ascii",
    allow: AllowOpt = None,
) -> None:
    """Print GRAPH's diagram."""
    if format not in ("ascii", "mermaid"):
        fail(f"--format must be ascii or mermaid, got {format!r}")
    target = load(graph, allow)
    try:
        text = target.graph.visualize("mermaid" if format == "mermaid" else "ascii", show=False)
    except SelectGraphError as error:
        fail(str(error))
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
    max_body: Annotated[
        int,
        typer.Option("--max-body", min=1, help="The largest request body read, in bytes (1 MiB)."),
    ] = 1 << 20,
    capture_content: Annotated[
        bool,
        typer.Option(
            "--capture-content", help="Keep the prompts and replies of the runs it starts."
        ),
    ] = False,
    reload: Annotated[
        bool, typer.Option("--reload", help="Reload the graph's module when its file changes.")
    ] = False,
    allow: AllowOpt = None,
) -> None:
    """Serve the studio for GRAPH: watch runs live, answer questions, fork runs."""
    try:
        from selectgraph.studio import TOKEN_ENV, serve, studio_url
    except ImportError as error:
        fail(f'the studio needs its extra: pip install "selectgraph[studio]" ({error})')
    target = load(graph, allow)
    checkpoints = open_checkpoints(store)
    token = token or os.environ.get(TOKEN_ENV) or None
    err.print(f"selectgraph studio for {target.graph.name!r}: {studio_url(host, port, token)}")
    try:
        serve(
            target.graph,
            host=host,
            port=port,
            store=checkpoints,
            token=token,
            max_body=max_body,
            capture_content=capture_content,
            reload=reload,
        )
    except ValueError as error:
        fail(str(error))


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
        fail(f"--executor must be dbos (the one executor there is), got {executor!r}")
    try:
        from selectgraph.executors.dbos import DatabaseUnavailableError, DBOSExecutor
    except ImportError as error:
        fail(str(error))
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
        fail(str(error))
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
        fail(str(error), EXIT_FAILED)
    except ValueError as error:
        fail(str(error))
