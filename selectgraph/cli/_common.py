"""What the commands share: the consoles, exit codes, options, and reading their arguments.

Every wrong argument ends the command the same way: one line on stderr saying what
was wrong, and exit code 2 (:func:`fail`), never a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from selectgraph.build._input import MAX_INPUT_DEPTH, json_depth
from selectgraph.cli._load import LoadError, Target, load_target
from selectgraph.cli._stores import StoreURLError, open_store
from selectgraph.core._errors import SelectGraphError, ThreadIdError
from selectgraph.persistence._protocol import CheckpointStore
from selectgraph.persistence._threads import ThreadStore, check_thread_id

__all__ = [
    "EXIT_FAILED",
    "EXIT_PAUSED",
    "EXIT_USAGE",
    "MAX_LIMIT",
    "AllowOpt",
    "GraphArg",
    "JsonOpt",
    "NoInputOpt",
    "QuietOpt",
    "StoreOpt",
    "checked_run_id",
    "err",
    "fail",
    "load",
    "loose",
    "open_checkpoints",
    "open_threads",
    "out",
    "parse_input",
    "parse_metadata",
]

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_PAUSED = 3
MAX_LIMIT = 10_000
"""The most rows one ``--limit`` lists (a store's integers stop at 2**63)."""


class _Console(Console):
    """A console whose plain text soft-wraps and whose panels and tables fit the width.

    Text is left to the terminal to wrap (a line copied or piped stays whole), but a
    boxed renderable laid out with soft wrapping would crop what passes its border
    (an interrupt's draft, a long value in ``runs show``): those are wrapped inside.
    """

    def print(self, *objects: Any, soft_wrap: bool | None = None, **options: Any) -> None:
        if soft_wrap is None and any(not isinstance(o, str | Text) for o in objects):
            soft_wrap = False
        for table in objects:
            if isinstance(table, Table):  # a long id or URL folds onto more lines, whole
                for column in table.columns:
                    if column.overflow == "ellipsis":
                        column.overflow = "fold"
        super().print(*objects, soft_wrap=soft_wrap, **options)


err = _Console(stderr=True, soft_wrap=True)
out = _Console(soft_wrap=True)

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
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No live display.")]


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print ``message`` as the command's error and exit with ``code``."""
    # Text, not markup: a message quotes what the user typed ("[x]" is not a style).
    err.print(Text.assemble(("error:", "bold red"), " ", message), highlight=False)
    raise typer.Exit(code)


def checked_run_id(run_id: str | None) -> str | None:
    """A run id every store can hold (what a thread id may be), or a usage error."""
    if run_id is None:
        return None
    try:
        check_thread_id(run_id)
    except ThreadIdError:
        fail(
            f"run id {run_id!r} cannot be stored: use 1 to 256 characters without control "
            "characters or '|' (interrupt ids use it), that UTF-8 can encode"
        )
    return run_id


def load(graph: str, allow: Sequence[str] | None) -> Target:
    """The graph GRAPH names, or a usage error saying why there is none."""
    try:
        return load_target(graph, allow=allow or ())
    except LoadError as error:
        fail(str(error))


def open_checkpoints(url: str | None, *, required: bool = False) -> CheckpointStore | None:
    """The store ``--store`` names (None without one, unless ``required``)."""
    if url is None:
        if required:
            fail("this command needs --store (e.g. --store sqlite:///runs.db)")
        return None
    try:
        return open_store(url)
    except (StoreURLError, ImportError, OSError, SelectGraphError) as error:
        fail(f"--store {url}: {error}")


def open_threads(url: str | None) -> tuple[CheckpointStore, ThreadStore]:
    """The store ``--store`` names, which must keep threads; the same object, typed twice."""
    store = open_checkpoints(url, required=True)
    assert store is not None
    if not isinstance(store, ThreadStore):
        fail(f"--store {url}: {type(store).__name__} keeps runs but not threads")
    return store, store


def parse_input(raw: str | None) -> Any:
    """The ``--input`` value as the run's input.

    JSON (an object is the state's data, a string a prompt), ``@file`` for a file of
    JSON, anything else a prompt. JSON nested too deeply to read is a usage error.
    """
    if raw is None:
        return None
    if raw.startswith("@"):
        path = Path(raw[1:])
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            fail(f"--input {raw}: {error}")
        try:
            return json.loads(text)
        except RecursionError:
            fail(f"--input {raw}: the JSON is nested too deeply to read")
        except ValueError as error:
            fail(f"--input {raw}: the file is not valid JSON: {error}")
    try:
        return json.loads(raw)
    except RecursionError:
        fail("--input: the JSON is nested too deeply to read")
    except ValueError:
        return raw


def loose(text: str) -> Any:
    """``text`` as JSON when it parses, else the text itself (answers, metadata values).

    JSON nested deeper than a state may be stored (100 levels) is a usage error.
    """
    try:
        value = json.loads(text)
    except RecursionError:
        fail(f"{text[:20]}...: the JSON is nested too deeply to read")
    except ValueError:
        return text
    if json_depth(value) > MAX_INPUT_DEPTH:
        fail(f"{text[:20]}...: the JSON is nested deeper than {MAX_INPUT_DEPTH} levels")
    return value


def parse_metadata(items: Sequence[str] | None, option: str = "--metadata") -> dict[str, Any]:
    """``key=value`` items as a dict; each value is JSON when it parses, else text."""
    found: dict[str, Any] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            fail(f"{option} {item!r}: write key=value (e.g. {option} user=ann)")
        found[key] = loose(value)
    return found
