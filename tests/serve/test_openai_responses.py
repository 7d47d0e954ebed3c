"""The Responses API: the official openai client creates and streams responses from a graph."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import openai
import pytest

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


def test_a_response_holds_the_final_message_its_thread_and_usage(client: openai.OpenAI) -> None:
    response = client.responses.create(model="assistant", input="I am Ann.")

    assert response.object == "response"
    assert response.status == "completed"
    assert response.output_text == "Hello there, Ann."
    assert response.conversation is not None
    assert response.metadata == {"thread_id": response.conversation.id}
    assert response.usage is not None
    assert response.usage.input_tokens > 0
    assert response.usage.output_tokens > 0


def test_previous_response_id_continues_that_responses_thread(client: openai.OpenAI) -> None:
    first = client.responses.create(model="hearing", input="one")
    second = client.responses.create(model="hearing", input="two", previous_response_id=first.id)

    assert second.output_text == "one | two"
    assert second.conversation == first.conversation
    assert second.previous_response_id == first.id


def test_conversation_names_the_thread(client: openai.OpenAI) -> None:
    client.responses.create(model="hearing", input="one", conversation="ann")
    second = client.responses.create(model="hearing", input="two", conversation={"id": "ann"})

    assert second.output_text == "one | two"
    assert second.conversation is not None
    assert second.conversation.id == "ann"


def test_an_input_list_resending_the_history_continues_the_thread(client: openai.OpenAI) -> None:
    first = client.responses.create(model="hearing", input=[{"role": "user", "content": "one"}])
    second = client.responses.create(
        model="hearing",
        input=[
            {"role": "user", "content": "one"},
            {"role": "assistant", "content": first.output_text},
            {"role": "user", "content": "two"},
        ],
    )

    assert second.output_text == "one | two"


def test_the_stream_helper_assembles_the_agents_deltas(client: openai.OpenAI) -> None:
    with client.responses.stream(model="assistant", input="I am Ann.") as stream:
        events = list(stream)
        final = stream.get_final_response()

    kinds = [event.type for event in events]
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert len(deltas) > 1
    assert "".join(deltas) == "Hello there, Ann."
    assert final.output_text == "Hello there, Ann."
    assert final.usage is not None
    assert final.usage.output_tokens > 0
    numbers = [e.sequence_number for e in events]
    assert numbers == sorted(numbers)
    assert len(set(numbers)) == len(numbers)


def test_create_with_stream_true_yields_typed_events(client: openai.OpenAI) -> None:
    events = list(client.responses.create(model="hearing", input="one", stream=True))

    completed = events[-1]
    assert completed.type == "response.completed"
    assert completed.response.output_text == "one"
    assert (completed.response.model_extra or {})["selectgraph"]["status"] == "done"


def test_an_interrupt_is_answered_by_the_next_response(client: openai.OpenAI) -> None:
    asked = client.responses.create(model="review", input="my draft")
    state = (asked.model_extra or {})["selectgraph"]

    assert state["status"] == "interrupted"
    assert state["question"]["payload"] == {"draft": "my draft"}
    assert asked.output_text.startswith("Publish this draft?")

    answered = client.responses.create(model="review", input="no", previous_response_id=asked.id)

    assert answered.output_text == "The draft was kept back."


def test_a_previous_response_id_this_server_never_gave_is_a_400(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match="previous_response_id") as caught:
        client.responses.create(model="hearing", input="x", previous_response_id="resp_123")

    assert caught.value.param == "previous_response_id"


def test_input_items_other_than_messages_are_refused_naming_the_field(server: Server) -> None:
    answer = httpx.post(
        f"{server.url}/v1/responses",
        json={"model": "hearing", "input": [{"type": "function_call_output", "output": "1"}]},
    )

    assert answer.status_code == 400
    assert answer.json()["error"]["param"] == "input[0].type"
