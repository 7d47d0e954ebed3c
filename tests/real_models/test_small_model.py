"""Both ways of running a real local model, through the same tests.

Every test that takes ``provider`` runs twice: with the in-process
:class:`LlamaCppProvider`, and with :class:`OpenAIProvider` against llama.cpp's
OpenAI-compatible server. SmolLM2-135M says odd things, so the tests assert
behaviour (shapes, counts, limits, timing), never wording.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING

import pytest
from pydantic import BaseModel, Field

from selectgraph import Agent, AgentConfig, AgentGraph
from selectgraph.core._messages import Message
from selectgraph.providers._base import CompletionRequest, ResponseFormat
from selectgraph.providers._llama import LlamaCppProvider
from selectgraph.providers._openai import OpenAIProvider

if TYPE_CHECKING:
    from selectgraph.providers._base import Provider, StreamChunk

pytestmark = [pytest.mark.real_model, pytest.mark.slow]

# SmolLM2's end-of-generation tokens (<|endoftext|>, <|im_end|>, <reponame>):
# biased away, the model cannot end its answer before max_tokens.
NEVER_END = {"logit_bias": {"0": -100.0, "2": -100.0, "4": -100.0}}


class Capital(BaseModel):
    """A small schema whose strings are bounded, so a constrained answer stays short."""

    country: str = Field(max_length=24)
    capital: str = Field(max_length=24)


def ask(prompt: str, *, max_tokens: int = 16, **options: object) -> CompletionRequest:
    return CompletionRequest(
        model="",
        messages=(Message.user(prompt),),
        max_tokens=max_tokens,
        **options,  # type: ignore[arg-type]
    )


def agent(provider: Provider, name: str, **config: object) -> Agent:
    settings: dict[str, object] = {"max_tokens": 16, **config}
    return Agent(AgentConfig(name=name, **settings), provider=provider)  # type: ignore[arg-type]


async def test_a_single_call_answers_with_text_and_usage(provider: Provider) -> None:
    completion = await provider.complete(ask("What is the capital of France?"))

    assert completion.message.text.strip()
    assert completion.finish_reason in ("stop", "length")
    assert completion.usage.calls == 1
    assert completion.usage.input_tokens > 5  # the question and the chat template
    assert 0 < completion.usage.output_tokens <= 16
    assert completion.latency_ms > 0


async def test_max_tokens_bounds_the_answer(provider: Provider) -> None:
    completion = await provider.complete(
        ask("Tell me a long story.", max_tokens=3, extra=NEVER_END)
    )

    assert completion.finish_reason == "length"
    assert completion.usage.output_tokens == 3


async def test_a_stop_sequence_ends_the_answer_before_it(provider: Provider) -> None:
    request = ask("Describe the sea in two sentences.", max_tokens=48, stop=(" ",), extra=NEVER_END)

    completion = await provider.complete(request)

    # The first space stops generation: one word at most, well before max_tokens.
    assert " " not in completion.message.text
    assert completion.finish_reason == "stop"
    assert completion.usage.output_tokens < 48


async def test_streaming_yields_text_pieces_then_the_whole_completion(provider: Provider) -> None:
    request = ask("Count from one to ten.", max_tokens=12, extra=NEVER_END)
    chunks: list[StreamChunk] = [chunk async for chunk in provider.stream(request)]

    *pieces, last = chunks
    assert len(pieces) >= 2
    assert all(piece.delta and piece.completion is None for piece in pieces)
    assert last.completion is not None
    assert last.completion.message.text == "".join(piece.delta for piece in pieces)
    assert last.completion.finish_reason == "length"
    usage = last.completion.usage
    assert usage.input_tokens > 0
    assert usage.output_tokens > 0
    if isinstance(provider, LlamaCppProvider):
        assert usage.output_tokens == 12  # counted while sampling
    # llama.cpp's server reports no usage in streams, so OpenAIProvider estimates it.


def test_a_chain_of_agents_runs_each_agent_on_the_previous_answer(provider: Provider) -> None:
    first = agent(provider, "outliner", instructions="Write one short line.")
    second = agent(provider, "editor", instructions="Rewrite the line.")

    result = AgentGraph.chain(first, second).run("A line about the sea")

    assert result.node_order == ["outliner", "editor"]
    assert result.total_usage.calls == 2
    assert result.content.strip()
    answers = [m for m in result.state.messages if m.name in ("outliner", "editor")]
    assert [m.name for m in answers] == ["outliner", "editor"]
    assert all(m.text.strip() for m in answers)


def test_two_sync_runs_in_a_row_both_answer(provider: Provider) -> None:
    writer = agent(provider, "writer")

    first = writer.run("Name a colour.")
    second = writer.run("Name a fruit.")

    assert first.content.strip()
    assert second.content.strip()
    assert first.usage.calls == second.usage.calls == 1


def test_sync_runs_from_two_threads_both_answer(provider: Provider) -> None:
    writer = agent(provider, "writer")
    answers: dict[str, str] = {}
    errors: list[BaseException] = []

    def run(prompt: str) -> None:
        try:
            answers[prompt] = writer.run(prompt).content
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(p,)) for p in ("Name a city.", "Name a dog.")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert errors == []
    assert sorted(answers) == ["Name a city.", "Name a dog."]
    assert all(answer.strip() for answer in answers.values())


def test_structured_output_is_enforced_by_a_grammar_in_process(
    llama_provider: LlamaCppProvider,
) -> None:
    geographer = agent(
        llama_provider, "geographer", output_schema=Capital, max_tokens=64, max_output_retries=0
    )

    result = geographer.run("What is the capital of France? Answer in JSON.")

    # No re-asking allowed: the first answer already matches the schema.
    assert isinstance(result.output, Capital)
    assert result.iterations == 1
    assert result.structured_mode == "json_schema"
    assert Capital.model_validate_json(result.content) == result.output


class Story(BaseModel):
    story: str


def test_a_grammar_bounds_a_string_the_schema_leaves_open(
    llama_provider: LlamaCppProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(llama_provider, "max_string_length", 40)
    teller = agent(
        llama_provider, "teller", output_schema=Story, max_tokens=200, max_output_retries=0
    )

    result = teller.run("Tell a very long story about a dragon, in JSON.")

    # Without the bound this model rambles inside the string until max_tokens (860 chars).
    assert isinstance(result.output, Story)
    assert len(result.output.story) <= 40


async def test_structured_output_through_the_server_falls_back_and_says_how(
    server_provider: OpenAIProvider,
) -> None:
    request = ask(
        "What is the capital of France? Answer in JSON.",
        max_tokens=64,
        response_format=ResponseFormat(name="Capital", json_schema=Capital.model_json_schema()),
    )

    completion = await server_provider.complete(request)

    assert Capital.model_validate_json(completion.message.text)
    # llama.cpp's server rejects json_schema; it accepts json_object with the schema,
    # which it enforces with a grammar.
    assert completion.structured_mode == "json_object"
    assert server_provider.structured_mode == "json_object"  # remembered for later calls

    geographer = agent(
        server_provider, "geographer", output_schema=Capital, max_tokens=64, max_output_retries=0
    )
    result = await geographer.arun("What is the capital of Italy? Answer in JSON.")

    assert isinstance(result.output, Capital)
    assert result.structured_mode == "json_object"
    assert result.iterations == 1


async def timed_small_call(provider: Provider) -> float:
    started = time.perf_counter()
    completion = await provider.complete(ask("Say yes.", max_tokens=2))
    assert completion.message.text
    return time.perf_counter() - started


# Cancellation is judged against a small call timed just before, under the same
# machine load: had generation gone on, the model (one generation at a time, in
# both setups) would stay busy for the rest of 900 tokens, hundreds of times the
# work of the small call.
async def test_closing_a_stream_early_stops_generation_promptly(provider: Provider) -> None:
    baseline = await timed_small_call(provider)
    stream = provider.stream(ask("Tell me a very long story.", max_tokens=900, extra=NEVER_END))
    assert isinstance(stream, AsyncGenerator)
    first = await anext(stream)
    assert first.delta  # mid-answer
    assert first.completion is None

    started = time.perf_counter()
    await stream.aclose()
    closed_in = time.perf_counter() - started
    follow_up = await timed_small_call(provider)

    assert closed_in < 2 * baseline + 1.0
    assert follow_up < 3 * baseline + 2.0


async def test_cancelling_the_task_reading_a_stream_stops_generation(provider: Provider) -> None:
    baseline = await timed_small_call(provider)
    first_text = asyncio.Event()

    async def read() -> None:
        request = ask("Tell me a very long story.", max_tokens=900, extra=NEVER_END)
        async for chunk in provider.stream(request):
            if chunk.delta:
                first_text.set()

    task = asyncio.create_task(read())
    await asyncio.wait_for(first_text.wait(), timeout=60)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    follow_up = await timed_small_call(provider)

    assert follow_up < 3 * baseline + 2.0
