"""Threads in the runtime: a conversation that continues run after run, double-texting,
the stored event log, and the LangGraph spellings of all three."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from selectgraph import (
    END,
    Agent,
    AgentGraph,
    CheckpointStore,
    Command,
    InMemoryCheckpointStore,
    InterruptRequest,
    Message,
    MessagesState,
    RemoveMessage,
    ResumeError,
    StateSerializationError,
    StateValidationError,
    ThreadBusy,
    ThreadIdError,
    append,
    tool,
)
from selectgraph.testing import LocalReply, ScriptedProvider
from tests.persistence.conftest import STORES, close_all, make_harness


class Chat(BaseModel):
    turns: int = 0
    heard: Annotated[list[str], append] = []


def _respond(state: Any) -> dict[str, Any]:
    last = state.messages[-1].text if state.messages else ""
    return {"turns": state["turns"] + 1, "heard": [last]}


def chat_graph() -> AgentGraph:
    graph = AgentGraph("chat", state_schema=Chat)
    graph.add_node("respond", _respond, next_node=END)
    return graph


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """Each of the four stores: the runtime's thread semantics are the same on all."""
    closing: list[Any] = []
    try:
        yield make_harness(request.param, tmp_path, closing).store
    finally:
        close_all(closing)


def test_a_thread_continues_run_after_run(store: InMemoryCheckpointStore) -> None:
    graph = chat_graph()
    first = graph.run("hello", thread_id="t1", checkpoint_store=store)
    second = graph.run("again", thread_id="t1", checkpoint_store=store)
    assert second.state.data == {"turns": 2, "heard": ["hello", "again"]}
    assert [m.text for m in second.state.messages] == ["hello", "again"]
    assert first.run_id != second.run_id  # each run has its own id and checkpoints
    assert store.head(first.run_id) is not None
    assert store.head(second.run_id) is not None
    runs = store.thread_runs("t1")
    assert [(r.seq, r.run_id) for r in runs] == [(1, first.run_id), (2, second.run_id)]
    assert runs[1].start_from == first.checkpoint_id  # from where the first run left it
    # A run's history is its own: the second run's state holds only its node.
    assert [name for name, _ in second.state.history] == ["respond"]
    thread = graph.get_thread("t1", checkpoint_store=store)
    assert (thread.status, thread.values["turns"], thread.thread.runs) == ("idle", 2, 2)


def test_a_new_thread_starts_from_its_input_alone(store: InMemoryCheckpointStore) -> None:
    result = chat_graph().run({"turns": 10}, thread_id="fresh", checkpoint_store=store)
    assert result.state.data == {"turns": 11, "heard": [""]}


def test_a_thread_input_is_merged_through_the_reducers(store: InMemoryCheckpointStore) -> None:
    graph = chat_graph()
    graph.run("a", thread_id="t", checkpoint_store=store)
    result = graph.run({"heard": ["told"]}, thread_id="t", checkpoint_store=store)
    assert result.state.data["heard"] == ["a", "told", "a"]  # appended, then the node's


def test_messages_state_follows_add_messages(store: InMemoryCheckpointStore) -> None:
    def echo(state: Any) -> dict[str, Any]:
        return {"messages": [("assistant", f"echo: {state['messages'][-1].text}")]}

    graph = AgentGraph("echo", state_schema=MessagesState)
    graph.add_node("echo", echo, next_node=END)
    config = {"configurable": {"thread_id": "c1"}}
    compiled = graph.compile(checkpointer=store)
    compiled.invoke({"messages": [("user", "hi")]}, config)
    out = compiled.invoke({"messages": [{"role": "user", "content": "bye"}]}, config)
    texts = [m.text for m in out["messages"]]
    assert texts == ["hi", "echo: hi", "bye", "echo: bye"]
    first = out["messages"][0]
    edited = first.model_copy(update={"content": "hello"})
    out = compiled.invoke({"messages": [edited, RemoveMessage(id=out["messages"][1].id)]}, config)
    assert [m.text for m in out["messages"]][:3] == ["hello", "bye", "echo: bye"]


def test_configurable_values_reach_context_config(store: InMemoryCheckpointStore) -> None:
    seen: list[Any] = []

    def node(state: Any, context: Any) -> dict[str, Any]:
        seen.append((dict(context.config), context.thread_id))
        return {}

    graph = AgentGraph("cfg")
    graph.add_node("n", node, next_node=END)
    compiled = graph.compile(checkpointer=store)
    compiled.invoke({}, {"configurable": {"thread_id": "t", "user": "ann"}})
    compiled.run({}, config={"user": "bob"})
    assert seen == [({"thread_id": "t", "user": "ann"}, "t"), ({"user": "bob"}, None)]


def test_continuing_a_run_that_does_not_exist_says_so(store: InMemoryCheckpointStore) -> None:
    with pytest.raises(ResumeError, match="run 'no-such-run' has no checkpoints"):
        chat_graph().run(None, run_id="no-such-run", checkpoint_store=store)
    with pytest.raises(ResumeError, match="thread 'nobody' has no run to continue"):
        chat_graph().run(None, thread_id="nobody", checkpoint_store=store)


@pytest.mark.parametrize(
    ("bad", "error", "message"),
    [
        ({"nope": 1}, StateValidationError, "the thread's input has 'nope', not a field of Chat"),
        ({"turns": "many"}, StateValidationError, "turns: Input should be a valid integer"),
        (7, TypeError, "a run on a thread takes a GraphState"),
    ],
)
def test_an_input_that_cannot_fit_leaves_nothing_on_the_thread(
    store: CheckpointStore, bad: Any, error: type[Exception], message: str
) -> None:
    graph = chat_graph()
    with pytest.raises(error, match=message):
        graph.run(bad, thread_id="new", checkpoint_store=store)
    assert store.get_thread("new") is None  # type: ignore[attr-defined]
    graph.run("hi", thread_id="old", checkpoint_store=store)
    with pytest.raises(error, match=message):
        graph.run(bad, thread_id="old", checkpoint_store=store)
    assert len(store.thread_runs("old")) == 1  # type: ignore[attr-defined]


def test_a_thread_needs_a_store_that_keeps_threads() -> None:
    with pytest.raises(ValueError, match="lives in a checkpoint store"):
        chat_graph().run("x", thread_id="t")

    class Plain(InMemoryCheckpointStore):
        claim_thread = None  # type: ignore[assignment]

    with pytest.raises(TypeError, match="keeps checkpoints but not threads"):
        chat_graph().run("x", thread_id="t", checkpoint_store=Plain())


@pytest.mark.parametrize("bad", ["", "a|b", "line\nbreak", "x" * 257, 7])
def test_a_thread_id_the_store_cannot_hold_is_refused(bad: Any) -> None:
    with pytest.raises(ThreadIdError, match="cannot be stored"):
        chat_graph().run("x", thread_id=bad, checkpoint_store=InMemoryCheckpointStore())


def test_strategy_options_need_a_thread() -> None:
    with pytest.raises(ValueError, match="give thread_id too"):
        chat_graph().run("x", multitask_strategy="enqueue")


# ---------------------------------------------------------------- double-texting
class Gate:
    """A node that waits until the test lets it go, so a run stays busy."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.calls: list[str] = []

    async def __call__(self, state: Any) -> dict[str, Any]:
        self.calls.append(state.messages[-1].text)
        self.entered.set()
        await self.release.wait()
        return {"heard": [state.messages[-1].text]}


def slow_graph(gate: Gate) -> AgentGraph:
    graph = AgentGraph("slow", state_schema=Chat)
    graph.add_node("first", lambda state: {"turns": state["turns"] + 1}, next_node="wait")
    graph.add_node("wait", gate, next_node=END)
    return graph


async def test_reject_refuses_a_second_input_and_changes_nothing(
    store: InMemoryCheckpointStore,
) -> None:
    gate = Gate()
    graph = slow_graph(gate)
    running = asyncio.ensure_future(graph.arun("one", thread_id="t", checkpoint_store=store))
    await gate.entered.wait()
    with pytest.raises(ThreadBusy, match="thread 't' is busy"):
        await graph.arun("two", thread_id="t", checkpoint_store=store)
    assert store.get_thread("t").runs == 1  # type: ignore[union-attr]
    gate.release.set()
    result = await running
    assert result.state.data["heard"] == ["one"]


async def test_enqueue_runs_inputs_after_the_current_run_in_arrival_order(
    store: InMemoryCheckpointStore,
) -> None:
    gate = Gate()
    graph = slow_graph(gate)
    running = asyncio.ensure_future(graph.arun("one", thread_id="t", checkpoint_store=store))
    await gate.entered.wait()
    in_queue = asyncio.Event()
    enqueue = store.aenqueue

    async def enqueued(*args: Any, **kwargs: Any) -> int:
        position: int = await enqueue(*args, **kwargs)
        in_queue.set()
        return position

    setattr(store, "aenqueue", enqueued)  # noqa: B010 - a spy on the queue
    queued = []
    for text in ("two", "three"):
        in_queue.clear()
        queued.append(
            asyncio.ensure_future(
                graph.arun(
                    text, thread_id="t", checkpoint_store=store, multitask_strategy="enqueue"
                )
            )
        )
        await in_queue.wait()  # arrival order, not finish order, is what is kept
    gate.release.set()
    results = [await running, *[await task for task in queued]]
    assert [r.state.data["heard"] for r in results] == [
        ["one"],
        ["one", "two"],
        ["one", "two", "three"],
    ]
    assert results[-1].state.data["turns"] == 3


async def test_interrupt_stops_the_running_run_and_goes_on_from_what_it_completed(
    store: InMemoryCheckpointStore,
) -> None:
    gate = Gate()
    graph = slow_graph(gate)
    running = asyncio.ensure_future(graph.arun("one", thread_id="t", checkpoint_store=store))
    await gate.entered.wait()  # "first" completed and was checkpointed; "wait" is running
    old_release, gate.release = gate.release, asyncio.Event()
    gate.entered.clear()
    newer = asyncio.ensure_future(
        graph.arun("two", thread_id="t", checkpoint_store=store, multitask_strategy="interrupt")
    )
    await gate.entered.wait()  # the newer run took the thread and reached "wait" itself
    old_release.set()  # the older run finishes its node, and its checkpoint is refused
    old = await running
    assert old.stop_reason == "superseded"
    last = store.read_events(old.run_id)[-1].event
    assert (last["event"], last["reason"]) == ("RunCancelled", "superseded")
    gate.release.set()
    new = await newer
    # The newer run started from the first run's last checkpoint: "first" ran once there.
    assert new.state.data == {"turns": 2, "heard": ["two"]}
    assert [r.superseded for r in store.thread_runs("t")] == [None, old.run_id]


async def test_rollback_discards_the_running_run(store: InMemoryCheckpointStore) -> None:
    gate = Gate()
    graph = slow_graph(gate)
    gate.release.set()
    earlier = await graph.arun("one", thread_id="t", checkpoint_store=store)
    gate.release = asyncio.Event()
    gate.entered.clear()
    running = asyncio.ensure_future(graph.arun("two", thread_id="t", checkpoint_store=store))
    await gate.entered.wait()
    old_release, gate.release = gate.release, asyncio.Event()
    gate.release.set()  # the newer run's own "wait" goes straight through
    newer = await graph.arun(
        "three", thread_id="t", checkpoint_store=store, multitask_strategy="rollback"
    )
    old_release.set()
    old = await running
    assert old.stop_reason == "superseded"
    assert store.head(old.run_id) is None  # its checkpoints are gone
    # From the state before the rolled-back run: its "first" never counted.
    assert newer.state.data["turns"] == earlier.state.data["turns"] + 1
    assert [r.run_id for r in store.thread_runs("t")] == [earlier.run_id, newer.run_id]


def _ask(state: Any) -> Iterator[Any]:
    answer = yield InterruptRequest("Go on?")
    state.data["heard"] = [f"answer {answer}"]


def _asking() -> AgentGraph:
    graph = AgentGraph("ask", state_schema=Chat)
    graph.add_node("ask", _ask, next_node=END)
    return graph


def test_a_paused_run_keeps_its_thread_until_answered(store: InMemoryCheckpointStore) -> None:
    graph = _asking()
    paused = graph.run("q", thread_id="t", checkpoint_store=store)
    assert graph.get_thread("t", checkpoint_store=store).status == "interrupted"
    with pytest.raises(ThreadBusy):
        graph.run("again", thread_id="t", checkpoint_store=store)
    done = graph.resume(paused.interrupt_id, "yes", checkpoint_store=store)  # type: ignore[arg-type]
    assert done.state.data["heard"] == ["answer yes"]
    assert graph.get_thread("t", checkpoint_store=store).status == "idle"
    compiled = graph.compile(checkpointer=store)
    config = {"configurable": {"thread_id": "lg"}}
    waiting = compiled.invoke("q", config)
    assert waiting["__interrupt__"][0].prompt == "Go on?"
    assert compiled.invoke(Command(resume="ok"), config)["heard"] == ["answer ok"]


def test_interrupting_a_paused_run_drops_its_question(store: InMemoryCheckpointStore) -> None:
    graph = _asking()
    paused = graph.run("q", thread_id="t", checkpoint_store=store)
    newer = graph.run("r", thread_id="t", checkpoint_store=store, multitask_strategy="interrupt")
    assert newer.interrupted  # the newer run asks its own question
    with pytest.raises(Exception, match=r"no longer owns thread 't'|not pending"):
        graph.resume(paused.interrupt_id, "late", checkpoint_store=store)  # type: ignore[arg-type]


# ---------------------------------------------------------------- the event log
async def _talk(state: Any, context: Any) -> dict[str, Any]:
    from selectgraph.observe import NodeChunk

    context.publish(NodeChunk, node=context.node, delta="secret words")
    return {"turns": 1}


def _streaming() -> AgentGraph:
    graph = AgentGraph("talk", state_schema=Chat)
    graph.add_node("talk", _talk, next_node=END)
    return graph


def test_each_run_stores_its_events_in_order(store: InMemoryCheckpointStore) -> None:
    result = _streaming().run("hi", thread_id="t", checkpoint_store=store)
    stored = store.read_events(result.run_id)
    assert [e.seq for e in stored] == list(range(1, len(stored) + 1))
    names = [e.event["event"] for e in stored]
    assert names[0] == "RunStarted"
    assert names[-1] == "RunFinished"
    assert "NodeChunk" not in names  # message content is left out by default
    finished = next(e.event for e in stored if e.event["event"] == "NodeFinished")
    assert finished["node"] == "talk"
    assert finished["duration_ms"] >= 0
    # A reader that reconnects after the event it saw last gets exactly the rest.
    middle = stored[2].seq
    assert store.read_events(result.run_id, after=middle) == stored[middle:]


def test_the_event_log_keeps_content_when_asked_and_can_be_off(
    store: InMemoryCheckpointStore,
) -> None:
    with_content = _streaming().run("hi", checkpoint_store=store, event_log="content")
    names = [e.event["event"] for e in store.read_events(with_content.run_id)]
    assert "NodeChunk" in names
    without = _streaming().run("hi", checkpoint_store=store, event_log=False)
    assert store.read_events(without.run_id) == []


def _asking_then_talking() -> AgentGraph:
    graph = AgentGraph("ask", state_schema=Chat)
    graph.add_node("ask", _ask, next_node="talk")
    graph.add_node("talk", _talk, next_node=END)
    return graph


def _logged(store: Any, run_id: str) -> list[str]:
    return [e.event["event"] for e in store.read_events(run_id)]


@pytest.mark.parametrize("live", [True, False], ids=["same process", "replayed"])
def test_a_resumed_run_stores_its_events_as_it_was_started_to(
    store: InMemoryCheckpointStore, live: bool
) -> None:
    graph = _asking_then_talking()
    # In another process the graph is another object: the run is rebuilt from the store.
    answering = graph if live else _asking_then_talking()
    quiet = graph.run("q", checkpoint_store=store, event_log=False)
    assert store.head(quiet.run_id).metadata["event_log"] is False  # type: ignore[union-attr]
    done = answering.resume(quiet.interrupt_id, "yes", checkpoint_store=store)  # type: ignore[arg-type]
    assert (done.state.data["heard"], done.state.data["turns"]) == (["answer yes"], 1)
    assert _logged(store, quiet.run_id) == []
    chatty = graph.run("q", checkpoint_store=store, event_log="content")
    answering.resume(chatty.interrupt_id, "yes", checkpoint_store=store)  # type: ignore[arg-type]
    names = _logged(store, chatty.run_id)
    assert (names[0], names[-1]) == ("RunStarted", "RunFinished")
    assert "NodeChunk" in names  # after the answer, content is still kept
    # Asked for on the resume, the continued part is logged though the start was not.
    asked = graph.run("q", checkpoint_store=store, event_log=False)
    answering.resume(asked.interrupt_id, "yes", checkpoint_store=store, event_log=True)  # type: ignore[arg-type]
    names = _logged(store, asked.run_id)
    assert "RunStarted" not in names
    assert names[-1] == "RunFinished"
    assert "NodeChunk" not in names
    plain = graph.run("q", checkpoint_store=store)
    assert "event_log" not in store.head(plain.run_id).metadata  # type: ignore[union-attr]


def _gated() -> AgentGraph:
    graph = AgentGraph("gated", state_schema=Chat)
    graph.add_node("first", lambda state: {"turns": 1}, next_node="talk")
    graph.add_node("talk", _talk, next_node=END)
    return graph


def test_a_run_continued_after_a_stop_keeps_its_event_log_choice(
    store: InMemoryCheckpointStore,
) -> None:
    for choice in (False, "content"):
        stopped = _gated().run("q", checkpoint_store=store, event_log=choice, pause_before=["talk"])
        assert stopped.paused
        # Continued as a crashed or stopped run is, by another graph object (process).
        done = _gated().run(None, run_id=stopped.run_id, checkpoint_store=store)
        assert done.state.data["turns"] == 1
        logged = _logged(store, stopped.run_id)
        if choice is False:
            assert logged == []
        else:
            assert "NodeChunk" in logged
            assert logged[-1] == "RunFinished"


def test_an_unknown_event_log_choice_is_refused(store: InMemoryCheckpointStore) -> None:
    with pytest.raises(ValueError, match=r"event_log must be True, False or 'content', got 'yes'"):
        _asking().run("q", checkpoint_store=store, event_log="yes")  # type: ignore[arg-type]
    paused = _asking().run("q", checkpoint_store=store)
    with pytest.raises(ValueError, match=r"event_log must be .* got 1"):
        _asking().resume(paused.interrupt_id, "y", checkpoint_store=store, event_log=1)  # type: ignore[arg-type]


def test_an_unobserved_run_logs_its_model_and_tool_calls(store: CheckpointStore) -> None:
    # Nobody listens, yet a later reader (runs show, the studio) wants the calls.
    @tool
    def weather(city: str) -> str:
        """The weather in a city.

        Args:
            city: The city.
        """
        return f"sunny in {city}"

    provider = ScriptedProvider(
        [LocalReply.tool_call("weather", {"city": "Oslo"}, call_id="c1"), "Sunny.", "Still."]
    )
    graph = AgentGraph("agentic")
    graph.add_node("ask", Agent(provider=provider, tools=[weather]), next_node=END)
    result = graph.run("Weather?", thread_id="t", checkpoint_store=store)
    events = [e.event for e in store.read_events(result.run_id)]  # type: ignore[attr-defined]
    names = [e["event"] for e in events]
    assert names.count("LLMCallStarted") == names.count("LLMCallFinished") == 2
    assert names.count("ToolCallStarted") == names.count("ToolCallFinished") == 1
    tool_done = next(e for e in events if e["event"] == "ToolCallFinished")
    assert (tool_done["node"], tool_done["tool"]) == ("ask", "weather")
    quiet = graph.run("Weather?", checkpoint_store=store, event_log=False)
    assert store.read_events(quiet.run_id) == []  # type: ignore[attr-defined]


# ---------------------------------------------------------------- thread records
def test_thread_metadata_nested_too_deeply_is_a_typed_error(
    store: InMemoryCheckpointStore,
) -> None:
    deep: dict[str, Any] = {}
    inner = deep
    for _ in range(5_000):
        inner["k"] = inner = {}
    with pytest.raises(StateSerializationError, match="nests too deeply"):
        chat_graph().run("a", thread_id="deep", checkpoint_store=store, thread_metadata=deep)


def test_copy_list_delete_and_prune_threads(store: InMemoryCheckpointStore) -> None:
    graph = chat_graph()
    graph.run("a", thread_id="t1", checkpoint_store=store, thread_metadata={"user": "ann"})
    graph.run("b", thread_id="t2", checkpoint_store=store, thread_metadata={"user": "bob"})
    copy = graph.copy_thread("t1", "t1-copy", checkpoint_store=store)
    assert graph.get_thread(copy, checkpoint_store=store).values["heard"] == ["a"]
    after = graph.run("c", thread_id=copy, checkpoint_store=store)
    assert after.state.data["heard"] == ["a", "c"]
    assert graph.get_thread("t1", checkpoint_store=store).values["heard"] == ["a"]
    assert [t.thread_id for t in store.list_threads(metadata={"user": "ann"})] == [
        "t1-copy",
        "t1",
    ]
    assert store.thread_bytes("t1") > 0
    assert store.delete_thread("t2") >= 1
    assert store.get_thread("t2") is None
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=2)
    assert sorted(store.prune_threads(older_than=dt.timedelta(days=1), now=later)) == [
        "t1",
        "t1-copy",
    ]


def test_a_thread_ttl_expires_it(store: InMemoryCheckpointStore) -> None:
    chat_graph().run("a", thread_id="short", checkpoint_store=store, thread_ttl=60)
    chat_graph().run("a", thread_id="long", checkpoint_store=store)
    soon = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=5)
    assert store.prune_threads(now=soon) == ["short"]


def test_messages_given_as_messages_keep_their_ids(store: CheckpointStore) -> None:
    graph = AgentGraph("ids", state_schema=MessagesState)
    graph.add_node("n", lambda state: {}, next_node=END)
    given = Message.user("x").model_copy(update={"id": "m1"})
    result = graph.run({"messages": [given]}, thread_id="ids", checkpoint_store=store)
    assert result.state.data["messages"][0].id == "m1"


def test_a_content_log_keeps_prompts_and_replies_and_a_plain_one_neither(
    store: InMemoryCheckpointStore,
) -> None:
    def calls(run_id: str) -> dict[str, dict[str, Any]]:
        return {
            e.event["event"]: e.event
            for e in store.read_events(run_id)
            if e.event["event"].startswith("LLMCall")
        }

    graph = AgentGraph("ask")
    graph.add_node(
        "ask", Agent(provider=ScriptedProvider(["Owls hunt at night.", "Again."])), next_node=END
    )

    kept = calls(graph.run("owls?", checkpoint_store=store, event_log="content").run_id)
    plain = calls(graph.run("owls?", checkpoint_store=store).run_id)

    assert {"role": "user", "text": "owls?"} in kept["LLMCallStarted"]["messages"]
    assert kept["LLMCallFinished"]["text"] == "Owls hunt at night."
    assert "messages" not in plain["LLMCallStarted"]
    assert "text" not in plain["LLMCallFinished"]
    assert plain["LLMCallFinished"]["output_tokens"] > 0  # the call itself is always logged
