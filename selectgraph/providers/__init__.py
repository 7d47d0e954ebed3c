"""Providers: the LLM backends agents call — OpenAI, Anthropic, and an offline local one."""

from __future__ import annotations

from selectgraph._errors import ProviderError, ProviderRequestError, ProviderRetryableError
from selectgraph.providers._anthropic import AnthropicProvider
from selectgraph.providers._base import (
    Completion,
    CompletionRequest,
    Provider,
    ResponseFormat,
    StreamChunk,
    ToolChoice,
    ToolSpec,
)
from selectgraph.providers._local import LocalProvider, LocalReply, ScriptExhausted
from selectgraph.providers._openai import OpenAIProvider
from selectgraph.providers._pricing import ModelPrice, cost_usd, price_for, register_price
from selectgraph.providers._retry import ProviderRetry
from selectgraph.providers._tokens import count_message_tokens, count_text_tokens, register_encoding

__all__ = [
    "AnthropicProvider",
    "Completion",
    "CompletionRequest",
    "LocalProvider",
    "LocalReply",
    "ModelPrice",
    "OpenAIProvider",
    "Provider",
    "ProviderError",
    "ProviderRequestError",
    "ProviderRetry",
    "ProviderRetryableError",
    "ResponseFormat",
    "ScriptExhausted",
    "StreamChunk",
    "ToolChoice",
    "ToolSpec",
    "cost_usd",
    "count_message_tokens",
    "count_text_tokens",
    "price_for",
    "register_encoding",
    "register_price",
]
