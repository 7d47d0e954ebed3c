"""What a request may send the studio: a bounded body, ids a store can hold, limits in range.

Issue 25 (item 8): deeply nested JSON and a huge ``?limit=`` gave 500, a 300 MB body
was read whole, and a run id with ``|`` was accepted and the run then failed. Each
is now a 4xx with a message, and the server keeps serving.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from selectgraph import SQLiteCheckpointStore
from selectgraph.studio import create_app
from selectgraph.studio import serve as serve_studio
from tests.studio.conftest import Served
from tests.studio.graphs import ticket_graph

Serve = Callable[..., Served]
JSON = {"Content-Type": "application/json"}
DEEP = 5_000
HUGE = "99999999999999999999"


def still_serving(served: Served) -> None:
    assert httpx.get(f"{served.url}/api/graph").status_code == 200


@pytest.fixture
def sqlite_studio(serve: Serve, tmp_path: Path) -> Served:
    return serve(ticket_graph(), store=SQLiteCheckpointStore(tmp_path / "runs.db"))


@pytest.mark.parametrize(
    ("path", "headers", "message"),
    [
        (f"/api/runs?limit={HUGE}", {}, f"limit must be from 1 to 1,000, got {HUGE}"),
        ("/api/runs?limit=0", {}, "limit must be from 1 to 1,000, got 0"),
        (f"/api/threads?limit={HUGE}", {}, "limit must be from 1 to 1,000"),
        (
            f"/api/runs/r1/events?limit={HUGE}",
            {"Accept": "application/json"},
            "limit must be from 1 to 1,000",
        ),
        (f"/api/runs/r1/events?after={HUGE}", {"Accept": "application/json"}, "Last-Event-ID must"),
        ("/api/runs/r1/events", {"Last-Event-ID": HUGE}, "Last-Event-ID must be from 0"),
        (f"/api/runs?limit={'9' * 5000}", {}, "limit must be an integer"),
    ],
)
def test_limits_outside_their_range_are_400_with_a_sqlite_store(
    sqlite_studio: Served, path: str, headers: dict[str, str], message: str
) -> None:
    reply = httpx.get(f"{sqlite_studio.url}{path}", headers=headers)
    assert reply.status_code == 400, reply.text
    assert message in reply.json()["error"]
    still_serving(sqlite_studio)


def test_deeply_nested_json_is_400(serve: Serve) -> None:
    served = serve(ticket_graph())
    deep = '{"input": ' + "[" * DEEP + "]" * DEEP + "}"
    for path in ("/api/runs", "/api/runs/r1/resume", "/api/threads/t/runs"):
        reply = httpx.post(f"{served.url}{path}", content=deep, headers=JSON)
        assert reply.status_code == 400, (path, reply.text)
        assert reply.json()["error"] == "the request body is JSON nested too deeply to read"
    metadata = quote("k=" + "[" * DEEP + "]" * DEEP)
    reply = httpx.get(f"{served.url}/api/threads?metadata={metadata}")
    assert reply.status_code == 400, reply.text
    assert "metadata 'k' is JSON nested too deeply" in reply.json()["error"]
    still_serving(served)


def test_json_nested_deeper_than_a_state_is_stored_is_400(serve: Serve) -> None:
    served = serve(ticket_graph())
    nested = "[" * 150 + "]" * 150
    body = '{"input": "hi", "metadata": {"k": ' + nested + "}}"
    reply = httpx.post(f"{served.url}/api/threads/t/runs", content=body, headers=JSON)
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"] == "the request body is JSON nested deeper than 100 levels"
    reply = httpx.get(f"{served.url}/api/threads?metadata={quote('k=' + nested)}")
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"] == "metadata 'k' is JSON nested deeper than 100 levels"
    still_serving(served)


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_not_json_and_are_400(serve: Serve, constant: str) -> None:
    served = serve(ticket_graph())
    body = '{"input": "hi", "metadata": {"k": ' + constant + "}}"
    reply = httpx.post(f"{served.url}/api/threads/t/runs", content=body, headers=JSON)
    assert reply.status_code == 400, reply.text  # was 500, from the store's JSON check
    assert f"{constant} is not a JSON value" in reply.json()["error"]
    still_serving(served)


@pytest.mark.parametrize("run_id", ["a|b", "a\x00b", "x" * 257, "\ud800"])
def test_a_run_id_no_store_can_hold_is_400_before_anything_runs(
    sqlite_studio: Served, run_id: str
) -> None:
    body = json.dumps({"input": {"text": "hi"}, "run_id": run_id})
    reply = httpx.post(f"{sqlite_studio.url}/api/runs", content=body, headers=JSON)
    assert reply.status_code == 400, reply.text
    assert "cannot be stored" in reply.json()["error"]
    assert httpx.get(f"{sqlite_studio.url}/api/runs").json() == []  # nothing started


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/api/runs/a%7Cb"),
        ("get", "/api/runs/a%7Cb/history"),
        ("get", "/api/runs/a%01b/events"),
        ("post", "/api/runs/a%7Cb/cancel"),
        ("post", "/api/runs/a%7Cb/fork"),
        ("post", "/api/runs/a%7Cb/resume"),
    ],
)
def test_a_run_id_in_the_path_no_store_can_hold_is_400(
    sqlite_studio: Served, method: str, path: str
) -> None:
    reply = httpx.request(method, f"{sqlite_studio.url}{path}", content=b"{}", headers=JSON)
    assert reply.status_code == 400, reply.text
    assert "cannot be stored" in reply.json()["error"]


def test_a_body_declared_larger_than_max_body_is_413(serve: Serve) -> None:
    served = serve(ticket_graph(), max_body=1000)
    body = json.dumps({"input": {"text": "x" * 2000}})
    reply = httpx.post(f"{served.url}/api/runs", content=body, headers=JSON)
    assert reply.status_code == 413, reply.text
    assert reply.json()["error"] == (
        "the request body is larger than this studio reads (1,000 bytes: max_body)"
    )
    still_serving(served)


def test_a_body_streamed_without_a_length_past_max_body_is_413(serve: Serve) -> None:
    served = serve(ticket_graph(), max_body=1000)

    def chunks() -> Iterator[bytes]:  # a generator: sent chunked, no Content-Length
        yield b'{"input": {"text": "'
        for _ in range(4):
            yield b"x" * 500
        yield b'"}}'

    reply = httpx.post(f"{served.url}/api/runs", content=chunks(), headers=JSON)
    assert "content-length" not in {k.lower() for k in reply.request.headers}
    assert reply.status_code == 413, reply.text
    still_serving(served)


def test_a_body_at_max_body_is_read(serve: Serve) -> None:
    served = serve(ticket_graph(), max_body=1000)
    prefix = '{"input": {"text": "'
    body = prefix + "x" * (1000 - len(prefix) - 3) + '"}}'
    assert len(body) == 1000
    reply = httpx.post(f"{served.url}/api/runs", content=body, headers=JSON)
    assert reply.status_code == 201, reply.text


def test_max_body_defaults_to_1_mib_and_must_be_positive() -> None:
    assert inspect.signature(create_app).parameters["max_body"].default == 1 << 20
    assert inspect.signature(serve_studio).parameters["max_body"].default == 1 << 20
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match="max_body must be a positive number of bytes"):
            create_app(ticket_graph(), max_body=bad)  # type: ignore[arg-type]
