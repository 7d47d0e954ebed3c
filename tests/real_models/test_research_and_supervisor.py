"""The research graphs and the supervisors on a real model (SmolLM2-135M).

The supervisors and the research graphs run both in-process and through
``selectgraph local-server`` (llama.cpp's server, requests queued).

The model is tiny, so these tests check that the machinery holds with a model that
really generates (grammar-constrained JSON for every structured answer, prose
elsewhere), not what it writes: every supervisor strategy ends with an answer (or
says why it fell back), and every research run keeps its time limit (the deadline
plus 5 seconds, the issue's bound) and reports what it gathered. Each test keeps
its budgets small so the whole tier stays well under 10 minutes on two cores.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from selectgraph import Agent, AgentConfig, SupervisorAgent, SupervisorStrategy
from selectgraph.providers._base import Provider
from selectgraph.providers._llama import LlamaCppProvider
from selectgraph.providers._openai import OpenAIProvider
from selectgraph.research import DeepResearch, IterativeResearch, LocalCorpusSearch, ResearchBudget
from tests.real_models.conftest import SERVER_MODEL, _free_port, local_server_command, serving

pytestmark = [pytest.mark.real_model, pytest.mark.slow]

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "research_corpus"
QUESTION = "What is the round-trip efficiency of pumped hydro storage?"
OVERSHOOT = 5.0
"""Seconds past its time limit a research run may take (issue 22)."""


@pytest.fixture(scope="module")
def roomy_provider(gguf_path: Path) -> Iterator[LlamaCppProvider]:
    """The model with room for a supervisor's prompts (schema, team, turns): 2048 tokens."""
    with LlamaCppProvider(gguf_path, n_ctx=2048, seed=1234) as provider:
        yield provider


@pytest.fixture(scope="module")
def roomy_server(gguf_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``selectgraph local-server`` with a 2048-token context; yields its /v1 base URL."""
    port = _free_port()
    log_path = tmp_path_factory.mktemp("roomy-server") / "server.log"
    with serving(local_server_command(gguf_path, port, 2048), port, log_path) as base_url:
        yield base_url


@pytest.fixture(params=["in_process", "server"])
def team_provider(request: pytest.FixtureRequest) -> Iterator[Provider]:
    """The model for a supervisor and its members: in-process, or through the server."""
    if request.param == "in_process":
        yield request.getfixturevalue("roomy_provider")
        return
    base_url = request.getfixturevalue("roomy_server")
    yield OpenAIProvider(base_url=base_url, default_model=SERVER_MODEL, timeout=60.0)


# ---------------------------------------------------------------------------- supervisors
@pytest.mark.timeout(300)  # MAGENTIC through the server: about 65 s on a busy 2-core machine
@pytest.mark.parametrize("strategy", list(SupervisorStrategy))
def test_each_supervisor_strategy_finishes_a_two_member_task(
    strategy: SupervisorStrategy, team_provider: Provider
) -> None:
    roomy_provider = team_provider
    team = {
        "poet": Agent(
            AgentConfig(name="poet", instructions="Write one line of verse.", max_tokens=30),
            provider=roomy_provider,
        ),
        "critic": Agent(
            AgentConfig(
                name="critic", instructions="Improve the line you are given.", max_tokens=30
            ),
            provider=roomy_provider,
        ),
    }
    # MAGENTIC asks for a progress ledger before every turn and once more to finish:
    # one round (one member's turn) keeps it near 30 s on two cores; the others take two.
    supervisor = SupervisorAgent(
        agents=team,
        provider=roomy_provider,
        strategy=strategy,
        max_rounds=1 if strategy is SupervisorStrategy.MAGENTIC else 2,
        max_stalls=2,
        call_max_tokens=200,
        call_timeout=30.0,
    )
    result = supervisor.run("Write one line about the sea.")

    assert result.stop_reason == "end"
    assert result.turns, "no member worked"
    assert all(turn.agent in team for turn in result.turns)
    assert isinstance(result.content, str)
    assert result.content.strip(), "no usable answer"
    if result.quality != "clean":
        # Whatever the small model got wrong is said, never raised.
        assert result.degraded_reasons
    assert result.total_usage.calls >= len(result.turns) + 1


# ------------------------------------------------------------------------------- research
def test_a_research_loop_on_a_real_model_writes_a_cited_report(
    llama_provider: LlamaCppProvider,
) -> None:
    research = IterativeResearch(
        tools=[LocalCorpusSearch(CORPUS)],
        provider=llama_provider,
        budget=ResearchBudget(max_iterations=1, max_seconds=40.0, reserve_seconds=15.0),
        max_evidence=3,
        max_output_tokens=60,
    )
    started = time.perf_counter()
    result = research.run(QUESTION)
    elapsed = time.perf_counter() - started

    print(f"\nwall time {elapsed:.2f} s for a 40 s time limit")  # for the closing note
    assert elapsed <= 40.0 + OVERSHOOT
    assert result.stop_reason == "end"
    assert result.node_order[-2:] == ["write", "report"]
    assert result.sources
    assert all((CORPUS / source.source_id).is_file() for source in result.sources)
    assert "## Sources" in result.markdown
    [section] = result.sections
    assert section.text or section.error  # the model wrote, or the report says why not
    assert result.total_usage.calls >= 3
    if result.quality != "clean":
        assert result.degraded_reasons


def test_the_iterative_graph_keeps_a_small_time_budget(team_provider: Provider) -> None:
    limit = 15.0
    research = IterativeResearch(
        tools=[LocalCorpusSearch(CORPUS)],
        provider=team_provider,
        budget=ResearchBudget(max_iterations=5, max_seconds=limit, reserve_seconds=5.0),
        max_evidence=3,
        max_output_tokens=80,
    )
    started = time.perf_counter()
    result = research.run(QUESTION)
    elapsed = time.perf_counter() - started

    print(f"\nwall time {elapsed:.2f} s for a {limit} s time limit")  # for the closing note
    assert elapsed <= limit + OVERSHOOT, f"{elapsed:.1f} s for a {limit} s budget"
    assert result.stop_reason == "end"
    assert result.markdown.startswith("# ")
    if result.quality != "clean":
        assert result.degraded_reasons
        assert all(f"> {reason}" in result.markdown for reason in result.degraded_reasons)


def test_the_deep_graph_keeps_a_small_time_budget(team_provider: Provider) -> None:
    limit = 30.0
    research = DeepResearch(
        tools=[LocalCorpusSearch(CORPUS)],
        provider=team_provider,
        budget=ResearchBudget(max_iterations=2, max_seconds=limit, reserve_seconds=6.0),
        max_sections=2,
        max_evidence=3,
        max_output_tokens=60,
    )
    started = time.perf_counter()
    result = research.run("How do batteries compare with pumped hydro?")
    elapsed = time.perf_counter() - started

    print(f"\nwall time {elapsed:.2f} s for a {limit} s time limit")  # for the closing note
    assert elapsed <= limit + OVERSHOOT, f"{elapsed:.1f} s for a {limit} s budget"
    assert result.stop_reason == "end"
    assert result.markdown.startswith("# ")
    assert result.sections or result.degraded_reasons
    if result.quality != "clean":
        assert result.degraded_reasons


def test_a_run_is_cancelled_at_its_deadline_mid_call(llama_provider: LlamaCppProvider) -> None:
    # 800 tokens of thinking take this model about ten seconds: the 2 s limit cuts the
    # call while it generates, and the run reports the (empty) research honestly.
    limit = 2.0
    research = IterativeResearch(
        tools=[LocalCorpusSearch(CORPUS)],
        provider=llama_provider,
        budget=ResearchBudget(max_iterations=2, max_seconds=limit, reserve_seconds=0.5),
        max_output_tokens=800,
    )
    started = time.perf_counter()
    result = research.run(QUESTION)
    elapsed = time.perf_counter() - started

    print(f"\nwall time {elapsed:.2f} s for a {limit} s time limit")  # for the closing note
    assert elapsed <= limit + OVERSHOOT, f"{elapsed:.1f} s for a {limit} s budget"
    cut = [e for e in result.state.errors if e.get("type") == "DeadlineReached"]
    assert any("was cut at the run's time limit" in str(e.get("error")) for e in cut), cut
    assert result.quality == "degraded"
    assert any("time limit" in reason for reason in result.degraded_reasons)
    # The cancelled generation freed the model: the next call starts at once.
    quick = Agent(AgentConfig(name="quick", max_tokens=5), provider=llama_provider)
    started = time.perf_counter()
    quick.run("Say hi.")
    assert time.perf_counter() - started < 10.0
