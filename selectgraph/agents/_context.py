"""Context: the messages an agent node is shown, built from the graph's conversation.

The graph's conversation (``state.messages``) holds every node's turns. A node
sees it from its own seat: its own earlier answers stay assistant turns, while
the user's messages, other agents' answers (prefixed ``[name]``) and past tool
traffic become user turns. Consecutive user turns are joined, so every
provider receives a well-formed alternating conversation.

Older turns can be folded into a rolling summary, written by the agent's own
model and kept in ``state.data[CONVERSATION_SUMMARY]`` so the next node extends
it instead of summarising everything again.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from selectgraph.agents._calls import call_model
from selectgraph.agents._config import ContextMode
from selectgraph.core._messages import Message, Role
from selectgraph.core._state import CONVERSATION_SUMMARY, GraphState
from selectgraph.core._usage import NO_USAGE, Usage
from selectgraph.providers._base import CompletionRequest, Provider

__all__ = ["BuiltContext", "build_context", "from_seat", "summarize", "well_formed"]

_SUMMARY_PROMPT = (
    "Summarise the conversation below for a colleague who takes over the work. Keep the "
    "task, decisions, facts, results of tool calls and open questions; drop pleasantries. "
    "Write plain prose, at most a few paragraphs."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class BuiltContext:
    """The messages for one agent node, and what building them cost."""

    messages: list[Message]
    """Context messages, ending with a user turn."""
    usage: Usage = NO_USAGE
    """Tokens and cost of any summarisation call."""
    summary: dict[str, Any] | None = None
    """A new rolling summary to store in the state, when one was written."""


def _tool_call_text(message: Message) -> str:
    calls = ", ".join(
        f"{call.name}({json.dumps(call.arguments, ensure_ascii=False)})"
        for call in message.tool_calls
    )
    said = f" and said: {message.text}" if message.text else ""
    return f"[{message.name or 'assistant'}] called {calls}{said}"


def from_seat(messages: Sequence[Message], me: str) -> list[Message]:
    """``messages`` as node ``me`` should see them (see the module docstring)."""
    return well_formed(_seat(messages, me))


def _seat(messages: Sequence[Message], me: str) -> list[Message]:
    seen: list[Message] = []
    for message in messages:
        role = message.role
        if role is Role.SYSTEM:
            continue  # other nodes' prompts are not this node's business
        if role is Role.ASSISTANT:
            if message.tool_calls:
                seen.append(Message.user(_tool_call_text(message)))
            elif message.name == me:
                seen.append(Message.assistant(message.text, name=me))
            else:
                prefix = f"[{message.name}] " if message.name else ""
                seen.append(Message.user(prefix + message.text))
        elif role is Role.TOOL:
            status = "error" if message.is_error else "result"
            seen.append(Message.user(f"[tool {message.name or ''} {status}] {message.text}"))
        else:
            seen.append(Message.user(message.text))
    return seen


def well_formed(messages: list[Message]) -> list[Message]:
    """Join consecutive user turns; start and end on a user turn."""
    joined: list[Message] = []
    for message in messages:
        if joined and message.role is Role.USER and joined[-1].role is Role.USER:
            joined[-1] = Message.user(f"{joined[-1].text}\n\n{message.text}")
        else:
            joined.append(message)
    if joined and joined[0].role is not Role.USER:
        joined.insert(0, Message.user("(The conversation so far.)"))
    if joined and joined[-1].role is not Role.USER:
        joined.append(Message.user("Continue from your last answer."))
    return joined


def _last_turn(messages: Sequence[Message]) -> Message | None:
    for message in reversed(messages):
        if message.metadata.get("transition"):
            continue
        answer = message.role is Role.ASSISTANT and not message.tool_calls
        if (message.role is Role.USER or answer) and message.text:
            return message
    return None


SUMMARY_MAX_TOKENS = 512
"""Tokens a conversation summary may take (every model call is bounded)."""


async def summarize(
    provider: Provider,
    model: str,
    messages: Sequence[Message],
    previous: str = "",
) -> tuple[str, Usage]:
    """A summary of ``previous`` (an earlier summary) followed by ``messages``."""
    transcript = "\n".join(
        f"{m.role.value}{f' ({m.name})' if m.name else ''}: {m.text}"
        for m in messages
        if m.role is not Role.SYSTEM
    )
    body = f"Earlier summary:\n{previous}\n\nThen:\n{transcript}" if previous else transcript
    completion = await call_model(
        provider,
        CompletionRequest(
            model=model,
            messages=(Message.system(_SUMMARY_PROMPT), Message.user(body)),
            temperature=0.0,
            max_tokens=SUMMARY_MAX_TOKENS,
            max_tokens_fits_budget=True,  # a budget may shorten it rather than refuse it
        ),
    )
    return completion.message.text, completion.usage


async def _with_summary(
    state: GraphState, thread: list[Message], keep: int, me: str, provider: Provider, model: str
) -> BuiltContext:
    """Summary of all but the last ``keep`` messages (extending the stored one), then those."""
    cut = max(len(thread) - keep, 0)
    if cut == 0:
        return BuiltContext(messages=from_seat(thread, me))
    stored = state.data.get(CONVERSATION_SUMMARY)
    usage = NO_USAGE
    summary: dict[str, Any] | None = None
    if isinstance(stored, Mapping) and stored.get("upto") == cut:
        text = str(stored.get("text", ""))
    else:
        start, previous = 0, ""
        upto = stored.get("upto") if isinstance(stored, Mapping) else None
        if isinstance(upto, int) and 0 < upto < cut:  # extend the rolling summary
            start, previous = upto, str(stored.get("text", ""))  # type: ignore[union-attr]
        text, usage = await summarize(provider, model, thread[start:cut], previous)
        summary = {"upto": cut, "text": text}
    head = Message.user(f"Summary of the conversation so far:\n{text}")
    return BuiltContext(
        messages=well_formed([head, *_seat(thread[cut:], me)]), usage=usage, summary=summary
    )


async def build_context(
    state: GraphState,
    *,
    mode: ContextMode,
    n: int,
    me: str,
    provider: Provider,
    model: str,
    compact_at_tokens: int | None = None,
) -> BuiltContext:
    """The context for node ``me`` under ``mode``.

    Args:
        state: The graph state (a node's view of it).
        mode: Which part of the conversation to show.
        n: Messages kept verbatim for LAST_N and SUMMARY (and compaction).
        me: The node's name.
        provider: Writes summaries when they are needed.
        model: The model that writes them.
        compact_at_tokens: For FULL: summarise older turns past this many tokens.

    Raises:
        ValueError: there is nothing to respond to, or ``mode`` is CUSTOM.
    """
    thread = list(state.messages)
    handoff = _handoff(state, thread)
    if mode is ContextMode.LAST_MESSAGE:
        if handoff is not None:
            return BuiltContext(messages=[handoff])
        last = _last_turn(thread)
        if last is not None:
            return BuiltContext(messages=from_seat([last], me))
        raise ValueError(
            f"agent node {me!r} has nothing to respond to: the conversation is empty. Start "
            "the run with a prompt (graph.run('...')) or give the node an input_transform"
        )
    if mode is ContextMode.LAST_N:
        built = BuiltContext(messages=from_seat(thread[-n:], me))
    elif mode is ContextMode.SUMMARY:
        built = await _with_summary(state, thread, n, me, provider, model)
    elif mode is ContextMode.FULL:
        if (
            compact_at_tokens is not None
            and provider.count_tokens(thread, model) > compact_at_tokens
        ):
            built = await _with_summary(state, thread, n, me, provider, model)
        else:
            built = BuiltContext(messages=from_seat(thread, me))
    else:
        raise ValueError(f"context mode {mode.value!r} needs an input_transform")
    if handoff is None:
        return built
    return dataclasses.replace(built, messages=well_formed([*built.messages, handoff]))


def _handoff(state: GraphState, thread: Sequence[Message]) -> Message | None:
    """The hand-off a node left in ``state.last_output`` after the last agent, as a user turn.

    An agent writes its answer both as a message and as ``last_output``; a value
    there that is no message's text was written by another node (a function, a
    generator). It is answered unless someone spoke since: when the newest message
    is a user's (a new prompt on a thread, a person's reply), that comes first.
    """
    value = state.last_output
    if value is None:
        return None
    text = str(value)
    if not text.strip() or any(message.text == text for message in thread):
        return None
    newest = _last_turn(thread)
    if newest is not None and newest.role is Role.USER:
        return None  # a user spoke after it: the hand-off is older than the question
    return Message.user(text)
