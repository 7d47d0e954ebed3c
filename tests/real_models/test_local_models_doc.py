"""The code in docs/howto/local-models.md runs, against the real model and server."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import selectgraph.providers

pytestmark = [pytest.mark.real_model, pytest.mark.slow]

PAGE = Path(__file__).resolve().parents[2] / "docs" / "howto" / "local-models.md"
DOC_SERVER = "http://127.0.0.1:8080/v1"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)


def run_block(block: str) -> dict[str, object]:
    namespace: dict[str, object] = {}
    # dont_inherit: run as a reader would, without this module's __future__ imports.
    exec(compile(block, str(PAGE), "exec", dont_inherit=True), namespace)
    return namespace


def test_the_page_has_an_in_process_and_a_server_example() -> None:
    blocks = python_blocks()

    assert len(blocks) == 2
    assert "LlamaCppProvider(" in blocks[0]
    assert DOC_SERVER in blocks[1]


@pytest.mark.usefixtures("gguf_path")
def test_the_in_process_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    namespace = run_block(python_blocks()[0])

    printed = capsys.readouterr().out
    assert "['outliner', 'writer']" in printed
    assert type(namespace["answer"]).__name__ == "AgentResult"
    assert isinstance(namespace["answer"].output, namespace["Capital"])  # type: ignore[attr-defined,arg-type]


def test_the_server_example_runs(llama_server: str, capsys: pytest.CaptureFixture[str]) -> None:
    block = python_blocks()[1].replace(DOC_SERVER, llama_server)

    run_block(block)

    assert "['first', 'second'] 2" in capsys.readouterr().out


@pytest.mark.usefixtures("gguf_path")
def test_selectgraph_provider_llama_makes_agents_use_the_shipped_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from selectgraph.agents._defaults import default_provider

    monkeypatch.setenv("SELECTGRAPH_PROVIDER", "llama")
    monkeypatch.delenv("SELECTGRAPH_LLAMA_MODEL", raising=False)
    provider = default_provider()
    assert isinstance(provider, selectgraph.providers.LlamaCppProvider)
    assert provider.model_path == selectgraph.providers.smollm2_model_path()
