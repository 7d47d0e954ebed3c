"""``import selectgraph`` leaves the vendor SDKs unimported until a provider is used."""

from __future__ import annotations

import subprocess
import sys

import pytest

import selectgraph.providers as providers


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )


def test_importing_selectgraph_imports_no_provider_sdk() -> None:
    done = run_python(
        "import selectgraph, selectgraph.providers, sys\n"
        "loaded = [m for m in ('openai', 'anthropic') if m in sys.modules]\n"
        "assert not loaded, loaded"
    )
    assert done.returncode == 0, done.stderr


def test_a_provider_imports_its_own_sdk_only() -> None:
    done = run_python(
        "import sys\n"
        "from selectgraph.providers import OpenAIProvider\n"
        "assert 'openai' in sys.modules\n"
        "assert 'anthropic' not in sys.modules\n"
        "from selectgraph.providers import AnthropicProvider\n"
        "assert 'anthropic' in sys.modules"
    )
    assert done.returncode == 0, done.stderr


def test_lazy_names_resolve_and_are_listed() -> None:
    from selectgraph.providers._anthropic import AnthropicProvider
    from selectgraph.providers._openai import OpenAIProvider

    assert providers.OpenAIProvider is OpenAIProvider
    assert providers.AnthropicProvider is AnthropicProvider
    assert {"OpenAIProvider", "AnthropicProvider"} <= set(dir(providers))
    assert set(providers.__all__) <= set(dir(providers))


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchProvider'"):
        getattr(providers, "NoSuchProvider")  # noqa: B009
