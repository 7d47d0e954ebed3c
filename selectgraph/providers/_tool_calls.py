"""Tool choice: named and required choices checked, and tool calls a model writes as JSON text.

Providers whose API has tool calling pass ``tool_choice`` through. Where it
does not (the in-process llama.cpp provider, a compatible server that refuses or
ignores ``required`` or a named choice), the model is asked for the call as one
JSON object, ``{"name": ..., "arguments": {...}}``, whose schema is built here
from the tools' own schemas: a grammar holds a local model to it, and a server
gets it as a structured-output request. The text is parsed (broken JSON is
repaired with ``json-repair``), validated against the chosen tool's schema, and
turned into a :class:`~selectgraph.core._messages.ToolCall`.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from typing import Any

import json_repair
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from selectgraph.core._errors import ProviderRequestError
from selectgraph.core._messages import Message, Role, ToolCall
from selectgraph.providers._base import CompletionRequest, ToolChoice, ToolSpec

__all__ = [
    "ToolCallInvalid",
    "call_schema",
    "check_tool_choice",
    "chosen_tools",
    "forces_tool",
    "is_tool_choice_rejection",
    "named_tool",
    "parse_tool_call",
    "text_history",
    "tool_instructions",
    "with_system",
]

_ids = itertools.count(1)


class ToolCallInvalid(ProviderRequestError):
    """A model asked for a tool call as JSON text did not write a valid one, even when re-asked."""


def named_tool(choice: ToolChoice | None) -> str | None:
    """The tool a named choice names, or ``None`` for ``auto``/``required``/``none``."""
    if isinstance(choice, dict):
        return choice["name"]
    return None


def forces_tool(request: CompletionRequest) -> bool:
    """Whether ``request`` requires a tool call (``required`` or a named choice, with tools)."""
    return bool(request.tools) and (
        request.tool_choice == "required" or named_tool(request.tool_choice) is not None
    )


def check_tool_choice(request: CompletionRequest, provider: str) -> None:
    """Refuse a ``tool_choice`` the request's tools cannot satisfy.

    Raises:
        ProviderRequestError: a named choice names a tool the request does not
            offer (the message lists those it does), or the choice is not one of
            ``auto``, ``required``, ``none`` or ``{"type": "function", "name": ...}``.
    """
    choice = request.tool_choice
    if choice is None or choice in ("auto", "required", "none"):
        return
    if not isinstance(choice, dict) or choice.get("type") != "function" or not choice.get("name"):
        raise ProviderRequestError(
            f"{provider}: tool_choice {choice!r} is not one of 'auto', 'required', 'none' "
            "or {'type': 'function', 'name': <tool name>}",
            provider=provider,
        )
    offered = [tool.name for tool in request.tools]
    if choice["name"] not in offered:
        raise ProviderRequestError(
            f"{provider}: tool_choice names tool {choice['name']!r}, which the request does "
            f"not offer; its tools are: {', '.join(offered) or 'none'}",
            provider=provider,
        )


def chosen_tools(request: CompletionRequest) -> tuple[ToolSpec, ...]:
    """The tools the model may call: the named one, or all of them."""
    name = named_tool(request.tool_choice)
    if name is None:
        return request.tools
    return tuple(tool for tool in request.tools if tool.name == name)


def call_schema(tools: Sequence[ToolSpec]) -> dict[str, Any]:
    """The JSON schema of one call of one of ``tools``: ``{"name": ..., "arguments": {...}}``."""
    options = [
        {
            "type": "object",
            "properties": {
                "name": {"type": "string", "enum": [tool.name]},
                "arguments": tool.parameters,
            },
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for tool in tools
    ]
    return options[0] if len(options) == 1 else {"anyOf": options}


def tool_instructions(tools: Sequence[ToolSpec], *, forced: bool) -> str:
    """A system-prompt section describing ``tools`` and how to call one as JSON."""
    lines = ["You can call these tools:"]
    for tool in tools:
        lines.append(
            f"- {tool.name}: {tool.description} Arguments (JSON schema): "
            f"{json.dumps(tool.parameters, ensure_ascii=False)}"
        )
    example = json.dumps({"name": tools[0].name, "arguments": {}})
    if forced:
        lines.append(
            f"Call one now: answer with only a JSON object such as {example}, with the "
            "arguments filled in from the conversation."
        )
    else:
        lines.append(
            f"To call a tool, answer with only a JSON object such as {example}. "
            "When a tool's result is in the conversation, answer the user with it."
        )
    return "\n".join(lines)


def parse_tool_call(text: str, tools: Sequence[ToolSpec]) -> tuple[ToolCall | None, str]:
    """The tool call ``text`` writes, or what is wrong with it.

    Broken JSON (a missing brace, single quotes, trailing text) is repaired
    first; a bare arguments object is accepted when only one tool may be called.

    Returns:
        ``(call, "")`` for a valid call, ``(None, problem)`` otherwise.
    """
    try:
        value: object = json_repair.loads(text)
    except Exception as exc:  # the repairer raises assorted errors on hopeless input
        return None, f"the answer is not JSON ({type(exc).__name__}: {exc})"
    if not isinstance(value, dict):
        return None, f"the answer is not a JSON object: {text[:120]!r}"
    by_name = {tool.name: tool for tool in tools}
    name = value.get("name")
    arguments = value.get("arguments", value.get("parameters"))
    if name is None and len(tools) == 1 and "arguments" not in value:
        name, arguments = tools[0].name, value
    if not isinstance(name, str) or name not in by_name:
        return None, (f"'name' must be one of {', '.join(map(repr, by_name))}, got {name!r}")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return None, f"'arguments' must be a JSON object, got {arguments!r}"
    problem = _schema_problem(arguments, by_name[name].parameters)
    if problem:
        return None, f"the arguments of {name!r} do not match its schema: {problem}"
    return ToolCall(id=f"call_text_{next(_ids)}", name=name, arguments=arguments), ""


def _schema_problem(arguments: dict[str, Any], schema: dict[str, Any]) -> str:
    try:
        validator = Draft202012Validator(schema)
        errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.path))
    except SchemaError:  # pragma: no cover - tool schemas come from Pydantic
        return ""
    return "; ".join(
        f"{'.'.join(str(p) for p in error.path) or 'arguments'}: {error.message}"
        for error in errors[:3]
    )


def text_history(messages: Sequence[Message]) -> tuple[Message, ...]:
    """``messages`` with tool calls and results written as plain text.

    For a model that has no tool-calling format of its own. Each result becomes
    a user message stating the call and what it returned, followed by the question
    it serves (``multiply(a=6, b=7) returned 42. Use this result to answer: ...``);
    the assistant's call itself is dropped, since a small model shown its own JSON
    call tends to write it again instead of answering.
    """
    out: list[Message] = []
    calls: dict[str, ToolCall] = {}
    question = ""
    for message in messages:
        if message.role is Role.USER:
            question = message.text
        if message.role is Role.ASSISTANT and message.tool_calls:
            calls.update((call.id, call) for call in message.tool_calls)
            if message.text:
                out.append(Message.assistant(message.text, name=message.name))
        elif message.role is Role.TOOL:
            call = calls.get(message.tool_call_id or "")
            shown = _call_text(call) if call is not None else (message.name or "the tool")
            verb = "failed" if message.is_error else "returned"
            ask = f" Use this result to answer: {question}" if question else ""
            out.append(Message.user(f"{shown} {verb} {message.text}.{ask}"))
        else:
            out.append(message)
    return tuple(out)


def _call_text(call: ToolCall) -> str:
    arguments = ", ".join(
        f"{name}={json.dumps(value, ensure_ascii=False)}" for name, value in call.arguments.items()
    )
    return f"{call.name}({arguments})"


def is_tool_choice_rejection(status: int | None, message: str) -> bool:
    """Whether an error status refuses the request's tool choice (not the request itself).

    Only an error that names tools counts: a 400 for a prompt past the context
    window, or an unknown model, is the request's own failure, not a refusal.
    """
    if status is None:
        return False
    return (status in (400, 422) or status >= 500) and "tool" in message.lower()


def with_system(messages: Sequence[Message], text: str) -> tuple[Message, ...]:
    """``messages`` with ``text`` added to the leading system message (or as one)."""
    if messages and messages[0].role is Role.SYSTEM:
        first = messages[0]
        merged = first.model_copy(update={"content": f"{first.text}\n\n{text}".strip()})
        return (merged, *messages[1:])
    return (Message.system(text), *messages)
