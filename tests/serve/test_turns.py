"""ServedGraph: a client's message answered by a run on the conversation's thread."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from selectgraph import (
    END,
    Agent,
    AgentConfig,
    AgentGraph,
    ContextMode,
    InterruptRequest,
    MessagesState,
    SQLiteCheckpointStore,
    append,
)
from selectgraph.observe import NodeChunk
from selectgraph.serve import ServedGraph, ServeError, Turn
from selectgraph.testing import ScriptedProvider


class Chat(BaseModel):
    heard: Annotated[list[str], append] = []


def _chat() -> AgentGraph:
    graph = AgentGraph("chat", state_schema=Chat, description="Remembers what it heard.")
    graph.add_node("hear", lambda s: {"heard": [s.messages[-1].text]}, next_node=END)
    return graph


async def test_a_message_on_a_new_thread_is_answered_and_names_its_thread() -> None:
    served = ServedGraph(_chat())

    turn = await served.turn("hello")

    assert turn.status == "done"
    assert turn.output == {"heard": ["hello"]}
    assert turn.question is None
    snapshot = served.graph.get_thread(turn.thread_id, checkpoint_store=served.store)
    assert snapshot.values["heard"] == ["hello"]
    assert served.name == "chat"
    assert served.description == "Remembers what it heard."
    assert served.input_schema["required"] == ["input"]


async def test_the_same_thread_continues_run_after_run_in_a_store_on_disk(tmp_path: Any) -> None:
    store = SQLiteCheckpointStore(str(tmp_path / "chat.db"))
    first = await ServedGraph(_chat(), store=store).turn("one", thread_id="ann")
    # Another server (another process, after a restart) on the same store.
    second = await ServedGraph(_chat(), store=store).turn("two", thread_id="ann")

    assert second.output == {"heard": ["one", "two"]}
    assert first.run_id != second.run_id
    store.close()


def _agent_graph(replies: list[str]) -> tuple[AgentGraph, ScriptedProvider]:
    model = ScriptedProvider(replies)
    graph = AgentGraph("assistant")
    agent = Agent(AgentConfig(name="assistant"), provider=model)
    graph.add_node("assistant", agent, context_mode=ContextMode.FULL, next_node=END)
    return graph, model


async def test_stream_yields_the_agents_text_as_it_is_made_then_the_turn() -> None:
    graph, model = _agent_graph(["Hello there, Ann.", "Your name is Ann."])
    served = ServedGraph(graph)

    items = [item async for item in served.stream("I am Ann.")]

    deltas, final = items[:-1], items[-1]
    assert isinstance(final, Turn)
    assert len(deltas) > 1
    assert all(isinstance(d, str) for d in deltas)
    assert "".join(str(d) for d in deltas) == final.reply == "Hello there, Ann."
    again = await served.turn("Who am I?", thread_id=final.thread_id)
    assert again.reply == "Your name is Ann."
    sent = [m.text for m in model.last_request.messages if m.role.value != "system"]
    assert sent == ["I am Ann.", "Hello there, Ann.", "Who am I?"]


async def test_a_messages_state_graph_takes_text_as_a_user_message() -> None:
    graph = AgentGraph("echo", state_schema=MessagesState)
    graph.add_node(
        "echo",
        lambda s: {"messages": [("assistant", "echo: " + s["messages"][-1].text)]},
        next_node=END,
    )
    served = ServedGraph(graph)

    first = await served.turn("hi")
    second = await served.turn("bye", thread_id=first.thread_id)

    assert (first.reply, second.reply) == ("echo: hi", "echo: bye")


class Verdict(BaseModel):
    approve: bool


def _review(schema: Any = None) -> AgentGraph:
    def review(state: Any) -> Any:
        answer = yield InterruptRequest(
            "Publish this draft?", {"draft": state.messages[-1].text}, response_schema=schema
        )
        approved = answer.approve if isinstance(answer, Verdict) else answer == "yes"
        return {"approved": approved}

    graph = AgentGraph("review")
    graph.add_node("review", review, next_node=END)
    return graph


async def test_a_question_is_the_reply_and_the_next_message_answers_it() -> None:
    served = ServedGraph(_review())

    asked = await served.turn("Owls are birds.")
    answered = await served.turn("yes", thread_id=asked.thread_id)

    assert asked.status == "interrupted"
    assert asked.question is not None
    assert asked.question.prompt == "Publish this draft?"
    assert asked.question.payload == {"draft": "Owls are birds."}
    assert "Publish this draft?" in asked.reply
    assert "Owls are birds." in asked.reply
    assert answered.status == "done"
    assert answered.output == {"approved": True}
    assert answered.run_id == asked.run_id  # the answer continued the paused run


async def test_an_answer_must_fit_the_questions_schema() -> None:
    served = ServedGraph(_review(Verdict))
    asked = await served.turn("Owls are birds.")
    assert asked.question is not None
    assert asked.question.response_schema is not None
    assert "JSON" in asked.reply

    with pytest.raises(ServeError) as refused:
        await served.turn('{"approve": "perhaps"}', thread_id=asked.thread_id)
    answered = await served.turn('{"approve": true}', thread_id=asked.thread_id)

    assert refused.value.status == 422
    assert "approve" in refused.value.message
    assert answered.output == {"approved": True}


async def test_bad_thread_ids_and_failed_runs_are_typed_errors() -> None:
    def broken(state: Any) -> Any:
        raise RuntimeError("the disk is full")

    graph = AgentGraph("broken")
    graph.add_node("broken", broken, next_node=END)
    served = ServedGraph(graph)

    with pytest.raises(ServeError) as bad_id:
        await served.turn("hi", thread_id="a|b")
    with pytest.raises(ServeError) as failed:
        await served.turn("hi", thread_id="t1")

    assert bad_id.value.status == 400
    assert failed.value.status == 500
    assert "the disk is full" in failed.value.message
    with pytest.raises(ServeError) as wrong_type:
        await ServedGraph(_chat()).turn(42)  # type: ignore[arg-type]
    assert wrong_type.value.status == 422


async def test_a_busy_thread_under_reject_is_a_409_and_cancel_stops_the_run() -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    async def slow(state: Any) -> dict[str, Any]:
        entered.set()
        await release.wait()
        return {"done": True}

    graph = AgentGraph("slow")
    graph.add_node("slow", slow, next_node=END)
    served = ServedGraph(graph, multitask_strategy="reject")

    first = asyncio.ensure_future(served.turn("one", thread_id="t"))
    await entered.wait()
    with pytest.raises(ServeError) as busy:
        await served.turn("two", thread_id="t")
    assert busy.value.status == 409

    assert await served.cancel("t") is True
    stopped = await first
    assert stopped.status == "cancelled"
    assert await served.cancel("t") is False  # nothing runs there now
    release.set()
    entered.clear()
    done = await served.turn("three", thread_id="t")  # the thread is free again
    assert done.status == "done"


def test_a_store_without_threads_is_refused() -> None:
    class NoThreads:
        pass

    with pytest.raises(TypeError, match="keeps no threads"):
        ServedGraph(_chat(), store=NoThreads())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="AgentGraph"):
        ServedGraph("graph")  # type: ignore[arg-type]


async def test_a_consumer_that_stops_early_stops_the_run() -> None:
    entered, release = asyncio.Event(), asyncio.Event()
    seen: list[str] = []

    async def talk(state: Any, context: Any) -> dict[str, Any]:
        context.publish(NodeChunk, node="talk", delta="first words")
        entered.set()
        await release.wait()
        seen.append("finished")
        return {"done": True}

    graph = AgentGraph("talk")
    graph.add_node("talk", talk, next_node=END)
    served = ServedGraph(graph)

    stream = served.stream("hi", thread_id="t")
    first = await stream.__anext__()
    await entered.wait()
    await stream.aclose()  # what a server does when its client goes away
    release.set()

    assert first == "first words"
    assert await served.cancel("t") is False  # nothing left running
    again = await served.turn("again", thread_id="t")  # the thread is free at once
    assert again.status == "done"
    assert seen == ["finished"]  # only the second run got to its end


async def test_a_dropped_question_is_not_answered_by_the_next_message() -> None:
    served = ServedGraph(_review())
    asked = await served.turn("Owls are birds.")

    assert await served.drop_question(asked.thread_id)
    again = await served.turn("Bats are birds.", thread_id=asked.thread_id)
    answered = await served.turn("yes", thread_id=asked.thread_id)

    assert again.status == "interrupted"  # a new run asked about the new draft
    assert again.run_id != asked.run_id
    assert again.question is not None
    assert again.question.payload == {"draft": "Bats are birds."}
    runs = served.store.thread_runs(asked.thread_id)  # type: ignore[attr-defined]
    assert runs[-1].superseded == asked.run_id
    assert answered.status == "done"  # the new question is answered as usual
    assert answered.run_id == again.run_id


async def test_dropping_a_pause_starts_a_new_run_and_nothing_waiting_drops_nothing() -> None:
    graph = AgentGraph("gated", pause_before=["publish"])
    graph.add_node("draft", lambda s: {"said": s.messages[-1].text}, next_node="publish")
    graph.add_node("publish", lambda s: {"published": True}, next_node=END)
    served = ServedGraph(graph)
    paused = await served.turn("one")

    assert await served.drop_question(paused.thread_id)
    again = await served.turn("two", thread_id=paused.thread_id)
    done = await served.turn("go on", thread_id=paused.thread_id)

    assert paused.status == again.status == "paused"
    assert again.run_id != paused.run_id  # not the paused run going on
    assert done.run_id == again.run_id
    assert done.output == {"said": "two", "published": True}
    assert not await served.drop_question(paused.thread_id)  # its run is over
    assert not await served.drop_question("no-such-thread")
