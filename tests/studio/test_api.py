"""The studio's HTTP API and event stream, against a real server on a local port."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from selectgraph import InMemoryCheckpointStore, SQLiteCheckpointStore
from selectgraph.studio import serve as serve_studio
from selectgraph.studio._log import EventLog
from tests.studio.conftest import Served
from tests.studio.graphs import (
    Gate,
    chat_graph,
    chatty_graph,
    gated_graph,
    slow_graph,
    ticket_graph,
)

ROOT = Path(__file__).resolve().parents[2]

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


def events(
    served: Served, run_id: str, *, last_id: int | None = None, stop_at: str | None = None
) -> Iterator[dict[str, Any]]:
    """The run's SSE messages, parsed, until the stream ends (or an event named ``stop_at``)."""
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
                if kind == "end" or record.get("event") == stop_at:
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
        ("get", "/api/runs/nope/events", None, {}, 404, "no run 'nope'"),
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


# ---------------------------------------------------------------- runs made elsewhere
def elsewhere(*args: str) -> subprocess.Popen[str]:
    """A run made by another process (tests/studio/elsewhere.py) on the same SQLite file."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.studio.elsewhere", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finished(process: subprocess.Popen[str]) -> None:
    _, err = process.communicate(timeout=60)
    assert process.returncode == 0, err


def until(check: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def test_a_run_made_by_another_process_shows_its_events_and_is_answered_here(
    serve: Serve, tmp_path: Path
) -> None:
    db = tmp_path / "runs.db"
    finished(elsewhere("ticket", str(db), "far"))
    served = serve(ticket_graph(), store=SQLiteCheckpointStore(db), poll_interval=0.02)
    opened = httpx.get(f"{served.url}/api/runs/far").json()
    assert (opened["status"], opened["live"]) == ("interrupted", False)

    stored = list(events(served, "far", stop_at="RunPaused"))  # open: it waits for an answer
    kinds = [e["event"] for e in stored]
    assert kinds[0] == "RunStarted"
    assert [e["_sse_id"] for e in stored] == list(range(1, len(stored) + 1))  # the log's seqs
    assert [e["node"] for e in stored if e["event"] == "NodeFinished"] == ["classify", "approve"]
    after_classify = next(e for e in stored if e.get("trigger") == "node_complete")
    assert after_classify["state"]["category"] == "billing"  # the state after the node
    [question] = stored[-1]["summary"]["interrupts"]
    assert question["prompt"] == "Send the reply?"

    answered = post(
        served, "/api/runs/far/resume", {"interrupt_id": question["id"], "answer": "yes"}
    )
    assert answered.status_code == 202
    whole = list(events(served, "far"))  # now from this studio's log, starting with the stored
    messages = [e for e in whole if e["_sse_event"] == "message"]
    assert [e["event"] for e in messages[: len(stored)]] == kinds
    assert [e["_sse_id"] for e in messages] == list(range(1, len(messages) + 1))
    assert messages[-1]["event"] == "RunFinished"
    assert messages[-1]["summary"]["content"] == "approved=True"
    assert wait_for(served, "far", "done")["state"]["approved"] is True


def test_a_run_going_on_in_another_process_is_watched_live(serve: Serve, tmp_path: Path) -> None:
    db, release = tmp_path / "runs.db", tmp_path / "release"
    store = SQLiteCheckpointStore(db)
    process = elsewhere("gated", str(db), "busy", str(release))
    try:
        until(lambda: store.head("busy") is not None, "the other process's first checkpoint")
        served = serve(gated_graph(Gate(release)), store=store, poll_interval=0.02)
        seen: list[dict[str, Any]] = []
        for record in events(served, "busy"):
            seen.append(record)
            if record.get("event") == "NodeFinished" and record["node"] == "first":
                # Stored with the checkpoint after "first"; "wait" holds the run until now.
                assert not release.exists()
                Gate(release).open()
        finished(process)
    finally:
        Gate(release).open()
        process.wait(timeout=60)
    messages = [e for e in seen if e["_sse_event"] == "message"]
    assert messages[-1]["event"] == "RunFinished"
    assert messages[-1]["summary"]["content"] == "heard "
    assert [e["_sse_id"] for e in messages] == list(range(1, len(messages) + 1))
    assert seen[-1]["_sse_event"] == "end"
    assert json.loads(json.dumps(seen[-1]))["last_id"] == messages[-1]["_sse_id"]


def test_a_stored_run_reconnects_with_last_event_id_exactly(serve: Serve, tmp_path: Path) -> None:
    store = SQLiteCheckpointStore(tmp_path / "runs.db")
    chatty_graph(30).run({}, run_id="told", checkpoint_store=store)  # not by this studio
    served = serve(chatty_graph(30), store=store)
    whole = [e["_sse_id"] for e in events(served, "told") if e["_sse_event"] == "message"]
    assert whole == [e.seq for e in store.read_events("told")]
    part = []
    for record in events(served, "told"):
        part.append(record["_sse_id"])
        if len(part) == 10:
            break  # the browser lost the connection here
    rest = [
        e["_sse_id"] for e in events(served, "told", last_id=10) if e["_sse_event"] == "message"
    ]
    assert part + rest == whole
    page = httpx.get(
        f"{served.url}/api/runs/told/events?after=10&limit=5",
        headers={"Accept": "application/json"},
    ).json()
    assert [e["id"] for e in page["events"]] == [11, 12, 13, 14, 15]
    assert (page["source"], page["last_id"], page["ended"]) == ("store", 15, False)
    end = httpx.get(
        f"{served.url}/api/runs/told/events?after={whole[-1] - 1}",
        headers={"Accept": "application/json"},
    ).json()
    assert [e["event"] for e in end["events"]] == ["RunFinished"]
    assert end["ended"] is True
    # Reconnecting after the last event: nothing more, and the stream ends at once.
    after_all = list(events(served, "told", last_id=whole[-1]))
    assert [e["_sse_event"] for e in after_all] == ["end"]


# ---------------------------------------------------------------- threads
def send(served: Served, thread_id: str, body: dict[str, Any]) -> httpx.Response:
    return post(served, f"/api/threads/{quote(thread_id, safe='')}/runs", body)


def thread(served: Served, thread_id: str) -> dict[str, Any]:
    reply = httpx.get(f"{served.url}/api/threads/{quote(thread_id, safe='')}")
    assert reply.status_code == 200, reply.text
    return reply.json()  # type: ignore[no-any-return]


def test_a_thread_is_sent_messages_listed_and_shown(serve: Serve, tmp_path: Path) -> None:
    served = serve(chat_graph(), store=SQLiteCheckpointStore(tmp_path / "runs.db"))
    assert httpx.get(f"{served.url}/api/threads").json() == []
    first = send(served, "team/ann", {"input": "My name is Ann.", "metadata": {"user": "ann"}})
    assert first.status_code == 201, first.text
    assert first.json()["thread_id"] == "team/ann"
    wait_for(served, first.json()["run_id"], "done")
    second = send(served, "team/ann", {"input": "What is my name?"})
    stream = list(events(served, second.json()["run_id"]))
    finished_event = next(e for e in stream if e.get("event") == "RunFinished")
    assert finished_event["summary"]["content"] == '[local] reply to: "What is my name?"'
    wait_for(served, second.json()["run_id"], "done")

    shown = thread(served, "team/ann")
    assert (shown["status"], shown["runs"], shown["metadata"]) == ("idle", 2, {"user": "ann"})
    assert [(m["role"], m["text"]) for m in shown["messages"]] == [
        ("user", "My name is Ann."),
        ("assistant", '[local] reply to: "My name is Ann."'),
        ("user", "What is my name?"),
        ("assistant", '[local] reply to: "What is my name?"'),
    ]
    runs = shown["thread_runs"]
    assert [r["run_id"] for r in runs] == [first.json()["run_id"], second.json()["run_id"]]
    assert [r["status"] for r in runs] == ["done", "done"]
    assert runs[1]["output"] == '[local] reply to: "What is my name?"'

    listed = httpx.get(f"{served.url}/api/threads", params={"metadata": "user=ann"}).json()
    assert [(t["thread_id"], t["status"], t["runs"]) for t in listed] == [("team/ann", "idle", 2)]
    assert httpx.get(f"{served.url}/api/threads", params={"metadata": "user=bob"}).json() == []


def test_double_texting_a_busy_thread(serve: Serve, tmp_path: Path) -> None:
    gate = Gate(tmp_path / "release")
    served = serve(gated_graph(gate), store=SQLiteCheckpointStore(tmp_path / "runs.db"))
    first = send(served, "t", {"input": "one"}).json()
    until(gate.entered.is_set, "the first run to reach its gate")
    refused = send(served, "t", {"input": "two", "strategy": "reject"})
    assert refused.status_code == 409
    assert "thread 't' is busy" in refused.json()["error"]
    queued = send(served, "t", {"input": "three", "strategy": "enqueue"})
    assert queued.status_code == 201
    assert queued.json()["status"] in ("queued", "running")
    assert thread(served, "t")["status"] == "busy"
    gate.open()
    assert wait_for(served, first["run_id"], "done")["summary"]["content"] == "heard one"
    later = wait_for(served, queued.json()["run_id"], "done")
    assert later["summary"]["content"] == "heard three"
    shown = thread(served, "t")
    assert [m["text"] for m in shown["messages"]] == ["one", "three"]
    assert [r["run_id"] for r in shown["thread_runs"]] == [first["run_id"], queued.json()["run_id"]]


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "message"),
    [
        ("get", "/api/threads/nope", None, 404, "no thread 'nope'"),
        ("get", "/api/threads/a%7Cb", None, 400, "cannot be stored"),
        ("post", "/api/threads/a%7Cb/runs", {"input": "x"}, 400, "cannot be stored"),
        ("post", "/api/threads/t/runs", {"input": "x", "strategy": "maybe"}, 400, "strategy must"),
        ("post", "/api/threads/t/runs", {"input": "x", "strategy": 3}, 400, "must be a string"),
        ("post", "/api/threads/t/runs", {"input": {"nope": 1}}, 422, "does not fit the graph"),
        ("post", "/api/threads/t/runs", {"input": None}, 404, "has no run to continue"),
        ("post", "/api/threads/t/runs", {"input": "x", "metadata": [1]}, 400, "metadata must"),
        ("get", "/api/threads?metadata=novalue", None, 400, "metadata must be key=value"),
        ("get", "/api/threads?limit=0", None, 400, "limit must be from 1 to 1,000"),
    ],
)
def test_bad_thread_requests_get_a_clear_4xx(
    serve: Serve, method: str, path: str, body: Any, status: int, message: str
) -> None:
    served = serve(ticket_graph())
    content = None if body is None else json.dumps(body)
    reply = httpx.request(method, f"{served.url}{path}", content=content, headers=JSON)
    assert reply.status_code == status, reply.text
    assert message in reply.json()["error"]
    assert httpx.get(f"{served.url}/api/graph").status_code == 200  # still serving


def test_a_store_without_threads_says_so(serve: Serve) -> None:
    class RunsOnly(InMemoryCheckpointStore):
        claim_thread = None  # type: ignore[assignment]

    served = serve(ticket_graph(), store=RunsOnly())
    reply = httpx.get(f"{served.url}/api/threads")
    assert reply.status_code == 501
    assert "keeps no threads" in reply.json()["error"]


@pytest.mark.parametrize(
    "given", ["why?", {"question": "why?"}], ids=["text-to-input-field", "json-is-the-state"]
)
def test_a_run_takes_text_into_the_input_field_or_json_as_the_state(
    serve: Serve, given: Any
) -> None:
    from tests.cli.graphs import asker  # its state schema declares input_field = "question"

    served = serve(asker)
    assert httpx.get(f"{served.url}/api/graph").json()["input_field"] == "question"

    run = post(served, "/api/runs", {"input": given}).json()
    done = wait_for(served, run["run_id"], "done")

    assert done["state"]["question"] == "why?"
