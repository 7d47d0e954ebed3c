"""One provider, many event loops: sync runs, asyncio.run, threads — one request per call.

Every sync ``run()`` starts and closes an event loop of its own. A provider's SDK
client pools connections that belong to the loop that opened them, so these tests
use one provider across loops and count the requests the server receives: a
dead pooled connection shows up as an error or as a silently repeated request.
"""

from __future__ import annotations

import asyncio
import gc
import threading
from typing import TYPE_CHECKING

import pytest

from selectgraph import Agent, AgentConfig, AgentGraph
from selectgraph.core._messages import Message
from selectgraph.providers._anthropic import AnthropicProvider
from selectgraph.providers._base import CompletionRequest
from selectgraph.providers._local import LocalProvider
from selectgraph.providers._openai import OpenAIProvider
from selectgraph.providers._retry import ProviderRetry
from tests.providers.conftest import ANTHROPIC_KEY, OPENAI_KEY, RecordingSleep
from tests.providers.llm_server import ServerThread, anthropic_stream, json_reply, openai_stream
from tests.providers.payloads import (
    anthropic_message,
    chat_completion,
    text_block,
    text_chunks,
    text_events,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"

Kind = str


@pytest.fixture
def wire() -> Iterator[ServerThread]:
    running = ServerThread().start()
    try:
        yield running
    finally:
        running.stop()


def make_provider(
    kind: Kind, wire: ServerThread, sleeps: RecordingSleep
) -> OpenAIProvider | AnthropicProvider:
    # Retries stay on (with instant sleeps): a provider that reconnects after a
    # dead connection would show up as an extra request, not as a pass.
    retry = ProviderRetry(max_attempts=3)
    if kind == "openai":
        return OpenAIProvider(
            OPENAI_KEY, base_url=f"{wire.base_url}/v1", retry=retry, sleep=sleeps, timeout=5.0
        )
    return AnthropicProvider(
        ANTHROPIC_KEY, base_url=wire.base_url, retry=retry, sleep=sleeps, timeout=5.0
    )


def script_answers(kind: Kind, wire: ServerThread, count: int, *, stream: bool = False) -> str:
    """Queue ``count`` answers ("answer 0", "answer 1", ...); returns the path they answer."""
    for number in range(count):
        text = f"answer {number}"
        if kind == "openai":
            reply = (
                openai_stream(text_chunks(text)) if stream else json_reply(chat_completion(text))
            )
            wire.server.script(OPENAI_PATH, reply)
        else:
            reply = (
                anthropic_stream(text_events(text))
                if stream
                else json_reply(anthropic_message([text_block(text)]))
            )
            wire.server.script(ANTHROPIC_PATH, reply)
    return OPENAI_PATH if kind == "openai" else ANTHROPIC_PATH


def requests_to(wire: ServerThread, path: str) -> int:
    return sum(1 for r in wire.server.requests if r.path == path)


KINDS = pytest.mark.parametrize("kind", ["openai", "anthropic"])


@KINDS
def test_sync_agent_runs_twice_with_one_request_each(
    kind: Kind, wire: ServerThread, sleeps: RecordingSleep
) -> None:
    path = script_answers(kind, wire, 3)
    agent = Agent(AgentConfig(name="a"), provider=make_provider(kind, wire, sleeps))

    answers = [agent.run(prompt).content for prompt in ("a", "b", "c")]

    assert answers == ["answer 0", "answer 1", "answer 2"]
    assert requests_to(wire, path) == 3
    assert sleeps.delays == []


@KINDS
def test_sync_agent_streams_twice(kind: Kind, wire: ServerThread, sleeps: RecordingSleep) -> None:
    path = script_answers(kind, wire, 2, stream=True)
    agent = Agent(AgentConfig(name="a"), provider=make_provider(kind, wire, sleeps))

    async def streamed(prompt: str) -> str:
        return "".join([chunk.delta async for chunk in agent.astream(prompt)])

    assert [asyncio.run(streamed(p)) for p in ("a", "b")] == ["answer 0", "answer 1"]
    assert requests_to(wire, path) == 2


@KINDS
def test_a_graph_of_agents_sharing_a_provider_runs_twice(
    kind: Kind, wire: ServerThread, sleeps: RecordingSleep
) -> None:
    path = script_answers(kind, wire, 4)
    provider = make_provider(kind, wire, sleeps)
    graph = AgentGraph.chain(
        Agent(AgentConfig(name="planner"), provider=provider),
        Agent(AgentConfig(name="writer"), provider=provider),
    )

    first = graph.run("one")
    second = graph.run("two")

    assert (first.content, second.content) == ("answer 1", "answer 3")
    assert requests_to(wire, path) == 4
    assert sleeps.delays == []


@KINDS
def test_two_asyncio_runs_share_a_provider(
    kind: Kind, wire: ServerThread, sleeps: RecordingSleep
) -> None:
    path = script_answers(kind, wire, 2)
    provider = make_provider(kind, wire, sleeps)
    request = CompletionRequest(model="m", messages=(Message.user("hi"),))

    answers = [asyncio.run(provider.complete(request)).message.text for _ in range(2)]

    assert answers == ["answer 0", "answer 1"]
    assert requests_to(wire, path) == 2
    # Each loop closed its client on the way out: nothing is left bound to a dead loop.
    assert len(provider._clients or ()) == 0


@KINDS
def test_two_threads_run_one_agent_at_once(
    kind: Kind, wire: ServerThread, sleeps: RecordingSleep
) -> None:
    path = script_answers(kind, wire, 4)
    agent = Agent(AgentConfig(name="a"), provider=make_provider(kind, wire, sleeps))
    answers: list[str] = []
    failures: list[BaseException] = []
    start = threading.Barrier(2)

    def work() -> None:
        start.wait()
        try:
            answers.extend(agent.run(p).content for p in ("x", "y"))
        except BaseException as exc:  # re-raised below, in the test's thread
            failures.append(exc)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert failures == []
    assert sorted(answers) == [f"answer {n}" for n in range(4)]
    assert requests_to(wire, path) == 4


@KINDS
async def test_async_use_in_the_test_loop_after_sync_runs(
    kind: Kind, wire: ServerThread, sleeps: RecordingSleep
) -> None:
    path = script_answers(kind, wire, 3)
    provider = make_provider(kind, wire, sleeps)
    agent = Agent(AgentConfig(name="a"), provider=provider)

    synced = await asyncio.to_thread(agent.run, "in a thread's own loop")
    first = await agent.arun("here")
    second = await agent.arun("here again")

    assert [synced.content, first.content, second.content] == [
        "answer 0",
        "answer 1",
        "answer 2",
    ]
    assert requests_to(wire, path) == 3
    await provider.aclose()
    assert len(provider._clients or ()) == 0


@KINDS
def test_a_loop_closed_without_shutting_down_is_forgotten(
    kind: Kind, wire: ServerThread, sleeps: RecordingSleep
) -> None:
    path = script_answers(kind, wire, 2)
    provider = make_provider(kind, wire, sleeps)
    request = CompletionRequest(model="m", messages=(Message.user("hi"),))
    loop = asyncio.new_event_loop()
    try:
        # No request here: a hand-managed loop that is closed without
        # shutdown_asyncgens() still leaves a client behind.
        loop.run_until_complete(provider._client())
    finally:
        loop.close()
    assert len(provider._clients or ()) == 1

    answers = [asyncio.run(provider.complete(request)).message.text for _ in range(2)]

    assert answers == ["answer 0", "answer 1"]
    assert requests_to(wire, path) == 2
    assert len(provider._clients or ()) == 0
    del loop
    gc.collect()


def test_the_local_provider_runs_twice_and_from_threads() -> None:
    agent = Agent(AgentConfig(name="a"), provider=LocalProvider([f"r{n}" for n in range(4)]))
    answers = [agent.run("a").content, agent.run("b").content]
    threads = [
        threading.Thread(target=lambda: answers.append(agent.run("c").content)) for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(answers) == ["r0", "r1", "r2", "r3"]
