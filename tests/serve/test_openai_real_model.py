"""A real model behind the OpenAI endpoints: SmolLM2-135M in-process, via the openai client.

SmolLM2 says odd things, so the test asserts behaviour (text arrives, streamed in
pieces, usage counted, the second turn continues the thread), never wording.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from selectgraph import END, Agent, AgentConfig, AgentGraph, ContextMode
from selectgraph.providers._llama import LlamaCppProvider, smollm2_model_path
from selectgraph.serve import ServedGraph
from selectgraph.serve._app import create_app
from tests.real_models.conftest import N_CTX, _missing
from tests.serve.server import Server

pytestmark = [pytest.mark.real_model, pytest.mark.slow]


@pytest.fixture(scope="module")
def model() -> Iterator[LlamaCppProvider]:
    """SmolLM2 in-process; skips (fails in CI) when the real-model tier cannot run here."""
    reason = _missing()
    if reason is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and {reason}", pytrace=False)
        pytest.skip(reason)
    with LlamaCppProvider(smollm2_model_path(), n_ctx=N_CTX, seed=1234) as provider:
        yield provider


def test_smollm2_answers_through_the_openai_client_and_continues_its_thread(
    model: LlamaCppProvider,
) -> None:
    graph = AgentGraph("smol")
    config = AgentConfig(name="assistant", max_tokens=24)
    graph.add_node(
        "assistant", Agent(config, provider=model), context_mode=ContextMode.FULL, next_node=END
    )
    with (
        Server(create_app([ServedGraph(graph)])) as running,
        openai.OpenAI(base_url=f"{running.url}/v1", api_key="unused", max_retries=0) as client,
    ):
        messages: Any = [{"role": "user", "content": "Name a color."}]
        stream = client.chat.completions.create(
            model="smol", messages=messages, stream=True, stream_options={"include_usage": True}
        )
        chunks = list(stream)
        reply = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": "And?"}]
        second = client.chat.completions.create(model="smol", messages=messages)

    pieces = [c for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(pieces) > 1  # the model's tokens arrive as it makes them
    assert reply.strip()
    usage = chunks[-1].usage
    assert usage is not None
    assert usage.prompt_tokens > 0
    assert 0 < usage.completion_tokens <= 24
    assert second.choices[0].message.content
    first_thread = (chunks[-2].model_extra or {})["thread_id"]
    assert (second.model_extra or {})["thread_id"] == first_thread
    assert second.usage is not None
    assert second.usage.prompt_tokens > usage.prompt_tokens  # it saw the first turn too
