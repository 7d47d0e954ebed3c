"""Chat Completions: the official openai client talks to a served graph as if it were a model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from selectgraph import SQLiteCheckpointStore
from selectgraph.serve import ServedGraph
from selectgraph.serve._app import create_app
from tests.serve.server import Server, agent_graph, hearing_graph, review_graph


@pytest.fixture
def server() -> Iterator[Server]:
    graph, _ = agent_graph(["Hello there, Ann.", "Your name is Ann."])
    served = [ServedGraph(hearing_graph()), ServedGraph(graph), ServedGraph(review_graph())]
    with Server(create_app(served)) as running:
        yield running


@pytest.fixture
def client(server: Server) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0) as client:
        yield client


def test_models_lists_every_served_graph(client: openai.OpenAI) -> None:
    models = client.models.list()

    assert [model.id for model in models] == ["hearing", "assistant", "review"]
    assert client.models.retrieve("hearing").owned_by == "selectgraph"


def test_a_chat_completion_is_the_graphs_final_message_and_names_its_thread(
    client: openai.OpenAI,
) -> None:
    raw = client.chat.completions.with_raw_response.create(
        model="hearing", messages=[{"role": "user", "content": "one"}]
    )
    completion = raw.parse()

    assert completion.object == "chat.completion"
    assert completion.model == "hearing"
    assert completion.choices[0].message.content == "one"
    assert completion.choices[0].finish_reason == "stop"
    extra = completion.model_extra or {}
    assert extra["thread_id"] == raw.headers["x-thread-id"]
    assert extra["selectgraph"]["status"] == "done"
    assert extra["selectgraph"]["question"] is None


def test_a_second_request_resending_the_history_continues_the_same_thread(
    client: openai.OpenAI,
) -> None:
    history: Any = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "one"},
    ]
    first = client.chat.completions.create(model="hearing", messages=history)
    history += [
        {"role": "assistant", "content": first.choices[0].message.content or ""},
        {"role": "user", "content": "two"},
    ]

    second = client.chat.completions.create(model="hearing", messages=history)

    # The graph saw the first turn's state: it heard both messages on one thread.
    assert second.choices[0].message.content == "one | two"
    assert (second.model_extra or {})["thread_id"] == (first.model_extra or {})["thread_id"]


def test_a_history_that_was_never_answered_starts_a_new_thread(client: openai.OpenAI) -> None:
    first = client.chat.completions.create(
        model="hearing", messages=[{"role": "user", "content": "one"}]
    )
    edited = client.chat.completions.create(
        model="hearing",
        messages=[
            {"role": "user", "content": "one"},
            {"role": "assistant", "content": "something this server never said"},
            {"role": "user", "content": "two"},
        ],
    )

    assert edited.choices[0].message.content == "two"
    assert (edited.model_extra or {})["thread_id"] != (first.model_extra or {})["thread_id"]


def test_a_thread_named_by_header_or_metadata_is_continued(client: openai.OpenAI) -> None:
    client.chat.completions.create(
        model="hearing",
        messages=[{"role": "user", "content": "one"}],
        extra_headers={"X-Thread-Id": "ann"},
    )
    second = client.chat.completions.create(
        model="hearing",
        messages=[{"role": "user", "content": "two"}],
        metadata={"thread_id": "ann"},
    )

    assert second.choices[0].message.content == "one | two"
    assert (second.model_extra or {})["thread_id"] == "ann"


def test_a_stream_carries_the_agents_text_deltas_then_finish_reason_and_usage(
    client: openai.OpenAI,
) -> None:
    stream = client.chat.completions.create(
        model="assistant",
        messages=[{"role": "user", "content": "I am Ann."}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)

    deltas = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    assert len(deltas) > 1  # streamed as the agent made it, not in one piece
    assert "".join(deltas) == "Hello there, Ann."
    finishing = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert [c.choices[0].finish_reason for c in finishing] == ["stop"]
    assert (finishing[0].model_extra or {})["selectgraph"]["status"] == "done"
    usage = chunks[-1].usage
    assert not chunks[-1].choices
    assert usage is not None
    assert usage.prompt_tokens > 0
    assert usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert all(c.object == "chat.completion.chunk" and c.id == chunks[0].id for c in chunks)


def test_a_streamed_conversation_continues_its_thread(client: openai.OpenAI) -> None:
    messages: Any = [{"role": "user", "content": "I am Ann."}]
    stream = client.chat.completions.create(model="assistant", messages=messages, stream=True)
    reply = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": "Who am I?"}]

    second = client.chat.completions.create(model="assistant", messages=messages)

    assert second.choices[0].message.content == "Your name is Ann."


def test_a_non_streamed_completion_reports_the_runs_usage(client: openai.OpenAI) -> None:
    completion = client.chat.completions.create(
        model="assistant", messages=[{"role": "user", "content": "I am Ann."}]
    )

    assert completion.choices[0].message.content == "Hello there, Ann."
    assert completion.usage is not None
    assert completion.usage.prompt_tokens > 0
    assert completion.usage.completion_tokens > 0


def test_an_interrupt_is_the_reply_and_the_next_message_answers_it(
    client: openai.OpenAI,
) -> None:
    messages: Any = [{"role": "user", "content": "my draft"}]
    asked = client.chat.completions.create(model="review", messages=messages)
    question = (asked.model_extra or {})["selectgraph"]
    reply = asked.choices[0].message.content or ""

    assert question["status"] == "interrupted"
    assert question["question"]["prompt"] == "Publish this draft?"
    assert question["question"]["payload"] == {"draft": "my draft"}
    assert question["question"]["interrupt_id"]
    assert question["question"]["response_schema"] is None
    assert "Publish this draft?" in reply
    assert "my draft" in reply

    messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": "yes"}]
    answered = client.chat.completions.create(model="review", messages=messages)

    assert answered.choices[0].message.content == "The draft was published."
    assert (answered.model_extra or {})["selectgraph"]["status"] == "done"
    assert (answered.model_extra or {})["thread_id"] == (asked.model_extra or {})["thread_id"]


def test_a_streamed_interrupt_sends_the_question_as_text(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model="review", messages=[{"role": "user", "content": "my draft"}], stream=True
    )
    chunks = list(stream)

    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.startswith("Publish this draft?")
    assert (chunks[-1].model_extra or {})["selectgraph"]["status"] == "interrupted"


def test_an_unknown_model_is_a_404_in_openais_error_shape(
    client: openai.OpenAI, server: Server
) -> None:
    with pytest.raises(openai.NotFoundError, match="'nope' does not exist"):
        client.chat.completions.create(model="nope", messages=[{"role": "user", "content": "x"}])
    body = httpx.post(
        f"{server.url}/v1/chat/completions",
        json={"model": "nope", "messages": [{"role": "user", "content": "x"}]},
    ).json()
    assert body["error"]["code"] == "model_not_found"
    assert body["error"]["param"] == "model"
    assert body["error"]["type"] == "not_found_error"


def test_a_restarted_server_on_the_same_store_continues_the_conversation(tmp_path: Path) -> None:
    store = SQLiteCheckpointStore(str(tmp_path / "served.db"))
    messages: Any = [{"role": "user", "content": "one"}]
    with (
        Server(create_app([ServedGraph(hearing_graph(), store=store)])) as before,
        openai.OpenAI(base_url=f"{before.url}/v1", api_key="unused", max_retries=0) as client,
    ):
        first = client.chat.completions.create(model="hearing", messages=messages)
    messages += [
        {"role": "assistant", "content": first.choices[0].message.content},
        {"role": "user", "content": "two"},
    ]
    # A new server (a new process, after a restart) knows the digest from the store alone.
    with (
        Server(create_app([ServedGraph(hearing_graph(), store=store)])) as after,
        openai.OpenAI(base_url=f"{after.url}/v1", api_key="unused", max_retries=0) as client,
    ):
        second = client.chat.completions.create(model="hearing", messages=messages)
    store.close()

    assert second.choices[0].message.content == "one | two"
    assert (second.model_extra or {})["thread_id"] == (first.model_extra or {})["thread_id"]


def test_two_servers_on_one_store_agree_on_which_history_a_thread_holds(tmp_path: Path) -> None:
    store = SQLiteCheckpointStore(str(tmp_path / "served.db"))
    with (
        Server(create_app([ServedGraph(hearing_graph(), store=store)])) as one,
        Server(create_app([ServedGraph(hearing_graph(), store=store)])) as other,
        openai.OpenAI(base_url=f"{one.url}/v1", api_key="unused", max_retries=0) as first,
        openai.OpenAI(base_url=f"{other.url}/v1", api_key="unused", max_retries=0) as second,
    ):
        started = first.chat.completions.create(
            model="hearing", messages=[{"role": "user", "content": "one"}]
        )
        history: Any = [
            {"role": "user", "content": "one"},
            {"role": "assistant", "content": started.choices[0].message.content},
        ]
        # The other server goes on with the thread: it holds a longer conversation now.
        went_on = second.chat.completions.create(
            model="hearing", messages=[*history, {"role": "user", "content": "two"}]
        )
        # The first server remembers the older history; the store says it is no more.
        retried = first.chat.completions.create(
            model="hearing", messages=[*history, {"role": "user", "content": "three"}]
        )
        longer = [
            *history,
            {"role": "user", "content": "two"},
            {"role": "assistant", "content": went_on.choices[0].message.content},
            {"role": "user", "content": "four"},
        ]
        continued = first.chat.completions.create(model="hearing", messages=longer)
    store.close()

    thread = (started.model_extra or {})["thread_id"]
    assert went_on.choices[0].message.content == "one | two"
    assert (went_on.model_extra or {})["thread_id"] == thread
    assert retried.choices[0].message.content == "three"  # a thread of its own
    assert (retried.model_extra or {})["thread_id"] != thread
    assert continued.choices[0].message.content == "one | two | four"
    assert (continued.model_extra or {})["thread_id"] == thread
