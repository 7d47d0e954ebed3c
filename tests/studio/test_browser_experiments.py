"""Experiments, schema forms and failed forks in a real browser (Playwright, Debian's Chromium).

Two experiments are kept by ``selectgraph eval`` run in other processes, then listed,
opened and compared on the page; a question with a Pydantic response schema is
answered through the form built from it (a wrong answer refused with its field named);
an edited fork whose run fails is shown failed, with its parent. Screenshots go to
test-artifacts/studio/.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.studio.conftest import Served
from tests.studio.test_browser import ARTIFACTS, ROOT, page  # noqa: F401 (the fixture)

pytestmark = pytest.mark.slow


def selectgraph_eval(graph: str, dataset: Path, db: Path, name: str) -> None:
    """``selectgraph eval`` in a process of its own, keeping experiment ``name`` in ``db``."""
    made = subprocess.run(
        [
            sys.executable,
            "-m",
            "selectgraph",
            "eval",
            f"tests.studio.evalgraphs:{graph}",
            str(dataset),
            "--store",
            f"sqlite:///{db}",
            "--experiment",
            name,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert made.returncode == 0, made.stdout + made.stderr


async def test_experiments_are_listed_opened_and_compared_on_the_page(
    page: Any,  # noqa: F811
    serve: Callable[..., Served],
    tmp_path: Path,
) -> None:
    from selectgraph import SQLiteCheckpointStore
    from tests.studio.evalgraphs import v1, write_datasets

    first, second = write_datasets(tmp_path)
    db = tmp_path / "evals.db"
    selectgraph_eval("v1", first, db, "v1")
    selectgraph_eval("v2", second, db, "v2")
    served = serve(v1, store=SQLiteCheckpointStore(db))
    await page.goto(served.url)
    await page.wait_for_selector("body[data-ready=true]", timeout=30_000)

    await page.click("#experiments-panel summary")
    rows = page.locator("#experiments-list tr[data-experiment]")
    await rows.nth(1).wait_for(timeout=10_000)
    assert await rows.evaluate_all("rs => rs.map(r => r.dataset.experiment)") == ["v2", "v1"]
    cells = await page.locator("#experiments-list tr[data-experiment=v1] td").all_inner_texts()
    assert cells[1:5] == ["v1", "first", "5", "3/5 (60%)"]

    await page.click("#experiments-list tr[data-experiment=v1] a.experiment-open")
    cases = page.locator("#experiment-cases tr[data-case]")
    await cases.nth(4).wait_for(timeout=10_000)
    q = await page.locator("#experiment-cases tr[data-case=q] td").all_inner_texts()
    assert q[:6] == ["q", "q", '{"answer":"no"}', '{"answer":"Q"}', "exact ✗", "fail"]
    assert await page.get_attribute("#experiment-cases tr[data-case=abc]", "data-passed") == (
        "true"
    )
    await page.screenshot(path=str(ARTIFACTS / "studio-experiment.png"), full_page=True)

    # A case opens its run: the timeline of the run the experiment kept.
    run_id = await page.get_attribute("#experiment-cases tr[data-case=q] a.case-run", "data-run-id")
    await page.click("#experiment-cases tr[data-case=q] a.case-run")
    await page.wait_for_function(
        f"document.getElementById('run-id').textContent === {json.dumps(run_id)}"
    )
    await page.wait_for_selector("body[data-run-status=done]", timeout=10_000)
    await page.locator("#timeline .tl-row[data-node=shout]").wait_for(timeout=10_000)

    await page.check("#experiments-list tr[data-experiment=v2] .experiment-pick")
    await page.check("#experiments-list tr[data-experiment=v1] .experiment-pick")
    await page.click("#compare-experiments")
    table = page.locator("#experiments-compare-table")
    await table.wait_for(timeout=10_000)
    changes = await table.locator("tr[data-case]").evaluate_all(
        "rs => Object.fromEntries(rs.map(r => [r.dataset.case, r.dataset.change]))"
    )
    assert changes == {
        "abc": "broke",
        "q": "fixed",
        "hi": "same",
        "zz": "changed",
        "old": "removed",
        "new": "added",
    }
    assert await page.inner_text("#experiments-compare h3") == "v1 → v2"  # the older first
    counts = await page.inner_text("#experiments-compare .experiment-counts")
    assert counts.startswith("pass rate 60% → 60%; 1 fixed, 1 broke, 1 changed, 1 same")
    await page.locator("#experiments-compare").scroll_into_view_if_needed()
    await page.screenshot(path=str(ARTIFACTS / "studio-experiments-compare.png"), full_page=True)


async def test_a_schema_question_is_answered_through_its_form(
    page: Any,  # noqa: F811
    serve: Callable[..., Served],
) -> None:
    from tests.studio.graphs import review_graph

    served = serve(review_graph())
    await page.goto(served.url)
    await page.wait_for_selector("body[data-ready=true]", timeout=30_000)
    await page.fill("#run-input", '{"text": "a draft"}')
    await page.click("#start-run")
    await page.wait_for_selector("#interrupt-form:not(.hidden)", timeout=30_000)
    fields = page.locator("#interrupt-fields .sg-field")
    kinds = await fields.evaluate_all(
        "fs => Object.fromEntries(fs.map(f => [f.dataset.field, f.dataset.kind]))"
    )
    assert kinds == {
        "approve": "boolean",
        "score": "integer",
        "tone": "enum",
        "note": "string",
        "tags": "json",
    }
    assert await page.locator("#interrupt-free").is_hidden()
    tones = await page.locator("#sg-answer-tone option").all_inner_texts()
    assert tones == ["formal", "casual"]

    await page.check("#sg-answer-approve")
    await page.fill("#sg-answer-score", "9")
    await page.select_option("#sg-answer-tone", label="casual")
    await page.fill("#sg-answer-note", "reads well")
    await page.click("#interrupt-submit")
    error = page.locator(".sg-field[data-field=score] .field-error")
    await page.wait_for_selector(".sg-field[data-field=score][data-invalid=true]", timeout=10_000)
    assert "score: 9 is greater than the maximum of 5" in await error.inner_text()
    assert "score" in await page.inner_text("#interrupt-error")
    assert await page.locator(".sg-field[data-invalid=true]").count() == 1  # only the score
    assert await page.inner_text("#run-status") == "interrupted"
    await page.screenshot(path=str(ARTIFACTS / "studio-schema-form.png"), full_page=True)

    await page.fill("#sg-answer-score", "4")
    await page.fill("#sg-answer-tags", '["short"]')
    await page.click("#interrupt-submit")
    await page.wait_for_selector("body[data-run-status=done]", timeout=30_000)
    assert "score=4" in await page.inner_text("#stream")
    state = await page.inner_text("#state-view")
    assert '"tone":"casual"' in state.replace(" ", "")


async def test_an_edited_fork_whose_run_fails_shows_failed_with_its_parent(
    page: Any,  # noqa: F811
    serve: Callable[..., Served],
) -> None:
    from tests.studio.graphs import fragile_ticket_graph

    served = serve(fragile_ticket_graph())
    await page.goto(served.url)
    await page.wait_for_selector("body[data-ready=true]", timeout=30_000)
    await page.fill("#run-input", '{"text": "my invoice"}')
    await page.click("#start-run")
    await page.wait_for_selector("body[data-run-status=done]", timeout=30_000)
    parent = await page.inner_text("#run-id")
    await page.click("#runs-panel summary")
    await page.click(f"#runs-list li[data-run-id='{parent}']", timeout=10_000)
    after_classify = page.locator("#history li", has_text="at classify")
    await after_classify.locator("button[data-edit-checkpoint-id]").click()
    editor = after_classify.locator(".cp-editor textarea")
    await editor.wait_for(timeout=10_000)
    state = json.loads(await editor.input_value())

    await editor.fill(json.dumps({**state, "category": 5}))  # not a string: refused
    await after_classify.locator("button.cp-fork-edited").click()
    banner = page.locator("#error-banner")
    await banner.wait_for(timeout=10_000)
    assert "category" in await banner.inner_text()
    assert await page.inner_text("#run-id") == parent  # no fork was made

    await editor.fill(json.dumps({**state, "category": "refunds"}))  # fits; the run fails
    await after_classify.locator("button.cp-fork-edited").click()
    await page.wait_for_function(
        f"document.getElementById('run-id').textContent !== {json.dumps(parent)}"
    )
    await page.wait_for_selector("body[data-run-status=failed]", timeout=30_000)
    lineage = await page.inner_text("#run-lineage")
    assert lineage.startswith(f"forked from {parent} at step ")
    assert "refunds cannot be approved here" in await banner.inner_text()
    # The node that raised is closed on the timeline as a failure, not left running.
    row = page.locator("#timeline .tl-row[data-node=approve]").last
    await row.wait_for(timeout=10_000)
    assert await row.get_attribute("data-outcome") == "failure"
    await page.screenshot(path=str(ARTIFACTS / "studio-failed-fork.png"), full_page=True)

    await page.click("#run-lineage a.parent-run")  # the parent lists its failed fork
    await page.wait_for_function(
        f"document.getElementById('run-id').textContent === {json.dumps(parent)}"
    )
    await page.locator("#run-lineage a.fork-run").wait_for(timeout=10_000)


async def test_a_question_whose_answer_is_one_word_of_a_list_gets_a_choice(
    page: Any,  # noqa: F811
    serve: Callable[..., Served],
) -> None:
    from tests.studio.graphs import choice_graph

    served = serve(choice_graph())
    await page.goto(served.url)
    await page.wait_for_selector("body[data-ready=true]", timeout=30_000)
    await page.click("#start-run")  # the box left empty: the state's defaults
    await page.wait_for_selector("#interrupt-form:not(.hidden)", timeout=30_000)
    field = page.locator("#interrupt-fields .sg-field")
    assert await field.count() == 1
    assert await field.get_attribute("data-kind") == "enum"
    assert await page.locator("#sg-answer-value option").all_inner_texts() == ["ship", "hold"]
    await page.select_option("#sg-answer-value", label="hold")
    await page.click("#interrupt-submit")
    await page.wait_for_selector("body[data-run-status=done]", timeout=30_000)
    assert "picked hold" in await page.inner_text("#stream")
