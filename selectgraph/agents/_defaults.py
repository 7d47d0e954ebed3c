"""Defaults: which provider an agent uses when none is given.

``SELECTGRAPH_PROVIDER`` (``local``, ``openai`` or ``anthropic``) chooses
explicitly. Otherwise a set ``OPENAI_API_KEY`` selects OpenAI, else a set
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
    raise ValueError(
        f"SELECTGRAPH_PROVIDER={choice!r} is not a provider; use local, openai or anthropic"
    )
