"""Runs made by another process: ``python -m tests.studio.elsewhere KIND DB RUN_ID [RELEASE]``.

- ``ticket``: the ticket graph on ``{"text": "my invoice"}``, which stops at its question;
- ``chat``: the chat graph (one LLM call, the local provider) on "hello there";
- ``gated``: the gated graph, held in its ``wait`` node until the file RELEASE exists;
- ``words``: the words graph on ``{"word": "none"}`` (two steps, each changing ``word``).

Each writes to the SQLite store at DB, as any application using selectgraph would.
"""

from __future__ import annotations

import sys
from pathlib import Path

from selectgraph import SQLiteCheckpointStore
from tests.studio.graphs import Gate, chat_graph, gated_graph, ticket_graph, words_graph


def main(kind: str, db: str, run_id: str, release: str = "") -> None:
    with SQLiteCheckpointStore(Path(db)) as store:
        if kind == "ticket":
            ticket_graph().run({"text": "my invoice"}, run_id=run_id, checkpoint_store=store)
        elif kind == "chat":
            chat_graph().run("hello there", run_id=run_id, checkpoint_store=store)
        elif kind == "gated":
            gated_graph(Gate(Path(release))).run({}, run_id=run_id, checkpoint_store=store)
        elif kind == "words":
            words_graph().run({"word": "none"}, run_id=run_id, checkpoint_store=store)
        else:
            raise SystemExit(f"unknown kind {kind!r}")


if __name__ == "__main__":
    main(*sys.argv[1:])
