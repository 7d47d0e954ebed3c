"""What an agent node is shown: the conversation from its seat, under each ContextMode."""

from __future__ import annotations

import itertools

import pytest

from selectgraph import END, Agent, AgentGraph, GraphState, Message, Role, ToolCall
from selectgraph.agents import ContextMode
from selectgraph.agents._context import build_context, from_seat, summarize
from selectgraph.core._state import CONVERSATION_SUMMARY
from selectgraph.testing import LocalReply, ScriptedProvider
from tests.agents.conftest import sent, turns, usage

SUMMARY_PROMPT = (
    "Summarise the conversation below for a colleague who takes over the work. Keep the "
    "task, decisions, facts, results of tool calls and open questions; drop pleasantries. "
    "Write plain prose, at most a few paragraphs."
)

# A planner/writer conversation: the user, then four answers alternating between them.
THREAD = [
    Message.user("Write a haiku about autumn."),
    Message.assistant("Plan: leaves, wind, 5-7-5.", name="planner"),
    Message.assistant("Leaves fall ...", name="writer"),
    Message.assistant("Tighten line two.", name="planner"),
    Message.assistant("Red leaves drift ...", name="writer"),
    Message.assistant("Approved.", name="planner"),
]


def state_of(*messages: Message, **data: object) -> GraphState:
    return GraphState(messages=list(messages), data=dict(data))


async def build(
    state: GraphState,
    mode: ContextMode,
    *,
    n: int = 2,
    me: str = "writer",
    provider: ScriptedProvider | None = None,
    compact_at_tokens: int | None = None,
) -> list[tuple[str, str]]:
    built = await build_context(
        state,
        mode=mode,
        n=n,
        me=me,
        provider=provider or ScriptedProvider(),
        model="m",
        compact_at_tokens=compact_at_tokens,
    )
    return turns(built.messages)


# --- from_seat ------------------------------------------------------------------------


def test_own_answers_stay_assistant_turns_and_others_become_named_user_turns() -> None:
    seen = from_seat(THREAD[:3], "writer")

    assert turns(seen) == [
        ("user", "Write a haiku about autumn.\n\n[planner] Plan: leaves, wind, 5-7-5."),
        ("assistant", "Leaves fall ..."),
        ("user", "Continue from your last answer."),
    ]
    assert seen[1] == Message.assistant("Leaves fall ...", name="writer")


def test_an_unnamed_assistant_turn_gets_no_prefix() -> None:
    seen = from_seat([Message.user("q"), Message.assistant("anonymous answer")], "writer")

    assert turns(seen) == [("user", "q\n\nanonymous answer")]


def test_tool_traffic_becomes_text() -> None:
    call = ToolCall(id="c1", name="search", arguments={"q": "haiku"})
    messages = [
        Message.user("Find haiku rules."),
        Message.assistant("Searching.", tool_calls=(call,), name="planner"),
        Message.tool("c1", "5-7-5 syllables", name="search"),
        Message.tool("c2", "timeout", name="search", is_error=True),
        Message.assistant(None, tool_calls=(call,), name="writer"),
    ]

    seen = from_seat(messages, "writer")

    assert turns(seen) == [
        (
            "user",
            "Find haiku rules.\n\n"
            '[planner] called search({"q": "haiku"}) and said: Searching.\n\n'
            "[tool search result] 5-7-5 syllables\n\n"
            "[tool search error] timeout\n\n"
            '[writer] called search({"q": "haiku"})',
        )
    ]


def test_consecutive_user_turns_are_joined_with_a_blank_line() -> None:
    seen = from_seat([Message.user("one"), Message.user("two"), Message.user("three")], "me")

    assert turns(seen) == [("user", "one\n\ntwo\n\nthree")]


def test_a_conversation_starting_with_an_own_answer_gets_a_user_turn_first() -> None:
    seen = from_seat([Message.assistant("my draft", name="me"), Message.user("edit it")], "me")

    assert turns(seen) == [
        ("user", "(The conversation so far.)"),
        ("assistant", "my draft"),
        ("user", "edit it"),
    ]


def test_a_conversation_ending_with_an_own_answer_gets_a_user_turn_last() -> None:
    seen = from_seat([Message.user("draft it"), Message.assistant("my draft", name="me")], "me")

    assert turns(seen)[-1] == ("user", "Continue from your last answer.")


def test_system_messages_are_dropped() -> None:
    seen = from_seat(
        [Message.system("planner's prompt"), Message.user("hi"), Message.system("more")], "me"
    )

    assert turns(seen) == [("user", "hi")]


def test_an_empty_conversation_stays_empty() -> None:
    assert from_seat([], "me") == []


def test_seen_conversations_alternate_and_end_on_a_user_turn() -> None:
    seen = from_seat(THREAD, "writer")

    roles = [m.role for m in seen]
    assert roles[0] is Role.USER
    assert roles[-1] is Role.USER
    assert all(a is not b for a, b in itertools.pairwise(roles))
    assert turns(seen) == [
        ("user", "Write a haiku about autumn.\n\n[planner] Plan: leaves, wind, 5-7-5."),
        ("assistant", "Leaves fall ..."),
        ("user", "[planner] Tighten line two."),
        ("assistant", "Red leaves drift ..."),
        ("user", "[planner] Approved."),
    ]


# --- LAST_MESSAGE ---------------------------------------------------------------------


async def test_last_message_shows_only_the_last_turn() -> None:
    assert await build(state_of(*THREAD), ContextMode.LAST_MESSAGE) == [
        ("user", "[planner] Approved.")
    ]


async def test_last_message_skips_tool_traffic_and_transition_markers() -> None:
    call = ToolCall(id="c1", name="search", arguments={})
    state = state_of(
        Message.user("task"),
        Message.assistant("Found it.", name="planner"),
        Message.assistant(None, tool_calls=(call,), name="planner"),
        Message.tool("c1", "raw result", name="search"),
        Message.user("[workflow] Step 'writer' takes over now", metadata={"transition": True}),
    )

    assert await build(state, ContextMode.LAST_MESSAGE) == [("user", "[planner] Found it.")]


async def test_last_message_falls_back_to_last_output_without_messages() -> None:
    state = state_of(__last_output__="notes from a function node")

    assert await build(state, ContextMode.LAST_MESSAGE) == [("user", "notes from a function node")]


@pytest.mark.parametrize("last_output", [None, "", "   "])
async def test_last_message_with_nothing_to_respond_to_is_a_clear_error(
    last_output: str | None,
) -> None:
    state = state_of(__last_output__=last_output)

    with pytest.raises(ValueError, match="agent node 'writer' has nothing to respond to"):
        await build(state, ContextMode.LAST_MESSAGE)


# --- LAST_N and FULL ------------------------------------------------------------------


async def test_last_n_shows_the_last_n_messages_from_the_nodes_seat() -> None:
    assert await build(state_of(*THREAD), ContextMode.LAST_N, n=3) == [
        ("user", "[planner] Tighten line two."),
        ("assistant", "Red leaves drift ..."),
        ("user", "[planner] Approved."),
    ]


async def test_last_n_larger_than_the_conversation_shows_all_of_it() -> None:
    assert await build(state_of(*THREAD[:2]), ContextMode.LAST_N, n=10) == [
        ("user", "Write a haiku about autumn.\n\n[planner] Plan: leaves, wind, 5-7-5.")
    ]


async def test_full_shows_the_whole_conversation_without_a_model_call() -> None:
    provider = ScriptedProvider()

    shown = await build(state_of(*THREAD), ContextMode.FULL, provider=provider)

    assert shown == turns(from_seat(THREAD, "writer"))
    assert provider.requests == []


# --- SUMMARY --------------------------------------------------------------------------


async def test_summary_folds_older_turns_into_a_model_written_summary() -> None:
    provider = ScriptedProvider([LocalReply(text="They drafted a haiku.", usage=usage(60, 5))])

    built = await build_context(
        state_of(*THREAD), mode=ContextMode.SUMMARY, n=2, me="writer", provider=provider, model="m"
    )

    assert sent(provider.last_request) == [
        ("system", SUMMARY_PROMPT),
        (
            "user",
            "user: Write a haiku about autumn.\n"
            "assistant (planner): Plan: leaves, wind, 5-7-5.\n"
            "assistant (writer): Leaves fall ...\n"
            "assistant (planner): Tighten line two.",
        ),
    ]
    assert provider.last_request.model == "m"
    assert provider.last_request.temperature == 0.0
    assert turns(built.messages) == [
        # No filler turn: the summary itself opens the conversation.
        ("user", "Summary of the conversation so far:\nThey drafted a haiku."),
        ("assistant", "Red leaves drift ..."),
        ("user", "[planner] Approved."),
    ]
    assert built.summary == {"upto": 4, "text": "They drafted a haiku."}
    assert built.usage == usage(60, 5)


async def test_summary_is_not_written_while_the_conversation_fits_in_n() -> None:
    provider = ScriptedProvider()

    built = await build_context(
        state_of(*THREAD[:3]),
        mode=ContextMode.SUMMARY,
        n=3,
        me="writer",
        provider=provider,
        model="m",
    )

    assert provider.requests == []
    assert built.summary is None
    assert turns(built.messages) == turns(from_seat(THREAD[:3], "writer"))


async def test_a_later_summary_extends_the_stored_one_from_upto() -> None:
    provider = ScriptedProvider(["S1", "S2"])
    state = state_of(*THREAD[:4])
    first = await build_context(
        state, mode=ContextMode.SUMMARY, n=2, me="writer", provider=provider, model="m"
    )
    assert first.summary == {"upto": 2, "text": "S1"}
    state.data[CONVERSATION_SUMMARY] = first.summary
    state.messages.extend(THREAD[4:])

    second = await build_context(
        state, mode=ContextMode.SUMMARY, n=2, me="writer", provider=provider, model="m"
    )

    # Only the turns between the stored summary's end and the new cut are sent, after it.
    assert sent(provider.requests[1])[1] == (
        "user",
        "Earlier summary:\nS1\n\nThen:\n"
        "assistant (writer): Leaves fall ...\n"
        "assistant (planner): Tighten line two.",
    )
    assert second.summary == {"upto": 4, "text": "S2"}
    assert turns(second.messages)[0][1].startswith("Summary of the conversation so far:\nS2")


async def test_a_stored_summary_that_ends_at_the_cut_is_reused_without_a_call() -> None:
    provider = ScriptedProvider()
    state = state_of(*THREAD, **{CONVERSATION_SUMMARY: {"upto": 4, "text": "Stored."}})

    built = await build_context(
        state, mode=ContextMode.SUMMARY, n=2, me="writer", provider=provider, model="m"
    )

    assert provider.requests == []
    assert built.summary is None
    assert built.messages[0].text.startswith("Summary of the conversation so far:\nStored.")


async def test_a_stored_summary_past_the_cut_is_replaced_by_a_fresh_one() -> None:
    provider = ScriptedProvider(["Fresh."])
    state = state_of(*THREAD, **{CONVERSATION_SUMMARY: {"upto": 5, "text": "Too far."}})

    built = await build_context(
        state, mode=ContextMode.SUMMARY, n=3, me="writer", provider=provider, model="m"
    )

    assert "Earlier summary" not in provider.last_request.messages[-1].text
    assert provider.last_request.messages[-1].text.startswith("user: Write a haiku")
    assert built.summary == {"upto": 3, "text": "Fresh."}


async def test_summarize_returns_the_text_and_usage_of_the_call() -> None:
    provider = ScriptedProvider([LocalReply(text="short", usage=usage(9, 1, 0.01))])

    text, spent = await summarize(
        provider, "m", [Message.system("hidden"), Message.user("hello")], previous=""
    )

    assert (text, spent) == ("short", usage(9, 1, 0.01))
    assert provider.last_request.messages[-1].text == "user: hello"


# --- FULL with compaction -------------------------------------------------------------


async def test_full_is_not_compacted_up_to_the_token_limit() -> None:
    provider = ScriptedProvider()
    limit = provider.count_tokens(THREAD, "m")

    shown = await build(
        state_of(*THREAD), ContextMode.FULL, provider=provider, compact_at_tokens=limit
    )

    assert provider.requests == []
    assert shown == turns(from_seat(THREAD, "writer"))


async def test_full_is_compacted_into_a_summary_past_the_token_limit() -> None:
    provider = ScriptedProvider(["Compacted."])
    limit = provider.count_tokens(THREAD, "m") - 1

    built = await build_context(
        state_of(*THREAD),
        mode=ContextMode.FULL,
        n=2,
        me="writer",
        provider=provider,
        model="m",
        compact_at_tokens=limit,
    )

    assert len(provider.requests) == 1
    assert built.summary == {"upto": 4, "text": "Compacted."}
    assert turns(built.messages)[1:] == [
        ("assistant", "Red leaves drift ..."),
        ("user", "[planner] Approved."),
    ]


# --- CUSTOM ---------------------------------------------------------------------------


async def test_custom_without_an_input_transform_is_an_error() -> None:
    with pytest.raises(ValueError, match="'custom' needs an input_transform"):
        await build(state_of(*THREAD), ContextMode.CUSTOM)


# --- the hand-off in last_output ------------------------------------------------------

HANDOFF = "Review complete. Approved: yes"


async def test_last_message_answers_a_hand_off_a_node_wrote_after_the_last_agent() -> None:
    state = state_of(*THREAD, __last_output__=HANDOFF)

    assert await build(state, ContextMode.LAST_MESSAGE) == [("user", HANDOFF)]


async def test_an_agents_own_answer_in_last_output_is_not_a_hand_off() -> None:
    state = state_of(*THREAD, __last_output__="Approved.")

    assert await build(state, ContextMode.LAST_MESSAGE) == [("user", "[planner] Approved.")]


@pytest.mark.parametrize("mode", [ContextMode.LAST_N, ContextMode.FULL])
async def test_other_modes_end_with_the_hand_off(mode: ContextMode) -> None:
    state = state_of(*THREAD, __last_output__=HANDOFF)

    built = await build(state, mode)

    assert built[-1] == ("user", f"[planner] Approved.\n\n{HANDOFF}")


def test_the_seeds_review_hand_off_reaches_the_next_agent() -> None:
    writer = Agent(provider=ScriptedProvider(["A draft about autumn."]))
    publisher_model = ScriptedProvider(["Published."])
    publisher = Agent(provider=publisher_model)

    def review(state: GraphState) -> None:
        state.data["__last_output__"] = "Review complete. Approved: yes"

    graph = AgentGraph()
    graph.add_node("writer", writer)
    graph.add_node("review", review)
    graph.add_node("publisher", publisher)
    graph.add_edge("writer", "review")
    graph.add_edge("review", "publisher")
    graph.add_edge("publisher", END)

    result = graph.run("Write a blog post")

    assert result.content == "Published."
    assert publisher_model.prompts == ["Review complete. Approved: yes"]


async def test_a_question_asked_after_the_hand_off_comes_first() -> None:
    # A thread's next run: the last run ended with a function's hand-off, then the
    # user asked again.
    state = state_of(
        Message.user("first question"),
        Message.assistant("answer one", name="writer"),
        Message.user("second question"),
        __last_output__="FORMATTED: answer one",
    )

    assert await build(state, ContextMode.LAST_MESSAGE) == [("user", "second question")]
    assert (await build(state, ContextMode.FULL))[-1] == ("user", "second question")


async def test_a_summary_call_is_bounded() -> None:
    from selectgraph.agents._context import SUMMARY_MAX_TOKENS

    provider = ScriptedProvider(["short summary"])
    await summarize(provider, "m", [Message.user("a long talk")])
    assert provider.requests[0].max_tokens == SUMMARY_MAX_TOKENS
