from __future__ import annotations

import doctest
import time

import pytest

import selectgraph.testing
from selectgraph.core._errors import ProviderRequestError, ProviderRetryableError
from selectgraph.core._messages import Message
from selectgraph.providers._base import CompletionRequest, Provider
from selectgraph.testing import LocalReply, ScriptedProvider, ScriptExhausted


def ask(text: str) -> CompletionRequest:
    return CompletionRequest(model="m", messages=(Message.system("sys"), Message.user(text)))


async def test_replies_come_back_in_script_order() -> None:
    provider = ScriptedProvider(["reply 1", "reply 2"])

    first = await provider.complete(ask("one"))
    second = await provider.complete(ask("two"))

    assert [first.message.text, second.message.text] == ["reply 1", "reply 2"]


async def test_prompts_list_the_last_user_message_of_each_call() -> None:
    provider = ScriptedProvider(["a", "b"])

    await provider.complete(ask("first"))
    await provider.complete(CompletionRequest(model="m", messages=(Message.system("only"),)))

    assert provider.prompts == ["first", ""]


async def test_running_out_of_script_names_how_many_replies_were_scripted() -> None:
    provider = ScriptedProvider(["reply 1", "reply 2"])
    await provider.complete(ask("one"))
    await provider.complete(ask("two"))

    with pytest.raises(ScriptExhausted, match=r"only 2 replies were scripted") as info:
        await provider.complete(ask("three"))

    assert isinstance(info.value, ProviderRequestError)
    assert info.value.provider == "scripted"
    assert info.value.call == 3


async def test_an_empty_script_fails_on_the_first_call() -> None:
    with pytest.raises(ScriptExhausted, match=r"call 1 but only 0 replies were scripted"):
        await ScriptedProvider().complete(ask("hi"))


async def test_last_request_is_the_most_recent_one() -> None:
    provider = ScriptedProvider(["a", "b"])
    await provider.complete(ask("one"))
    await provider.complete(ask("two"))

    assert provider.last_request.messages[-1].text == "two"


def test_last_request_before_any_call_is_an_assertion_error() -> None:
    with pytest.raises(AssertionError, match="not been called"):
        _ = ScriptedProvider(["a"]).last_request


async def test_retries_are_recorded_but_not_waited_for_by_default() -> None:
    failure = ProviderRetryableError("busy", provider="scripted", retry_after=30.0)
    provider = ScriptedProvider([failure, "ok"])

    started = time.perf_counter()
    completion = await provider.complete(ask("hi"))

    assert time.perf_counter() - started < 1.0
    assert completion.message.text == "ok"
    assert provider.retry_delays == [30.0]
    assert provider.prompts == ["hi", "hi"]


async def test_given_sleep_is_used_for_retries() -> None:
    waited: list[float] = []

    async def sleep(seconds: float) -> None:
        waited.append(seconds)

    failure = ProviderRetryableError("busy", provider="scripted", retry_after=1.5)
    provider = ScriptedProvider([failure, "ok"], sleep=sleep)

    await provider.complete(ask("hi"))

    assert waited == [1.5]


async def test_tool_call_replies_can_be_scripted() -> None:
    provider = ScriptedProvider([LocalReply.tool_call("search", {"q": "x"}, call_id="c1")])

    completion = await provider.complete(ask("find x"))

    assert completion.message.tool_calls[0].id == "c1"


async def test_assert_all_used_passes_once_every_reply_was_taken() -> None:
    provider = ScriptedProvider(["a"])
    await provider.complete(ask("hi"))

    provider.assert_all_used()


def test_assert_all_used_fails_while_replies_remain() -> None:
    provider = ScriptedProvider(["a", "b"])

    with pytest.raises(AssertionError, match=r"2 of 2 scripted replies were never used"):
        provider.assert_all_used()


def test_scripted_provider_is_a_provider() -> None:
    assert isinstance(ScriptedProvider(), Provider)


def test_public_names() -> None:
    assert selectgraph.testing.__all__ == [
        "LocalProvider",
        "LocalReply",
        "ScriptEntry",
        "ScriptExhausted",
        "ScriptedProvider",
    ]


def test_docstring_examples_run() -> None:
    result = doctest.testmod(selectgraph.testing)

    assert result.attempted > 0
    assert result.failed == 0
