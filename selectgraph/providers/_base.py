"""Provider protocol: what an LLM backend must do for agents and llm_decide edges."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypedDict, runtime_checkable

from selectgraph.core._messages import Message
from selectgraph.core._usage import Usage

__all__ = [
    "Completion",
    "CompletionRequest",
    "FunctionChoice",
    "Provider",
    "ResponseFormat",
    "StreamChunk",
    "StructuredMode",
    "ToolCallMode",
    "ToolChoice",
    "ToolSpec",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """A tool as a model sees it: a name, what it does, and its JSON schema."""

    name: str
    """Unique within one request."""
    description: str
    """What the tool does; the model reads this to decide when to call it."""
    parameters: dict[str, Any]
    """JSON schema (an ``object`` schema) of the tool's arguments."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseFormat:
    """Ask the model for JSON that matches a schema (structured output)."""

    name: str
    """A short identifier for the schema, e.g. the Pydantic model's name."""
    json_schema: dict[str, Any]
    """The JSON schema the answer must satisfy."""
    strict: bool = True
    """Ask the provider to enforce the schema where it can."""


StructuredMode = Literal["json_schema", "json_object", "instructions"]
"""How a provider asked for structured output.

- ``"json_schema"``: the server constrains the answer to the schema (OpenAI's
  ``response_format: json_schema``, Anthropic's ``output_config.format``).
- ``"json_object"``: the server only guarantees JSON; the schema travels in the
  request for servers that use it (llama.cpp, vLLM), and the caller validates.
- ``"instructions"``: no server support; the prompt asks for JSON matching the
  schema, and the caller validates (agents re-ask on a mismatch).
"""


class FunctionChoice(TypedDict):
    """A named tool choice: the model must call this one tool."""

    type: Literal["function"]
    """Always ``"function"``."""
    name: str
    """The tool to call; it must be among the request's tools."""


ToolChoice = Literal["auto", "required", "none"] | FunctionChoice
"""Whether the model may, must, or must not call a tool, or which one it must call.

- ``"auto"``: the model decides.
- ``"required"``: the model must call some tool.
- ``"none"``: the model must answer in text.
- ``{"type": "function", "name": "calculator"}``: the model must call that tool.
"""

ToolCallMode = Literal["native", "grammar", "prompted"]
"""How a provider got a tool call from the model when the request required one.

- ``"native"``: the API's own tool calling (``tool_choice`` sent as asked).
- ``"grammar"``: a local model sampled under a grammar built from the tools' schemas.
- ``"prompted"``: the server refused or ignored the choice; the model was asked
  for the call as JSON text, which was repaired, validated against the tool's
  schema, and re-asked once when invalid.
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class CompletionRequest:
    """Everything a provider needs for one model call."""

    model: str
    """Model name as the provider knows it."""
    messages: tuple[Message, ...]
    """The conversation, system messages included."""
    tools: tuple[ToolSpec, ...] = ()
    """Tools the model may call."""
    tool_choice: ToolChoice | None = None
    """Tool-calling mode; ``None`` leaves it to the provider's default."""
    response_format: ResponseFormat | None = None
    """Structured-output schema, when the caller wants JSON back."""
    temperature: float | None = None
    """Sampling temperature; ``None`` uses the model default."""
    max_tokens: int | None = None
    """Upper bound on generated tokens; ``None`` uses the provider default."""
    max_tokens_fits_budget: bool = False
    """Whether a run's token or cost budget may lower ``max_tokens`` to what it has
    left instead of refusing the call (agents set it when they keep their default
    bound; an explicit ``max_tokens`` that does not fit is refused)."""
    stop: tuple[str, ...] = ()
    """Stop sequences."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Provider-specific request fields passed through unchanged."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Completion:
    """A model's finished answer."""

    message: Message
    """The assistant message, with ``tool_calls`` when the model asked for tools."""
    usage: Usage
    """Tokens used and their estimated cost."""
    model: str
    """The model that answered (as reported by the provider)."""
    finish_reason: str | None = None
    """Why generation stopped: ``"stop"``, ``"tool_calls"``, ``"length"``, ..."""
    latency_ms: float = 0.0
    """Wall time of the call, retries included."""
    structured_mode: StructuredMode | None = None
    """How structured output was requested, when the request had a response_format."""
    tool_mode: ToolCallMode | None = None
    """How a required (or named) tool call was obtained, when the request forced one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamChunk:
    """A piece of a streamed answer; the last chunk carries the whole completion."""

    delta: str = ""
    """Text generated since the previous chunk."""
    completion: Completion | None = None
    """Set on the final chunk only: the assembled answer with usage."""


@runtime_checkable
class Provider(Protocol):
    """An LLM backend: complete, stream, and count tokens."""

    name: str
    """Short provider name used in errors, traces and usage, e.g. ``"openai"``."""
    default_model: str
    """Model used when an agent does not name one."""

    async def complete(self, request: CompletionRequest) -> Completion:
        """Run one model call and return the finished answer.

        Raises:
            ProviderRetryableError: a transient failure survived every retry.
            ProviderRequestError: the request cannot succeed as sent.
        """
        ...

    def stream(self, request: CompletionRequest) -> AsyncIterator[StreamChunk]:
        """Run one model call, yielding text as it arrives; the last chunk has the completion."""
        ...

    def count_tokens(self, messages: Sequence[Message], model: str | None = None) -> int:
        """Count the prompt tokens ``messages`` would use (exact where the encoding is known)."""
        ...
