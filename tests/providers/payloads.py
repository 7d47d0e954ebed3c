"""Response bodies and stream events shaped like the ones OpenAI and Anthropic send."""

from __future__ import annotations

import json
from typing import Any

OPENAI_MODEL = "gpt-4o-mini-2024-07-18"
ANTHROPIC_MODEL = "claude-haiku-4-5-20251001"


# OpenAI Chat Completions -------------------------------------------------------------


def openai_tool_call(call_id: str, name: str, arguments: object) -> dict[str, Any]:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": raw}}


def chat_completion(
    content: str | None = None,
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    finish_reason: str = "stop",
    prompt_tokens: int = 21,
    completion_tokens: int = 7,
    usage: bool = True,
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    body: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1_731_000_000,
        "model": OPENAI_MODEL,
        "system_fingerprint": "fp_test",
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}
        ],
    }
    if usage:
        body["usage"] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
    return body


def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1_731_000_000,
        "model": OPENAI_MODEL,
        "system_fingerprint": "fp_test",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
        "usage": None,
    }


def usage_chunk(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1_731_000_000,
        "model": OPENAI_MODEL,
        "system_fingerprint": "fp_test",
        "choices": [],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def text_chunks(
    *pieces: str, prompt_tokens: int = 9, completion_tokens: int = 3
) -> list[dict[str, Any]]:
    """A whole streamed text answer: role, the pieces, the finish, then usage."""
    return [
        chunk({"role": "assistant", "content": "", "refusal": None}),
        *(chunk({"content": p}) for p in pieces),
        chunk({}, finish_reason="stop"),
        usage_chunk(prompt_tokens, completion_tokens),
    ]


# Anthropic Messages -----------------------------------------------------------------


def anthropic_message(
    content: list[dict[str, Any]],
    *,
    stop_reason: str = "end_turn",
    input_tokens: int = 30,
    output_tokens: int = 11,
    cache_read_input_tokens: int = 0,
) -> dict[str, Any]:
    return {
        "id": "msg_01test",
        "type": "message",
        "role": "assistant",
        "model": ANTHROPIC_MODEL,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": cache_read_input_tokens,
            "service_tier": "standard",
        },
    }


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text, "citations": None}


def tool_use_block(block_id: str, name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": block_id, "name": name, "input": tool_input}


def message_start(input_tokens: int = 25) -> dict[str, Any]:
    message = anthropic_message([], input_tokens=input_tokens, output_tokens=1)
    message["stop_reason"] = None
    return {"type": "message_start", "message": message}


def block_start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def text_delta(index: int, text: str) -> dict[str, Any]:
    return {
        "type": "content_block_delta",
        "index": index,
        "delta": {"type": "text_delta", "text": text},
    }


def json_delta(index: int, partial_json: str) -> dict[str, Any]:
    return {
        "type": "content_block_delta",
        "index": index,
        "delta": {"type": "input_json_delta", "partial_json": partial_json},
    }


def block_stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def message_delta(stop_reason: str, output_tokens: int) -> dict[str, Any]:
    return {
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": None},
        "usage": {"output_tokens": output_tokens},
    }


def message_stop() -> dict[str, Any]:
    return {"type": "message_stop"}


def ping() -> dict[str, Any]:
    return {"type": "ping"}


def stream_error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def text_events(
    *pieces: str, input_tokens: int = 25, output_tokens: int = 6
) -> list[dict[str, Any]]:
    """A whole streamed text answer, as the Messages API sends it."""
    return [
        message_start(input_tokens),
        block_start(0, {"type": "text", "text": ""}),
        ping(),
        *(text_delta(0, p) for p in pieces),
        block_stop(0),
        message_delta("end_turn", output_tokens),
        message_stop(),
    ]
