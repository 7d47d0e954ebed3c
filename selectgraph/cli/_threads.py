"""``selectgraph threads``: a store's conversations; list and show them, send the next message.

A thread is read from the store alone (no graph needed): its record, its runs in
order, and its conversation from the latest checkpoint of its current (or last)
run, shown as stored. ``send`` runs a graph on the thread with the message as its
input, with the live view and the questions of ``selectgraph run``.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Mapping
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from selectgraph.cli._common import (
    MAX_LIMIT,
    AllowOpt,
    GraphArg,
    JsonOpt,
    NoInputOpt,
    QuietOpt,
    StoreOpt,
    checked_run_id,
    fail,
    load,
    open_threads,
    out,
    parse_metadata,
)
from selectgraph.cli._drive import drive
from selectgraph.cli._load import Target
from selectgraph.core._errors import ThreadIdError
from selectgraph.core._serialization import TAG
from selectgraph.core._state import LAST_OUTPUT
from selectgraph.observe._codec import json_value
from selectgraph.persistence._protocol import CheckpointStore
from selectgraph.persistence._threads import (
    MULTITASK_STRATEGIES,
    MultitaskStrategy,
    Thread,
    ThreadRun,
    check_thread_id,
)
from selectgraph.runtime._resume import run_status

__all__ = ["thread_input", "threads_app"]

threads_app = typer.Typer(
    help="Threads (conversations) kept in a checkpoint store.", no_args_is_help=True
)

ThreadArg = Annotated[str, typer.Argument(metavar="THREAD", help="The thread's id.")]


def _thread_id(thread_id: str) -> str:
    try:
        return check_thread_id(thread_id)
    except ThreadIdError as error:
        fail(str(error))


def _status(checkpoints: CheckpointStore, thread: Thread) -> str:
    """``idle``, ``busy``, ``interrupted`` or ``paused`` (as ``graph.get_thread`` says)."""
    if thread.owner is None:
        return "idle"
    head = checkpoints.head(thread.owner)
    status = "running" if head is None else run_status(head.metadata)
    return status if status in ("interrupted", "paused") else "busy"


def _when(thread: Thread) -> str:
    return f"{thread.updated_at:%Y-%m-%d %H:%M:%S}"


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


@threads_app.command("list")
def threads_list(
    store: StoreOpt = None,
    metadata: Annotated[
        list[str] | None,
        typer.Option(
            "--metadata", "-m", help="Only threads whose metadata has key=value (repeat it)."
        ),
    ] = None,
    limit: Annotated[int, typer.Option(help="Threads to show, most recent first.")] = 20,
    as_json: JsonOpt = False,
) -> None:
    """List the threads a store holds, most recently active first."""
    if not 1 <= limit <= MAX_LIMIT:
        fail(f"--limit must be from 1 to {MAX_LIMIT:,}, got {limit}")
    wanted = parse_metadata(metadata)
    checkpoints, threads = open_threads(store)
    found = threads.list_threads(metadata=wanted or None, limit=limit)
    if as_json:
        out.print_json(data=[_record(checkpoints, t) for t in found])
        return
    table = Table("thread", "status", "runs", "updated", "metadata", "expires")
    for thread in found:
        table.add_row(
            Text(thread.thread_id),
            _status(checkpoints, thread),
            str(thread.runs),
            _when(thread),
            Text(_compact(thread.metadata) if thread.metadata else ""),
            "" if thread.expires_at is None else f"{thread.expires_at:%Y-%m-%d %H:%M:%S}",
        )
    out.print(table)


def _record(checkpoints: CheckpointStore, thread: Thread) -> dict[str, Any]:
    return {
        "thread_id": thread.thread_id,
        "status": _status(checkpoints, thread),
        "runs": thread.runs,
        "created_at": thread.created_at.isoformat(),
        "updated_at": thread.updated_at.isoformat(),
        "metadata": json_value(thread.metadata),
        "owner": thread.owner,
        "last_run": thread.last_run,
        "expires_at": None if thread.expires_at is None else thread.expires_at.isoformat(),
        "ttl": thread.ttl,
    }


# ------------------------------------------------------------------ show


def _untagged(value: Any) -> Any:
    """A stored value with the serializer's type tags taken off (a model is its fields)."""
    if isinstance(value, Mapping):
        if TAG in value and "v" in value:
            return _untagged(value["v"])
        return {str(k): _untagged(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_untagged(v) for v in value]
    return value


def _is_message(value: Any) -> bool:
    return isinstance(value, Mapping) and "role" in value and "content" in value


def _messages(state: Mapping[str, Any]) -> builtins.list[dict[str, Any]]:
    """The conversation in a stored state: ``messages``, or an ``add_messages`` data field."""
    data = state.get("data")
    found = _untagged(state.get("messages") or [])
    field = _untagged(data.get("messages")) if isinstance(data, Mapping) else None
    if isinstance(field, list) and field and all(_is_message(m) for m in field):
        found = field  # a MessagesState graph keeps its conversation in data
    messages = []
    for raw in found:
        if not isinstance(raw, Mapping):
            continue
        content = raw.get("content")
        text = content if isinstance(content, str) or content is None else _compact(content)
        calls = [str(call.get("name", "?")) for call in raw.get("tool_calls") or []]
        messages.append(
            {"role": str(raw.get("role", "?")), "name": raw.get("name"), "text": text or ""}
            | ({"tool_calls": calls} if calls else {})
        )
    return messages


def _run_record(checkpoints: CheckpointStore, run: ThreadRun, later: set[str]) -> dict[str, Any]:
    head = checkpoints.head(run.run_id)
    status = "unknown" if head is None else run_status(head.metadata)
    if run.run_id in later:  # a newer input took the thread over
        status = "superseded"
    output = None
    if head is not None and status == "done":
        data = checkpoints.load_state(head.checkpoint_id).get("data")
        output = _untagged(data.get(LAST_OUTPUT)) if isinstance(data, Mapping) else None
    return {
        "seq": run.seq,
        "run_id": run.run_id,
        "status": status,
        "strategy": run.strategy,
        "superseded": run.superseded,
        "created_at": run.created_at.isoformat(),
        "output": output,
    }


@threads_app.command("show")
def threads_show(
    thread_id: ThreadArg,
    store: StoreOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show a thread: its conversation, its runs in order, its metadata and expiry."""
    _thread_id(thread_id)
    checkpoints, threads = open_threads(store)
    thread = threads.get_thread(thread_id)
    if thread is None:
        fail(f"no thread {thread_id!r} in {store}")
    runs = threads.thread_runs(thread_id)
    superseded = {r.superseded for r in runs if r.superseded}
    current = thread.owner or thread.last_run
    head = None if current is None else checkpoints.head(current)
    state = {} if head is None else checkpoints.load_state(head.checkpoint_id)
    shown = {
        **_record(checkpoints, thread),
        "messages": _messages(state),
        "thread_runs": [_run_record(checkpoints, r, superseded) for r in runs],
        "waiting": [],
    }
    if head is not None and _status(checkpoints, thread) == "interrupted":
        shown["waiting"] = [
            {"id": key, "node": record.get("node"), "prompt": record.get("prompt")}
            for key, record in head.interrupts.items()
        ]
    if as_json:
        out.print_json(data=shown)
        return
    _print_thread(shown)


def _print_thread(shown: Mapping[str, Any]) -> None:
    out.print(
        Text.assemble(
            (f"thread {shown['thread_id']}", "bold"),
            f": {shown['status']}, {shown['runs']} run(s), updated {shown['updated_at']}",
        )
    )
    if shown["metadata"]:
        out.print(Text(f"metadata: {_compact(shown['metadata'])}"))
    expiry = shown["expires_at"] or "never"
    out.print(Text(f"expires: {expiry}" + (f" (ttl {shown['ttl']:g} s)" if shown["ttl"] else "")))
    out.print(Text("conversation:", style="bold"))
    if not shown["messages"]:
        out.print("  (no messages)")
    for message in shown["messages"]:
        who = message["role"] + (f" ({message['name']})" if message.get("name") else "")
        calls = message.get("tool_calls")
        text = message["text"] + (f" [calls {', '.join(calls)}]" if calls else "")
        out.print(Text.assemble(("  " + who + ": ", "cyan"), text))
    for question in shown["waiting"]:
        out.print(Text(f"waiting: {question['node']} asks: {question['prompt']}", style="yellow"))
    table = Table("#", "run", "status", "how", "started", "output", title="runs")
    for run in shown["thread_runs"]:
        how = run["strategy"] + (f" (took over {run['superseded']})" if run["superseded"] else "")
        output = run["output"]
        text = "" if output is None else output if isinstance(output, str) else _compact(output)
        table.add_row(
            str(run["seq"]),
            run["run_id"],
            run["status"],
            how,
            run["created_at"][:19].replace("T", " "),
            Text(text if len(text) <= 80 else text[:79] + "…"),
        )
    out.print(table)


# ------------------------------------------------------------------ send


def thread_input(target: Target, message: str) -> Any:
    """A user's message as a run's input on a thread.

    A graph whose state has an ``add_messages`` field named ``messages`` (a
    MessagesState) gets it there; any other graph gets a prompt, which becomes a
    user message in ``state.messages``.
    """
    reducer = target.graph.compile().schema.reducers.get("messages")
    if getattr(reducer, "name", None) == "add_messages":
        return {"messages": [{"role": "user", "content": message}]}
    return target.input(message)


@threads_app.command("send")
def threads_send(
    graph: GraphArg,
    thread_id: ThreadArg,
    message: Annotated[str, typer.Argument(metavar="MESSAGE", help="The user's message.")],
    store: StoreOpt = None,
    strategy: Annotated[
        str,
        typer.Option(
            "--strategy",
            "-s",
            help="If the thread is busy: reject, enqueue (wait), interrupt or rollback.",
        ),
    ] = "reject",
    metadata: Annotated[
        list[str] | None,
        typer.Option("--metadata", "-m", help="key=value merged into the thread's metadata."),
    ] = None,
    ttl: Annotated[
        float | None,
        typer.Option("--ttl", help="Seconds idle after which the thread may be pruned."),
    ] = None,
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="The new run's id.", callback=checked_run_id)
    ] = None,
    no_input: NoInputOpt = False,
    allow: AllowOpt = None,
    quiet: QuietOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Send MESSAGE on THREAD: run GRAPH on the conversation so far, and print its answer."""
    _thread_id(thread_id)
    if strategy not in MULTITASK_STRATEGIES:
        fail(f"--strategy must be one of {', '.join(MULTITASK_STRATEGIES)}, got {strategy!r}")
    chosen: MultitaskStrategy = strategy  # type: ignore[assignment]  # checked just above
    if ttl is not None and ttl <= 0:
        fail(f"--ttl must be a positive number of seconds, got {ttl:g}")
    extra = parse_metadata(metadata)
    target = load(graph, allow)
    checkpoints, _ = open_threads(store)
    try:
        value = thread_input(target, message)
    except (ValueError, TypeError) as error:
        fail(f"MESSAGE: {error}")

    def start(listeners: list[Any]) -> Any:
        return target.graph.arun(
            value,
            thread_id=thread_id,
            multitask_strategy=chosen,
            thread_metadata=extra or None,
            thread_ttl=ttl,
            run_id=run_id,
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
        extra={"thread_id": thread_id},
    )
    raise typer.Exit(code)
