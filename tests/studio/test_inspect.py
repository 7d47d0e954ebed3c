"""What the studio's records carry for the timeline: content only when captured."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.studio.conftest import Served, write_module
from tests.studio.graphs import chat_graph, ticket_graph

JSON = {"Content-Type": "application/json"}
ROOT = Path(__file__).resolve().parents[2]


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


def wait_status(served: Served, run_id: str, status: str) -> dict[str, Any]:
    deadline = time.monotonic() + 20
    while True:
        run: dict[str, Any] = httpx.get(f"{served.url}/api/runs/{run_id}").json()
        if run["status"] == status:
            return run
        assert time.monotonic() < deadline, f"run {run_id} is {run['status']}, not {status}"
        time.sleep(0.05)


def post(served: Served, path: str, body: Any) -> httpx.Response:
    return httpx.post(f"{served.url}{path}", content=json.dumps(body), headers=JSON)


def test_a_fork_with_an_edited_state_records_its_parent_on_both_runs(serve: Any) -> None:
    served = serve(ticket_graph())
    parent = post(served, "/api/runs", {"input": {"text": "my invoice"}}).json()["run_id"]
    wait_status(served, parent, "interrupted")
    history = httpx.get(f"{served.url}/api/runs/{parent}/history").json()
    after_classify = next(cp for cp in history if cp["node"] == "classify")
    at = httpx.get(
        f"{served.url}/api/runs/{parent}/checkpoints/{after_classify['checkpoint_id']}"
    ).json()
    assert at["state"]["category"] == "billing"
    assert at["step"] == after_classify["step"]

    reply = post(
        served,
        f"/api/runs/{parent}/fork",
        {"checkpoint_id": after_classify["checkpoint_id"], "update": {"category": "refunds"}},
    )
    assert reply.status_code == 201, reply.text
    fork = reply.json()
    assert fork["forked_from"] == {
        "run_id": parent,
        "checkpoint_id": after_classify["checkpoint_id"],
        "step": after_classify["step"],
    }
    waiting = wait_status(served, fork["run_id"], "interrupted")
    # The edit reached the node that ran after it: the question carries the new category.
    assert waiting["interrupts"][0]["payload"] == {"category": "refunds"}
    assert waiting["state"]["category"] == "refunds"
    assert waiting["forked_from"]["run_id"] == parent
    shown = httpx.get(f"{served.url}/api/runs/{parent}").json()
    assert shown["forks"] == [
        {
            "run_id": fork["run_id"],
            "checkpoint_id": after_classify["checkpoint_id"],
            "step": after_classify["step"],
        }
    ]
    assert shown["forked_from"] is None
    assert shown["state"]["category"] == "billing"  # the parent is untouched


def test_a_bad_edit_or_checkpoint_gets_a_clear_4xx(serve: Any) -> None:
    served = serve(ticket_graph())
    parent = post(served, "/api/runs", {"input": {"text": "my invoice"}}).json()["run_id"]
    wait_status(served, parent, "interrupted")
    first = httpx.get(f"{served.url}/api/runs/{parent}/history").json()[-1]["checkpoint_id"]
    reply = post(served, f"/api/runs/{parent}/fork", {"checkpoint_id": first, "update": [1]})
    assert reply.status_code == 400
    assert "update must be an object" in reply.json()["error"]
    reply = post(
        served, f"/api/runs/{parent}/fork", {"checkpoint_id": first, "update": {"category": 5}}
    )
    assert reply.status_code == 422, reply.text
    assert "does not fit" in reply.json()["error"]
    reply = httpx.get(f"{served.url}/api/runs/{parent}/checkpoints/nope")
    assert reply.status_code == 404
    assert "has no checkpoint 'nope'" in reply.json()["error"]


def answered_run(served: Served, text: str, answer: str) -> str:
    """A ticket run on ``text`` whose question is answered ``answer``, to its end."""
    run_id: str = post(served, "/api/runs", {"input": {"text": text}}).json()["run_id"]
    asked = wait_status(served, run_id, "interrupted")
    post(
        served,
        f"/api/runs/{run_id}/resume",
        {"interrupt_id": asked["interrupts"][0]["id"], "answer": answer},
    )
    wait_status(served, run_id, "done")
    return run_id


def test_two_runs_are_compared_path_usage_time_and_state(serve: Any) -> None:
    served = serve(ticket_graph())
    first = answered_run(served, "my invoice", "yes")
    second = answered_run(served, "hello", "no")
    compared = httpx.get(f"{served.url}/api/compare", params={"a": first, "b": second}).json()
    a, b = compared["a"], compared["b"]
    assert (a["run_id"], b["run_id"]) == (first, second)
    assert a["path"] == b["path"] == ["classify", "approve"]
    assert a["steps"] == 2
    assert (a["status"], b["status"]) == ("done", "done")
    assert compared["state_differences"] == {
        "__last_output__": {"a": "approved=True", "b": "approved=False"},
        "approved": {"a": True, "b": False},
        "category": {"a": "billing", "b": "general"},
        "text": {"a": "my invoice", "b": "hello"},
    }
    for side in (a, b):
        assert side["duration_s"] >= 0
        assert side["input_tokens"] == side["llm_calls"] == 0


def test_a_compare_of_llm_runs_counts_their_tokens_and_checks_its_runs(serve: Any) -> None:
    served = serve(chat_graph())
    runs = []
    for text in ("hi", "a much longer message than the first one"):
        finished_events(served, text)
        runs.append(httpx.get(f"{served.url}/api/runs").json()[0]["run_id"])
    compared = httpx.get(f"{served.url}/api/compare", params={"a": runs[0], "b": runs[1]}).json()
    assert compared["a"]["llm_calls"] == compared["b"]["llm_calls"] == 1
    assert compared["a"]["input_tokens"] < compared["b"]["input_tokens"]
    assert compared["a"]["path"] == ["assistant"]
    missing = httpx.get(f"{served.url}/api/compare", params={"a": runs[0], "b": "nope"})
    assert missing.status_code == 404
    assert "no run 'nope'" in missing.json()["error"]
    half = httpx.get(f"{served.url}/api/compare", params={"a": runs[0]})
    assert half.status_code == 400
    assert "b is missing" in half.json()["error"]


def test_a_pauses_step_is_the_one_the_cli_prints(serve: Any, tmp_path: Path) -> None:
    from selectgraph import SQLiteCheckpointStore

    db = tmp_path / "runs.db"
    made = subprocess.run(
        [sys.executable, "-m", "tests.studio.elsewhere", "ticket", str(db), "far"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    shown = subprocess.run(
        [sys.executable, "-m", "selectgraph", "runs", "show", "far", "--store", str(db)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert shown.returncode == 0, shown.stderr
    said = re.search(r"interrupted at step (\d+)", shown.stdout)
    assert said is not None, shown.stdout
    served = serve(ticket_graph(), store=SQLiteCheckpointStore(db))
    listed = httpx.get(f"{served.url}/api/runs").json()
    assert [(r["run_id"], r["step"]) for r in listed] == [("far", int(said[1]))]
    assert httpx.get(f"{served.url}/api/runs/far").json()["step"] == int(said[1])


def wait_graph(served: Served, check: Any) -> dict[str, Any]:
    deadline = time.monotonic() + 20
    while True:
        info: dict[str, Any] = httpx.get(f"{served.url}/api/graph").json()
        if check(info):
            return info
        assert time.monotonic() < deadline, f"the graph did not change: {info}"
        time.sleep(0.05)


def test_a_changed_graph_module_is_reloaded_keeping_the_runs(
    serve: Any, hot_module: tuple[Path, Any]
) -> None:
    path, module = hot_module
    served = serve(module.graph, reload=True, reload_interval=0.05)
    info = httpx.get(f"{served.url}/api/graph").json()
    assert (info["reload"], info["version"], set(info["nodes"])) == (True, 1, {"first"})
    before = post(served, "/api/runs", {"input": {}}).json()["run_id"]
    wait_status(served, before, "done")

    write_module(path, second=True)
    info = wait_graph(served, lambda i: i["version"] == 2)
    assert set(info["nodes"]) == {"first", "second"}
    after = post(served, "/api/runs", {"input": {}}).json()["run_id"]
    assert wait_status(served, after, "done")["state"]["seen"] == "second"
    listed = {r["run_id"] for r in httpx.get(f"{served.url}/api/runs").json()}
    assert {before, after} <= listed  # the runs made before the reload are still there
    assert httpx.get(f"{served.url}/api/runs/{before}").json()["state"]["seen"] == "first"

    write_module(path, second=True, broken=True)
    info = wait_graph(served, lambda i: i["reload_error"] is not None)
    assert info["reload_error"].startswith("SyntaxError")
    assert (info["version"], set(info["nodes"])) == (2, {"first", "second"})  # the old serves


def test_reload_needs_a_graph_a_module_holds() -> None:
    from selectgraph import END, AgentGraph
    from selectgraph.studio import create_app

    graph = AgentGraph("nowhere")
    graph.add_node("only", lambda state: {}, next_node=END)
    with pytest.raises(ValueError, match="global of an imported module"):
        create_app(graph, reload=True)
