"""OpenAI provider: Chat Completions through the official SDK, for OpenAI and compatible servers.

``base_url`` points the provider at any server that speaks the Chat Completions
wire format (vLLM, Ollama, LM Studio, llama.cpp's server, gateways). Retries are
ours alone: the SDK client is built with ``max_retries=0`` and every attempt goes
through :func:`~selectgraph.providers._retry.call_with_retries`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, TypedDict, TypeVar

import openai
from openai import AsyncOpenAI, AsyncStream
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionAssistantMessageParam,
    ChatCompletionChunk,
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageFunctionToolCall,
    ChatCompletionMessageFunctionToolCallParam,
    ChatCompletionMessageParam,
    ChatCompletionStreamOptionsParam,
    ChatCompletionSystemMessageParam,
    ChatCompletionToolChoiceOptionParam,
    ChatCompletionToolUnionParam,
    ChatCompletionUserMessageParam,
)

from selectgraph.core._errors import ProviderError, ProviderRequestError, ProviderRetryableError
from selectgraph.core._messages import Message, Role, ToolCall
from selectgraph.core._usage import Usage
from selectgraph.providers._base import (
    Completion,
    CompletionRequest,
    StreamChunk,
    StructuredMode,
)
from selectgraph.providers._deadline import DEFAULT_STREAM_IDLE_TIMEOUT, check_timeouts
from selectgraph.providers._errors_map import (
    connection_error,
    malformed_response,
    redact,
    status_error,
    url_secrets,
)
from selectgraph.providers._pricing import cost_usd
from selectgraph.providers._reported_usage import reported_tokens
from selectgraph.providers._retry import ProviderRetry
from selectgraph.providers._sdk import (
    LoopClients,
    OpenStream,
    SDKProvider,
    StreamCut,
    elapsed_ms,
)
from selectgraph.providers._tokens import count_message_tokens, count_text_tokens
from selectgraph.providers._tool_calls import check_tool_choice, forces_tool, named_tool

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence

    from openai.types.shared_params import ResponseFormatJSONSchema

__all__ = ["MaxTokensField", "OpenAIProvider"]

MaxTokensField = Literal["auto", "max_completion_tokens", "max_tokens"]
"""Which request field carries ``CompletionRequest.max_tokens``.

- ``"max_completion_tokens"``: OpenAI's current field; the only one o-series models accept.
- ``"max_tokens"``: the older field, which compatible servers (vLLM, Ollama, ...) all accept.
- ``"auto"``: ``max_completion_tokens`` for OpenAI's own API (``*api.openai.com``),
  ``max_tokens`` for any other server.
"""

_T = TypeVar("_T")

_DEFAULT_RETRY = ProviderRetry()

# Chat Completions accepts a participant ``name`` only in this shape; node names
# with spaces or dots would make the whole request fail, so those are not sent.
_NAME_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")

# Compatible servers that need no key still get an Authorization header, because
# the SDK refuses to build a client without one.
_PLACEHOLDER_KEY = "not-needed"

_FINISH_REASONS: dict[str, str] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}

_log = logging.getLogger(__name__)


class _CreateArgs(TypedDict, total=False):
    """The arguments of one ``chat.completions.create`` call that do not depend on streaming."""

    model: str
    messages: list[ChatCompletionMessageParam]
    tools: list[ChatCompletionToolUnionParam]
    tool_choice: ChatCompletionToolChoiceOptionParam
    response_format: ResponseFormatJSONSchema
    temperature: float
    max_tokens: int
    max_completion_tokens: int
    stop: list[str]
    extra_body: dict[str, object]


class OpenAIProvider(SDKProvider[AsyncOpenAI, AsyncStream[ChatCompletionChunk]]):
    """An LLM provider backed by OpenAI's Chat Completions API (or a compatible server).

    Args:
        api_key: The API key; read from ``OPENAI_API_KEY`` when not given. Optional
            when ``base_url`` points at a server that needs none.
        base_url: Root of a compatible API, e.g. ``"http://localhost:8000/v1"`` for
            vLLM or ``"http://localhost:11434/v1"`` for Ollama.
        default_model: Model used when an agent does not name one.
        timeout: Seconds one attempt may take in total (request, reply body and,
            for a stream, every event until the answer ends) before it is cancelled
            with :class:`~selectgraph.providers.ProviderTimeoutError` (and retried,
            unless streamed text was already handed out).
        stream_idle_timeout: Seconds a stream may go without an event (keep-alive
            comments do not count) before the attempt fails with
            :class:`~selectgraph.providers.ProviderTimeoutError`; ``None`` leaves
            only ``timeout``.
        retry: How transient failures are retried.
        client: A ready-made SDK client to use instead of building one; it is used
            with ``max_retries=0`` and is not closed by :meth:`aclose`.
        sleep: Awaitable sleep between retries, replaceable in tests.
        max_tokens_field: Which request field carries ``max_tokens``.
        price_models: Price each call by the model name the server reports (see
            :func:`~selectgraph.providers.cost_usd`). ``None``: only on OpenAI's own
            API. A compatible server (vLLM, Ollama, llama.cpp's server) answers with
            whatever name it was sent, so pricing it would bill a local model as the
            OpenAI model of that name; its calls are unpriced (``cost_usd`` ``None``,
            counted in ``Usage.unpriced_calls``) unless this is ``True``.

    Raises:
        ProviderRequestError: no API key was given or found and no ``base_url`` is set.
    """

    name = "openai"
    """Provider name used in errors, traces and usage."""
    structured_modes: tuple[StructuredMode, ...] = ("json_schema", "json_object", "instructions")

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str | None = None,
        default_model: str = "gpt-4o-mini",
        timeout: float = 60.0,
        stream_idle_timeout: float | None = DEFAULT_STREAM_IDLE_TIMEOUT,
        retry: ProviderRetry = _DEFAULT_RETRY,
        client: AsyncOpenAI | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        max_tokens_field: MaxTokensField = "auto",
        price_models: bool | None = None,
    ) -> None:
        self.default_model = default_model
        """Model used when a request does not name one."""
        self._retry = retry
        self._sleep = sleep
        self._timeout, self._stream_idle_timeout = check_timeouts(
            self.name, timeout, stream_idle_timeout
        )
        self._clients: LoopClients[AsyncOpenAI] | None = None
        self._shared_client: AsyncOpenAI | None = None
        if client is not None:
            self._shared_client = template = client.with_options(max_retries=0)
        else:
            key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
            if not key:
                if base_url is None:
                    raise ProviderRequestError(
                        "openai: no API key; pass api_key= or set OPENAI_API_KEY "
                        "(a base_url server that needs no key needs neither)",
                        provider=self.name,
                    )
                key = _PLACEHOLDER_KEY

            def build() -> AsyncOpenAI:
                return AsyncOpenAI(api_key=key, base_url=base_url, timeout=timeout, max_retries=0)

            template = build()
            self._clients = LoopClients(build, _close_client, first=template)
        self._base_url = str(template.base_url)
        self._secrets = tuple(
            s for s in (api_key, template.api_key, *url_secrets(self._base_url)) if s
        )
        official = template.base_url.host.endswith("api.openai.com")
        if max_tokens_field == "auto":
            max_tokens_field = "max_completion_tokens" if official else "max_tokens"
        self._max_tokens_field: MaxTokensField = max_tokens_field
        self._priced = official if price_models is None else price_models

    def count_tokens(self, messages: Sequence[Message], model: str | None = None) -> int:
        """Prompt tokens of ``messages``: exact for OpenAI models once tiktoken's encoding loads.

        See :mod:`selectgraph.providers._tokens` for what happens offline.
        """
        return count_message_tokens(messages, model or self.default_model)

    async def complete(self, request: CompletionRequest) -> Completion:
        """Run one chat completion, retrying transient failures.

        A ``required`` or named ``tool_choice`` the server refuses or ignores
        falls back to a prompted JSON tool call (``Completion.tool_mode``).

        Raises:
            ProviderRetryableError: a transient failure survived every retry.
            ProviderRequestError: the request cannot succeed as sent (a named
                tool_choice for a tool it does not offer included), or the
                server's reply is not a chat completion.
        """
        return await self._complete_with_tools(request, self._complete_once)

    async def _complete_once(self, request: CompletionRequest) -> Completion:
        """One completion (structured-output fallback and retries included)."""
        started = time.perf_counter()
        model = request.model or self.default_model

        async def call(mode: StructuredMode | None) -> _Assembler:
            args = self._create_args(request, model, mode)
            return await self._with_retries(lambda: self._create(args, model, mode), model)

        assembler, mode = await self._structured(request, call)
        return assembler.completion(request, latency_ms=elapsed_ms(started), structured_mode=mode)

    async def _create(
        self, args: _CreateArgs, model: str, mode: StructuredMode | None
    ) -> _Assembler:
        """One attempt: the SDK call, and the reply read into an assembler."""
        client = await self._client()
        error: ProviderError
        try:
            response: object = await client.chat.completions.create(**args)
        except openai.OpenAIError as exc:
            error = self._error(exc, model, mode)
        except ValueError as exc:
            # The SDK parses a JSON content type itself; a body cut short fails here.
            error = self._malformed(model, f"the body is not valid JSON ({exc})", garbage=True)
        else:
            problem = _completion_problem(response)
            if problem is None:
                assert isinstance(response, ChatCompletion)
                assembler = _Assembler(
                    model=getattr(response, "model", None) or model,
                    priced=self._priced,
                    provider=self.name,
                )
                problem = assembler.take_completion(response)
                if problem is None:
                    return assembler
            error = self._malformed(model, problem, garbage=isinstance(response, str))
        # Raised here, outside the except clause, so the SDK's exception (whose
        # body may quote a key the server echoed) is not kept as __context__.
        raise error

    async def stream(self, request: CompletionRequest) -> AsyncGenerator[StreamChunk, None]:
        """Run one chat completion as a stream; the last chunk carries the completion.

        Failures before the first text arrives are retried like :meth:`complete`;
        once text has been yielded, a failure is raised at once, since a retry
        would repeat text the caller already has. A stream that ends before any
        choice carried a finish reason was cut short (a server that interrupts
        running requests does that): it is sent again once, with a warning, when
        no other request of this process is in flight to the server; cut again,
        it is an error.

        Raises:
            ProviderRetryableError: a transient failure survived every retry, or
                the stream broke (or was cut short) after text was yielded.
            ProviderRequestError: the request cannot succeed as sent.
        """
        if forces_tool(request) or (self._prompted_tools and request.tools):
            # A tool call has no text to stream; complete() handles its fallbacks.
            completion = await self.complete(request)
            if completion.message.text and not completion.message.tool_calls:
                yield StreamChunk(delta=completion.message.text)
            yield StreamChunk(completion=completion)
            return
        check_tool_choice(request, self.name)
        started = time.perf_counter()
        model = request.model or self.default_model
        include_usage: ChatCompletionStreamOptionsParam = {"include_usage": True}

        async def open_stream(
            args: _CreateArgs, mode: StructuredMode | None
        ) -> OpenStream[AsyncStream[ChatCompletionChunk]]:
            client = await self._client()
            error: ProviderError
            try:
                chunks = await client.chat.completions.create(
                    **args, stream=True, stream_options=include_usage
                )
            except openai.OpenAIError as exc:
                error = self._error(exc, model, mode)
            else:
                assembler = _Assembler(model=model, priced=self._priced, provider=self.name)
                return OpenStream(stream=chunks, assembler=assembler)
            raise error

        async def call(
            mode: StructuredMode | None,
        ) -> OpenStream[AsyncStream[ChatCompletionChunk]]:
            args = self._create_args(request, model, mode)
            return await self._open_streaming(lambda: open_stream(args, mode), model)

        opened, mode = await self._structured(request, call)
        async for chunk in self._relay(opened, model):
            yield chunk
        completion = opened.assembler.completion(
            request, latency_ms=elapsed_ms(started), structured_mode=mode
        )
        yield StreamChunk(completion=completion)

    async def _next_text(
        self, opened: OpenStream[AsyncStream[ChatCompletionChunk]], model: str
    ) -> str | None:
        assembler: _Assembler = opened.assembler
        error: ProviderError
        try:
            chunk: object = await opened.stream.__anext__()
        except StopAsyncIteration:
            if assembler.finish_reason is not None:
                return None
            # A server that interrupts running requests (llama.cpp's, by default)
            # ends the stream this way; the base class retries it once, later.
            raise StreamCut(
                self._malformed(
                    model, "the stream ended before the answer finished (no finish reason)", True
                )
            ) from None
        except openai.OpenAIError as exc:
            error = self._error(exc, model, None)
        except ValueError as exc:
            error = self._malformed(model, f"a stream event is not valid JSON ({exc})", True)
        except (AttributeError, TypeError) as exc:
            error = self._malformed(model, f"a stream event has the wrong shape ({exc})", False)
        else:
            text = assembler.take_chunk(chunk)
            if text is not None:
                return text
            error = self._malformed(model, "a stream event is not a chat completion chunk", False)
        raise error

    async def _close_stream(self, stream: AsyncStream[ChatCompletionChunk]) -> None:
        await stream.close()

    def _malformed(self, model: str, what: str, garbage: bool) -> ProviderError:
        return malformed_response(
            provider=self.name, model=model, what=what, garbage=garbage, secrets=self._secrets
        )

    def _create_args(
        self, request: CompletionRequest, model: str, mode: StructuredMode | None
    ) -> _CreateArgs:
        args: _CreateArgs = {
            "model": model,
            "messages": [_message_param(m, i) for i, m in enumerate(request.messages)],
        }
        if request.tools:
            args["tools"] = [
                _tool_param(t.name, t.description, t.parameters) for t in request.tools
            ]
            if request.tool_choice is not None:
                args["tool_choice"] = _tool_choice_param(request)
        extra: dict[str, object] = dict(request.extra)
        response_format = request.response_format
        if response_format is not None and mode == "json_schema":
            args["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": response_format.name,
                    "schema": response_format.json_schema,
                    "strict": response_format.strict,
                },
            }
        elif response_format is not None and mode == "json_object":
            # JSON mode has no typed schema field; servers that constrain JSON mode
            # to a schema (llama.cpp, vLLM) read it from ``response_format.schema``.
            extra["response_format"] = {
                "type": "json_object",
                "schema": response_format.json_schema,
            }
        if response_format is not None and mode != "json_schema":
            args["messages"] = _with_schema_instructions(
                args["messages"], response_format.json_schema
            )
        if request.temperature is not None:
            args["temperature"] = request.temperature
        if request.max_tokens is not None:
            if self._max_tokens_field == "max_tokens":
                args["max_tokens"] = request.max_tokens
            else:
                args["max_completion_tokens"] = request.max_tokens
        if request.stop:
            args["stop"] = list(request.stop)
        if extra:
            args["extra_body"] = extra
        return args

    def _error(
        self, exc: openai.OpenAIError, model: str, mode: StructuredMode | None
    ) -> ProviderError:
        if isinstance(exc, openai.APIStatusError):
            server_message = _server_message(exc.body)
            error = status_error(
                provider=self.name,
                status=exc.status_code,
                model=model,
                server_message=server_message,
                headers=exc.response.headers,
                request_id=exc.request_id,
                secrets=self._secrets,
            )
            return self._rejection(error, server_message, mode)
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__
            reason = f"{type(cause).__name__}: {cause}" if cause is not None else exc.message
            return connection_error(
                provider=self.name,
                model=model,
                reason=reason,
                timed_out=isinstance(exc, openai.APITimeoutError),
                secrets=self._secrets,
            )
        if isinstance(exc, openai.APIResponseValidationError):
            message = f"openai: the reply for model {model!r} did not match the API schema"
            return ProviderRequestError(redact(message, self._secrets), provider=self.name)
        if isinstance(exc, openai.APIError):
            # An error event inside an event stream: the server failed mid-answer.
            message = f"openai: the stream for model {model!r} reported an error: {exc.message}"
            return ProviderRetryableError(redact(message, self._secrets), provider=self.name)
        message = f"openai: request for model {model!r} failed: {type(exc).__name__}: {exc}"
        return ProviderRequestError(redact(message, self._secrets), provider=self.name)


async def _close_client(client: AsyncOpenAI) -> None:
    await client.close()


@dataclass(slots=True)
class _PendingToolCall:
    """A tool call being assembled from stream deltas."""

    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Assembler:
    """Collects a completion's text, tool calls, finish reason and usage."""

    model: str
    priced: bool = True
    """Whether the model name is priced (``False``: a compatible server's name means nothing)."""
    text: list[str] = field(default_factory=list)
    tool_calls: dict[int, _PendingToolCall] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: tuple[int, int] | None = None
    """The (input, output) token counts the server reported, when it reported possible ones."""
    refused: bool = False
    provider: str = "openai"

    def take_completion(self, response: ChatCompletion) -> str | None:
        """Take a whole (non-streamed) response; returns what is wrong with it, if anything."""
        try:
            self._take_completion(response)
        except (AttributeError, TypeError, ValueError) as exc:
            # The SDK builds replies without validating them; a field of the wrong
            # type surfaces only when read.
            return f"a field has the wrong shape ({type(exc).__name__}: {exc})"
        return None

    def _take_completion(self, response: ChatCompletion) -> None:
        self.usage = _usage_of(response, self.provider)
        choice = response.choices[0]
        self.finish_reason = choice.finish_reason
        message = choice.message
        if message.content is not None and not isinstance(message.content, str):
            # str() would turn a number into an answer nobody sent.
            kind = type(message.content).__name__
            raise TypeError(f"choices[0].message.content is {kind}, not a string")
        if message.content:
            self.text.append(message.content)
        elif getattr(message, "refusal", None):
            self.text.append(str(message.refusal))
            self.refused = True
        for index, call in enumerate(getattr(message, "tool_calls", None) or ()):
            if isinstance(call, ChatCompletionMessageFunctionToolCall):
                self.tool_calls[index] = _PendingToolCall(
                    id=call.id, name=call.function.name, arguments=[call.function.arguments]
                )

    def take_chunk(self, chunk: object) -> str | None:
        """Take one stream chunk; returns the text it adds, or ``None`` if it is not a chunk."""
        if not isinstance(chunk, ChatCompletionChunk) or not isinstance(
            getattr(chunk, "choices", None), list
        ):
            return None
        try:
            return self._take_chunk(chunk)
        except (AttributeError, TypeError, ValueError):
            return None

    def _take_chunk(self, chunk: ChatCompletionChunk) -> str:
        model = getattr(chunk, "model", None)
        if model:
            self.model = model
        usage = _usage_of(chunk, self.provider)
        if usage is not None:
            self.usage = usage
        added = ""
        for choice in chunk.choices:
            if getattr(choice, "index", 0) != 0:
                continue
            delta = choice.delta
            if delta.content:
                added += delta.content
            elif getattr(delta, "refusal", None):
                added += str(delta.refusal)
                self.refused = True
            for call in getattr(delta, "tool_calls", None) or ():
                pending = self.tool_calls.setdefault(call.index, _PendingToolCall())
                if call.id:
                    pending.id = call.id
                if call.function is not None:
                    # Names arrive whole (some servers repeat them in every delta);
                    # arguments arrive in pieces.
                    if call.function.name:
                        pending.name = call.function.name
                    if call.function.arguments:
                        pending.arguments.append(call.function.arguments)
            if getattr(choice, "finish_reason", None) is not None:
                self.finish_reason = choice.finish_reason
        if added:
            self.text.append(added)
        return added

    def completion(
        self,
        request: CompletionRequest,
        *,
        latency_ms: float,
        structured_mode: StructuredMode | None = None,
    ) -> Completion:
        """The finished completion, with usage priced for the model that answered (if priced)."""
        text = "".join(self.text)
        calls = tuple(
            _tool_call(p.id, p.name, "".join(p.arguments))
            for _, p in sorted(self.tool_calls.items())
        )
        if self.usage is not None:
            input_tokens, output_tokens = self.usage
        else:
            # Some compatible servers report no (possible) usage; budgets still need a number.
            input_tokens = count_message_tokens(request.messages, self.model)
            output_tokens = count_text_tokens(
                text + "".join("".join(p.arguments) for p in self.tool_calls.values()), self.model
            )
        finish = self.finish_reason
        return Completion(
            message=Message.assistant(
                text if text or not calls else None,
                tool_calls=calls,
                metadata={"refusal": True} if self.refused else {},
            ),
            usage=Usage(
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                cost_usd=(
                    cost_usd(self.model, input_tokens, output_tokens) if self.priced else None
                ),
                calls=1,
            ),
            model=self.model,
            finish_reason=_FINISH_REASONS.get(finish, finish) if finish is not None else None,
            latency_ms=latency_ms,
            structured_mode=structured_mode,
        )


def _completion_problem(response: object) -> str | None:
    """What keeps ``response`` (as the SDK returned it) from being a chat completion."""
    if isinstance(response, str):
        # The SDK hands back the text of a body that is not JSON (an HTML error page).
        return f"the body is not a JSON object: {response[:80]!r}"
    if not isinstance(response, ChatCompletion):
        kind = "null" if response is None else type(response).__name__
        return f"expected a chat completion object, got {kind}"
    choices = getattr(response, "choices", None)
    if not isinstance(choices, list) or not choices:
        # An empty object would otherwise read as an empty answer.
        return "the reply has no choices"
    if getattr(choices[0], "message", None) is None:
        return "the first choice has no message"
    return None


def _usage_of(reply: ChatCompletion | ChatCompletionChunk, provider: str) -> tuple[int, int] | None:
    """The reply's (input, output) token counts; ``None`` when it has no possible ones.

    Raises:
        TypeError: a count is there but not an integer (a malformed reply).
    """
    usage = getattr(reply, "usage", None)
    if usage is None:
        return None
    prompt = reported_tokens(getattr(usage, "prompt_tokens", None), "usage.prompt_tokens", provider)
    completion = reported_tokens(
        getattr(usage, "completion_tokens", None), "usage.completion_tokens", provider
    )
    if prompt is None or completion is None:
        return None  # counted locally: half a report is no report
    return prompt, completion


def _with_schema_instructions(
    messages: list[ChatCompletionMessageParam], schema: dict[str, object]
) -> list[ChatCompletionMessageParam]:
    """``messages`` with a system message asking for JSON matching ``schema``.

    Without a json_schema response_format the schema reaches the model only through
    the prompt. Agents already put it in their system prompt (this exact JSON), so
    it is added only when no system message carries it.
    """
    dumped = json.dumps(schema, ensure_ascii=False)
    for message in messages:
        if message["role"] == "system" and dumped in str(message.get("content", "")):
            return messages
    text = (
        f"Answer with a single JSON object, and nothing else, that matches this JSON schema:\n"
        f"{dumped}"
    )
    first = messages[0] if messages else None
    if first is not None and first["role"] == "system" and isinstance(first["content"], str):
        # Merged into the leading system message: some chat templates allow only one.
        merged: ChatCompletionSystemMessageParam = {
            **first,
            "content": f"{first['content']}\n\n{text}",
        }
        return [merged, *messages[1:]]
    instruction: ChatCompletionSystemMessageParam = {"role": "system", "content": text}
    return [instruction, *messages]


def _message_param(message: Message, index: int) -> ChatCompletionMessageParam:
    name = message.name if message.name and _NAME_PATTERN.fullmatch(message.name) else None
    if message.role is Role.SYSTEM:
        system: ChatCompletionSystemMessageParam = {"role": "system", "content": message.text}
        if name:
            system["name"] = name
        return system
    if message.role is Role.USER:
        user: ChatCompletionUserMessageParam = {"role": "user", "content": message.text}
        if name:
            user["name"] = name
        return user
    if message.role is Role.ASSISTANT:
        # Content goes even when empty: chat templates of compatible servers
        # (llama.cpp's) fail with HTTP 500 on an assistant message without it.
        assistant: ChatCompletionAssistantMessageParam = {
            "role": "assistant",
            "content": message.text,
        }
        if message.tool_calls:
            assistant["tool_calls"] = [_tool_call_param(c) for c in message.tool_calls]
        if name:
            assistant["name"] = name
        return assistant
    if message.tool_call_id is None:
        raise ProviderRequestError(
            f"openai: message {index} is a tool result without tool_call_id; "
            "set it to the id of the tool call it answers",
            provider=OpenAIProvider.name,
        )
    return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.text}


def _tool_call_param(call: ToolCall) -> ChatCompletionMessageFunctionToolCallParam:
    arguments = call.raw_arguments
    if arguments is None:
        arguments = json.dumps(call.arguments, ensure_ascii=False)
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": arguments},
    }


def _tool_choice_param(request: CompletionRequest) -> ChatCompletionToolChoiceOptionParam:
    name = named_tool(request.tool_choice)
    if name is not None:
        return {"type": "function", "function": {"name": name}}
    choice = request.tool_choice
    assert isinstance(choice, str)
    return choice


def _tool_param(
    name: str, description: str, parameters: dict[str, object]
) -> ChatCompletionFunctionToolParam:
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


def _tool_call(call_id: str, name: str, raw: str) -> ToolCall:
    """A tool call whose arguments are ``raw`` JSON; kept raw when they do not parse."""
    try:
        parsed: object = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError:
        parsed = None
    if isinstance(parsed, dict):
        return ToolCall(id=call_id, name=name, arguments=parsed)
    return ToolCall(id=call_id, name=name, raw_arguments=raw)


def _server_message(body: object) -> str | None:
    """What an OpenAI-style error body says went wrong (``error.message``)."""
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else inner
        return message if isinstance(message, str) else None
    if isinstance(body, str):
        return body
    return None
