"""Every research model call is bounded, and prompts stay small (issue 22)."""

from __future__ import annotations

from pathlib import Path

import pytest

from selectgraph.agents._defaults import DEFAULT_MAX_TOKENS
from selectgraph.providers import LocalProvider
from selectgraph.research import IterativeResearch, LocalCorpusSearch, ResearchBudget
from selectgraph.research._prompts import gap_prompt
from selectgraph.research._state import Evidence


def test_every_call_of_a_research_run_sends_a_bound(tmp_path: Path) -> None:
    (tmp_path / "tides.md").write_text("# Tides\nThe moon's gravity raises tides.\n")
    provider = LocalProvider()
    research = IterativeResearch(
        tools=[LocalCorpusSearch(tmp_path)],
        provider=provider,
        budget=ResearchBudget(max_iterations=2),
    )

    research.run("What causes tides?")

    assert provider.requests
    structured = [r for r in provider.requests if r.response_format is not None]
    assert structured  # the gap judge and the selector answer in JSON
    assert {r.max_tokens for r in provider.requests} == {DEFAULT_MAX_TOKENS}


def test_the_gap_judge_sees_only_the_newest_passages() -> None:
    evidence = [
        Evidence(source_id=f"doc{i}.md", title=f"Doc {i}", snippet=f"passage {i}")
        for i in range(30)
    ]

    prompt = gap_prompt("q", "", "", evidence, [])

    assert "(22 earlier passages not shown)" in prompt
    assert "passage 29" in prompt
    assert "passage 21" not in prompt


async def test_cancelling_the_search_step_stops_its_searches() -> None:
    import asyncio

    from selectgraph.research._iterative import _run_tasks
    from selectgraph.research._state import ToolTask

    started, stopped = asyncio.Event(), asyncio.Event()
    finished: list[str] = []

    class Slow:
        async def search(self, query: str, *, limit: int = 5) -> list[object]:
            started.set()
            try:
                await asyncio.Event().wait()  # never set: only a cancel ends it
            except asyncio.CancelledError:
                stopped.set()
                raise
            finished.append(query)
            return []

    tasks = [ToolTask(tool="web", query="q1", gap="g")]
    step = asyncio.ensure_future(_run_tasks({"web": Slow()}, tasks, "Q", 5, None))  # type: ignore[dict-item]
    await started.wait()

    step.cancel()
    with pytest.raises(asyncio.CancelledError):
        await step

    assert stopped.is_set()  # the search was cancelled with its step, not left running
    assert finished == []
