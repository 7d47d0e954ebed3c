"""``selectgraph threads`` and the timeline of ``runs show``, as a user runs them: the
installed command in a subprocess, against a SQLite file each command opens anew."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_cli import selectgraph

pytestmark = pytest.mark.slow

CHAT = "tests.cli.graphs:chat"


def flat(text: str) -> str:
    """Output with the tables' borders taken out and spaces collapsed."""
    return " ".join(text.replace("│", " ").split())


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.db'}"


def test_a_conversation_is_sent_listed_and_shown(store: str) -> None:
    first = selectgraph(
        "threads", "send", CHAT, "ann", "My name is Ann.", "--store", store, "-m", "user=ann"
    )
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == '[local] reply to: "My name is Ann."'
    assert "1 steps" in first.stderr  # the live view's last line, as `run` shows it
    second = selectgraph(
        "threads", "send", CHAT, "ann", "What is my name?", "--store", store, "--json"
    )
    assert second.returncode == 0, second.stderr
    outcome = json.loads(second.stdout)
    assert (outcome["thread_id"], outcome["stop_reason"]) == ("ann", "end")
    assert outcome["content"] == '[local] reply to: "What is my name?"'
    selectgraph("threads", "send", CHAT, "bob", "Hello", "--store", store, "-m", "user=bob", "-q")

    listed = selectgraph("threads", "list", "--store", store)
    assert listed.returncode == 0, listed.stderr
    rows = [line.replace("│", " ").split() for line in listed.stdout.splitlines()]
    ann = next(row for row in rows if row and row[0] == "ann")
    assert ann[1:3] == ["idle", "2"]
    assert '{"user":"ann"}' in ann
    only = selectgraph("threads", "list", "--store", store, "--metadata", "user=bob", "--json")
    assert [t["thread_id"] for t in json.loads(only.stdout)] == ["bob"]

    shown = selectgraph("threads", "show", "ann", "--store", store)
    assert shown.returncode == 0, shown.stderr
    assert "thread ann: idle, 2 run(s)" in shown.stdout
    assert 'metadata: {"user":"ann"}' in shown.stdout
    assert "expires: never" in shown.stdout
    conversation = shown.stdout.split("conversation:")[1]
    assert conversation.index("user: My name is Ann.") < conversation.index(
        'assistant (assistant): [local] reply to: "What is my name?"'
    )
    as_json = json.loads(selectgraph("threads", "show", "ann", "--store", store, "--json").stdout)
    assert [m["role"] for m in as_json["messages"]] == ["user", "assistant", "user", "assistant"]
    assert [r["status"] for r in as_json["thread_runs"]] == ["done", "done"]
    assert as_json["thread_runs"][1]["run_id"] == outcome["run_id"]


def test_a_typed_question_is_asked_again_until_the_answer_fits(store: str) -> None:
    done = selectgraph(
        "threads", "send", "tests.cli.graphs:vote", "v", "the budget", "--store", store,
        stdin="perhaps\ntrue\n",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "answer with JSON of this schema" in done.stderr
    assert "that answer does not fit the question" in done.stderr
    assert done.stderr.count("vote asks") == 2
    assert done.stdout.strip() == "the budget: approved"


def test_a_busy_thread_refuses_a_message_unless_told_otherwise(store: str) -> None:
    approval = "tests.cli.graphs:approval"
    paused = selectgraph("threads", "send", approval, "t", "first", "--store", store, "--no-input")
    assert paused.returncode == 3, paused.stderr
    refused = selectgraph("threads", "send", approval, "t", "second", "--store", store)
    assert refused.returncode == 2
    assert "ThreadBusy: thread 't' is busy" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert "Traceback" not in refused.stderr
    listed = selectgraph("threads", "list", "--store", store, "--json")
    assert json.loads(listed.stdout)[0]["status"] == "interrupted"
    shown = selectgraph("threads", "show", "t", "--store", store)
    assert "waiting: ask asks: Ship it?" in shown.stdout

    taken = selectgraph(
        "threads", "send", approval, "t", "third", "--store", store, "--strategy", "interrupt",
        stdin="yes\n",
    )  # fmt: skip
    assert taken.returncode == 0, taken.stderr
    assert taken.stdout.strip() == "answered 'yes'"
    runs = json.loads(selectgraph("threads", "show", "t", "--store", store, "--json").stdout)
    assert [r["status"] for r in runs["thread_runs"]] == ["superseded", "done"]
    assert runs["thread_runs"][1]["strategy"] == "interrupt"


def test_runs_show_prints_the_timeline_of_a_run_another_process_made(store: str) -> None:
    made = selectgraph("run", CHAT, "--input", "Tell me about owls", "--store", store,
                       "--run-id", "owl", "-q")  # fmt: skip
    assert made.returncode == 0, made.stderr
    shown = selectgraph("runs", "show", "owl", "--store", store)
    assert shown.returncode == 0, shown.stderr
    timeline = shown.stdout.split("timeline")[1].replace("│", " ")
    lines = [" ".join(line.split()) for line in timeline.splitlines()]
    assert any(line.endswith("started at assistant") for line in lines)
    assert any("node started assistant" in line for line in lines)
    call = next(line for line in lines if "model call" in line)
    assert "assistant local" in call
    for part in (" in / ", " out ", "$0.0000", " ms"):  # tokens, cost, latency
        assert part in call
    node = next(line for line in lines if "node finished" in line)
    assert "assistant success" in node
    assert node.endswith(" ms")
    assert any("finished end (clean), 1 steps in" in line for line in lines)
    assert "1 model call(s):" in shown.stdout
    assert 'result: [local] reply to: "Tell me about owls"' in shown.stdout
    everything = selectgraph("runs", "show", "owl", "--store", store, "--all-events")
    assert "checkpoint" in everything.stdout.split("timeline")[1]


def test_the_timeline_shows_questions_answers_and_failures(store: str) -> None:
    approval = "tests.cli.graphs:approval"
    selectgraph("run", approval, "--store", store, "--run-id", "a1", "--no-input", "-q")
    selectgraph("runs", "resume", approval, "a1", "--store", store, "--answer", "yes", "-q")
    shown = flat(selectgraph("runs", "show", "a1", "--store", store).stdout)
    assert "question ask asks: Ship it?" in shown
    assert "paused interrupt; next: ask" in shown
    assert "resumed answered a1|2:ask|0" in shown
    failed = selectgraph("run", "tests.cli.graphs:failing", "--store", store, "--run-id", "f1")
    assert failed.returncode == 1
    shown = flat(selectgraph("runs", "show", "f1", "--store", store).stdout)
    assert "node started second" in shown
    assert "failed node_exception at second" in shown
    assert "ConnectionError: the backend is down" in shown


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("threads", "show", "nope"), "no thread 'nope' in sqlite:///"),
        (("threads", "show", "a|b"), "thread_id 'a|b' cannot be stored"),
        (("threads", "send", CHAT, "a|b", "hi"), "thread_id 'a|b' cannot be stored"),
        (("threads", "send", CHAT, "t", "hi", "--strategy", "later"), "--strategy must be one of"),
        (("threads", "send", CHAT, "t", "hi", "--ttl", "0"), "--ttl must be a positive"),
        (("threads", "list", "--metadata", "user"), "--metadata 'user': write key=value"),
        (("threads", "list", "--limit", "0"), "--limit must be from 1 to 10,000, got 0"),
        (("runs", "show", "nope"), "no run 'nope' in sqlite:///"),
        (("runs", "resume", "tests.cli.graphs:approval", "nope"), "no run 'nope'"),
        (("runs", "fork", "tests.cli.graphs:approval", "nope", "-c", "x"), "no run 'nope'"),
    ],
)
def test_bad_thread_and_run_arguments_exit_2_in_one_line(
    store: str, args: tuple[str, ...], message: str
) -> None:
    done = selectgraph(*args, "--store", store)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr


def test_threads_need_a_store() -> None:
    done = selectgraph("threads", "list")
    assert done.returncode == 2
    assert "needs --store" in done.stderr
