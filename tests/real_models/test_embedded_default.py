"""With no API key and no provider named, agents run the embedded SmolLM2 model (issue 22)."""

from __future__ import annotations

import pytest

from selectgraph import Agent, AgentConfig
from selectgraph.providers import LlamaCppProvider, smollm2_model_path


@pytest.mark.usefixtures("gguf_path")
def test_an_agent_without_a_provider_answers_from_the_embedded_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("SELECTGRAPH_PROVIDER", "SELECTGRAPH_LLAMA_MODEL"):
        monkeypatch.delenv(name, raising=False)

    first = Agent(AgentConfig(name="a", max_tokens=16, temperature=0.0))
    second = Agent(AgentConfig(name="b", max_tokens=16, temperature=0.0))
    result = first.run("Say hello.")

    assert isinstance(first.provider, LlamaCppProvider)
    assert first.provider is second.provider  # one model loaded for every agent
    assert first.provider.model_path == smollm2_model_path()
    assert result.content.strip()
    assert not result.content.startswith("[local]")  # a model's words, not the echo
    assert result.usage.output_tokens > 0
    assert result.usage.cost_usd is None or result.usage.cost_usd == 0
