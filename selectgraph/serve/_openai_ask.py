"""Asks: what the Chat Completions and Responses endpoints share.

Finding the graph a request's ``model`` names, the thread its conversation goes to
(``_conversations.py``), and the fields every answer adds to OpenAI's shape: the
``X-Thread-Id`` header, a ``thread_id`` field, and a ``selectgraph`` field holding the
turn's status and pending question.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from starlette.requests import Request

from selectgraph.serve._conversations import Conversations, Exchange
from selectgraph.serve._http import ApiError
from selectgraph.serve._turns import ServedGraph, Turn

__all__ = [
    "SSE_HEADERS",
    "THREAD_HEADER",
    "Ask",
    "Catalog",
    "extra_fields",
    "named_thread",
    "sse",
    "tail",
]

THREAD_HEADER: Final = "X-Thread-Id"
"""The header naming a request's thread, and every answer's."""


@dataclass(frozen=True, slots=True)
class Ask:
    """One request's message, the graph that answers it, and the thread it goes to."""

    served: ServedGraph
    """The graph."""
    conversations: Conversations
    """Its conversations' threads."""
    thread_id: str
    """The thread the message goes to (a fresh id for a new conversation)."""
    message: str
    """The user's new message: the input of the run, or the answer to its question."""
    conversation: Exchange
    """The conversation as the client holds it, its new message last."""

    async def turn(self) -> Turn:
        """Answer the message in one piece, and record the conversation with its reply.

        Raises:
            ServeError: the message cannot be answered.
        """
        turn = await self.served.turn(self.message, thread_id=self.thread_id)
        await self.record(turn, turn.reply)
        return turn

    async def record(self, turn: Turn, sent: str) -> None:
        """Record that the thread holds the conversation, the reply ``sent`` last."""
        if turn.status != "cancelled":
            exchange = [*self.conversation, ("assistant", sent)]
            await self.conversations.record(self.thread_id, exchange)

    def stream(self) -> AsyncGenerator[str | Turn, None]:
        """The turn's text deltas, then its Turn.

        The run starts at the first ``__anext__``: a message that cannot be answered (a
        busy thread, a bad thread id) raises :class:`ServeError` there, before a byte
        of the answer is sent, so it is answered with its HTTP status.
        """
        # An async generator, closed when the answer ends.
        return self.served.stream(self.message, thread_id=self.thread_id)

    def headers(self) -> dict[str, str]:
        """The headers of every answer to this request."""
        return {THREAD_HEADER: self.thread_id}


def extra_fields(turn: Turn) -> dict[str, Any]:
    """What an answer adds to OpenAI's shape: its thread, its status and its question."""
    return {
        "thread_id": turn.thread_id,
        "selectgraph": {
            "thread_id": turn.thread_id,
            "run_id": turn.run_id,
            "status": turn.status,
            "question": None if turn.question is None else turn.question.as_json(),
        },
    }


def tail(streamed: str, reply: str) -> str:
    """What a stream still owes after ``streamed`` so the client also gets ``reply``.

    Streamed text is every streaming node's; the reply is the final message, or the
    question of a run that paused, or the output of a graph that streams nothing.
    """
    if streamed.endswith(reply):
        return ""
    if reply.startswith(streamed):
        return reply[len(streamed) :]
    return "\n\n" + reply


class Catalog:
    """The served graphs by name, each with its conversations."""

    def __init__(self, graphs: Sequence[ServedGraph]) -> None:
        """Serve ``graphs``, each under its name."""
        self.graphs: dict[str, tuple[ServedGraph, Conversations]] = {
            served.name: (served, Conversations(served)) for served in graphs
        }

    def graph(self, name: str, *, param: str | None = "model") -> tuple[ServedGraph, Conversations]:
        """The graph served as ``name``, and its conversations.

        Raises:
            ApiError: 404 ``model_not_found``.
        """
        found = self.graphs.get(name)
        if found is None:
            known = ", ".join(repr(known) for known in self.graphs) or "none"
            raise ApiError(
                404,
                f"the model {name!r} does not exist: this server serves the graphs {known}",
                param=param,
                code="model_not_found",
            )
        return found

    async def ask(
        self,
        request: Request,
        model: str,
        conversation: Exchange,
        *,
        named: str | None,
        param: str,
    ) -> Ask:
        """The thread and message of a request for ``model``.

        Args:
            request: The request (its ``X-Thread-Id`` header names a thread).
            model: The graph's name.
            conversation: The messages as the client sent them, its new one last.
            named: A thread the body names (``metadata.thread_id``, ``conversation``...).
            param: The body field holding the messages, for errors.

        Raises:
            ApiError: an unknown model, or no user message last.
        """
        served, conversations = self.graph(model)
        if not conversation or conversation[-1][0] != "user":
            last = conversation[-1][0] if conversation else "nothing"
            raise ApiError(
                400,
                f"{param} must end with the user's message (a message with role 'user'), "
                f"not {last}",
                param=param,
            )
        thread_id = request.headers.get(THREAD_HEADER) or named
        if thread_id is None:
            thread_id = await conversations.thread_for(conversation[:-1])
        if thread_id is None:
            thread_id = served.new_thread_id()
        return Ask(served, conversations, thread_id, conversation[-1][1], conversation)


def named_thread(metadata: Mapping[str, str] | None) -> str | None:
    """The thread ``metadata.thread_id`` names, if it names one."""
    return None if metadata is None else metadata.get("thread_id")


def sse(data: Mapping[str, Any] | str, event: str | None = None) -> str:
    """One Server-Sent Event: ``data`` as JSON (or as it is, when text)."""
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n"


SSE_HEADERS: Final = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
"""Headers of a streamed answer: nothing between server and client may hold it back."""
