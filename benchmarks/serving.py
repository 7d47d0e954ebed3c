"""Serving: what answering over HTTP adds to a run, and how many streams a server keeps up.

Run with ``python -m benchmarks.serving`` (``--quick`` for a smoke run). Three
servers answer the same trivial one-node graph, each in its own process on
127.0.0.1, driven by one httpx client process:

- **selectgraph serve**: the real command, ``POST /v1/chat/completions``, whole and
  streamed (each request a new conversation: a new thread in the in-memory store);
- **floor**: a plain Starlette endpoint calling the same graph's ``arun()`` (whole:
  its JSON; streamed: one SSE event), served by uvicorn the same way: what any
  server must pay for HTTP and a run;
- **LangGraph dev** (``langgraph dev``, in-memory runtime), ``POST /runs/wait`` and
  ``POST /runs/stream``, when its CLI is found (``--langgraph-cli``, else
  ``langgraph`` on PATH); its own in-process ``ainvoke()`` is its baseline.

Figures: the median latency of one request at a time, and what it adds over the
graph's in-process ``arun()`` (LangGraph's over its ``ainvoke()``); then requests per
second with 100 clients streaming at once. The servers are measured round by round,
in turn, so they share the machine's conditions.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from selectgraph import END, AgentGraph
from selectgraph.build._output import final_output

ROOT = Path(__file__).resolve().parent.parent
QUIET = ("--log-level", "warning", "--port")

_LANGGRAPH_GRAPH = """
from typing import TypedDict
from langgraph.graph import END, START, StateGraph

class State(TypedDict):
    text: str
    reply: str

def echo(state: State) -> dict:
    return {"reply": "echo: " + state["text"]}

builder = StateGraph(State)
builder.add_node("echo", echo)
builder.add_edge(START, "echo")
builder.add_edge("echo", END)
graph = builder.compile()
"""


def _echo_graph() -> AgentGraph:
    graph = AgentGraph("echo")

    def reply(state: Any) -> Any:
        return {"__last_output__": "echo: " + state.messages[-1].text}

    graph.add_node("echo", reply, next_node=END)
    return graph


echo = _echo_graph()
"""The served graph (``selectgraph serve benchmarks.serving:echo``)."""


def floor_app() -> Any:
    """The floor: a plain Starlette endpoint around ``arun()`` (``uvicorn --factory``)."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    graph = _echo_graph()

    async def answer(request: Request) -> str:
        body = await request.json()
        return str(final_output(await graph.arun(body["text"])))

    async def whole(request: Request) -> Response:
        return JSONResponse({"reply": await answer(request)})

    async def streamed(request: Request) -> Response:
        reply = await answer(request)

        async def events() -> Any:
            yield f"data: {json.dumps({'reply': reply})}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    return Starlette(
        routes=[
            Route("/run", whole, methods=["POST"]),
            Route("/stream", streamed, methods=["POST"]),
        ]
    )


# ------------------------------------------------------------------ servers
@dataclass(frozen=True, slots=True)
class Target:
    """One server: how to start it, and its two requests (whole, streamed)."""

    name: str
    command: list[str]
    cwd: Path
    whole: tuple[str, dict[str, Any]]
    streamed: tuple[str, dict[str, Any]]
    expect: str
    """Text every answer must hold: a wrong answer fails the benchmark, not timed."""
    share: float = 1.0
    """The part of the one-at-a-time requests it gets (LangGraph dev takes ~1 s each)."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _targets(langgraph_cli: str | None, workdir: Path) -> tuple[list[Target], str | None]:
    python = sys.executable
    chat = {"model": "echo", "messages": [{"role": "user", "content": "hi"}]}
    targets = [
        Target(
            "selectgraph serve",
            [python, "-m", "selectgraph", "serve", "benchmarks.serving:echo", "--port"],
            ROOT,
            ("/v1/chat/completions", chat),
            ("/v1/chat/completions", {**chat, "stream": True}),
            "echo: hi",
        ),
        Target(
            "floor (Starlette + arun)",
            [python, "-m", "uvicorn", "benchmarks.serving:floor_app", "--factory", *QUIET],
            ROOT,
            ("/run", {"text": "hi"}),
            ("/stream", {"text": "hi"}),
            "echo: hi",
        ),
    ]
    cli = langgraph_cli or shutil.which("langgraph")
    if cli is None:
        return targets, "no langgraph CLI (pip install 'langgraph-cli[inmem]', or --langgraph-cli)"
    (workdir / "echo_graph.py").write_text(_LANGGRAPH_GRAPH)
    config = {"dependencies": ["."], "graphs": {"echo": "./echo_graph.py:graph"}}
    (workdir / "langgraph.json").write_text(json.dumps(config))
    run = {"assistant_id": "echo", "input": {"text": "hi"}}
    targets.append(
        Target(
            "LangGraph dev",
            [cli, "dev", "--no-browser", "--no-reload", "--server-log-level", "WARNING", "--port"],
            workdir,
            ("/runs/wait", run),
            ("/runs/stream", {**run, "stream_mode": "values"}),
            "echo: hi",
            share=0.1,
        )
    )
    return targets, None


@contextmanager
def _running(target: Target) -> Iterator[int]:
    port = _free_port()
    env = {**os.environ, "LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGSMITH_TRACING": "false"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryFile() as log:
        command = [*target.command, str(port)]
        process = subprocess.Popen(command, cwd=target.cwd, env=env, stdout=log, stderr=log)
        try:
            _wait_ready(url, target, process, log)
            yield port
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_ready(url: str, target: Target, process: subprocess.Popen[bytes], log: Any) -> None:
    path, body = target.whole
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log.seek(0)
            raise RuntimeError(f"{target.name} exited: {log.read().decode()[-2000:]}")
        try:
            answer = httpx.post(url + path, json=body, timeout=5)
            if answer.status_code == 200 and target.expect in answer.text:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{target.name} did not answer within 120 s")


# ------------------------------------------------------------------ measuring
class _Connection:
    """One keep-alive HTTP/1.1 connection, bare: the client's own cost stays small.

    httpx spends more CPU per request than these servers do once 100 streams share
    its pool, and the client shares the machine with them; this reads a response
    whole (by its length, or its chunks for a stream) and nothing more.
    """

    def __init__(self, port: int) -> None:
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
        """POST ``body`` as JSON; the status and the whole response body."""
        if self.reader is None or self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        data = json.dumps(body).encode()
        head = (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
        )
        self.writer.write(head.encode() + data)
        await self.writer.drain()
        reader = self.reader
        status = int((await reader.readline()).split()[1])
        headers: dict[str, str] = {}
        while (line := await reader.readline()) not in (b"\r\n", b""):
            key, _, value = line.decode().partition(":")
            headers[key.strip().lower()] = value.strip().lower()
        kept = headers.get("connection") != "close"
        if "content-length" in headers:
            content = await reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding") == "chunked":
            content = await _chunks(reader)
        else:  # the body ends with the connection
            content, kept = await reader.read(), False
        if not kept:
            await self.close()
        return status, content

    async def close(self) -> None:
        """Close the connection (the next request opens another)."""
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(OSError):
                await self.writer.wait_closed()
        self.reader = self.writer = None


async def _chunks(reader: asyncio.StreamReader) -> bytes:
    content = bytearray()
    while size := int((await reader.readline()).split(b";")[0], 16):
        content += await reader.readexactly(size)
        await reader.readexactly(2)  # the chunk's CRLF
    await reader.readline()  # the CRLF after the last chunk
    return bytes(content)


async def _whole(connection: _Connection, target: Target) -> None:
    path, body = target.whole
    status, content = await connection.post(path, body)
    if status != 200 or target.expect.encode() not in content:
        raise RuntimeError(f"{target.name} answered {status}: {content[:200]!r}")


async def _streamed(connection: _Connection, target: Target) -> None:
    path, body = target.streamed
    status, content = await connection.post(path, body)
    if status != 200 or target.expect.encode() not in content:
        raise RuntimeError(f"{target.name} streamed {status}: {content[:200]!r}")


Ask = Callable[[_Connection, Target], Awaitable[None]]


async def _latencies(port: int, target: Target, request: Ask, count: int) -> list[float]:
    """Seconds of each of ``count`` requests, one at a time."""
    times = []
    connection = _Connection(port)
    for _ in range(5):  # warm the connection
        await request(connection, target)
    for _ in range(count):
        start = time.perf_counter()
        await request(connection, target)
        times.append(time.perf_counter() - start)
    await connection.close()
    return times


async def _throughput(port: int, target: Target, clients: int, each: int) -> float:
    """Requests per second with ``clients`` streaming at once, ``each`` requests apiece."""
    connections = [_Connection(port) for _ in range(clients)]

    async def one_client(connection: _Connection, count: int) -> None:
        for _ in range(count):
            await _streamed(connection, target)

    await asyncio.gather(*(one_client(c, 1) for c in connections))  # connected and warm
    start = time.perf_counter()
    await asyncio.gather(*(one_client(c, each) for c in connections))
    elapsed = time.perf_counter() - start
    await asyncio.gather(*(c.close() for c in connections))
    return clients * each / elapsed


async def _in_process(count: int) -> dict[str, float]:
    """Median seconds of the graphs' own in-process runs: the baselines."""
    from selectgraph import InMemoryCheckpointStore
    from selectgraph.serve import ServedGraph

    graph = _echo_graph()
    store = InMemoryCheckpointStore()
    served = ServedGraph(graph)
    found: dict[str, float] = {}
    runs: dict[str, Callable[[], Awaitable[object]]] = {
        "selectgraph arun()": lambda: graph.arun("hi"),
        # What a served turn pays besides HTTP: a new thread in a store, the run on it.
        "arun() on a new thread of a store": lambda: graph.arun(
            "hi", checkpoint_store=store, thread_id=served.new_thread_id()
        ),
        "ServedGraph.turn()": lambda: served.turn("hi"),
    }
    for name, run in runs.items():
        times = []
        for _ in range(count + 5):
            start = time.perf_counter()
            await run()
            times.append(time.perf_counter() - start)
        found[name] = statistics.median(times[5:])
    try:
        namespace: dict[str, Any] = {}
        exec(compile(_LANGGRAPH_GRAPH, "echo_graph.py", "exec"), namespace)  # the same graph
        compiled = namespace["graph"]
        times = []
        for _ in range(count + 5):
            start = time.perf_counter()
            await compiled.ainvoke({"text": "hi"})
            times.append(time.perf_counter() - start)
        found["LangGraph ainvoke()"] = statistics.median(times[5:])
    except ImportError:
        pass
    return found


@dataclass(slots=True)
class Row:
    """One server's figures."""

    name: str
    whole: list[float]
    streamed: list[float]
    rps: list[float]


def measure(quick: bool, langgraph_cli: str | None) -> tuple[list[Row], dict[str, float], str]:
    """Every server's figures, round by round; the in-process baselines; why LG is absent."""
    rounds, count, each = (1, 50, 3) if quick else (3, 200, 10)
    clients = 100
    with tempfile.TemporaryDirectory() as directory:
        targets, missing = _targets(langgraph_cli, Path(directory))
        rows = {t.name: Row(t.name, [], [], []) for t in targets}
        baselines = asyncio.run(_in_process(count * rounds))
        for _ in range(rounds):
            for target in targets:
                row = rows[target.name]
                with _running(target) as port:
                    own = max(10, int(count * target.share))
                    row.whole += asyncio.run(_latencies(port, target, _whole, own))
                    row.streamed += asyncio.run(_latencies(port, target, _streamed, own))
                    row.rps.append(asyncio.run(_throughput(port, target, clients, each)))
    return list(rows.values()), baselines, missing or ""


def report(rows: list[Row], baselines: dict[str, float], missing: str) -> str:
    """The table the README shows."""
    ms = 1000.0
    own = baselines["selectgraph arun()"]
    lines = [
        "in-process: "
        + ", ".join(f"{name} {value * ms:.3f} ms" for name, value in baselines.items()),
        "",
        "| server | whole: median ms | over in-process | streamed: median ms "
        "| over in-process | 100 streaming clients: req/s |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        base = (
            baselines.get("LangGraph ainvoke()", own) if row.name.startswith("LangGraph") else own
        )
        whole, streamed = statistics.median(row.whole), statistics.median(row.streamed)
        lines.append(
            f"| {row.name} | {whole * ms:.2f} | +{(whole - base) * ms:.2f} | {streamed * ms:.2f} "
            f"| +{(streamed - base) * ms:.2f} | {statistics.median(row.rps):.0f} |"
        )
    named = {row.name: row for row in rows}
    ours, floor = named["selectgraph serve"], named["floor (Starlette + arun)"]
    lines.append("")
    lines.append(_ratios("selectgraph serve / floor", ours, floor))
    if "LangGraph dev" in named:
        lines.append(_ratios("LangGraph dev / selectgraph serve", named["LangGraph dev"], ours))
    if missing:
        lines.append(f"LangGraph dev: not measured ({missing})")
    return "\n".join(lines)


def _ratios(label: str, top: Row, bottom: Row) -> str:
    def ratio(a: list[float], b: list[float]) -> float:
        return statistics.median(a) / statistics.median(b)

    return (
        f"{label}: whole {ratio(top.whole, bottom.whole):.2f}x, streamed "
        f"{ratio(top.streamed, bottom.streamed):.2f}x, req/s {ratio(top.rps, bottom.rps):.2f}x"
    )


def main(argv: list[str] | None = None) -> None:
    """``python -m benchmarks.serving``."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.serving", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="one round, fewer requests")
    parser.add_argument("--langgraph-cli", help="the langgraph command (langgraph-cli[inmem])")
    parser.add_argument("--json", help="also save the raw figures to this file")
    args = parser.parse_args(argv)
    rows, baselines, missing = measure(args.quick, args.langgraph_cli)
    print(report(rows, baselines, missing))
    if args.json:
        raw = {"baselines": baselines, "rows": [asdict(row) for row in rows]}
        Path(args.json).write_text(json.dumps(raw, indent=2))


if __name__ == "__main__":
    main()
