"""``POST /v1/responses``: a turn answered as a Responses API response, whole or streamed.

The conversation's thread is the one ``conversation`` names, or the thread of
``previous_response_id`` (a response id names its thread), else as for chat
completions. Each response names its thread as ``conversation.id`` and
``metadata.thread_id`` besides the ``thread_id`` and ``selectgraph`` fields.

Streamed, the answer is the API's typed events, in the order OpenAI's clients
assemble them: ``response.created``, ``response.in_progress``, the message item and
its text part added, one ``response.output_text.delta`` per delta, their ``done``
events, then ``response.completed`` holding the whole response. A run that fails
once the stream has begun ends it with ``response.failed``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from selectgraph.serve._conversations import response_id, thread_of_response
from selectgraph.serve._openai_ask import (
    SSE_HEADERS,
    Ask,
    Catalog,
    extra_fields,
    named_thread,
    sse,
    tail,
)
from selectgraph.serve._openai_models import ResponsesRequest, read_body
from selectgraph.serve._turns import ServeError, Turn

__all__ = ["responses"]


async def responses(catalog: Catalog, request: Request) -> Response:
    """Answer a Responses API request with a turn of the graph its ``model`` names.

    Raises:
        ApiError: the request is malformed or names no served graph or response.
        ServeError: the message cannot be answered (a busy thread...), before any
            byte of the answer is sent.
    """
    body = await read_body(request, ResponsesRequest)
    named = named_thread(body.metadata) or body.conversation_id()
    if named is None and body.previous_response_id is not None:
        named = thread_of_response(body.previous_response_id)
    ask = await catalog.ask(request, body.model, body.exchange(), named=named, param="input")
    shape = _Shape(
        id=response_id(ask.thread_id),
        model=body.model,
        thread_id=ask.thread_id,
        previous=body.previous_response_id,
    )
    if not body.stream:
        turn = await ask.turn()
        return JSONResponse(shape.response(turn, turn.reply), headers=ask.headers())
    items = ask.stream()
    first = await anext(items)  # a refusal raises here, answered with its status
    events = _events(ask, shape, first, items)
    headers = {**ask.headers(), **SSE_HEADERS}
    return StreamingResponse(events, media_type="text/event-stream", headers=headers)


@dataclass(slots=True, kw_only=True)
class _Shape:
    """One response's fixed fields, and how its objects look."""

    id: str
    model: str
    thread_id: str
    previous: str | None
    created_at: float = field(default_factory=time.time)
    message_id: str = field(default_factory=lambda: f"msg_{uuid.uuid4().hex}")

    def response(self, turn: Turn | None, text: str | None, status: str = "completed") -> Any:
        """The response object: in progress (no turn yet), completed, or failed."""
        output = [] if text is None else [self.message(text, "completed")]
        response: dict[str, Any] = {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "model": self.model,
            "status": status,
            "output": output,
            "error": None,
            "incomplete_details": None,
            "instructions": None,
            "metadata": {"thread_id": self.thread_id},
            "conversation": {"id": self.thread_id},
            "previous_response_id": self.previous,
            "parallel_tool_calls": False,
            "tool_choice": "auto",
            "tools": [],
            "temperature": None,
            "top_p": None,
            "usage": None if turn is None else _usage(turn),
            "thread_id": self.thread_id,
        }
        if turn is not None:
            response.update(extra_fields(turn))
        return response

    def message(self, text: str, status: str) -> dict[str, Any]:
        """The output message item."""
        content = [] if status == "in_progress" else [self.part(text)]
        return {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "status": status,
            "content": content,
        }

    def part(self, text: str) -> dict[str, Any]:
        """The message's text part."""
        return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


async def _events(
    ask: Ask, shape: _Shape, first: str | Turn, items: AsyncGenerator[str | Turn, None]
) -> AsyncIterator[str]:
    numbers = iter(range(1 << 62))
    place = {"item_id": shape.message_id, "output_index": 0, "content_index": 0}

    def event(kind: str, **data: Any) -> str:
        return sse({"type": kind, "sequence_number": next(numbers), **data}, event=kind)

    yield event("response.created", response=shape.response(None, None, "in_progress"))
    yield event("response.in_progress", response=shape.response(None, None, "in_progress"))
    yield event("response.output_item.added", output_index=0, item=shape.message("", "in_progress"))
    yield event("response.content_part.added", **place, part=shape.part(""))
    streamed = ""
    item = first
    try:
        while not isinstance(item, Turn):
            streamed += item
            yield event("response.output_text.delta", **place, delta=item, logprobs=[])
            item = await anext(items)
    except ServeError as error:  # the run failed after the answer began
        failed = shape.response(None, None, "failed")
        failed["error"] = {"code": "server_error", "message": error.message}
        yield event("response.failed", response=failed)
        return
    finally:
        await items.aclose()
    rest = tail(streamed, item.reply)
    if rest:
        yield event("response.output_text.delta", **place, delta=rest, logprobs=[])
    text = streamed + rest
    await ask.record(item, text)
    yield event("response.output_text.done", **place, text=text, logprobs=[])
    yield event("response.content_part.done", **place, part=shape.part(text))
    yield event("response.output_item.done", output_index=0, item=shape.message(text, "completed"))
    yield event("response.completed", response=shape.response(item, text))


def _usage(turn: Turn) -> dict[str, Any]:
    return {
        "input_tokens": turn.input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": turn.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": turn.input_tokens + turn.output_tokens,
    }
