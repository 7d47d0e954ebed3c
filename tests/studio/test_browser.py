"""The studio in a real browser: Playwright driving Debian's headless Chromium.

The page is opened on a real server, a run of the newsroom example is started from
it, the nodes are seen lighting up in order, the editor's question is answered in
the form and the run is seen to finish. Screenshots go to test-artifacts/studio/.
Without Chromium or Playwright the tests skip, saying so (and fail under CI=true).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.studio.conftest import Served

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "studio"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = pytest.mark.slow

# Flags that keep Chromium off the network it cannot reach here and out of the sandbox
# it cannot make as root in a container.
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# Records every change of a node's state, in order, so the test sees the sequence.
WATCH_NODES = """
window.__sgStates = [];
new MutationObserver((changes) => {
  for (const change of changes) {
    const node = change.target;
    if (node.dataset && node.dataset.sgNode && node.dataset.sgState) {
      window.__sgStates.push([node.dataset.sgNode, node.dataset.sgState]);
    }
  }
}).observe(document.getElementById('diagram'), {
  attributes: true, subtree: true, attributeFilter: ['data-sg-state'],
});
"""


def _missing() -> str | None:
    if CHROMIUM is None:
        return "Chromium is not installed (Debian: apt-get install chromium)"
    if importlib.util.find_spec("playwright") is None:
        return "Playwright is not installed (pip install playwright)"
    return None


@pytest.fixture
async def page() -> AsyncIterator[Any]:
    reason = _missing()
    if reason is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and {reason}", pytrace=False)
        pytest.skip(reason)
    from playwright.async_api import async_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = await browser.new_context(viewport={"width": 1400, "height": 900})
        opened = await context.new_page()
        errors: list[str] = []
        opened.on("pageerror", lambda error: errors.append(str(error)))
        yield opened
        await browser.close()
        assert errors == [], f"the page raised: {errors}"


def newsroom() -> Any:
    import importlib
    import sys

    os.environ["SELECTGRAPH_STUDIO_FAST"] = ""  # agents take 0.4 s: visible steps
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        module = importlib.import_module("12_studio")
        return importlib.reload(module).graph
    finally:
        sys.path.remove(str(ROOT / "examples"))


async def test_a_run_lights_up_node_by_node_and_is_answered_in_the_form(
    page: Any, serve: Callable[..., Served]
) -> None:
    served = serve(newsroom())
    await page.goto(served.url)
    await page.wait_for_selector("body[data-ready=true]", timeout=30_000)
    await page.evaluate(WATCH_NODES)
    drawn = await page.evaluate(
        "[...document.querySelectorAll('#diagram g.node')].map(g => g.dataset.sgNode)"
    )
    assert {"intake", "science", "market", "write", "editor", "publish"} <= set(drawn)

    await page.fill("#run-input", '{"topic": "sodium batteries"}')
    await page.click("#start-run")
    await page.wait_for_selector("#interrupt-form:not(.hidden)", timeout=30_000)
    await page.screenshot(path=str(ARTIFACTS / "waiting-for-the-editor.png"), full_page=True)

    assert await page.inner_text("#run-status") == "interrupted"
    assert "Publish this draft?" in await page.inner_text("#interrupt-prompt")
    states: list[list[str]] = await page.evaluate("window.__sgStates")
    running = [node for node, state in states if state == "running"]
    assert running[0] == "intake"
    assert set(running[1:3]) == {"science", "market"}  # the parallel branches
    assert running[3:] == ["write", "editor"]
    assert ["editor", "paused"] in states
    branch = await page.get_attribute("#diagram g.node[data-sg-node=science]", "data-sg-branch")
    assert branch == "true"
    taken = await page.evaluate("document.querySelectorAll('#diagram path[data-sg-taken]').length")
    assert taken >= 5  # start, both branches, their join, write -> editor
    assert "science:" in await page.inner_text("#stream")  # streamed agent words

    await page.fill("#interrupt-answer", "publish")
    await page.click("#interrupt-submit")
    await page.wait_for_selector("body[data-run-status=done]", timeout=30_000)
    await page.screenshot(path=str(ARTIFACTS / "published.png"), full_page=True)

    final: dict[str, str] = await page.evaluate(
        "Object.fromEntries([...document.querySelectorAll('#diagram g.node')]"
        ".map(g => [g.dataset.sgNode, g.dataset.sgState || '']))"
    )
    for node in ("intake", "science", "market", "write", "editor", "publish"):
        assert final[node] == "done", final
    assert "PUBLISHED" in await page.inner_text("#stream")
    assert await page.locator("#interrupt-form").is_hidden()


async def test_earlier_runs_are_listed_and_forked_from_the_page(
    page: Any, serve: Callable[..., Served]
) -> None:
    from tests.studio.graphs import ticket_graph

    served = serve(ticket_graph())
    await page.goto(served.url)
    await page.wait_for_selector("body[data-ready=true]", timeout=30_000)
    await page.fill("#run-input", '{"text": "my invoice"}')
    await page.click("#start-run")
    await page.wait_for_selector("#interrupt-form:not(.hidden)", timeout=30_000)
    await page.fill("#interrupt-answer", "no")
    await page.click("#interrupt-submit")
    await page.wait_for_selector("body[data-run-status=done]", timeout=30_000)

    await page.click("#runs-panel summary")
    await page.wait_for_selector("#runs-list li", timeout=10_000)
    await page.click("#runs-list li")
    fork = page.locator("#history button[data-checkpoint-id]").first
    await fork.wait_for(timeout=10_000)
    history = await page.inner_text("#history")
    assert "interrupt" in history
    # Fork from the checkpoint where the run asked, and answer differently this time.
    fork_here = page.locator("#history li", has_text="interrupt").locator(
        "button[data-checkpoint-id]"
    )
    await fork_here.click()
    await page.wait_for_selector("#interrupt-form:not(.hidden)", timeout=30_000)
    await page.fill("#interrupt-answer", "yes")
    await page.click("#interrupt-submit")
    await page.wait_for_selector("body[data-run-status=done]", timeout=30_000)
    assert "approved=True" in await page.inner_text("#stream")
    await page.screenshot(path=str(ARTIFACTS / "forked.png"), full_page=True)


async def test_a_bad_input_is_shown_not_crashed_on(page: Any, serve: Callable[..., Served]) -> None:
    from tests.studio.graphs import ticket_graph

    served = serve(ticket_graph())
    await page.goto(served.url)
    await page.wait_for_selector("body[data-ready=true]", timeout=30_000)
    await page.fill("#run-input", '{"no_such_field": 1}')
    await page.click("#start-run")
    banner = page.locator("#error-banner")
    await banner.wait_for(state="visible", timeout=10_000)
    assert "does not fit the graph" in await banner.inner_text()


async def test_a_thread_is_opened_and_its_next_message_answered_on_the_page(
    page: Any, serve: Callable[..., Served], tmp_path: Path
) -> None:
    from selectgraph import SQLiteCheckpointStore
    from tests.studio.graphs import chat_graph

    store = SQLiteCheckpointStore(tmp_path / "runs.db")
    chat_graph().run("My name is Ann.", thread_id="ann", checkpoint_store=store)
    served = serve(chat_graph(), store=store)
    await page.goto(served.url)
    await page.wait_for_selector("body[data-ready=true]", timeout=30_000)
    await page.click("#threads-panel summary")
    await page.click("#threads-list li[data-thread-id=ann]", timeout=10_000)
    await page.wait_for_selector("#thread-messages li[data-role=assistant]", timeout=10_000)
    assert await page.inner_text("#thread-id") == "ann"
    messages = await page.locator("#thread-messages li").all_inner_texts()
    assert messages == [
        "user: My name is Ann.",
        'assistant (assistant): [local] reply to: "My name is Ann."',
    ]
    assert await page.locator("#thread-runs li").count() == 1
    assert await page.get_attribute("#thread-runs li", "data-status") == "done"

    await page.fill("#thread-message", "What is my name?")
    await page.select_option("#thread-strategy", "enqueue")
    await page.click("#thread-send")
    await page.wait_for_selector("body[data-run-status=done]", timeout=30_000)
    await page.wait_for_function(
        "document.querySelectorAll('#thread-messages li').length === 4", timeout=10_000
    )
    last = await page.locator("#thread-messages li").last.inner_text()
    assert last == 'assistant (assistant): [local] reply to: "What is my name?"'
    assert await page.locator("#thread-runs li").count() == 2
    assert (
        await page.get_attribute("#diagram g.node[data-sg-node=assistant]", "data-sg-state")
        == "done"
    )
    assert "What is my name?" in await page.inner_text("#stream")  # the answer, streamed
    await page.screenshot(path=str(ARTIFACTS / "thread.png"), full_page=True)

    # A run of the thread opens its timeline.
    await page.locator("#thread-runs li").first.click()
    await page.wait_for_function(
        "document.getElementById('run-id').textContent === "
        f"{json.dumps(await page.get_attribute('#thread-runs li >> nth=0', 'data-run-id'))}"
    )
    await page.wait_for_selector("body[data-run-status=done]", timeout=10_000)
    finished = page.locator("#events li[data-event=RunFinished]")
    await finished.wait_for(state="attached", timeout=10_000)  # in the folded Events panel


async def test_a_run_made_by_another_process_shows_its_timeline_and_is_answered(
    page: Any, serve: Callable[..., Served], tmp_path: Path
) -> None:
    from selectgraph import SQLiteCheckpointStore
    from tests.studio.graphs import ticket_graph

    db = tmp_path / "runs.db"
    made = subprocess.run(
        [sys.executable, "-m", "tests.studio.elsewhere", "ticket", str(db), "far"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    served = serve(ticket_graph(), store=SQLiteCheckpointStore(db), poll_interval=0.05)
    await page.goto(served.url)
    await page.wait_for_selector("body[data-ready=true]", timeout=30_000)
    await page.click("#runs-panel summary")
    await page.click("#runs-list li[data-run-id=far]", timeout=10_000)
    await page.wait_for_selector("#interrupt-form:not(.hidden)", timeout=10_000)
    await page.wait_for_selector(
        "#diagram g.node[data-sg-node=classify][data-sg-state=done]", timeout=10_000
    )
    assert (
        await page.get_attribute("#diagram g.node[data-sg-node=approve]", "data-sg-state")
        == "paused"
    )
    assert await page.inner_text("#run-status") == "interrupted"
    # Paused at its question after one step, as `selectgraph runs list` says (step 1).
    assert await page.inner_text("#run-step") == "1"
    assert await page.locator("#steps li").count() == 1
    assert "step 1" in await page.inner_text("#runs-list li[data-run-id=far]")
    kinds = await page.eval_on_selector_all(
        "#events li", "items => items.map(i => i.dataset.event)"
    )
    assert kinds[0] == "RunStarted"
    assert {"NodeStarted", "NodeFinished", "InterruptRaised", "RunPaused"} <= set(kinds)
    await page.click("#steps li >> nth=0")
    assert "category" in await page.inner_text("#state-view")  # the state after classify
    await page.screenshot(path=str(ARTIFACTS / "stored-run.png"), full_page=True)

    await page.fill("#interrupt-answer", "yes")
    await page.click("#interrupt-submit")
    await page.wait_for_selector("body[data-run-status=done]", timeout=30_000)
    assert (
        await page.get_attribute("#diagram g.node[data-sg-node=approve]", "data-sg-state") == "done"
    )
    assert "approved=True" in await page.inner_text("#stream")


MARKUP_NAMES = ["n<b>1</b><img src=x>", "`**bold**`", "a #lt;i#gt; b", 'say "hi" & <!-- x -->']


async def test_node_names_are_drawn_as_text_not_markup(
    page: Any, serve: Callable[..., Served]
) -> None:
    from selectgraph import END, AgentGraph
    from selectgraph.core._sentinels import EndType

    graph = AgentGraph("markup")
    followers: list[str | EndType] = [*MARKUP_NAMES[1:], END]
    for name, following in zip(MARKUP_NAMES, followers, strict=True):
        graph.add_node(name, lambda state: {}, next_node=following)
    served = serve(graph)
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    await page.goto(served.url)
    await page.wait_for_selector("body[data-ready=true]", timeout=30_000)
    elements = await page.evaluate(
        "[...document.querySelectorAll('#diagram b, #diagram img, #diagram i, #diagram strong,"
        " #diagram em')].map(e => e.outerHTML)"
    )
    assert elements == []
    labels: dict[str, str] = await page.evaluate(
        "Object.fromEntries([...document.querySelectorAll('#diagram g.node')]"
        ".map(g => [g.dataset.sgNode, g.textContent.trim()]))"
    )
    assert labels == {
        "__start__": "start",
        **{name: name for name in MARKUP_NAMES},
        "__end__": "END",
    }
    assert [url for url in requests if not url.startswith(served.url)] == []


async def open_stored_run(page: Any, served: Served, run_id: str) -> None:
    await page.goto(served.url)
    await page.wait_for_selector("body[data-ready=true]", timeout=30_000)
    await page.click("#runs-panel summary")
    await page.click(f"#runs-list li[data-run-id='{run_id}']", timeout=10_000)


async def test_a_stored_run_from_another_process_shows_its_timeline(
    page: Any, serve: Callable[..., Served], tmp_path: Path
) -> None:
    from selectgraph import SQLiteCheckpointStore
    from tests.studio.graphs import chat_graph

    db = tmp_path / "runs.db"
    made = subprocess.run(
        [sys.executable, "-m", "tests.studio.elsewhere", "chat", str(db), "far"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    store = SQLiteCheckpointStore(db)
    stored = [e.event for e in store.read_events("far")]
    node = next(e for e in stored if e["event"] == "NodeFinished")
    call = next(e for e in stored if e["event"] == "LLMCallFinished")
    served = serve(chat_graph(), store=store, poll_interval=0.05)
    await open_stored_run(page, served, "far")
    await page.wait_for_selector("body[data-run-status=done]", timeout=10_000)
    row = page.locator("#timeline .tl-row[data-node=assistant]")
    await row.wait_for(timeout=10_000)
    assert await row.get_attribute("data-outcome") == "success"
    shown = f"{round(node['duration_ms'])} ms"
    assert await row.locator(".tl-duration").inner_text() == shown
    # Beside its duration: the node's tokens, summed over its calls (one here).
    tokens = call["input_tokens"] + call["output_tokens"]
    assert await row.locator(".tl-usage").get_attribute("data-tokens") == str(tokens)
    assert (await row.locator(".tl-usage").inner_text()).startswith(f"{tokens} tokens")
    head = page.locator("#timeline .tl-call[data-kind=llm] .tl-call-head")
    text = await head.inner_text()
    assert f"{call['input_tokens']} in / {call['output_tokens']} out tokens" in text
    assert text.startswith("LLM local")
    # The header's time is the run's own (first event to last), not a clock of the page.
    first, last = stored[0]["timestamp"], stored[-1]["timestamp"]
    assert await page.inner_text("#run-elapsed") == f"{last - first:.1f}s"
    # The run stored no content: its prompt is said to be missing, not invented.
    await head.click()
    detail = page.locator("#timeline .tl-detail")
    assert await detail.get_attribute("data-captured") == "false"
    assert "hello there" not in await detail.inner_text()
    await page.screenshot(path=str(ARTIFACTS / "studio-timeline.png"), full_page=True)


async def test_a_calls_prompt_is_shown_only_with_content_capture_on(
    page: Any, serve: Callable[..., Served]
) -> None:
    from tests.studio.graphs import chat_graph

    for capture in (True, False):
        served = serve(chat_graph(), capture_content=capture)
        await page.goto(served.url)
        await page.wait_for_selector("body[data-ready=true]", timeout=30_000)
        await page.fill("#run-input", "tell me about owls")
        await page.click("#start-run")
        await page.wait_for_selector("body[data-run-status=done]", timeout=30_000)
        head = page.locator("#timeline .tl-call[data-kind=llm] .tl-call-head")
        await head.click()
        detail = page.locator("#timeline .tl-detail")
        await detail.wait_for(timeout=10_000)
        text = await detail.inner_text()
        assert await detail.get_attribute("data-captured") == str(capture).lower()
        if capture:
            assert "user: tell me about owls" in text
            assert '[local] reply to: "tell me about owls"' in text
            await page.screenshot(path=str(ARTIFACTS / "studio-prompt.png"), full_page=True)
        else:
            assert "owls" not in text
            assert "capture_content=True" in text


async def test_a_running_run_is_cancelled_from_the_page(
    page: Any, serve: Callable[..., Served], tmp_path: Path
) -> None:
    from tests.studio.graphs import Gate, gated_graph

    gate = Gate(tmp_path / "never")  # never opened: the run stays in its wait node
    served = serve(gated_graph(gate))
    await page.goto(served.url)
    await page.wait_for_selector("body[data-ready=true]", timeout=30_000)
    await page.fill("#run-input", "{}")
    await page.click("#start-run")
    await page.wait_for_selector("#timeline .tl-row[data-node=wait]", timeout=30_000)
    assert await page.get_attribute("#timeline .tl-row[data-node=wait]", "data-outcome") == (
        "running"
    )
    await page.click("#cancel-run")
    await page.wait_for_selector("body[data-run-status=cancelled]", timeout=30_000)
    assert await page.locator("#cancel-run").is_hidden()
    run_id = await page.inner_text("#run-id")
    assert app_status(served, run_id) == "cancelled"


def app_status(served: Served, run_id: str) -> str:
    import httpx

    return str(httpx.get(f"{served.url}/api/runs/{run_id}").json()["status"])


async def test_the_events_panel_folds_a_nodes_text_chunks_into_one_row(
    page: Any, serve: Callable[..., Served]
) -> None:
    served = serve(newsroom())
    await page.goto(served.url)
    await page.wait_for_selector("body[data-ready=true]", timeout=30_000)
    await page.fill("#run-input", '{"topic": "sodium batteries"}')
    await page.click("#start-run")
    await page.wait_for_selector("#interrupt-form:not(.hidden)", timeout=30_000)
    # The parallel branches are bars side by side in time.
    science = page.locator("#timeline .tl-row[data-node=science] .tl-bar")
    market = page.locator("#timeline .tl-row[data-node=market] .tl-bar")
    science_box, market_box = await science.bounding_box(), await market.bounding_box()
    assert science_box is not None
    assert market_box is not None
    assert science_box["x"] < market_box["x"] + market_box["width"]
    assert market_box["x"] < science_box["x"] + science_box["width"]  # they overlap
    await page.screenshot(path=str(ARTIFACTS / "studio-timeline-newsroom.png"), full_page=True)
    rows = page.locator("#events li[data-event=NodeChunk]")
    counts = [int(c) for c in await rows.evaluate_all("rs => rs.map(r => r.dataset.chunks)")]
    assert counts
    assert max(counts) > 1
    paths = await rows.evaluate_all("rs => rs.map(r => r.dataset.path)")
    assert "science" in paths
    assert sum(counts) > len(counts)  # fewer rows than chunks
    await page.locator("details:has(#events) > summary").click()  # the folded Events panel
    await rows.first.locator("summary").click()
    assert await rows.first.locator("pre").inner_text() != ""


async def test_a_checkpoints_state_is_edited_and_forked_with_the_parent_shown_on_both(
    page: Any, serve: Callable[..., Served]
) -> None:
    from tests.studio.graphs import ticket_graph

    served = serve(ticket_graph())
    await page.goto(served.url)
    await page.wait_for_selector("body[data-ready=true]", timeout=30_000)
    await page.fill("#run-input", '{"text": "my invoice"}')
    await page.click("#start-run")
    await page.wait_for_selector("#interrupt-form:not(.hidden)", timeout=30_000)
    parent = await page.inner_text("#run-id")
    await page.click("#runs-panel summary")
    await page.click(f"#runs-list li[data-run-id='{parent}']", timeout=10_000)
    after_classify = page.locator("#history li", has_text="at classify")
    await after_classify.locator("button[data-edit-checkpoint-id]").click()
    editor = after_classify.locator(".cp-editor textarea")
    await editor.wait_for(timeout=10_000)
    state = json.loads(await editor.input_value())
    assert state["category"] == "billing"
    await editor.fill(json.dumps({**state, "category": "refunds"}))
    await page.screenshot(path=str(ARTIFACTS / "studio-edit-fork.png"), full_page=True)
    await after_classify.locator("button.cp-fork-edited").click()
    await page.wait_for_function(
        f"document.getElementById('run-id').textContent !== {json.dumps(parent)}"
    )
    await page.wait_for_selector("#interrupt-form:not(.hidden)", timeout=30_000)
    assert "refunds" in await page.inner_text("#interrupt-payload")
    lineage = await page.inner_text("#run-lineage")
    assert lineage.startswith(f"forked from {parent} at step ")
    fork = await page.inner_text("#run-id")

    await page.click("#run-lineage a.parent-run")  # back to the parent: it lists its fork
    await page.wait_for_function(
        f"document.getElementById('run-id').textContent === {json.dumps(parent)}"
    )
    link = page.locator(f"#run-lineage a.fork-run[data-run-id='{fork}']")
    await link.wait_for(timeout=10_000)
    assert (await page.inner_text("#run-lineage")).startswith("forks: ")


async def test_two_runs_are_picked_and_compared_side_by_side(
    page: Any, serve: Callable[..., Served]
) -> None:
    from tests.studio.graphs import ticket_graph

    served = serve(ticket_graph())
    await page.goto(served.url)
    await page.wait_for_selector("body[data-ready=true]", timeout=30_000)
    for text, answer in (("my invoice", "yes"), ("hello", "no")):
        await page.fill("#run-input", json.dumps({"text": text}))
        await page.click("#start-run")
        await page.wait_for_selector("#interrupt-form:not(.hidden)", timeout=30_000)
        await page.fill("#interrupt-answer", answer)
        await page.click("#interrupt-submit")
        await page.wait_for_selector("body[data-run-status=done]", timeout=30_000)
    await page.click("#runs-panel summary")
    picks = page.locator("#runs-list .compare-pick")
    await picks.nth(1).wait_for(timeout=10_000)
    await picks.nth(0).check()
    await picks.nth(1).check()
    await page.click("#compare-runs")
    table = page.locator("#compare-table")
    await table.wait_for(timeout=10_000)
    path = await table.locator("tr[data-row=path] td").all_inner_texts()
    assert path == ["classify → approve", "classify → approve"]
    category = await table.locator("tr[data-row='state.category'] td").all_inner_texts()
    assert sorted(category) == ['"billing"', '"general"']
    assert await table.locator("tr[data-row='state.category'] td.differs").count() == 2
    assert await table.locator("tr[data-row=duration] td").count() == 2
    await page.screenshot(path=str(ARTIFACTS / "studio-compare.png"), full_page=True)


async def test_hot_reload_draws_the_changed_graph_and_keeps_the_runs(
    page: Any, serve: Callable[..., Served], hot_module: tuple[Path, Any]
) -> None:
    from tests.studio.conftest import write_module

    path, module = hot_module
    served = serve(module.graph, reload=True, reload_interval=0.05)
    await page.goto(served.url)
    await page.wait_for_selector("body[data-ready=true]", timeout=30_000)
    await page.fill("#run-input", "{}")
    await page.click("#start-run")
    await page.wait_for_selector("body[data-run-status=done]", timeout=30_000)
    before = await page.inner_text("#run-id")
    assert await page.locator("#diagram g.node[data-sg-node=second]").count() == 0

    write_module(path, second=True)
    await page.wait_for_selector("#diagram g.node[data-sg-node=second]", timeout=30_000)
    assert await page.get_attribute("body", "data-graph-version") == "2"
    await page.fill("#run-input", "{}")
    await page.click("#start-run")
    await page.wait_for_selector(
        "#diagram g.node[data-sg-node=second][data-sg-state=done]", timeout=30_000
    )
    await page.click("#runs-panel summary")
    await page.wait_for_selector(f"#runs-list li[data-run-id='{before}']", timeout=10_000)
    await page.screenshot(path=str(ARTIFACTS / "studio-reloaded.png"), full_page=True)
