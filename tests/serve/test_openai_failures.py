"""Runs that fail: before the answer begins (a 500 with the reason) and once a stream has begun."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

from selectgraph import END, Agent, AgentConfig, AgentGraph, ContextMode, InterruptRequest
from selectgraph.serve import ServedGraph
from selectgraph.serve._app import create_app
from selectgraph.testing import ScriptedProvider
from tests.serve.server import Server


def _boom(state: Any) -> Any:
    raise ConnectionError("the backend is down")


def _talks_then_fails() -> AgentGraph:
    """An agent streams its text, then the next node fails."""
    graph = AgentGraph("talker")
    agent = Agent(AgentConfig(name="assistant"), provider=ScriptedProvider(["Working on it."]))
    graph.add_node("assistant", agent, context_mode=ContextMode.FULL, next_node="boom")
    graph.add_node("boom", _boom, next_node=END)
    return graph


def _typed_question() -> AgentGraph:
    def ask(state: Any) -> Any:
        answer = yield InterruptRequest("How many?", response_schema={"type": "integer"})
        return {"__last_output__": f"{answer} it is"}

    graph = AgentGraph("count")
    graph.add_node("ask", ask, next_node=END)
    return graph


@pytest.fixture
def client() -> Iterator[openai.OpenAI]:
    failing = AgentGraph("failing")
    failing.add_node("boom", _boom, next_node=END)
    served = [
        ServedGraph(failing),
        ServedGraph(_talks_then_fails()),
        ServedGraph(_typed_question()),
    ]
    with (
        Server(create_app(served)) as running,
        openai.OpenAI(base_url=f"{running.url}/v1", api_key="unused", max_retries=0) as client,
    ):
        yield client


def test_a_failed_run_is_a_500_saying_why(client: openai.OpenAI) -> None:
    with pytest.raises(openai.InternalServerError, match="the backend is down") as caught:
        client.chat.completions.create(
            model="failing", messages=[{"role": "user", "content": "go"}]
        )

    assert caught.value.status_code == 500
    assert (caught.value.body or {})["type"] == "server_error"  # type: ignore[index]


def test_a_run_failing_once_the_chat_stream_began_ends_it_with_an_error(
    client: openai.OpenAI,
) -> None:
    stream = client.chat.completions.create(
        model="talker", messages=[{"role": "user", "content": "go"}], stream=True
    )
    received: list[str] = []

    def read() -> None:
        for chunk in stream:
            received.append(chunk.choices[0].delta.content or "")

    with pytest.raises(openai.APIError, match="the backend is down"):
        read()

    assert "".join(received) == "Working on it."  # what came before the failure


def test_a_run_failing_once_the_responses_stream_began_ends_it_with_response_failed(
    client: openai.OpenAI,
) -> None:
    events = list(client.responses.create(model="talker", input="go", stream=True))

    assert events[-1].type == "response.failed"
    failed = events[-1].response
    assert failed.status == "failed"
    assert failed.error is not None
    assert "the backend is down" in failed.error.message
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert "".join(deltas) == "Working on it."


def test_an_answer_that_does_not_fit_the_questions_schema_is_a_422(
    client: openai.OpenAI,
) -> None:
    asked = client.responses.create(model="count", input="start")
    assert "integer" in asked.output_text  # the question says how to answer

    with pytest.raises(openai.UnprocessableEntityError, match="does not fit"):
        client.responses.create(model="count", input="many", previous_response_id=asked.id)
    answered = client.responses.create(model="count", input="3", previous_response_id=asked.id)

    assert answered.output_text == "3 it is"  # the question stayed open
