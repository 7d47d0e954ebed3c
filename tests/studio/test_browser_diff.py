"""What a step changed, nested timelines with usage, and another process's cancel, in a browser.

Playwright drives Debian's Chromium on a real studio. A run stored by another process
(SQLite) shows, per step, each changed key's old and new value; a run with a subgraph
and a tool-calling agent shows its nested rows, its tool call and each node's tokens;
a run another process drives shows Cancel disabled, saying why. Screenshots go to
test-artifacts/studio/.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.studio.conftest import Served
from tests.studio.test_api import elsewhere, finished
from tests.studio.test_browser import ARTIFACTS, ROOT, page  # noqa: F401 (the fixture)

pytestmark = pytest.mark.slow


async def open_stored_run(tab: Any, served: Served, run_id: str) -> None:
    await tab.goto(served.url)
    await tab.wait_for_selector("body[data-ready=true]", timeout=30_000)
    await tab.click("#runs-panel summary")
    await tab.click(f"#runs-list li[data-run-id='{run_id}']", timeout=10_000)


async def state_lines(tab: Any) -> dict[str, tuple[str, str]]:
    """The state view's lines: key -> (how it changed, the line's text)."""
    lines = await tab.eval_on_selector_all(
        "#state-view div", "ds => ds.map(d => [d.dataset.key, d.dataset.change, d.textContent])"
    )
    return {key: (change, text) for key, change, text in lines}


async def test_a_stored_runs_steps_show_each_changed_keys_old_and_new_value(
    page: Any,  # noqa: F811
    serve: Callable[..., Served],
    tmp_path: Path,
) -> None:
    from selectgraph import SQLiteCheckpointStore
    from tests.studio.graphs import words_graph

    db = tmp_path / "runs.db"
    finished(elsewhere("words", str(db), "far"))
    store = SQLiteCheckpointStore(db)
    # The other process's log carries no updates: the diff comes from the checkpoints.
    stored = [e.event for e in store.read_events("far")]
    assert all(e.get("update") is None for e in stored if e["event"] == "NodeFinished")
    served = serve(words_graph(), store=store, poll_interval=0.05)
    await open_stored_run(page, served, "far")
    await page.wait_for_selector("body[data-run-status=done]", timeout=10_000)
    steps = page.locator("#steps li")
    await page.wait_for_function(
        "document.querySelectorAll('#steps li').length === 2"
        " && document.querySelector('#steps li:nth-child(2)').textContent.includes(',')",
        timeout=10_000,
    )
    assert await steps.all_inner_texts() == ["draft: word, count", "final: word, count"]

    await steps.nth(0).click()
    first = await state_lines(page)
    assert first["word"] == ("changed", 'word: "none" → "draft"')
    assert first["count"] == ("added", "+ count: 1")

    await steps.nth(1).click()
    second = await state_lines(page)
    assert second["word"] == ("changed", 'word: "draft" → "final"')
    assert second["count"] == ("changed", "count: 1 → 2")
    await page.screenshot(path=str(ARTIFACTS / "studio-state-diff.png"), full_page=True)


async def test_a_subgraphs_nodes_nest_and_a_tool_call_and_node_tokens_are_shown(
    page: Any,  # noqa: F811
    serve: Callable[..., Served],
) -> None:
    from tests.studio.graphs import nested_tool_graph

    served = serve(nested_tool_graph(), capture_content=True)
    await page.goto(served.url)
    await page.wait_for_selector("body[data-ready=true]", timeout=30_000)
    await page.fill("#run-input", "go")
    await page.click("#start-run")
    await page.wait_for_selector("body[data-run-status=done]", timeout=30_000)
    timeline = page.locator("#timeline")
    await timeline.locator(".tl-row[data-node=helper][data-outcome=success]").wait_for(
        timeout=10_000
    )
    # The subgraph's node is a row under it, one level deeper.
    assert await timeline.locator(".tl-row[data-node=prepare]").get_attribute("data-depth") == "0"
    assert await timeline.locator(".tl-row[data-node=tidy]").get_attribute("data-depth") == "1"
    assert "↳ tidy" in await timeline.locator(".tl-row[data-node=tidy] .tl-label").inner_text()
    tool = timeline.locator(".tl-call[data-kind=tool] .tl-call-head")
    head = await tool.inner_text()
    assert head.startswith("tool lookup · ")
    assert not head.endswith("…")  # finished: its duration is shown
    await tool.click()
    detail = await timeline.locator(".tl-call[data-kind=tool] .tl-detail").inner_text()
    assert '"query": "owls"' in detail
    assert "result: owls: birds of prey that hunt at night" in detail
    assert await timeline.locator(".tl-call[data-kind=llm]").count() == 2

    # The agent's row sums its two LLM calls' tokens, as the run's events count them.
    run_id = await page.inner_text("#run-id")
    records = events_of(served, run_id)
    calls = [r for r in records if r["event"] == "LLMCallFinished"]
    assert len(calls) == 2
    tokens = sum(r["input_tokens"] + r["output_tokens"] for r in calls)
    assert tokens > 0
    usage = timeline.locator(".tl-row[data-node=helper] .tl-usage")
    assert await usage.get_attribute("data-tokens") == str(tokens)
    assert (await usage.inner_text()).startswith(f"{tokens} tokens")
    # Nodes that called no model show no usage.
    assert await timeline.locator(".tl-row[data-node=tidy] .tl-usage").count() == 0
    await page.screenshot(path=str(ARTIFACTS / "studio-timeline-nested.png"), full_page=True)


def events_of(served: Served, run_id: str) -> list[dict[str, Any]]:
    """The run's records as the API serves them (the run has ended)."""
    page_ = httpx.get(
        f"{served.url}/api/runs/{run_id}/events", headers={"Accept": "application/json"}
    ).json()
    assert page_["ended"], page_
    return page_["events"]  # type: ignore[no-any-return]


async def test_another_processs_running_run_shows_cancel_disabled_saying_why(
    page: Any,  # noqa: F811
    serve: Callable[..., Served],
    tmp_path: Path,
) -> None:
    from selectgraph import SQLiteCheckpointStore
    from tests.studio.graphs import Gate, gated_graph

    db, release = tmp_path / "runs.db", tmp_path / "release"
    store = SQLiteCheckpointStore(db)
    process = elsewhere("gated", str(db), "busy", str(release))
    try:
        deadline = time.monotonic() + 60  # a safety net only: the loop ends on the checkpoint
        while store.head("busy") is None:
            assert time.monotonic() < deadline, "the other process saved no checkpoint"
            time.sleep(0.02)
        served = serve(gated_graph(Gate(release)), store=store, poll_interval=0.05)
        await open_stored_run(page, served, "busy")
        await page.wait_for_selector("body[data-run-status=running]", timeout=10_000)
        cancel = page.locator("#cancel-run")
        assert await cancel.is_visible()
        assert await cancel.is_disabled()
        assert await cancel.get_attribute("title") == (
            "this run is driven by another process; cancel it there"
        )
        await page.screenshot(path=str(ARTIFACTS / "studio-cancel-elsewhere.png"), full_page=True)
        Gate(release).open()
        finished(process)
        await page.wait_for_selector("body[data-run-status=done]", timeout=30_000)
        assert await cancel.is_hidden()
    finally:
        Gate(release).open()
        process.wait(timeout=60)
