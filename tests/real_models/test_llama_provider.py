"""The in-process llama.cpp provider: what only it does, and how it fails."""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING

import pytest

from selectgraph import Agent, AgentConfig
from selectgraph.core._errors import ProviderRequestError, ProviderRetryableError
from selectgraph.core._messages import Message
from selectgraph.providers._base import CompletionRequest, ResponseFormat, ToolSpec
from selectgraph.providers._llama import LlamaCppProvider, smollm2_model_path
from selectgraph.providers._retry import ProviderRetry

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = [pytest.mark.real_model, pytest.mark.slow]


class RecordingSleep:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


def llama_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "selectgraph-llama" and t.is_alive()]


def test_smollm2_model_path_finds_the_packaged_gguf(gguf_path: Path) -> None:
    path = smollm2_model_path()

    assert path == gguf_path
    assert path.suffix == ".gguf"
    assert path.stat().st_size > 10_000_000
    assert path.read_bytes()[:4] == b"GGUF"


async def test_count_tokens_is_what_the_call_reports_as_input(
    llama_provider: LlamaCppProvider,
) -> None:
    messages = (Message.system("Be brief."), Message.user("What is two plus two?"))
    counted = llama_provider.count_tokens(messages)

    completion = await llama_provider.complete(
        CompletionRequest(model="", messages=messages, max_tokens=2)
    )

    assert counted == completion.usage.input_tokens
    # A local model is unpriced: never $0 passed off as a known price.
    assert completion.usage.known_cost_usd is None
    assert completion.usage.unpriced_calls == 1
    assert completion.model == "SmolLM2-135M-Instruct.Q4_1"


async def test_the_event_loop_keeps_running_while_the_model_generates(
    llama_provider: LlamaCppProvider,
) -> None:
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticker = asyncio.create_task(tick())
    request = CompletionRequest(
        model="",
        messages=(Message.user("Tell me a story."),),
        max_tokens=40,
        extra={"logit_bias": {"0": -100, "2": -100, "4": -100}},
    )
    await llama_provider.complete(request)
    ticker.cancel()

    # 40 tokens take a good fraction of a second; a blocked loop would not tick at all.
    assert ticks >= 5


async def test_closing_a_stream_early_ends_the_worker_thread_before_returning(
    llama_provider: LlamaCppProvider,
) -> None:
    request = CompletionRequest(
        model="",
        messages=(Message.user("Tell me a very long story."),),
        max_tokens=900,
        extra={"logit_bias": {"0": -100, "2": -100, "4": -100}},
    )
    stream = llama_provider.stream(request)
    await anext(stream)
    assert len(llama_threads()) == 1

    await stream.aclose()

    assert llama_threads() == []


async def test_breaking_out_of_an_agent_stream_stops_the_model(
    llama_provider: LlamaCppProvider,
) -> None:
    storyteller = Agent(
        AgentConfig(
            name="storyteller",
            max_tokens=900,
            extra={"logit_bias": {"0": -100, "2": -100, "4": -100}},
        ),
        provider=llama_provider,
    )
    stream = storyteller.astream("Tell me a very long story.")
    async for chunk in stream:
        if chunk.delta:
            break
    await stream.aclose()  # type: ignore[attr-defined]

    assert llama_threads() == []


async def test_a_prompt_longer_than_the_context_fails_without_retrying(gguf_path: Path) -> None:
    sleeps = RecordingSleep()
    provider = LlamaCppProvider(gguf_path, n_ctx=128, retry=ProviderRetry(), sleep=sleeps)
    request = CompletionRequest(model="", messages=(Message.user("word " * 400),), max_tokens=4)

    with provider:
        with pytest.raises(ProviderRequestError, match="n_ctx") as caught:
            await provider.complete(request)
        with pytest.raises(ProviderRequestError, match="n_ctx"):
            async for _ in provider.stream(request):
                pass

    assert caught.value.provider == "llama_cpp"
    assert not caught.value.retryable
    assert sleeps.delays == []


async def test_tools_offered_with_auto_get_a_text_answer_and_a_bad_named_choice_is_refused(
    llama_provider: LlamaCppProvider,
) -> None:
    tool = ToolSpec(name="lookup", description="Look a word up.", parameters={"type": "object"})
    request = CompletionRequest(
        model="", messages=(Message.user("Define owl."),), tools=(tool,), max_tokens=4
    )

    # Without a forced choice the model answers in text (tool calls: see test_tool_calls.py).
    assert (await llama_provider.complete(request)).message.text

    wrong = CompletionRequest(
        model="",
        messages=request.messages,
        tools=(tool,),
        tool_choice={"type": "function", "name": "define"},
        max_tokens=4,
    )
    with pytest.raises(ProviderRequestError, match=r"'define'.*lookup"):
        await llama_provider.complete(wrong)


async def test_a_schema_llama_cpp_cannot_compile_is_a_request_error(
    llama_provider: LlamaCppProvider,
) -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": "https://example.com/a.json"}}}
    request = CompletionRequest(
        model="",
        messages=(Message.user("Hi"),),
        response_format=ResponseFormat(name="Remote", json_schema=schema),
        max_tokens=4,
    )

    with pytest.raises(ProviderRequestError, match="grammar"):
        await llama_provider.complete(request)


@pytest.mark.parametrize("bias", [{"eos": "down"}, [0, 2], {"49152": -100}, {"-1": 5}])
async def test_a_malformed_logit_bias_names_the_field(
    llama_provider: LlamaCppProvider, bias: object
) -> None:
    request = CompletionRequest(
        model="", messages=(Message.user("Hi"),), extra={"logit_bias": bias}
    )

    with pytest.raises(ProviderRequestError, match="logit_bias"):
        await llama_provider.complete(request)


async def test_temperature_zero_with_a_seed_repeats_the_answer(
    llama_provider: LlamaCppProvider,
) -> None:
    request = CompletionRequest(
        model="", messages=(Message.user("Name a bird."),), temperature=0.0, max_tokens=8
    )

    first = await llama_provider.complete(request)
    second = await llama_provider.complete(request)

    assert first.message.text == second.message.text


async def test_another_chat_format_counts_tokens_close_to_the_real_prompt(
    gguf_path: Path,
) -> None:
    messages = (Message.system("Be brief."), Message.user("What is two plus two?"))
    async with LlamaCppProvider(gguf_path, n_ctx=256, chat_format="chatml") as provider:
        counted = provider.count_tokens(messages)
        completion = await provider.complete(
            CompletionRequest(model="", messages=messages, max_tokens=1)
        )

    assert repr(provider) == f"LlamaCppProvider(model_path={str(gguf_path)!r}, n_ctx=256)"
    # Texts are counted exactly; the framing is an allowance of a few tokens a message.
    assert abs(counted - completion.usage.input_tokens) <= 2 * len(messages) + 2


def test_a_missing_model_file_is_a_request_error_naming_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.gguf"

    with pytest.raises(ProviderRequestError, match=r"nope\.gguf"):
        LlamaCppProvider(missing)


def test_a_file_that_is_not_a_model_is_a_request_error(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"not a model at all")

    with pytest.raises(ProviderRequestError, match="cannot load"):
        LlamaCppProvider(bogus)


async def test_a_closed_provider_refuses_calls(gguf_path: Path) -> None:
    provider = LlamaCppProvider(gguf_path, n_ctx=128)
    await provider.aclose()

    with pytest.raises(ProviderRequestError, match="closed"):
        await provider.complete(CompletionRequest(model="", messages=(Message.user("Hi"),)))
    with pytest.raises(ProviderRequestError, match="closed"):
        provider.count_tokens([Message.user("Hi")])


def test_llama_cpp_failures_while_generating_are_retryable(
    llama_provider: LlamaCppProvider,
) -> None:
    decode = llama_provider._error(RuntimeError("llama_decode returned -1"))
    template = llama_provider._error(ValueError("Conversation roles must alternate"))

    assert isinstance(decode, ProviderRetryableError)
    assert "llama_decode" in str(decode)
    assert isinstance(template, ProviderRequestError)
    assert "alternate" in str(template)


async def test_a_failure_inside_llama_cpp_is_retried_with_the_same_request(
    gguf_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sleeps = RecordingSleep()
    provider = LlamaCppProvider(gguf_path, n_ctx=256, retry=ProviderRetry(), sleep=sleeps)
    real = provider._llama.create_chat_completion
    calls: list[dict[str, object]] = []

    def fails_once(**arguments: object) -> object:
        calls.append(arguments)
        if len(calls) == 1:
            raise RuntimeError("llama_decode returned 1")  # what a full KV cache raises
        return real(**arguments)

    monkeypatch.setattr(provider._llama, "create_chat_completion", fails_once)
    request = CompletionRequest(
        model="",
        messages=(Message.user("Tell me a story."),),
        max_tokens=4,
        extra={"logit_bias": {"0": -100, "2": -100, "4": -100}},
    )

    with provider:
        completion = await provider.complete(request)

    assert len(calls) == 2
    assert len(sleeps.delays) == 1
    # The retry ran the whole request again, bias included: it could not end early.
    assert completion.finish_reason == "length"
    assert completion.usage.output_tokens == 4
