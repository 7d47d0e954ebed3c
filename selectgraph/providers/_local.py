"""Local provider: deterministic, scriptable model replies with no network and no key."""

from __future__ import annotations

import asyncio
import json
import math
import re
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from pydantic import BaseModel

from selectgraph.core._errors import ProviderError, ProviderRequestError
from selectgraph.core._messages import Message, Role, ToolCall
from selectgraph.core._usage import Usage
from selectgraph.providers._base import Completion, CompletionRequest, StreamChunk
from selectgraph.providers._retry import ProviderRetry, call_with_retries
from selectgraph.providers._tokens import estimate_message_tokens, estimate_text_tokens

__all__ = ["LocalProvider", "LocalReply", "ScriptEntry", "ScriptExhausted"]


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalReply:
    """One scripted answer of a :class:`LocalProvider`, for full control over a call.

    Tool calls without an ``id`` get a deterministic one (``call_<call>_<n>``)
    when the reply is sent.
    """

    text: str = ""
    """The assistant's text; empty when the reply only calls tools."""
    tool_calls: Sequence[ToolCall] = ()
    """Tools the model asks to call, in order."""
    usage: Usage | None = None
    """Reported usage; ``None`` counts tokens from the request and the reply."""
    latency: float | None = None
    """Seconds the call takes (really awaited); ``None`` uses the provider's latency."""
    finish_reason: str | None = None
    """Why generation stopped; ``None`` gives ``"tool_calls"`` or ``"stop"``."""

    def __post_init__(self) -> None:
        # Accept any sequence (lists read best in scripts) but store an immutable tuple.
        object.__setattr__(self, "tool_calls", tuple(self.tool_calls))
        if self.latency is not None and self.latency < 0:
            raise ValueError(f"LocalReply.latency must be >= 0, got {self.latency}")

    @classmethod
    def tool_call(
        cls,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        call_id: str = "",
        text: str = "",
    ) -> LocalReply:
        """A reply that calls one tool.

        Args:
            name: The tool to call.
            arguments: Its JSON arguments.
            call_id: The call's id; empty assigns a deterministic one.
            text: Text sent alongside the call.

        Returns:
            The reply.
        """
        call = ToolCall(id=call_id, name=name, arguments=dict(arguments or {}))
        return cls(text=text, tool_calls=(call,))

    @classmethod
    def json(cls, value: Mapping[str, Any] | Sequence[Any] | BaseModel) -> LocalReply:
        """A reply whose text is ``value`` as JSON, as a structured-output answer arrives.

        Args:
            value: A JSON-able mapping or sequence, or a Pydantic model instance.

        Returns:
            The reply.
        """
        if isinstance(value, BaseModel):
            return cls(text=value.model_dump_json())
        return cls(text=json.dumps(value, ensure_ascii=False))


ScriptReply: TypeAlias = str | LocalReply | Exception
"""What one call resolves to: text, a full reply, or a failure to raise."""

ScriptEntry: TypeAlias = ScriptReply | Callable[[CompletionRequest], ScriptReply]
"""One scripted call: a reply, or a function of the request that returns one."""


class ScriptExhausted(ProviderRequestError):
    """A strict local provider was called more often than it had scripted replies."""

    def __init__(self, message: str, *, provider: str, scripted: int, call: int) -> None:
        super().__init__(message, provider=provider)
        self.scripted = scripted
        """How many replies were scripted in total."""
        self.call = call
        """The 1-based number of the call that found the script empty."""


_DEFAULT_RETRY = ProviderRetry()


class LocalProvider:
    """A model provider that runs offline: scripted replies first, then defaults.

    Each script entry answers one attempt, in order. An entry is a ``str``
    (assistant text), a :class:`LocalReply` (text, tool calls, usage, latency),
    an exception instance (raised, e.g. ``ProviderRetryableError`` to simulate a
    rate limit), or a callable taking the :class:`CompletionRequest` and
    returning one of those. Failures go through :func:`call_with_retries` with
    the provider's :class:`ProviderRetry`, exactly as a real provider's do, so a
    retried call consumes one entry per attempt.

    When the script is empty the reply is deterministic and derived from the
    request: JSON that validates against ``response_format`` when one is set, a
    call of the first tool when ``tool_choice`` is ``"required"``, and otherwise
    text naming the model and quoting the last user message. With
    ``strict=True`` an empty script raises :class:`ScriptExhausted` instead.

    Every attempt's request is kept in :attr:`requests`. Usage counts input
    tokens from the request's messages and output tokens from the reply, with
    ``calls=1`` and no cost.

    Example:
        >>> import asyncio
        >>> from selectgraph.core._messages import Message
        >>> provider = LocalProvider(script=["Paris."])
        >>> request = CompletionRequest(model="local", messages=(Message.user("Capital?"),))
        >>> asyncio.run(provider.complete(request)).message.text
        'Paris.'
        >>> asyncio.run(provider.complete(request)).message.text
        '[local] reply to: "Capital?"'
    """

    name: str = "local"
    """Provider name used in errors, traces and usage."""
    default_model: str = "local"
    """Model reported when a request names none."""

    def __init__(
        self,
        script: Iterable[ScriptEntry] = (),
        *,
        strict: bool = False,
        retry: ProviderRetry = _DEFAULT_RETRY,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        latency: float = 0.0,
        default_model: str = "local",
    ) -> None:
        """Create a provider.

        Args:
            script: Replies for the coming attempts, in order.
            strict: Raise :class:`ScriptExhausted` when the script runs out.
            retry: How transient failures are retried.
            sleep: Awaitable sleep between retries; replace it in tests.
            latency: Seconds every attempt takes unless its reply says otherwise.
            default_model: Model reported when a request names none.

        Raises:
            TypeError: a script entry is not a reply, exception instance or callable.
            ValueError: ``latency`` is negative.
        """
        if latency < 0:
            raise ValueError(f"LocalProvider latency must be >= 0, got {latency}")
        self.default_model = default_model
        self.requests: list[CompletionRequest] = []
        """Every request received, one per attempt (retries included), in order."""
        self.retry_delays: list[float] = []
        """Seconds waited before each retry, in order."""
        self._script: deque[ScriptEntry] = deque()
        self._scripted = 0
        self._strict = strict
        self._retry = retry
        self._sleep = sleep
        self._latency = latency
        self.extend(script)

    @property
    def remaining(self) -> int:
        """Scripted replies not used yet."""
        return len(self._script)

    @property
    def scripted(self) -> int:
        """Replies scripted so far, used or not."""
        return self._scripted

    def extend(self, script: Iterable[ScriptEntry]) -> None:
        """Append replies to the script.

        Args:
            script: More entries, answered after the ones already queued.

        Raises:
            TypeError: an entry is not a reply, exception instance or callable.
        """
        if isinstance(script, str | LocalReply | Exception):
            # A bare string would otherwise be scripted one character per call.
            raise TypeError(f"script must be a list of entries, got {script!r}; wrap it in [...]")
        for entry in script:
            _check_entry(entry)
            self._script.append(entry)
            self._scripted += 1

    async def complete(self, request: CompletionRequest) -> Completion:
        """Answer ``request`` with the next scripted reply or the default one.

        Raises:
            ProviderRetryableError: a scripted transient failure survived every retry.
            ProviderRequestError: a scripted request failure, or an empty strict script.
        """
        started = time.perf_counter()
        reply = await call_with_retries(
            lambda: self._attempt(request),
            self._retry,
            sleep=self._sleep,
            on_retry=self._note_retry,
        )
        latency_ms = (time.perf_counter() - started) * 1000
        return self._completion(request, reply, latency_ms)

    async def stream(self, request: CompletionRequest) -> AsyncIterator[StreamChunk]:
        """Answer ``request`` word by word; the last chunk carries the completion."""
        completion = await self.complete(request)
        # Each piece is a word with the whitespace before it; joined they give the text.
        for piece in re.findall(r"\s*\S+|\s+$", completion.message.text):
            yield StreamChunk(delta=piece)
        yield StreamChunk(completion=completion)

    def count_tokens(self, messages: Sequence[Message], model: str | None = None) -> int:
        """Prompt tokens ``messages`` would use, by the documented estimate.

        The local provider never loads a tokenizer: that could mean a download,
        and this provider promises never to touch the network.
        """
        return estimate_message_tokens(messages)

    async def _attempt(self, request: CompletionRequest) -> LocalReply:
        self.requests.append(request)
        number = len(self.requests)
        resolved = self._next_reply(request, number)
        if isinstance(resolved, Exception):
            await self._wait(self._latency)
            raise resolved
        reply = LocalReply(text=resolved) if isinstance(resolved, str) else resolved
        await self._wait(reply.latency if reply.latency is not None else self._latency)
        return _with_call_ids(reply, number)

    def _next_reply(self, request: CompletionRequest, number: int) -> ScriptReply:
        if not self._script:
            if self._strict:
                noun = "reply was" if self._scripted == 1 else "replies were"
                raise ScriptExhausted(
                    f"{self.name} provider got call {number} but only {self._scripted} "
                    f"{noun} scripted; add a reply for this call "
                    f"(its last user message: {_last_user_text(request)!r})",
                    provider=self.name,
                    scripted=self._scripted,
                    call=number,
                )
            return _default_reply(request, request.model or self.default_model)
        entry = self._script.popleft()
        if isinstance(entry, str | LocalReply | Exception):
            return entry
        resolved = entry(request)
        if not isinstance(resolved, str | LocalReply | Exception):
            raise TypeError(
                f"script function {entry!r} returned {type(resolved).__name__}; "
                "return a str, a LocalReply or an exception instance"
            )
        return resolved

    async def _wait(self, seconds: float) -> None:
        # Latency is real time on purpose (it shows overlap between parallel
        # calls), so it never goes through the replaceable retry sleep.
        if seconds > 0:
            await asyncio.sleep(seconds)

    def _note_retry(self, _error: ProviderError, _attempt: int, delay: float) -> None:
        self.retry_delays.append(delay)

    def _completion(
        self, request: CompletionRequest, reply: LocalReply, latency_ms: float
    ) -> Completion:
        model = request.model or self.default_model
        usage = reply.usage
        if usage is None:
            output = estimate_text_tokens(reply.text) + sum(
                estimate_text_tokens(call.name + json.dumps(call.arguments))
                for call in reply.tool_calls
            )
            usage = Usage(
                input_tokens=estimate_message_tokens(request.messages),
                output_tokens=output,
                calls=1,
            )
        content = reply.text if reply.text or not reply.tool_calls else None
        finish_reason = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
        return Completion(
            message=Message.assistant(content, tool_calls=tuple(reply.tool_calls)),
            usage=usage,
            model=model,
            finish_reason=finish_reason,
            latency_ms=latency_ms,
        )


def _check_entry(entry: object) -> None:
    if isinstance(entry, type) and issubclass(entry, BaseException):
        raise TypeError(
            f"script entry {entry.__name__} is an exception class; "
            f"pass an instance, e.g. {entry.__name__}(...)"
        )
    if not (isinstance(entry, str | LocalReply | Exception) or callable(entry)):
        raise TypeError(
            f"script entry {entry!r} is a {type(entry).__name__}; use a str, a LocalReply, "
            "an exception instance, or a function of the request returning one of those"
        )


def _with_call_ids(reply: LocalReply, number: int) -> LocalReply:
    if all(call.id for call in reply.tool_calls):
        return reply
    calls = tuple(
        call if call.id else call.model_copy(update={"id": f"call_{number}_{index}"})
        for index, call in enumerate(reply.tool_calls, start=1)
    )
    return LocalReply(
        text=reply.text,
        tool_calls=calls,
        usage=reply.usage,
        latency=reply.latency,
        finish_reason=reply.finish_reason,
    )


def _last_user_text(request: CompletionRequest) -> str:
    for message in reversed(request.messages):
        if message.role is Role.USER:
            return message.text
    return ""


def _shorten(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _default_reply(request: CompletionRequest, model: str) -> LocalReply:
    if request.response_format is not None:
        schema = request.response_format.json_schema
        return LocalReply(text=json.dumps(_schema_example(schema, schema), ensure_ascii=False))
    if request.tool_choice == "required" and request.tools:
        spec = request.tools[0]
        arguments = _schema_example(spec.parameters, spec.parameters)
        return LocalReply.tool_call(spec.name, arguments if isinstance(arguments, dict) else {})
    return LocalReply(text=_echo_text(request, model))


def _echo_text(request: CompletionRequest, model: str) -> str:
    prompt = _shorten(_last_user_text(request), 200)
    text = f'[{model}] reply to: "{prompt}"' if prompt else f"[{model}] reply: no user message"
    # Tool results after the last user message are what an agent loop feeds
    # back; naming them shows in examples that the loop went round.
    results: list[str] = []
    for message in reversed(request.messages):
        if message.role is Role.USER:
            break
        if message.role is Role.TOOL:
            results.append(f"{message.name or 'tool'} -> {_shorten(message.text, 80)}")
    if results:
        text += " after tool results: " + "; ".join(reversed(results))
    return text


# Example values for string formats, each valid for its format.
_FORMAT_EXAMPLES = {
    "date-time": "1970-01-01T00:00:00Z",
    "date": "1970-01-01",
    "time": "00:00:00Z",
    "duration": "PT0S",
    "email": "user@example.com",
    "hostname": "example.com",
    "ipv4": "127.0.0.1",
    "ipv6": "::1",
    "uri": "https://example.com/",
    "url": "https://example.com/",
    "uuid": "00000000-0000-0000-0000-000000000000",
}

# Deeper than this, a schema is treated as recursive and answered with null.
_MAX_SCHEMA_DEPTH = 32


def _schema_example(schema: Any, root: Any, depth: int = 0) -> Any:
    """A small value that validates against JSON ``schema`` (``root`` resolves ``$ref``).

    Objects get their required properties only, enums their first value,
    strings the empty string (or a format example, padded to ``minLength``),
    numbers the value nearest 0 within their bounds, arrays ``minItems``
    items. ``pattern`` and ``uniqueItems`` are not honoured.
    """
    if depth > _MAX_SCHEMA_DEPTH or not isinstance(schema, Mapping):
        return None
    if "$ref" in schema:
        return _schema_example(_resolve_ref(root, schema["$ref"]), root, depth + 1)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return _schema_example(_pick_option(schema[key], root), root, depth + 1)
    if schema.get("allOf"):
        return _schema_example(_merge_all_of(schema, root), root, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in schema else "array" if "items" in schema else None
    if kind == "object":
        properties = schema.get("properties", {})
        return {
            name: _schema_example(properties.get(name, {}), root, depth + 1)
            for name in schema.get("required", [])
        }
    if kind == "array":
        items = [_schema_example(s, root, depth + 1) for s in schema.get("prefixItems", [])]
        while len(items) < schema.get("minItems", 0):
            items.append(_schema_example(schema.get("items", {}), root, depth + 1))
        return items
    if kind == "string":
        value = _FORMAT_EXAMPLES.get(schema.get("format", ""), "")
        return value + "x" * max(0, schema.get("minLength", 0) - len(value))
    if kind in ("integer", "number"):
        return _number_example(schema, integer=kind == "integer")
    if kind == "boolean":
        return False
    return None


def _number_example(schema: Mapping[str, Any], *, integer: bool) -> int | float:
    low, high = schema.get("minimum"), schema.get("maximum")
    excl_low, excl_high = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    value: float = 0
    if low is not None and value < low:
        value = low
    if excl_low is not None and value <= excl_low:
        value = math.floor(excl_low) + 1 if integer else excl_low + 1
    if high is not None and value > high:
        value = high
    if excl_high is not None and value >= excl_high:
        value = math.ceil(excl_high) - 1 if integer else excl_high - 1
    if excl_low is not None and excl_high is not None and not integer and value <= excl_low:
        value = (excl_low + excl_high) / 2  # a narrow open interval: take its middle
    step = schema.get("multipleOf")
    if step:
        value = math.ceil(value / step) * step
    return int(value) if integer else float(value)


def _resolve_ref(root: Any, ref: str) -> Any:
    if not ref.startswith("#"):
        return {}  # remote references cannot be followed offline
    path = ref[1:].strip("/")
    node = root
    for part in path.split("/") if path else []:
        key = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or key not in node:
            return {}
        node = node[key]
    return node


def _pick_option(options: Sequence[Any], root: Any) -> Any:
    # Prefer a real value over null: it shows the shape in examples and is as valid.
    for option in options:
        resolved = _deref(option, root)
        if isinstance(resolved, Mapping) and resolved.get("type") != "null":
            return option
    return options[0]


def _merge_all_of(schema: Mapping[str, Any], root: Any) -> dict[str, Any]:
    merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
    for part in schema["allOf"]:
        sub = _deref(part, root)
        if not isinstance(sub, Mapping):
            continue
        for key, value in sub.items():
            if key == "properties":
                merged["properties"] = {**merged.get("properties", {}), **value}
            elif key == "required":
                merged["required"] = list(dict.fromkeys([*merged.get("required", []), *value]))
            else:
                merged.setdefault(key, value)
    return merged


def _deref(schema: Any, root: Any) -> Any:
    if isinstance(schema, Mapping) and "$ref" in schema:
        return _resolve_ref(root, schema["$ref"])
    return schema
