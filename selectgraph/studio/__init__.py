"""The studio: watch a graph's runs live in a browser, answer their questions, fork them.

``selectgraph studio GRAPH`` serves it; ``create_app(graph)`` is the ASGI app for
embedding or tests, ``serve(graph)`` runs it with uvicorn. Needs the ``studio`` extra
(``pip install "selectgraph[studio]"``).
"""

from __future__ import annotations

import ipaddress
import os
import secrets
from typing import Any

from selectgraph.build._builder import AgentGraph
from selectgraph.persistence._protocol import CheckpointStore
from selectgraph.studio._api import DEFAULT_MAX_BODY
from selectgraph.studio._app import TOKEN_COOKIE, create_app

__all__ = ["TOKEN_COOKIE", "create_app", "is_loopback", "serve", "studio_url"]

TOKEN_ENV = "SELECTGRAPH_STUDIO_TOKEN"
"""The environment variable a token may come from."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def studio_url(host: str, port: int, token: str | None) -> str:
    """The address to open (with the token, when there is one)."""
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{shown}:{port}/" + (f"?token={token}" if token else "")


def serve(
    graph: AgentGraph,
    *,
    host: str = "127.0.0.1",
    port: int = 8400,
    store: CheckpointStore | None = None,
    token: str | None = None,
    log_level: str = "warning",
    max_body: int = DEFAULT_MAX_BODY,
    capture_content: bool = False,
    reload: bool = False,
    **uvicorn_options: Any,
) -> None:
    """Serve the studio for ``graph`` until interrupted (Ctrl-C).

    Bound to a loopback address it needs no token; bound elsewhere it needs one
    (``token``, or ``SELECTGRAPH_STUDIO_TOKEN``), and every request must carry it.

    ``max_body`` is the largest request body read, in bytes (1 MiB by default);
    ``capture_content`` keeps the prompts and replies of the runs it starts;
    ``reload`` re-imports the graph's module when its file changes.

    Raises:
        ValueError: a non-loopback ``host`` without a token, or a ``max_body`` below 1.
    """
    import uvicorn

    token = token or os.environ.get(TOKEN_ENV) or None
    loopback = is_loopback(host)
    if not loopback and not token:
        raise ValueError(
            f"the studio would be reachable from other machines on {host}; give it a token "
            f"(--token, or {TOKEN_ENV}), for example {secrets.token_urlsafe(16)}"
        )
    app = create_app(
        graph,
        store=store,
        token=token,
        loopback_only=loopback,
        max_body=max_body,
        capture_content=capture_content,
        reload=reload,
    )
    uvicorn.run(app, host=host, port=port, log_level=log_level, **uvicorn_options)
