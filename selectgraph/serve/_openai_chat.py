"""``POST /v1/chat/completions``: a turn answered as a chat completion, whole or streamed.

Streamed, the answer is Server-Sent Events of ``chat.completion.chunk`` objects: a
first chunk naming the role, one per text delta the graph's nodes stream, a last one
with ``finish_reason`` (and the thread and status fields), with
``stream_options.include_usage`` a chunk reporting usage, then ``data: [DONE]``. A
run that fails once the stream has begun ends it with an ``{"error": ...}`` event,
which OpenAI's clients raise as an error.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from selectgraph.serve._http import error_body
from selectgraph.serve._openai_ask import (
    SSE_HEADERS,
    Ask,
    Catalog,
    extra_fields,
    named_thread,
    sse,
    tail,
)
from selectgraph.serve._openai_models import ChatRequest, read_body
from selectgraph.serve._turns import ServeError, Turn

__all__ = ["chat_completions"]


async def chat_completions(catalog: Catalog, request: Request) -> Response:
    """Answer a Chat Completions request with a turn of the graph its ``model`` names.

    Raises:
        ApiError: the request is malformed or names no served graph.
        ServeError: the message cannot be answered (a busy thread...), before any
            byte of the answer is sent.
    """
    body = await read_body(request, ChatRequest)
    ask = await catalog.ask(
        request,
        body.model,
        body.exchange(),
        named=named_thread(body.metadata),
        param="messages",
    )
    head = {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "created": int(time.time()),
        "model": body.model,
        "system_fingerprint": None,
    }
    if not body.stream:
        turn = await ask.turn()
        message = {"role": "assistant", "content": turn.reply, "refusal": None}
        choice = {"index": 0, "message": message, "finish_reason": "stop", "logprobs": None}
        completion = {
            **head,
            "object": "chat.completion",
            "choices": [choice],
            "usage": _usage(turn),
            **extra_fields(turn),
        }
        return JSONResponse(completion, headers=ask.headers())
    include_usage = body.stream_options is not None and body.stream_options.include_usage
    items = ask.stream()
    first = await anext(items)  # a refusal raises here, answered with its status
    chunks = _chunks(ask, first, items, head, include_usage=include_usage)
    headers = {**ask.headers(), **SSE_HEADERS}
    return StreamingResponse(chunks, media_type="text/event-stream", headers=headers)


async def _chunks(
    ask: Ask,
    first: str | Turn,
    items: AsyncGenerator[str | Turn, None],
    head: dict[str, Any],
    *,
    include_usage: bool,
) -> AsyncIterator[str]:
    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return sse({**head, "object": "chat.completion.chunk", "choices": [choice], **extra})

    yield chunk({"role": "assistant", "content": ""})
    streamed = ""
    item = first
    try:
        while not isinstance(item, Turn):
            streamed += item
            yield chunk({"content": item})
            item = await anext(items)
    except ServeError as error:  # the run failed after the answer began
        yield sse(error_body(error.status, error.message))
        return
    finally:
        await items.aclose()
    rest = tail(streamed, item.reply)
    if rest:
        yield chunk({"content": rest})
    await ask.record(item, streamed + rest)
    yield chunk({}, "stop", **extra_fields(item))
    if include_usage:
        yield sse({**head, "object": "chat.completion.chunk", "choices": [], "usage": _usage(item)})
    yield sse("[DONE]")


def _usage(turn: Turn) -> dict[str, int]:
    return {
        "prompt_tokens": turn.input_tokens,
        "completion_tokens": turn.output_tokens,
        "total_tokens": turn.input_tokens + turn.output_tokens,
    }
