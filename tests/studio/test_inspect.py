"""What the studio's records carry for the timeline: content only when captured."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

from tests.studio.conftest import Served
from tests.studio.graphs import chat_graph

JSON = {"Content-Type": "application/json"}


def finished_events(served: Served, text: str) -> list[dict[str, Any]]:
    """Start a run on ``text``, wait for its end, and return its records."""
    reply = httpx.post(f"{served.url}/api/runs", content=json.dumps({"input": text}), headers=JSON)
    assert reply.status_code == 201, reply.text
    run_id = reply.json()["run_id"]
    deadline = time.monotonic() + 20
    while True:
        page = httpx.get(
            f"{served.url}/api/runs/{run_id}/events", headers={"Accept": "application/json"}
        ).json()
        if page["ended"]:
            return page["events"]  # type: ignore[no-any-return]
        assert time.monotonic() < deadline, f"run {run_id} did not end: {page}"
        time.sleep(0.05)


def by_name(records: list[dict[str, Any]], name: str) -> dict[str, Any]:
    found = [r for r in records if r.get("event") == name]
    assert len(found) == 1, [r.get("event") for r in records]
    return found[0]


def test_a_live_run_keeps_prompts_and_replies_only_with_capture_on(serve: Any) -> None:
    captured = serve(chat_graph(), capture_content=True)
    assert httpx.get(f"{captured.url}/api/graph").json()["capture_content"] is True
    records = finished_events(captured, "hello owls")
    started = by_name(records, "LLMCallStarted")
    finished = by_name(records, "LLMCallFinished")
    assert [m["role"] for m in started["messages"]][-1] == "user"
    assert "hello owls" in started["messages"][-1]["text"]
    assert finished["text"] == '[local] reply to: "hello owls"'
    assert finished["input_tokens"] > 0
    assert finished["output_tokens"] > 0
    assert finished["model"] == "local"
    assert finished["duration_ms"] >= 0
    # A prompt is roles and text: no request headers or provider settings travel with it.
    assert all(set(m) == {"role", "text"} for m in started["messages"])

    plain = serve(chat_graph())
    assert httpx.get(f"{plain.url}/api/graph").json()["capture_content"] is False
    records = finished_events(plain, "hello owls")
    started = by_name(records, "LLMCallStarted")
    finished = by_name(records, "LLMCallFinished")
    assert "messages" not in started
    assert "text" not in finished
    assert finished["input_tokens"] > 0  # usage and timings are kept all the same
    assert "hello owls" not in json.dumps([started, finished])
