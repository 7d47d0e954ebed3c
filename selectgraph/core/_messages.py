"""Messages: the conversation vocabulary shared by state, agents and providers."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue
from pydantic_core import PydanticSerializationError, to_jsonable_python

__all__ = ["Message", "Role", "ToolCall", "tool_content"]


class Role(StrEnum):
    """Who a message is from."""

    SYSTEM = "system"
    """Instructions to the model."""
    USER = "user"
    """The person (or the graph, on their behalf)."""
    ASSISTANT = "assistant"
    """The model's answer, possibly with tool calls."""
    TOOL = "tool"
    """The result of one tool call, answering ``tool_call_id``."""


class ToolCall(BaseModel):
    """A model's request to call one tool."""

    model_config = ConfigDict(frozen=True)

    id: str
    """Provider-assigned id; the tool's result message answers it."""
    name: str
    """The tool's name."""
    arguments: dict[str, JsonValue] = Field(default_factory=dict)
    """Parsed JSON arguments."""
    raw_arguments: str | None = None
    """The arguments as the model sent them, kept when they were not valid JSON."""


class Message(BaseModel):
    """One message of a conversation; immutable, and JSON round-trips exactly."""

    model_config = ConfigDict(frozen=True)

    role: Role
    """Who the message is from."""
    content: str | dict[str, JsonValue] | list[JsonValue] | None = None
    """Text, or structured JSON content (e.g. a tool's structured result)."""
    name: str | None = None
    """The producing node or agent for assistant messages, the tool for tool results."""
    tool_calls: tuple[ToolCall, ...] = ()
    """Tools the assistant asked to call."""
    tool_call_id: str | None = None
    """For ``Role.TOOL``: the id of the call this message answers."""
    is_error: bool = False
    """For ``Role.TOOL``: the tool failed and ``content`` describes the error."""
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    """Bookkeeping that is not sent to a model (node name, transition markers...)."""
    id: str | None = None
    """An identifier a later update can name to replace or remove the message
    (``add_messages``); given to a message without one when that reducer stores it."""

    @property
    def text(self) -> str:
        """The content as text: structured content is rendered as compact JSON."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return json.dumps(self.content, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def system(cls, content: str, **kwargs: Any) -> Message:
        """A system message."""
        return cls(role=Role.SYSTEM, content=content, **kwargs)

    @classmethod
    def user(cls, content: str | dict[str, Any] | list[Any], **kwargs: Any) -> Message:
        """A user message."""
        return cls(role=Role.USER, content=content, **kwargs)

    @classmethod
    def assistant(
        cls,
        content: str | dict[str, Any] | list[Any] | None = None,
        **kwargs: Any,
    ) -> Message:
        """An assistant message, optionally carrying ``tool_calls``."""
        return cls(role=Role.ASSISTANT, content=content, **kwargs)

    @classmethod
    def tool(
        cls,
        tool_call_id: str,
        content: str | dict[str, Any] | list[Any],
        *,
        name: str | None = None,
        is_error: bool = False,
        **kwargs: Any,
    ) -> Message:
        """The result of one tool call."""
        return cls(
            role=Role.TOOL,
            content=content,
            tool_call_id=tool_call_id,
            name=name,
            is_error=is_error,
            **kwargs,
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict; :meth:`from_dict` restores an equal message."""
        return self.model_dump(mode="json", exclude_defaults=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Message:
        """Rebuild a message written by :meth:`to_dict`."""
        return cls.model_validate(data)


def tool_content(result: Any) -> str | dict[str, Any] | list[Any]:
    """A tool's return value as a tool message's content.

    Text is sent as it is; containers, models and dataclasses as structured JSON
    content; other JSON-able values as their JSON text; anything else as ``str()``.
    """
    if isinstance(result, str):
        return result
    try:
        value = to_jsonable_python(result, inf_nan_mode="null")
    except PydanticSerializationError:
        return str(result)
    if isinstance(value, dict | list):
        return value
    return json.dumps(value, ensure_ascii=False)
