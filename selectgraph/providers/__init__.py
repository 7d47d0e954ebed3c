"""Providers: the LLM backends agents call — OpenAI, Anthropic, llama.cpp, and an offline one.

The SDK-backed providers are imported on first use: ``import selectgraph`` does
not import the ``openai`` or ``anthropic`` packages (about two seconds and a
couple of hundred thousand objects the garbage collector would walk forever).
``from selectgraph.providers import OpenAIProvider`` imports the OpenAI SDK then.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from selectgraph.core._errors import ProviderError, ProviderRequestError, ProviderRetryableError
from selectgraph.providers._base import (
    Completion,
    CompletionRequest,
    FunctionChoice,
    Provider,
    ResponseFormat,
    StreamChunk,
    StructuredMode,
    ToolCallMode,
    ToolChoice,
    ToolSpec,
)
from selectgraph.providers._deadline import ProviderTimeoutError
from selectgraph.providers._errors_map import StructuredOutputRejected
from selectgraph.providers._local import LocalProvider, LocalReply, ScriptExhausted
from selectgraph.providers._pricing import ModelPrice, cost_usd, price_for, register_price
from selectgraph.providers._reported_usage import ImplausibleUsageWarning
from selectgraph.providers._retry import ProviderRetry
from selectgraph.providers._tokens import count_message_tokens, count_text_tokens, register_encoding
from selectgraph.providers._tool_calls import ToolCallInvalid

if TYPE_CHECKING:
    from selectgraph.providers._anthropic import AnthropicProvider
    from selectgraph.providers._llama import LlamaCppProvider, smollm2_model_path
    from selectgraph.providers._openai import OpenAIProvider

# Public name -> the private module that defines it, imported on first access.
# A provider whose dependency is heavy or optional is added here, not imported above.
_LAZY: dict[str, str] = {
    "AnthropicProvider": "selectgraph.providers._anthropic",
    "LlamaCppProvider": "selectgraph.providers._llama",
    "OpenAIProvider": "selectgraph.providers._openai",
    "smollm2_model_path": "selectgraph.providers._llama",
}

__all__ = [
    "AnthropicProvider",
    "Completion",
    "CompletionRequest",
    "FunctionChoice",
    "ImplausibleUsageWarning",
    "LlamaCppProvider",
    "LocalProvider",
    "LocalReply",
    "ModelPrice",
    "OpenAIProvider",
    "Provider",
    "ProviderError",
    "ProviderRequestError",
    "ProviderRetry",
    "ProviderRetryableError",
    "ProviderTimeoutError",
    "ResponseFormat",
    "ScriptExhausted",
    "StreamChunk",
    "StructuredMode",
    "StructuredOutputRejected",
    "ToolCallInvalid",
    "ToolCallMode",
    "ToolChoice",
    "ToolSpec",
    "cost_usd",
    "count_message_tokens",
    "count_text_tokens",
    "price_for",
    "register_encoding",
    "register_price",
    "smollm2_model_path",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
