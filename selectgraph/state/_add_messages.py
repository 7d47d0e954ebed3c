"""A conversation field: the ``add_messages`` reducer and the ready ``MessagesState`` schema.

LangGraph's semantics: an update's messages are appended, a message whose id is
already in the list replaces it where it stands, and ``RemoveMessage(id)`` deletes
one (``RemoveMessage(REMOVE_ALL_MESSAGES)`` clears the list). Messages may be given
as :class:`~selectgraph.Message`, as ``{"role": ..., "content": ...}`` dicts, as
``(role, content)`` pairs or as plain strings (a user message); each is stored as a
Message, and one without an id is given one, so later updates can name it.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Annotated, Any, Final, TypedDict

from pydantic import BaseModel, ConfigDict

from selectgraph.core._messages import Message, Role
from selectgraph.core._serialization import library_type
from selectgraph.state._reducers import Reducer

__all__ = ["REMOVE_ALL_MESSAGES", "MessagesState", "RemoveMessage", "add_messages"]

REMOVE_ALL_MESSAGES: Final = "__remove_all__"
"""The id of a RemoveMessage that clears the whole list."""

_ROLES: Final = {
    "user": Role.USER,
    "human": Role.USER,
    "assistant": Role.ASSISTANT,
    "ai": Role.ASSISTANT,
    "system": Role.SYSTEM,
    "tool": Role.TOOL,
}


@library_type
class RemoveMessage(BaseModel):
    """In an ``add_messages`` update: delete the message with this id."""

    model_config = ConfigDict(frozen=True)

    id: str
    """The message to delete, or REMOVE_ALL_MESSAGES for all of them."""


def _as_message(item: Any) -> Message | RemoveMessage:
    if isinstance(item, Message | RemoveMessage):
        message = item
    elif isinstance(item, str):
        message = Message.user(item)
    elif isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
        message = Message(role=_role(item[0]), content=item[1])
    elif isinstance(item, Mapping):
        fields = dict(item)
        role = fields.pop("role", None) or fields.pop("type", None)
        if not isinstance(role, str):
            raise TypeError(f"a message dict needs a 'role' (user, assistant...), got {item!r}")
        message = Message(role=_role(role), **fields)
    else:
        raise TypeError(
            "add_messages takes Messages, {'role': ..., 'content': ...} dicts, (role, content) "
            f"pairs, strings or RemoveMessage; got {type(item).__name__}"
        )
    if isinstance(message, Message) and message.id is None:
        message = message.model_copy(update={"id": uuid.uuid4().hex})
    return message


def _role(name: str) -> Role:
    role = _ROLES.get(name.lower())
    if role is None:
        raise TypeError(f"unknown message role {name!r}; use one of {', '.join(_ROLES)}")
    return role


class _AddMessages(Reducer):
    name = "add_messages"
    round_trip_idempotent = True  # merging the merged list again replaces each by itself

    def __call__(self, current: Any, update: Any) -> list[Message]:
        merged: list[Message] = [_as_message(m) for m in current or ()]  # type: ignore[misc]
        items = update if isinstance(update, list | tuple) else [update]
        position = {m.id: index for index, m in enumerate(merged)}
        for item in items:
            message = _as_message(item)
            if isinstance(message, RemoveMessage):
                if message.id == REMOVE_ALL_MESSAGES:
                    merged, position = [], {}
                    continue
                if message.id not in position:
                    raise ValueError(f"RemoveMessage({message.id!r}): no message has that id")
                merged = [m for m in merged if m.id != message.id]
                position = {m.id: index for index, m in enumerate(merged)}
            elif message.id in position:
                merged[position[message.id]] = message
            else:
                position[message.id] = len(merged)
                merged.append(message)
        return merged


add_messages: Final[Reducer] = _AddMessages()
"""Append messages, replace those whose id is already there, delete on RemoveMessage."""


class MessagesState(TypedDict):
    """A state schema with one field, ``messages``, merged by ``add_messages``.

    Use it as it is (``AgentGraph("chat", state_schema=MessagesState)``) or
    subclass it to add fields.
    """

    messages: Annotated[list[Message], add_messages]
