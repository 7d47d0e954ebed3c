"""Required and named tool calls on servers that refuse or ignore them: ask for JSON text instead.

An OpenAI-compatible server may not support ``tool_choice="required"`` or a
named choice: llama.cpp's server ignores ``required`` (the model answers in
text), others answer HTTP 400 or 500. :class:`ToolChoiceFallback` sends the
choice natively first; when the server refuses it, or answers without the tool
call it was told to make, the provider switches to the prompted mode for good:
the model is asked for the call as one JSON object (the call's schema goes as a
structured-output request, which llama.cpp's server enforces with a grammar),
the text is repaired and validated against the tool's schema, and an invalid
call is re-asked once with the problem. The completion says which mode produced
it (:attr:`~selectgraph.providers.Completion.tool_mode`), as structured output
does.

Once prompted, later requests render earlier tool calls and results as plain
text, since a server without tool calling cannot show them to the model.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable

from selectgraph.core._errors import ProviderRequestError
from selectgraph.core._messages import Message
from selectgraph.core._usage import NO_USAGE, Usage
from selectgraph.providers._base import Completion, CompletionRequest, ResponseFormat
from selectgraph.providers._tool_calls import (
    ToolCallInvalid,
    call_schema,
    check_tool_choice,
    chosen_tools,
    forces_tool,
    is_tool_choice_rejection,
    parse_tool_call,
    text_history,
    tool_instructions,
    with_system,
)

__all__ = ["ToolChoiceFallback"]

_log = logging.getLogger("selectgraph.providers")

Complete = Callable[[CompletionRequest], Awaitable[Completion]]


class ToolChoiceFallback:
    """Mixin of SDK providers: forced tool calls natively, or as validated JSON text.

    The class using it has ``name`` and calls :meth:`_complete_with_tools` with
    its own one-call completion function.
    """

    name: str
    _prompted_tools: bool = False
    """Whether this provider's server refused (or ignored) a forced tool choice."""

    @property
    def tool_mode(self) -> str:
        """``"prompted"`` once the server refused a forced tool choice, else ``"native"``."""
        return "prompted" if self._prompted_tools else "native"

    async def _complete_with_tools(
        self, request: CompletionRequest, native: Complete
    ) -> Completion:
        """``native(request)``, with forced tool choices falling back to prompted JSON calls.

        Raises:
            ProviderRequestError: the tool choice names a tool the request does not offer.
            ToolCallInvalid: in the prompted mode, the model wrote no valid call
                even when re-asked.
        """
        check_tool_choice(request, self.name)
        if not forces_tool(request):
            if self._prompted_tools and request.tools:
                request = dataclasses.replace(request, messages=text_history(request.messages))
            return await native(request)
        if self._prompted_tools:
            return await self._prompted_call(request, native)
        refusal = ""
        spent = NO_USAGE  # what a native answer without a tool call cost
        try:
            completion = await native(request)
        except ProviderRequestError as error:
            if not is_tool_choice_rejection(error.status_code, str(error)):
                raise
            refusal = str(error)
        else:
            if completion.message.tool_calls:
                return dataclasses.replace(completion, tool_mode="native")
            refusal = "the server answered without calling a tool"
            spent = completion.usage
        _log.warning(
            "%s: tool_choice %r was not honoured (%s); asking for tool calls as JSON "
            "text from now on",
            self.name,
            request.tool_choice,
            refusal,
        )
        prompted = await self._prompted_call(request, native, spent)
        self._prompted_tools = True  # once the prompted way has worked
        return prompted

    async def _prompted_call(
        self, request: CompletionRequest, native: Complete, spent: Usage = NO_USAGE
    ) -> Completion:
        started = time.perf_counter()
        tools = chosen_tools(request)
        messages = with_system(
            text_history(request.messages), tool_instructions(tools, forced=True)
        )
        ask = dataclasses.replace(
            request,
            messages=messages,
            tools=(),
            tool_choice=None,
            response_format=ResponseFormat(
                name="tool_call", json_schema=call_schema(tools), strict=False
            ),
        )
        completion = await native(ask)
        usage = spent + completion.usage
        call, problem = parse_tool_call(completion.message.text, tools)
        if call is None:
            again = dataclasses.replace(
                ask,
                messages=(
                    *messages,
                    Message.assistant(completion.message.text),
                    Message.user(
                        f"That tool call is invalid: {problem}. Answer again with only the "
                        "corrected JSON object."
                    ),
                ),
            )
            completion = await native(again)
            usage = usage + completion.usage
            call, problem = parse_tool_call(completion.message.text, tools)
        if call is None:
            names = ", ".join(tool.name for tool in tools)
            raise ToolCallInvalid(
                f"{self.name}: the model did not write a valid call of {names} as JSON "
                f"text, even when re-asked: {problem}",
                provider=self.name,
            )
        return Completion(
            message=Message.assistant(None, tool_calls=(call,)),
            usage=usage,
            model=completion.model,
            finish_reason="tool_calls",
            latency_ms=(time.perf_counter() - started) * 1000,
            structured_mode=completion.structured_mode,
            tool_mode="prompted",
        )
