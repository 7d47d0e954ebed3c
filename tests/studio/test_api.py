"""The studio's HTTP API and event stream, against a real server on a local port."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from selectgraph import SQLiteCheckpointStore
from selectgraph.studio import serve as serve_studio
from selectgraph.studio._log import EventLog
from tests.studio.conftest import Served
from tests.studio.graphs import chatty_graph, slow_graph, ticket_graph

Serve = Callable[..., Served]
JSON = {"Content-Type": "application/json"}


def post(served: Served, path: str, body: Any, **kwargs: Any) -> httpx.Response:
    return httpx.post(f"{served.url}{path}", content=json.dumps(body), headers=JSON, **kwargs)


def wait_for(served: Served, run_id: str, status: str, timeout: float = 20) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        run = httpx.get(f"{served.url}/api/runs/{run_id}").json()
        if run["status"] == status:
            return run  # type: ignore[no-any-return]
        if time.monotonic() > deadline:
            raise AssertionError(f"run {run_id} is {run['status']}, not {status}")
        time.sleep(0.05)


def events(served: Served, run_id: str, *, last_id: int | None = None) -> Iterator[dict[str, Any]]:
    """The run's SSE messages, parsed, until the stream ends."""
    headers = {} if last_id is None else {"Last-Event-ID": str(last_id)}
    with httpx.stream(
        "GET", f"{served.url}/api/runs/{run_id}/events", headers=headers, timeout=20
    ) as reply:
        assert reply.status_code == 200
        assert reply.headers["content-type"].startswith("text/event-stream")
        event_id, kind, data = None, "message", ""
        for line in reply.iter_lines():
            if line.startswith("id:"):
                event_id = int(line[3:].strip())
            elif line.startswith("event:"):
                kind = line[6:].strip()
            elif line.startswith("data:"):
                data += line[5:].strip()
            elif not line and data:
                record = json.loads(data)
                record["_sse_id"], record["_sse_event"] = event_id, kind
                yield record
                if kind == "end":
                    return
                event_id, kind, data = None, "message", ""


def test_graph_description(serve: Serve) -> None:
    served = serve(ticket_graph())
    info = httpx.get(f"{served.url}/api/graph").json()
    assert info["name"] == "tickets"
    assert info["entry"] == "classify"
    assert info["mermaid"].startswith("flowchart TD")
    assert info["ids"]["classify"] == "n0"
    assert {"source": "classify", "target": "approve", "index": 1, "kind": "edge"} in info["links"]
    page = httpx.get(served.url)
    assert page.status_code == 200
    assert "<title>selectgraph studio: tickets</title>" in page.text
    mermaid = httpx.get(f"{served.url}/static/vendor/mermaid.min.js")
    assert mermaid.status_code == 200
    assert len(mermaid.content) > 1_000_000  # bundled: the page works offline


def test_a_run_streams_pauses_is_answered_once_and_finishes(serve: Serve) -> None:
    served = serve(ticket_graph())
    started = post(served, "/api/runs", {"input": {"text": "my invoice"}, "run_id": "t-1"})
    assert started.status_code == 201
    assert started.json()["run_id"] == "t-1"
    run = wait_for(served, "t-1", "interrupted")
    [question] = run["interrupts"]
    assert question["prompt"] == "Send the reply?"
    assert question["payload"] == {"category": "billing"}
    assert run["state"]["category"] == "billing"

    first = post(served, "/api/runs/t-1/resume", {"interrupt_id": question["id"], "answer": "yes"})
    assert first.status_code == 202
    again = post(served, "/api/runs/t-1/resume", {"interrupt_id": question["id"], "answer": "no"})
    assert again.status_code == 409
    assert "already answered" in again.json()["error"]

    stream = list(events(served, "t-1"))
    kinds = [e["event"] for e in stream if e["_sse_event"] == "message"]
    assert kinds[0] == "RunStarted"
    assert "InterruptRaised" in kinds
    assert "RunPaused" in kinds
    assert "RunResumed" in kinds
    assert kinds[-1] == "RunFinished"
    assert stream[-1]["_sse_event"] == "end"
    finished = next(e for e in stream if e.get("event") == "RunFinished")
    assert finished["summary"]["content"] == "approved=True"
    classify = next(
        e for e in stream if e.get("event") == "NodeFinished" and e["node"] == "classify"
    )
    assert classify["update"] == {"category": "billing"}
    assert classify["state"]["category"] == "billing"
    ids = [e["_sse_id"] for e in stream if e["_sse_event"] == "message"]
    assert ids == list(range(1, len(ids) + 1))
    assert wait_for(served, "t-1", "done")["summary"]["stop_reason"] == "end"


def test_a_reconnect_with_last_event_id_misses_nothing_and_repeats_nothing(serve: Serve) -> None:
    served = serve(chatty_graph(200))
    run_id = post(served, "/api/runs", {"input": {}}).json()["run_id"]
    wait_for(served, run_id, "done")
    whole = [e["_sse_id"] for e in events(served, run_id) if e["_sse_event"] == "message"]
    part = []
    for record in events(served, run_id):
        part.append(record["_sse_id"])
        if len(part) == 50:
            break  # the browser lost the connection here
    rest = [
        e["_sse_id"] for e in events(served, run_id, last_id=50) if e["_sse_event"] == "message"
    ]
    assert part + rest == whole
    assert len(whole) > 200


def test_a_reader_that_never_reads_does_not_hold_the_run_back(serve: Serve) -> None:
    served = serve(chatty_graph(5000), max_events=300)
    run_id = post(served, "/api/runs", {"input": {}}).json()["run_id"]
    with httpx.stream("GET", f"{served.url}/api/runs/{run_id}/events", timeout=20):
        # Connected, reading nothing: the run still finishes at once.
        wait_for(served, run_id, "done", timeout=20)
    late = list(events(served, run_id))
    assert late[0]["event"] == "Gap"
    assert late[0]["missed"] > 4000
    kept = [e for e in late if e["_sse_event"] == "message" and e["event"] != "Gap"]
    assert len(kept) == 300  # memory stays bounded per run, whoever is reading
    assert kept[-1]["event"] == "RunFinished"


@pytest.mark.parametrize(
    ("method", "path", "body", "headers", "status", "message"),
    [
        ("post", "/api/runs", b"{not json", JSON, 400, "not valid JSON"),
        ("post", "/api/runs", b"[1, 2]", JSON, 400, "must be a JSON object"),
        ("post", "/api/runs", b'{"input": {"nope": 1}}', JSON, 422, "does not fit the graph"),
        ("post", "/api/runs", b'{"run_id": ""}', JSON, 400, "run_id must be a non-empty"),
        ("post", "/api/runs", b"input=x", {}, 415, "send the request body as JSON"),
        ("get", "/api/runs/nope", None, {}, 404, "no run 'nope'"),
        ("get", "/api/runs/nope/events", None, {}, 404, "no live run 'nope'"),
        ("get", "/api/runs/nope/history", None, {}, 404, "no checkpoints for run 'nope'"),
        (
            "post",
            "/api/runs/nope/resume",
            b'{"interrupt_id": "x", "answer": 1}',
            JSON,
            404,
            "no run",
        ),
        ("post", "/api/runs/nope/resume", b'{"answer": 1}', JSON, 400, "needs an interrupt_id"),
        ("post", "/api/runs/nope/fork", b"{}", JSON, 400, "needs a checkpoint_id"),
        ("post", "/api/runs/nope/cancel", b"{}", JSON, 404, "no live run"),
        ("get", "/api/runs?limit=x", None, {}, 400, "limit must be an integer"),
        ("get", "/api/nothing", None, {}, 404, "no such page or API route"),
        ("delete", "/api/runs", None, {}, 405, "DELETE is not allowed"),
    ],
)
def test_bad_requests_get_a_clear_4xx(
    serve: Serve,
    method: str,
    path: str,
    body: bytes | None,
    headers: dict[str, str],
    status: int,
    message: str,
) -> None:
    served = serve(ticket_graph())
    reply = httpx.request(method, f"{served.url}{path}", content=body, headers=headers)
    assert reply.status_code == status, reply.text
    assert message in reply.json()["error"]
    assert httpx.get(f"{served.url}/api/graph").status_code == 200  # still serving


def test_answering_a_run_that_is_not_waiting_is_refused(serve: Serve) -> None:
    served = serve(ticket_graph())
    post(served, "/api/runs", {"input": {"text": "hi"}, "run_id": "w"})
    wait_for(served, "w", "interrupted")
    wrong = post(served, "/api/runs/w/resume", {"interrupt_id": "w|nope|0", "answer": 1})
    assert wrong.status_code == 404
    assert "no pending interrupt 'w|nope|0'" in wrong.json()["error"]
    dup = post(served, "/api/runs", {"input": {"text": "hi"}, "run_id": "w"})
    assert dup.status_code == 409


def test_history_and_a_fork_from_an_earlier_checkpoint(serve: Serve) -> None:
    served = serve(ticket_graph())
    post(served, "/api/runs", {"input": {"text": "invoice"}, "run_id": "h"})
    question = wait_for(served, "h", "interrupted")["interrupts"][0]
    post(served, "/api/runs/h/resume", {"interrupt_id": question["id"], "answer": "no"})
    wait_for(served, "h", "done")
    history = httpx.get(f"{served.url}/api/runs/h/history").json()
    assert [c["trigger"] for c in history][:2] == ["end", "node_complete"]
    at_interrupt = next(c for c in history if c["trigger"] == "interrupt")
    fork = post(served, "/api/runs/h/fork", {"checkpoint_id": at_interrupt["checkpoint_id"]})
    assert fork.status_code == 201
    new_id = fork.json()["run_id"]
    forked = wait_for(served, new_id, "interrupted")
    post(
        served,
        f"/api/runs/{new_id}/resume",
        {"interrupt_id": forked["interrupts"][0]["id"], "answer": "yes"},
    )
    assert wait_for(served, new_id, "done")["summary"]["content"] == "approved=True"
    original = httpx.get(f"{served.url}/api/runs/h").json()
    assert original["state"]["approved"] is False  # the original is untouched
    unknown = post(served, "/api/runs/h/fork", {"checkpoint_id": "nope"})
    assert unknown.status_code == 404


def test_a_run_can_be_cancelled(serve: Serve) -> None:
    served = serve(slow_graph(30))
    run_id = post(served, "/api/runs", {"input": {}}).json()["run_id"]
    time.sleep(0.2)
    assert post(served, f"/api/runs/{run_id}/cancel", {}).status_code == 202
    wait_for(served, run_id, "cancelled", timeout=10)
    assert post(served, f"/api/runs/{run_id}/cancel", {}).status_code == 409


def test_runs_in_the_store_are_listed_opened_and_answered_by_a_new_studio(
    serve: Serve, tmp_path: Path
) -> None:
    store = SQLiteCheckpointStore(tmp_path / "runs.db")
    first = serve(ticket_graph(), store=store)
    post(first, "/api/runs", {"input": {"text": "invoice"}, "run_id": "kept"})
    wait_for(first, "kept", "interrupted")
    first.__exit__()

    second = serve(ticket_graph(), store=SQLiteCheckpointStore(tmp_path / "runs.db"))
    listed = httpx.get(f"{second.url}/api/runs").json()
    assert [(r["run_id"], r["status"], r["live"]) for r in listed] == [
        ("kept", "interrupted", False)
    ]
    opened = httpx.get(f"{second.url}/api/runs/kept").json()
    assert opened["live"] is False
    question = opened["interrupts"][0]
    assert question["prompt"] == "Send the reply?"
    answered = post(
        second, "/api/runs/kept/resume", {"interrupt_id": question["id"], "answer": "yes"}
    )
    assert answered.status_code == 202
    assert wait_for(second, "kept", "done")["summary"]["content"] == "approved=True"


def test_a_token_guards_every_request(serve: Serve) -> None:
    served = serve(ticket_graph(), token="s3cret-token")
    assert httpx.get(f"{served.url}/api/graph").status_code == 401
    assert httpx.get(f"{served.url}/api/graph?token=wrong").status_code == 401
    bearer = {"Authorization": "Bearer s3cret-token"}
    assert httpx.get(f"{served.url}/api/graph", headers=bearer).status_code == 200
    page = httpx.get(f"{served.url}/?token=s3cret-token")
    assert page.status_code == 200
    cookie = page.headers["set-cookie"]
    assert "HttpOnly" in cookie
    assert "SameSite=Strict" in cookie
    with httpx.Client(base_url=served.url, cookies=page.cookies) as client:
        assert client.get("/api/graph").status_code == 200


def test_a_loopback_studio_answers_only_loopback_host_names(serve: Serve) -> None:
    served = serve(ticket_graph())
    rebound = httpx.get(f"{served.url}/api/graph", headers={"Host": "evil.example:80"})
    assert rebound.status_code == 400
    assert httpx.get(f"http://localhost:{served.port}/api/graph").status_code == 200


def test_serving_beyond_loopback_needs_a_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SELECTGRAPH_STUDIO_TOKEN", raising=False)
    with pytest.raises(
        ValueError, match=r"reachable from other machines on 0\.0\.0\.0; give it a token"
    ):
        serve_studio(ticket_graph(), host="0.0.0.0")


async def test_the_event_log_wakes_readers_and_reports_gaps() -> None:
    log = EventLog(max_events=3)
    for n in range(5):
        log.append({"n": n})
    log.close()
    seen = [record async for record in log.follow(0)]
    assert seen[0] == {"event": "Gap", "missed": 2, "id": 2}
    assert [r["id"] for r in seen[1:]] == [3, 4, 5]
    with pytest.raises(ValueError, match="max_events must be >= 1"):
        EventLog(max_events=0)
