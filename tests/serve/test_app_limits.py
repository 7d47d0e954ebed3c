"""The served app's rules: its token, its body limit, bad requests, busy threads, its parts."""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any, cast

import httpx
import openai
import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from selectgraph.serve import ServedGraph, ServedPart
from selectgraph.serve._app import create_app, is_loopback, serve, server_url
from selectgraph.serve._guard import Guard
from tests.serve.server import Gate, Server, hearing_graph

JSON = {"Content-Type": "application/json"}
CHAT: dict[str, Any] = {"model": "hearing", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def server() -> Iterator[Server]:
    with Server(create_app([ServedGraph(hearing_graph())], max_body=1000)) as running:
        yield running


def _post(server: Server, body: Any = None, **options: Any) -> httpx.Response:
    return httpx.post(f"{server.url}/v1/chat/completions", json=body, **options)


@pytest.mark.parametrize(
    ("body", "param", "says"),
    [
        ({"model": "hearing"}, "messages", "Field required"),
        ({"model": 3, "messages": CHAT["messages"]}, "model", "valid string"),
        ({**CHAT, "stream": "yes"}, "stream", "valid boolean"),
        ({**CHAT, "messages": []}, "messages", "at least 1 item"),
        ({**CHAT, "messages": [{"role": "robot", "content": "x"}]}, "messages[0].role", "'user'"),
        (
            {**CHAT, "messages": [{"role": "user", "content": [{"type": "image_url"}]}]},
            "messages[0].content[0].type",
            "'text'",
        ),
        (
            {**CHAT, "messages": [{"role": "assistant", "content": "x"}]},
            "messages",
            "must end with the user's message",
        ),
    ],
)
def test_a_body_of_the_wrong_shape_is_a_400_naming_the_field(
    server: Server, body: Any, param: str, says: str
) -> None:
    answer = _post(server, body)

    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["param"] == param
    assert error["type"] == "invalid_request_error"
    assert says in error["message"]
    assert error["message"].startswith(param)


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "must be a JSON object, got list"),
        (b"\xff\xfe", "not valid JSON"),
        (b'{"a":' * 150 + b"1" + b"}" * 150, "nested deeper than 100"),
    ],
)
def test_a_body_that_is_not_a_json_object_is_a_400(
    server: Server, content: bytes, says: str
) -> None:
    answer = httpx.post(f"{server.url}/v1/chat/completions", content=content, headers=JSON)

    assert answer.status_code == 400
    assert says in answer.json()["error"]["message"]


def test_the_openai_client_raises_bad_request_naming_the_field(server: Server) -> None:
    with (
        openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0) as client,
        pytest.raises(openai.BadRequestError) as caught,
    ):
        client.chat.completions.create(
            model="hearing", messages=cast(Any, [{"role": "user", "content": 7}])
        )

    assert caught.value.param == "messages[0].content"


def test_a_body_declared_past_the_limit_is_a_413(server: Server) -> None:
    answer = httpx.post(f"{server.url}/v1/chat/completions", content=b"x" * 1001)

    assert answer.status_code == 413
    assert "1,000 bytes" in answer.json()["error"]["message"]
    assert answer.json()["error"]["code"] == "request_too_large"


async def test_a_content_length_that_is_not_a_number_is_a_400() -> None:
    # uvicorn refuses such a request itself; the guard still answers it under other servers.
    sent: list[Any] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("the guard let the request through")

    async def receive() -> Any:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        sent.append(message)

    headers = [(b"content-length", b"lots")]
    scope: dict[str, Any] = {"type": "http", "method": "POST", "path": "/", "headers": headers}
    await Guard(app, token=None, max_body=10)(scope, receive, send)

    assert sent[0]["status"] == 400
    assert (
        json.loads(sent[1]["body"])["error"]["message"] == "Content-Length is not a number: b'lots'"
    )


def test_a_streamed_body_past_the_limit_is_a_413(server: Server) -> None:
    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        for _ in range(50):
            yield b"x" * 100

    answer = httpx.post(f"{server.url}/v1/chat/completions", content=chunks())

    assert answer.status_code == 413


def test_a_streamed_body_within_the_limit_is_read(server: Server) -> None:
    def chunks() -> Iterator[bytes]:
        body = json.dumps(CHAT).encode()
        yield body[:10]
        yield body[10:]

    answer = httpx.post(f"{server.url}/v1/chat/completions", content=chunks(), headers=JSON)

    assert answer.status_code == 200
    assert answer.json()["choices"][0]["message"]["content"] == "hi"


def test_every_route_needs_the_token_when_there_is_one() -> None:
    app = create_app([ServedGraph(hearing_graph())], token="s3cret")
    with Server(app) as running:
        url = running.url
        missing = httpx.get(f"{url}/v1/models")
        wrong = httpx.get(f"{url}/v1/models", headers={"Authorization": "Bearer nope"})
        basic = httpx.get(f"{url}/v1/models", headers={"Authorization": "Basic s3cret"})
        right = httpx.get(f"{url}/v1/models", headers={"Authorization": "Bearer s3cret"})
        unknown_route = httpx.get(f"{url}/elsewhere")
        with (
            openai.OpenAI(base_url=f"{url}/v1", api_key="nope", max_retries=0) as bad_client,
            pytest.raises(openai.AuthenticationError, match="needs its token"),
        ):
            bad_client.chat.completions.create(model="hearing", messages=CHAT["messages"])
        with openai.OpenAI(base_url=f"{url}/v1", api_key="s3cret", max_retries=0) as good_client:
            reply = good_client.chat.completions.create(model="hearing", messages=CHAT["messages"])

    assert [missing.status_code, wrong.status_code, basic.status_code] == [401, 401, 401]
    assert missing.headers["www-authenticate"] == "Bearer"
    assert missing.json()["error"]["type"] == "authentication_error"
    assert unknown_route.status_code == 401  # the guard answers before routing
    assert right.status_code == 200
    assert reply.choices[0].message.content == "hi"


def test_a_body_not_sent_as_json_is_a_415(server: Server) -> None:
    # What a cross-site form can send: text/plain holding JSON.
    answer = httpx.post(
        f"{server.url}/v1/chat/completions",
        content=json.dumps(CHAT),
        headers={"Content-Type": "text/plain"},
    )

    assert answer.status_code == 415
    assert "Content-Type: application/json" in answer.json()["error"]["message"]


def test_loopback_only_answers_requests_for_a_loopback_host_name() -> None:
    app = create_app([ServedGraph(hearing_graph())], loopback_only=True)
    with Server(app) as running:
        rebound = httpx.get(f"{running.url}/v1/models", headers={"Host": "evil.example:80"})
        local = httpx.get(f"{running.url}/v1/models", headers={"Host": "localhost:80"})
        direct = httpx.get(f"{running.url}/v1/models")

    assert rebound.status_code == 400
    assert "loopback host" in rebound.json()["error"]["message"]
    assert [local.status_code, direct.status_code] == [200, 200]


def test_unknown_routes_and_methods_are_json_errors(server: Server) -> None:
    missing = httpx.get(f"{server.url}/v2/nothing")
    wrong_method = httpx.get(f"{server.url}/v1/chat/completions")

    assert missing.status_code == 404
    assert "/v2/nothing" in missing.json()["error"]["message"]
    assert wrong_method.status_code == 405
    assert "GET is not allowed" in wrong_method.json()["error"]["message"]


def test_a_message_for_a_busy_thread_under_reject_is_a_409() -> None:
    gate = Gate()
    served = ServedGraph(gate.graph(), multitask_strategy="reject")
    with (
        Server(create_app([served])) as running,
        openai.OpenAI(base_url=f"{running.url}/v1", api_key="unused", max_retries=0) as client,
    ):
        messages: Any = [{"role": "user", "content": "wait"}]
        busy = {"X-Thread-Id": "busy"}

        def ask() -> Any:
            return client.chat.completions.create(
                model="gate", messages=messages, extra_headers=busy
            )

        first: list[Any] = []
        waiting = threading.Thread(target=lambda: first.append(ask()))
        waiting.start()
        try:
            assert gate.entered.wait(timeout=30), "the first run never started"
            with pytest.raises(openai.ConflictError) as caught:
                ask()
            streamed = httpx.post(
                f"{running.url}/v1/chat/completions",
                json={"model": "gate", "messages": messages, "stream": True},
                headers=busy,
            )
        finally:
            gate.release.set()
            waiting.join(timeout=30)

    assert caught.value.status_code == 409
    assert (caught.value.body or {})["code"] == "thread_busy"  # type: ignore[index]
    assert streamed.status_code == 409  # refused before the stream began
    assert first[0].choices[0].message.content == "done waiting"


def test_a_bad_thread_id_is_a_400(server: Server) -> None:
    answer = _post(server, CHAT, headers={"X-Thread-Id": "a|b"})

    assert answer.status_code == 400
    assert "|" in answer.json()["error"]["message"]


def test_parts_add_their_routes_and_run_their_lifespan() -> None:
    events: list[str] = []

    @asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        events.append("started")
        yield
        events.append("stopped")

    async def hello(request: Request) -> Response:
        return JSONResponse({"hello": "part"})

    async def broken(request: Request) -> Response:
        raise RuntimeError("a bug")

    part = ServedPart([Route("/part", hello), Route("/broken", broken)], lifespan)
    app = create_app([ServedGraph(hearing_graph())], parts=[part], token="t", max_body=10)
    with Server(app) as running:
        answered = httpx.get(f"{running.url}/part", headers={"Authorization": "Bearer t"})
        refused = httpx.get(f"{running.url}/part")
        too_big = httpx.post(
            f"{running.url}/part", content=b"x" * 11, headers={"Authorization": "Bearer t"}
        )
        failed = httpx.get(f"{running.url}/broken", headers={"Authorization": "Bearer t"})
        assert events == ["started"]

    assert events == ["started", "stopped"]
    assert failed.status_code == 500
    assert failed.json()["error"]["message"] == "the server failed on /broken: RuntimeError"
    assert answered.json() == {"hello": "part"}
    assert refused.status_code == 401
    assert too_big.status_code == 413  # the guard is in front of every part


@pytest.mark.parametrize(
    ("graphs", "options", "says"),
    [
        ([], {}, "at least one ServedGraph"),
        (None, {"max_body": 0}, "max_body must be a positive number"),
        (None, {"token": ""}, "token must not be empty"),
        ("twice", {}, "two graphs are served as 'hearing'"),
    ],
)
def test_create_app_refuses_what_cannot_be_served(graphs: Any, options: Any, says: str) -> None:
    if graphs is None:
        graphs = [ServedGraph(hearing_graph())]
    elif graphs == "twice":
        graphs = [ServedGraph(hearing_graph()), ServedGraph(hearing_graph())]

    with pytest.raises(ValueError, match=says):
        create_app(graphs, **options)


def test_serve_refuses_a_non_loopback_host_without_a_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SELECTGRAPH_SERVE_TOKEN", raising=False)

    with pytest.raises(ValueError, match=r"reachable from other machines on 0\.0\.0\.0"):
        serve([ServedGraph(hearing_graph())], host="0.0.0.0")


def test_loopback_hosts_and_urls() -> None:
    assert [is_loopback(h) for h in ("127.0.0.1", "localhost", "::1", "[::1]")] == [True] * 4
    assert [is_loopback(h) for h in ("0.0.0.0", "10.0.0.1", "example.com")] == [False] * 3
    assert server_url("0.0.0.0", 8410) == "http://127.0.0.1:8410"
    assert server_url("::1", 80) == "http://[::1]:80"
