"""OpenAI request bodies: the fields the server reads, checked with pydantic.

Only text is understood; fields a client may send but a graph has no use for
(``temperature``, ``tools``...) are accepted and ignored, since the graph chooses
its own models and settings. A body that is not JSON, a field of the wrong type or
a conversation without a user message last is an :class:`ApiError` (400) naming the
field, as ``param``.
"""

from __future__ import annotations

import json
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request

from selectgraph.build._input import MAX_INPUT_DEPTH, json_depth
from selectgraph.serve._conversations import Exchange
from selectgraph.serve._http import ApiError

__all__ = [
    "ChatMessage",
    "ChatRequest",
    "InputMessage",
    "ResponsesRequest",
    "read_body",
]

Role = Literal["system", "developer", "user", "assistant"]


class _Strict(BaseModel):
    # Strict: "true" is not a boolean and 1 is not a string; unknown fields are let be.
    model_config = ConfigDict(strict=True, extra="allow")


class TextPart(_Strict):
    """A text part of a message's content (images and audio are refused)."""

    type: Literal["text", "input_text", "output_text"]
    """What the part holds: text, by whichever name the API gives it."""
    text: str
    """The text."""


class ChatMessage(_Strict):
    """One message of a Chat Completions request."""

    role: Role
    """Who said it (tool calls are not part of a graph's conversation)."""
    content: str | list[TextPart]
    """Its text, whole or in parts."""

    def text(self) -> str:
        """The message's text, its parts joined."""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)


class StreamOptions(_Strict):
    """Chat Completions' ``stream_options``."""

    include_usage: bool = False
    """Whether a last chunk reports the tokens used."""


class ChatRequest(_Strict):
    """``POST /v1/chat/completions``."""

    model: str
    """The served graph's name."""
    messages: list[ChatMessage] = Field(min_length=1)
    """The conversation so far, ending with the user's new message."""
    stream: bool = False
    """Whether to answer as Server-Sent Events."""
    stream_options: StreamOptions | None = None
    """What a stream adds."""
    metadata: dict[str, str] | None = None
    """``thread_id`` names the conversation's thread; the rest is ignored."""

    def exchange(self) -> Exchange:
        """The conversation as (role, text) pairs."""
        return [(message.role, message.text()) for message in self.messages]


class InputMessage(_Strict):
    """One message item of a Responses API ``input`` list."""

    type: Literal["message"] = "message"
    """Only messages: tool calls and their outputs are not part of a graph's conversation."""
    role: Role
    """Who said it."""
    content: str | list[TextPart]
    """Its text, whole or in parts."""

    def text(self) -> str:
        """The message's text, its parts joined."""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)


class ConversationRef(_Strict):
    """The Responses API's ``conversation`` given as an object."""

    id: str
    """The conversation's id: here, a thread id."""


class ResponsesRequest(_Strict):
    """``POST /v1/responses``."""

    model: str
    """The served graph's name."""
    input: str | list[InputMessage]
    """The new message, or the conversation ending with it."""
    stream: bool = False
    """Whether to answer as Server-Sent Events."""
    previous_response_id: str | None = None
    """A response of this server: continue its thread."""
    conversation: str | ConversationRef | None = None
    """The thread to continue (or start, under that id)."""
    metadata: dict[str, str] | None = None
    """``thread_id`` names the conversation's thread; the rest is ignored."""

    def exchange(self) -> Exchange:
        """The input as (role, text) pairs."""
        if isinstance(self.input, str):
            return [("user", self.input)]
        return [(item.role, item.text()) for item in self.input]

    def conversation_id(self) -> str | None:
        """The thread ``conversation`` names, if it names one."""
        if isinstance(self.conversation, ConversationRef):
            return self.conversation.id
        return self.conversation


Model = TypeVar("Model", bound=BaseModel)


async def read_body(request: Request, model: type[Model]) -> Model:
    """The request's JSON body as ``model``; the guard has already bounded its size.

    Raises:
        ApiError: 415 without a JSON content type; 400 for a body that is not JSON,
            too deeply nested, or not ``model``.
    """
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":
        # A cross-site form cannot send JSON: a web page cannot start a run on its own.
        raise ApiError(415, "send the request body as JSON (Content-Type: application/json)")
    raw = await request.body()
    try:
        data: Any = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ApiError(400, f"the request body is not valid JSON: {error}") from None
    except RecursionError:
        raise ApiError(400, "the request body is nested too deeply to read") from None
    if not isinstance(data, dict):
        raise ApiError(400, f"the request body must be a JSON object, got {type(data).__name__}")
    if json_depth(data) > MAX_INPUT_DEPTH:
        raise ApiError(400, f"the request body is nested deeper than {MAX_INPUT_DEPTH} levels")
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise _invalid(error) from None


def _invalid(error: ValidationError) -> ApiError:
    """The deepest problem pydantic found, naming its field as OpenAI names params.

    Deepest, because a union's other members fail shallowly: an ``input`` list whose
    item has a wrong ``type`` also "is not a string".
    """
    problems = error.errors(include_url=False)
    first = max(problems, key=lambda problem: len(problem["loc"]))
    param = _param(first["loc"])
    more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
    where = param or "the request body"
    return ApiError(400, f"{where}: {first['msg']}{more}", param=param or None)


def _param(loc: tuple[int | str, ...]) -> str:
    """``("messages", 0, "content")`` as ``messages[0].content``."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif "[" in part or part in ("str", "int", "bool", "list", "dict"):
            continue  # a union member's name (list[TextPart]), not a field
        else:
            text += f".{part}" if text else part
    return text
