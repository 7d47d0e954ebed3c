"""Anthropic provider: the Messages API through the official SDK.

How selectgraph's messages map onto the Messages API
    System messages go, joined by blank lines, to the ``system`` parameter.
    Assistant tool calls become ``tool_use`` blocks, and tool results become
    ``tool_result`` blocks in a user turn; consecutive turns of one role are merged
    into one, as the API expects. ``max_tokens`` is required by the API, so
    requests without one use the provider's ``default_max_tokens``. Structured
    output uses the API's native ``output_config.format`` (a JSON schema the
    answer is constrained to), and the JSON text comes back as the content.
    ``temperature`` has no typed parameter in this SDK, so it is sent as a raw body
    field, like everything in ``CompletionRequest.extra``.

Token counting
    Anthropic publishes no local tokenizer, and ``Provider.count_tokens`` is a
    synchronous, offline call, so :meth:`AnthropicProvider.count_tokens` returns an
    estimate: about one token per four UTF-8 bytes of each field, plus OpenAI-style
    chat framing (see :mod:`selectgraph.providers._tokens`). Use it for budgets
    and trimming, not billing; the usage on each :class:`Completion` is the
    server's own count.

Retries are ours alone: the SDK client is built with ``max_retries=0`` and every
attempt goes through :func:`~selectgraph.providers._retry.call_with_retries`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict, TypeVar

import anthropic
import httpx2
from anthropic import AsyncAnthropic, AsyncStream
from anthropic.types import Message as AnthropicMessageType
from anthropic.types import RawMessageStreamEvent

from selectgraph.core._errors import ProviderError, ProviderRequestError
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
from selectgraph.providers._sdk import LoopClients, OpenStream, SDKProvider, elapsed_ms
from selectgraph.providers._tokens import estimate_message_tokens, estimate_text_tokens
from selectgraph.providers._tool_calls import check_tool_choice, forces_tool, named_tool

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence

    from anthropic.types import (
        ContentBlockParam,
        MessageParam,
        OutputConfigParam,
        TextBlockParam,
        ToolChoiceParam,
        ToolParam,
        ToolResultBlockParam,
        ToolUseBlockParam,
    )
    from anthropic.types import (
        Message as AnthropicMessage,
    )

__all__ = ["AnthropicProvider"]

_T = TypeVar("_T")

_DEFAULT_RETRY = ProviderRetry()

_FINISH_REASONS: dict[str, str] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
    "pause_turn": "pause",
}

_TOOL_CHOICES: dict[str, ToolChoiceParam] = {
    "auto": {"type": "auto"},
    "required": {"type": "any"},
    "none": {"type": "none"},
}

# An error event inside a stream arrives with the stream's HTTP 200, so its
# ``error.type`` is mapped to the status the same failure has outside a stream.
_STATUS_OF_ERROR_TYPE: dict[str, int] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}

_log = logging.getLogger(__name__)


class _CreateArgs(TypedDict, total=False):
    """The arguments of one ``messages.create`` call that do not depend on streaming."""

    model: str
    max_tokens: int
    messages: list[MessageParam]
    system: str
    tools: list[ToolParam]
    tool_choice: ToolChoiceParam
    output_config: OutputConfigParam
    stop_sequences: list[str]
    extra_body: dict[str, object]


class AnthropicProvider(SDKProvider[AsyncAnthropic, AsyncStream[RawMessageStreamEvent]]):
    """An LLM provider backed by Anthropic's Messages API.

    Args:
        api_key: The API key; when not given the SDK reads ``ANTHROPIC_API_KEY``
            (or its other credential sources, such as ``ANTHROPIC_AUTH_TOKEN``).
            A gateway that needs no key still needs some string here.
        base_url: Root of the API, for proxies and gateways.
        default_model: Model used when an agent does not name one.
        default_max_tokens: ``max_tokens`` for requests that set none; the API
            requires a value.
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
        price_models: Price each call by the model name the server reports (see
            :func:`~selectgraph.providers.cost_usd`). ``None``: only on Anthropic's
            own API (``*.anthropic.com``); calls to any other server are unpriced
            (``cost_usd`` ``None``, counted in ``Usage.unpriced_calls``) unless
            this is ``True``, since such a server may answer any model name.

    Raises:
        ProviderRequestError: no API key or other credential was given or found, or
            a configured credentials profile could not be loaded.
    """

    name = "anthropic"
    """Provider name used in errors, traces and usage."""
    structured_modes: tuple[StructuredMode, ...] = ("json_schema", "instructions")

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str | None = None,
        default_model: str = "claude-haiku-4-5",
        default_max_tokens: int = 4096,
        timeout: float = 60.0,
        stream_idle_timeout: float | None = DEFAULT_STREAM_IDLE_TIMEOUT,
        retry: ProviderRetry = _DEFAULT_RETRY,
        client: AsyncAnthropic | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        price_models: bool | None = None,
    ) -> None:
        self.default_model = default_model
        """Model used when a request does not name one."""
        self.default_max_tokens = default_max_tokens
        """``max_tokens`` sent when a request sets none."""
        self._retry = retry
        self._sleep = sleep
        self._timeout, self._stream_idle_timeout = check_timeouts(
            self.name, timeout, stream_idle_timeout
        )
        self._clients: LoopClients[AsyncAnthropic] | None = None
        self._shared_client: AsyncAnthropic | None = None
        if client is not None:
            self._shared_client = template = client.with_options(max_retries=0)
        else:

            def build() -> AsyncAnthropic:
                return AsyncAnthropic(
                    api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0
                )

            failure: str | None = None
            try:
                template = build()
            except anthropic.AnthropicError as exc:
                # A credentials profile that is configured but broken (missing file,
                # bad JSON) surfaces here, before any request.
                failure = f"anthropic: cannot load credentials: {exc}"
            if failure is not None:
                # Raised outside the except clause: the SDK's exception stays unlinked.
                secrets = (*((api_key,) if api_key else ()), *url_secrets(base_url))
                raise ProviderRequestError(redact(failure, secrets), provider=self.name)
            # Without credentials the SDK fails each request with a bare TypeError;
            # say so once, here, in terms of what to set.
            if not (template.api_key or template.auth_token or template.credentials):
                raise ProviderRequestError(
                    "anthropic: no API key; pass api_key= or set ANTHROPIC_API_KEY",
                    provider=self.name,
                )
            self._clients = LoopClients(build, _close_client, first=template)
        self._base_url = str(template.base_url)
        official = template.base_url.host.endswith("anthropic.com")
        self._priced = official if price_models is None else price_models
        self._secrets = tuple(
            s
            for s in (api_key, template.api_key, template.auth_token, *url_secrets(self._base_url))
            if s
        )

    def count_tokens(self, messages: Sequence[Message], model: str | None = None) -> int:
        """An estimate of the prompt tokens of ``messages`` (no local Claude tokenizer exists)."""
        return estimate_message_tokens(messages)

    async def complete(self, request: CompletionRequest) -> Completion:
        """Run one Messages API call, retrying transient failures.

        A ``required`` or named ``tool_choice`` the server refuses or ignores
        falls back to a prompted JSON tool call (``Completion.tool_mode``).

        Raises:
            ProviderRetryableError: a transient failure survived every retry.
            ProviderRequestError: the request cannot succeed as sent (a named
                tool_choice for a tool it does not offer included), or the
                server's reply is not a message.
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
            response: object = await client.messages.create(**args)
        except (anthropic.AnthropicError, httpx2.TransportError) as exc:
            error = self._error(exc, model, mode)
        except ValueError as exc:
            # The SDK parses a JSON content type itself; a body cut short fails here.
            error = self._malformed(model, f"the body is not valid JSON ({exc})", garbage=True)
        else:
            if isinstance(response, AnthropicMessageType):
                assembler = _Assembler(model=model, priced=self._priced, provider=self.name)
                problem = assembler.take_message(response)
                if problem is None:
                    return assembler
            elif isinstance(response, str):
                problem = f"the body is not a JSON object: {response[:80]!r}"
            else:
                kind = "null" if response is None else type(response).__name__
                problem = f"expected a message object, got {kind}"
            error = self._malformed(model, problem, garbage=isinstance(response, str))
        # Raised here, outside the except clause, so the SDK's exception (whose
        # body may quote a key the server echoed) is not kept as __context__.
        raise error

    async def stream(self, request: CompletionRequest) -> AsyncGenerator[StreamChunk, None]:
        """Run one Messages API call as a stream; the last chunk carries the completion.

        Failures before the first text arrives (including an ``overloaded_error``
        event at the start of the stream) are retried like :meth:`complete`; once
        text has been yielded, a failure is raised at once. A stream that ends
        without ``message_stop`` and without a stop reason was cut short and is
        an error.

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

        async def open_stream(
            args: _CreateArgs, mode: StructuredMode | None
        ) -> OpenStream[AsyncStream[RawMessageStreamEvent]]:
            client = await self._client()
            error: ProviderError
            try:
                events = await client.messages.create(**args, stream=True)
            except (anthropic.AnthropicError, httpx2.TransportError) as exc:
                error = self._error(exc, model, mode)
            else:
                assembler = _Assembler(model=model, priced=self._priced, provider=self.name)
                return OpenStream(stream=events, assembler=assembler)
            raise error

        async def call(
            mode: StructuredMode | None,
        ) -> OpenStream[AsyncStream[RawMessageStreamEvent]]:
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
        self, opened: OpenStream[AsyncStream[RawMessageStreamEvent]], model: str
    ) -> str | None:
        assembler: _Assembler = opened.assembler
        error: ProviderError
        try:
            event: object = await opened.stream.__anext__()
        except StopAsyncIteration:
            if assembler.stopped or assembler.stop_reason is not None:
                return None
            error = self._malformed(
                model, "the stream ended before the answer finished (no message_stop)", True
            )
        except (anthropic.AnthropicError, httpx2.TransportError) as exc:
            error = self._error(exc, model, None)
        except ValueError as exc:
            error = self._malformed(model, f"a stream event is not valid JSON ({exc})", True)
        except (AttributeError, TypeError) as exc:
            error = self._malformed(model, f"a stream event has the wrong shape ({exc})", False)
        else:
            text = assembler.take_event(event)
            if text is not None:
                return text
            error = self._malformed(model, "a stream event is not a Messages API event", False)
        raise error

    async def _close_stream(self, stream: AsyncStream[RawMessageStreamEvent]) -> None:
        await stream.close()

    def _malformed(self, model: str, what: str, garbage: bool) -> ProviderError:
        return malformed_response(
            provider=self.name, model=model, what=what, garbage=garbage, secrets=self._secrets
        )

    def _create_args(
        self, request: CompletionRequest, model: str, mode: StructuredMode | None
    ) -> _CreateArgs:
        system, messages = _split_system(request.messages)
        args: _CreateArgs = {
            "model": model,
            "max_tokens": (
                request.max_tokens if request.max_tokens is not None else self.default_max_tokens
            ),
            "messages": messages,
        }
        if system:
            args["system"] = system
        if request.tools:
            args["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in request.tools
            ]
            if request.tool_choice is not None:
                args["tool_choice"] = _tool_choice_param(request)
        extra: dict[str, object] = dict(request.extra)
        if request.response_format is not None and mode == "instructions":
            args["system"] = _with_schema_instructions(
                args.get("system", ""), request.response_format.json_schema
            )
        elif request.response_format is not None:
            output_config: OutputConfigParam = {
                "format": {"type": "json_schema", "schema": request.response_format.json_schema}
            }
            # A caller's own output_config (e.g. effort) is kept alongside the format;
            # as a raw body field it would replace ours wholesale.
            given = extra.pop("output_config", None)
            if isinstance(given, dict):
                output_config = {**given, **output_config}
            args["output_config"] = output_config
        if request.temperature is not None:
            extra.setdefault("temperature", request.temperature)
        if request.stop:
            args["stop_sequences"] = list(request.stop)
        if extra:
            args["extra_body"] = extra
        return args

    def _error(self, exc: Exception, model: str, mode: StructuredMode | None) -> ProviderError:
        if isinstance(exc, anthropic.APIStatusError):
            status = exc.status_code
            if status < 400:
                status = _STATUS_OF_ERROR_TYPE.get(str(exc.type), 500)
            server_message = exc.api_message or _body_text(exc.body)
            error = status_error(
                provider=self.name,
                status=status,
                model=model,
                server_message=server_message,
                headers=exc.response.headers,
                request_id=exc.request_id,
                secrets=self._secrets,
            )
            return self._rejection(error, server_message, mode)
        if isinstance(exc, anthropic.APIConnectionError):
            cause = exc.__cause__
            reason = f"{type(cause).__name__}: {cause}" if cause is not None else ""
            return connection_error(
                provider=self.name,
                model=model,
                reason=reason,
                timed_out=isinstance(exc, anthropic.APITimeoutError),
                secrets=self._secrets,
            )
        if isinstance(exc, httpx2.TransportError):
            # The SDK does not wrap transport failures raised while reading a stream.
            return connection_error(
                provider=self.name,
                model=model,
                reason=f"{type(exc).__name__}: {exc}",
                timed_out=isinstance(exc, httpx2.TimeoutException),
                secrets=self._secrets,
            )
        message = f"anthropic: request for model {model!r} failed: {type(exc).__name__}: {exc}"
        return ProviderRequestError(redact(message, self._secrets), provider=self.name)


def _tool_choice_param(request: CompletionRequest) -> ToolChoiceParam:
    name = named_tool(request.tool_choice)
    if name is not None:
        return {"type": "tool", "name": name}
    return _TOOL_CHOICES[str(request.tool_choice)]


async def _close_client(client: AsyncAnthropic) -> None:
    await client.close()


@dataclass(slots=True)
class _PendingToolCall:
    """A tool call being assembled from stream events."""

    id: str
    name: str
    input_json: list[str] = field(default_factory=list)
    input: dict[str, object] | None = None


@dataclass(slots=True)
class _Assembler:
    """Collects a message's text, tool calls, stop reason and usage."""

    model: str
    priced: bool = True
    """Whether the model name is priced (``False``: another server's name means nothing)."""
    text: list[str] = field(default_factory=list)
    tool_calls: dict[int, _PendingToolCall] = field(default_factory=dict)
    stop_reason: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    counted: bool = True
    """Whether the server reported possible token counts (else the provider counts)."""
    provider: str = "anthropic"

    stopped: bool = False
    """Whether the stream's ``message_stop`` event arrived."""

    def take_message(self, message: AnthropicMessage) -> str | None:
        """Take a whole message, or the empty one that opens a stream.

        Returns:
            What is wrong with the message, or ``None`` when it was read.
        """
        if not isinstance(getattr(message, "content", None), list):
            # An empty object would otherwise read as an empty answer.
            return "the reply has no content list"
        try:
            self._take_message(message)
        except (AttributeError, TypeError, ValueError) as exc:
            # The SDK builds replies without validating them; a field of the wrong
            # type surfaces only when read.
            return f"a field has the wrong shape ({type(exc).__name__}: {exc})"
        return None

    def _take_message(self, message: AnthropicMessage) -> None:
        model = getattr(message, "model", None)
        if model:
            self.model = model
        for index, block in enumerate(message.content):
            if block.type == "text":
                if not isinstance(block.text, str):
                    raise TypeError(f"content[{index}].text is {type(block.text).__name__}")
                self.text.append(block.text)
            elif block.type == "tool_use":
                self.tool_calls[index] = _PendingToolCall(
                    id=block.id, name=block.name, input=dict(block.input)
                )
        self.stop_reason = getattr(message, "stop_reason", None)
        usage = message.usage
        self._take_input(usage)
        self._take_output(usage)

    def _take_input(self, usage: object) -> None:
        counts = [
            reported_tokens(getattr(usage, name, None), f"usage.{name}", self.provider)
            for name in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        ]
        if counts[0] is None:
            self.counted = False
        self.input_tokens = sum(count or 0 for count in counts)

    def _take_output(self, usage: object) -> None:
        count = reported_tokens(
            getattr(usage, "output_tokens", None), "usage.output_tokens", self.provider
        )
        if count is None:
            self.counted = False
        self.output_tokens = count or 0

    def take_event(self, event: object) -> str | None:
        """Take one stream event; returns the text it adds, or ``None`` if it is not an event."""
        kind = getattr(event, "type", None)
        if not isinstance(kind, str):
            return None
        try:
            return self._take_event(event)  # type: ignore[arg-type]
        except (AttributeError, TypeError, ValueError):
            return None

    def _take_event(self, event: RawMessageStreamEvent) -> str | None:
        if event.type == "message_start":
            if self.take_message(event.message) is not None:
                return None
        elif event.type == "content_block_start":
            block = event.content_block
            if block.type == "text" and block.text:
                self.text.append(block.text)
                return block.text
            if block.type == "tool_use":
                self.tool_calls[event.index] = _PendingToolCall(id=block.id, name=block.name)
        elif event.type == "content_block_delta":
            delta = event.delta
            if delta.type == "text_delta" and delta.text:
                self.text.append(delta.text)
                return delta.text
            if delta.type == "input_json_delta" and event.index in self.tool_calls:
                self.tool_calls[event.index].input_json.append(delta.partial_json)
        elif event.type == "message_delta":
            if event.delta.stop_reason is not None:
                self.stop_reason = event.delta.stop_reason
            usage = event.usage
            # message_delta counts are cumulative, so they replace message_start's.
            self._take_output(usage)
            if usage.input_tokens is not None:
                self._take_input(usage)
        elif event.type == "message_stop":
            self.stopped = True
        return ""

    def completion(
        self,
        request: CompletionRequest,
        *,
        latency_ms: float,
        structured_mode: StructuredMode | None = None,
    ) -> Completion:
        """The finished completion, with usage priced for the model that answered."""
        text = "".join(self.text)
        calls = tuple(_tool_call(p) for _, p in sorted(self.tool_calls.items()))
        stop = self.stop_reason
        input_tokens, output_tokens = self.input_tokens, self.output_tokens
        if not self.counted:  # budgets still need a number
            input_tokens = estimate_message_tokens(request.messages)
            output_tokens = estimate_text_tokens(
                text
                + "".join(
                    "".join(p.input_json) if p.input is None else json.dumps(p.input)
                    for p in self.tool_calls.values()
                )
            )
        return Completion(
            message=Message.assistant(text if text or not calls else None, tool_calls=calls),
            usage=Usage(
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                cost_usd=(
                    cost_usd(self.model, input_tokens, output_tokens) if self.priced else None
                ),
                calls=1,
            ),
            model=self.model,
            finish_reason=_FINISH_REASONS.get(stop, stop) if stop is not None else None,
            latency_ms=latency_ms,
            structured_mode=structured_mode,
        )


def _with_schema_instructions(system: str, schema: dict[str, object]) -> str:
    """``system`` asking for JSON matching ``schema`` (unless it already shows that schema)."""
    dumped = json.dumps(schema, ensure_ascii=False)
    if dumped in system:
        return system
    text = (
        f"Answer with a single JSON object, and nothing else, that matches this JSON schema:\n"
        f"{dumped}"
    )
    return f"{system}\n\n{text}" if system else text


def _split_system(messages: Sequence[Message]) -> tuple[str, list[MessageParam]]:
    """The system prompt, and the other messages as API turns with same-role runs merged."""
    system: list[str] = []
    turns: list[tuple[str, list[ContentBlockParam]]] = []
    for index, message in enumerate(messages):
        if message.role is Role.SYSTEM:
            system.append(message.text)
            continue
        role = "assistant" if message.role is Role.ASSISTANT else "user"
        blocks = _blocks(message, index)
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
        else:
            turns.append((role, blocks))
    return "\n\n".join(s for s in system if s), [_turn(role, blocks) for role, blocks in turns]


def _blocks(message: Message, index: int) -> list[ContentBlockParam]:
    if message.role is Role.TOOL:
        if message.tool_call_id is None:
            raise ProviderRequestError(
                f"anthropic: message {index} is a tool result without tool_call_id; "
                "set it to the id of the tool call it answers",
                provider=AnthropicProvider.name,
            )
        result: ToolResultBlockParam = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id,
            "content": message.text,
        }
        if message.is_error:
            result["is_error"] = True
        return [result]
    blocks: list[ContentBlockParam] = []
    # The API rejects empty text blocks, so an assistant turn that only calls
    # tools carries no text block at all.
    if message.text or not message.tool_calls:
        text: TextBlockParam = {"type": "text", "text": message.text}
        blocks.append(text)
    for call in message.tool_calls:
        use: ToolUseBlockParam = {
            "type": "tool_use",
            "id": call.id,
            "name": call.name,
            "input": dict(call.arguments),
        }
        blocks.append(use)
    return blocks


def _turn(role: str, blocks: list[ContentBlockParam]) -> MessageParam:
    # A turn of plain text is sent as a string, the API's shorthand for one text block.
    content: str | list[ContentBlockParam] = blocks
    if len(blocks) == 1 and blocks[0]["type"] == "text":
        content = str(blocks[0]["text"])
    if role == "assistant":
        return {"role": "assistant", "content": content}
    return {"role": "user", "content": content}


def _tool_call(pending: _PendingToolCall) -> ToolCall:
    """A finished tool call; input JSON that does not parse is kept raw."""
    if pending.input is not None:
        return ToolCall(id=pending.id, name=pending.name, arguments=pending.input)
    raw = "".join(pending.input_json)
    try:
        parsed: object = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError:
        parsed = None
    if isinstance(parsed, dict):
        return ToolCall(id=pending.id, name=pending.name, arguments=parsed)
    return ToolCall(id=pending.id, name=pending.name, raw_arguments=raw)


def _body_text(body: object) -> str | None:
    """A non-JSON error body (e.g. a proxy's error page) as text."""
    return body if isinstance(body, str) else None
