"""The studio's JSON API for experiments, answers checked against a schema, and failed forks."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from selectgraph import SQLiteCheckpointStore
from selectgraph.evals import dataset_of, evaluate_graph, list_experiments
from tests.studio import evalgraphs
from tests.studio.conftest import Served
from tests.studio.graphs import choice_graph, fragile_ticket_graph, review_graph, ticket_graph
from tests.studio.test_inspect import post, wait_status


@pytest.fixture
async def kept(tmp_path: Path) -> SQLiteCheckpointStore:
    """A SQLite store holding experiment ``v1`` then ``v2`` of the shout graph."""
    store = SQLiteCheckpointStore(tmp_path / "evals.db")
    for graph, rows, name in (
        (evalgraphs.v1, evalgraphs.FIRST, "v1"),
        (evalgraphs.v2, evalgraphs.SECOND, "v2"),
    ):
        await evaluate_graph(graph, dataset_of(rows, name="shouts"), experiment=name, store=store)
    return store


def get(served: Served, path: str) -> httpx.Response:
    return httpx.get(f"{served.url}{path}")


def test_experiments_are_listed_most_recent_first(serve: Any, kept: SQLiteCheckpointStore) -> None:
    served = serve(evalgraphs.v1, store=kept)
    listed = get(served, "/api/experiments").json()
    assert [e["name"] for e in listed] == ["v2", "v1"]
    first = listed[1]
    assert (first["cases"], first["passed"], first["dataset"]) == (5, 3, "shouts")
    assert first["pass_rate"] == pytest.approx(0.6)
    assert first["tokens"] == 0
    assert first["cost_usd"] == 0.0
    assert first["started"] <= first["updated"]
    assert [e.name for e in list_experiments(kept)] == ["v2", "v1"]  # what the route reads
    assert get(served, "/api/experiments?limit=1").json()[0]["name"] == "v2"


def test_an_experiments_cases_carry_input_output_scores_and_their_run(
    serve: Any, kept: SQLiteCheckpointStore
) -> None:
    served = serve(evalgraphs.v1, store=kept)
    shown = get(served, "/api/experiments/v1").json()
    cases = {case["case"]: case for case in shown["cases"]}
    assert set(cases) == {"abc", "q", "hi", "zz", "old"}
    q = cases["q"]
    assert q["inputs"] == "q"
    assert q["output"] == {"answer": "no"}
    assert q["expected"] == {"answer": "Q"}
    assert q["scores"] == {"exact": False}
    assert q["passed"] is False
    assert cases["abc"]["passed"] is True
    # The case's run is in the store: the page opens its timeline from here.
    run = get(served, f"/api/runs/{q['run_id']}").json()
    assert run["status"] == "done"
    assert run["state"]["answer"] == "no"


def test_two_experiments_compare_case_by_case_as_the_cli_does(
    serve: Any, kept: SQLiteCheckpointStore
) -> None:
    served = serve(evalgraphs.v1, store=kept)
    compared = get(served, "/api/compare-experiments?a=v1&b=v2").json()
    changes = {row["case"]: row["change"] for row in compared["cases"]}
    assert changes == {
        "abc": "broke",
        "q": "fixed",
        "hi": "same",
        "zz": "changed",
        "old": "removed",
        "new": "added",
    }
    assert compared["counts"] == {
        "fixed": 1,
        "broke": 1,
        "changed": 1,
        "same": 1,
        "added": 1,
        "removed": 1,
    }
    row = next(r for r in compared["cases"] if r["case"] == "new")
    assert row["baseline"] is None
    assert row["candidate"]["output"] == {"answer": "NEW"}
    assert (compared["baseline"]["name"], compared["candidate"]["name"]) == ("v1", "v2")


def test_unknown_experiments_are_named_in_a_404(serve: Any, kept: SQLiteCheckpointStore) -> None:
    served = serve(evalgraphs.v1, store=kept)
    reply = get(served, "/api/experiments/nope")
    assert reply.status_code == 404
    assert reply.json()["error"] == "no experiment 'nope' in this store"
    reply = get(served, f"/api/experiments/{quote('a/b c', safe='')}")
    assert reply.status_code == 404
    assert "'a/b c'" in reply.json()["error"]
    reply = get(served, "/api/compare-experiments?a=v1&b=v9")
    assert reply.status_code == 404
    assert "'v9'" in reply.json()["error"]
    reply = get(served, "/api/compare-experiments?a=v1")
    assert reply.status_code == 400
    assert "b is missing" in reply.json()["error"]


def test_a_store_without_experiments_lists_none(serve: Any) -> None:
    served = serve(ticket_graph())
    assert get(served, "/api/experiments").json() == []


# ------------------------------------------------------------------ answers with a schema
def test_an_answer_that_does_not_fit_the_schema_is_refused_naming_the_field(serve: Any) -> None:
    served = serve(review_graph())
    run_id = post(served, "/api/runs", {"input": {"text": "a draft"}}).json()["run_id"]
    asked = wait_status(served, run_id, "interrupted")["interrupts"][0]
    schema = asked["response_schema"]
    assert schema["properties"]["score"]["maximum"] == 5  # for the page to build its form
    wrong = {"approve": True, "score": 9, "tone": "rude", "note": "ok"}
    reply = post(
        served, f"/api/runs/{run_id}/resume", {"interrupt_id": asked["id"], "answer": wrong}
    )
    assert reply.status_code == 422, reply.text
    refused = reply.json()
    assert set(refused["errors"]) == {"score", "tone"}
    assert "score: 9 is greater than the maximum of 5" in refused["error"]
    assert refused["interrupt_id"] == asked["id"]
    missing = post(
        served,
        f"/api/runs/{run_id}/resume",
        {"interrupt_id": asked["id"], "answer": {"approve": True, "score": 2, "tone": "formal"}},
    )
    assert missing.status_code == 422
    assert missing.json()["errors"] == {"note": "is required"}
    assert wait_status(served, run_id, "interrupted")["interrupts"][0]["id"] == asked["id"]

    right = {"approve": True, "score": 4, "tone": "formal", "note": "fine"}
    reply = post(
        served, f"/api/runs/{run_id}/resume", {"interrupt_id": asked["id"], "answer": right}
    )
    assert reply.status_code == 202, reply.text
    done = wait_status(served, run_id, "done")
    assert done["state"]["review"] == {**right, "tags": []}


def test_a_stored_question_is_checked_by_another_studio_against_its_json_schema(
    serve: Any, tmp_path: Path
) -> None:
    first = serve(choice_graph(), store=SQLiteCheckpointStore(tmp_path / "runs.db"))
    run_id = post(first, "/api/runs", {"input": {}}).json()["run_id"]
    asked = wait_status(first, run_id, "interrupted")["interrupts"][0]
    # Another studio on the same store has the question only as the store keeps it.
    other = serve(choice_graph(), store=SQLiteCheckpointStore(tmp_path / "runs.db"))
    resume = f"/api/runs/{run_id}/resume"
    reply = post(other, resume, {"interrupt_id": asked["id"], "answer": "maybe"})
    assert reply.status_code == 422, reply.text
    assert reply.json()["errors"] == {"": "'maybe' is not one of ['ship', 'hold']"}
    assert "the answer: 'maybe' is not one of" in reply.json()["error"]
    reply = post(other, resume, {"interrupt_id": asked["id"], "answer": "hold"})
    assert reply.status_code == 202, reply.text
    assert wait_status(other, run_id, "done")["state"]["picked"] == "hold"


# ------------------------------------------------------------------ forks that fail
def _checkpoint_after(served: Served, run_id: str, node: str) -> str:
    history = get(served, f"/api/runs/{run_id}/history").json()
    return str(next(cp for cp in history if cp["node"] == node)["checkpoint_id"])


def test_an_invalid_edit_is_named_and_makes_no_fork(serve: Any, tmp_path: Path) -> None:
    store = SQLiteCheckpointStore(tmp_path / "runs.db")
    served = serve(ticket_graph(), store=store)
    parent = post(served, "/api/runs", {"input": {"text": "my invoice"}}).json()["run_id"]
    wait_status(served, parent, "interrupted")
    at = _checkpoint_after(served, parent, "classify")
    before = store.runs()
    for update, field in (({"category": 5}, "category"), ({"bogus": 1}, "bogus")):
        reply = post(served, f"/api/runs/{parent}/fork", {"checkpoint_id": at, "update": update})
        assert reply.status_code == 422, reply.text
        assert field in reply.json()["error"]
    assert store.runs() == before  # nothing made: no paused fork in the store
    assert [r["run_id"] for r in get(served, "/api/runs").json()] == [parent]
    assert get(served, f"/api/runs/{parent}").json()["forks"] == []


def test_a_fork_whose_run_fails_shows_failed_with_its_parent(serve: Any, tmp_path: Path) -> None:
    store = SQLiteCheckpointStore(tmp_path / "runs.db")
    served = serve(fragile_ticket_graph(), store=store)
    parent = post(served, "/api/runs", {"input": {"text": "my invoice"}}).json()["run_id"]
    wait_status(served, parent, "done")
    at = _checkpoint_after(served, parent, "classify")
    reply = post(
        served, f"/api/runs/{parent}/fork", {"checkpoint_id": at, "update": {"category": "refunds"}}
    )
    assert reply.status_code == 201, reply.text
    fork = reply.json()["run_id"]
    failed = wait_status(served, fork, "failed")
    assert "refunds cannot be approved here" in failed["error"]
    assert failed["forked_from"]["run_id"] == parent
    assert [f["run_id"] for f in get(served, f"/api/runs/{parent}").json()["forks"]] == [fork]

    # Read back by another studio on the same store: failed, and still its parent's fork.
    again = serve(fragile_ticket_graph(), store=SQLiteCheckpointStore(tmp_path / "runs.db"))
    shown = get(again, f"/api/runs/{fork}").json()
    assert shown["status"] == "failed"
    assert shown["forked_from"]["run_id"] == parent
    assert [f["run_id"] for f in get(again, f"/api/runs/{parent}").json()["forks"]] == [fork]


def test_a_run_without_an_input_is_refused_not_failed(serve: Any) -> None:
    served = serve(choice_graph())
    reply = post(served, "/api/runs", {"input": None})
    assert reply.status_code == 400
    assert "a new run needs an input" in reply.json()["error"]
    assert get(served, "/api/runs").json() == []
