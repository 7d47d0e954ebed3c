"""The documentation stays true: names, links, README code and docstring examples."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import re
import sys
import tempfile
from pathlib import Path

import pytest

import selectgraph
import selectgraph.agents
import selectgraph.observe
import selectgraph.providers
import selectgraph.research
import selectgraph.supervisor

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


@pytest.mark.parametrize(
    "module",
    [
        selectgraph,
        selectgraph.agents,
        selectgraph.providers,
        selectgraph.observe,
        selectgraph.supervisor,
        selectgraph.research,
    ],
)
def test_every_public_name_is_in_the_api_reference(module: object) -> None:
    reference = (DOCS / "api.md").read_text()
    missing = [
        name
        for name in module.__all__  # type: ignore[attr-defined]
        if not re.search(rf"\b{re.escape(name)}\b", reference)
    ]
    assert missing == []


def _markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md")), ROOT / "benchmarks" / "README.md"]


@pytest.mark.parametrize("page", _markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", page.read_text()):
        if "://" in target:
            continue
        assert (page.parent / target).exists(), f"{page.name} links to missing {target}"


def test_readme_code_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SELECTGRAPH_PROVIDER", "local")
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert len(blocks) >= 2
    namespace: dict[str, object] = {}
    for block in blocks:
        # dont_inherit: run as a user would, without this module's __future__ imports.
        exec(compile(block, "README.md", "exec", dont_inherit=True), namespace)
    printed = capsys.readouterr().out
    assert "['write', 'review', 'write', 'review', 'write', 'review']" in printed
    assert "reply to" in printed  # the offline agent chain answered


NOT_RUN_HERE = {
    "howto/local-models.md": "needs a model server; tests/real_models/test_local_models_doc.py",
    "howto/checkpoint-stores.md": "needs Postgres; tests/persistence/test_docs_page.py",
}
"""Pages with code that another test runs, and why it is not run here."""

RUNNABLE_PAGES = [
    "howto/tracing.md",
    "howto/guardrails.md",
    "agents.md",
    "concepts.md",
    "events.md",
    "howto/budgets.md",
    "howto/declarative.md",
    "howto/errors.md",
    "howto/hitl.md",
    "howto/node-cache.md",
    "howto/parallel.md",
    "howto/research.md",
    "howto/routing.md",
    "howto/streaming.md",
    "howto/subgraphs.md",
    "howto/testing.md",
    "howto/time-travel.md",
    "persistence.md",
    "security.md",
    "supervisor.md",
]
"""Pages whose code blocks run top to bottom, in one namespace, as written."""

PRINTED = {
    "howto/tracing.md": [
        "invoke_workflow chain",
        "  invoke_agent researcher",
        "    execute_tool lookup",
        "  invoke_agent writer",
        "gen_ai.operation.name = chat",
        "gen_ai.usage.input_tokens = 47",
        "tool lookup call_1_1",
    ],
    "howto/declarative.md": [
        "classify -> billing ['tagged billing', 'billing']",
        "classify -> research -> general ['tagged other', 'looked up How to export?', 'general']",
    ],
    "howto/errors.md": [
        "fetch 2 node_exception",
        "ConnectionError('https://example.com/world.rss is not answering')",
        "['load', 'fetch']",
    ],
    "howto/hitl.md": [
        "end published ['draft', 'review', 'publish']",
        "news-1|1:confirm|1 To all 40,000 subscribers. Sure?",
        "['chg-1|start:0/2:legal|0', 'chg-1|start:1/2:security|0']",
        "interrupted ['security']",
        "True ['owls']",
        "True {'draft': 1, 'review': 2, 'summary': 1}",
        "paused True False ['fetch', 'clean']",
        "paused ['clean', 'fetch']",
    ],
    "events.md": [
        "start writer",
        "route writer -> editor",
        "route editor -> END",
        'end end [local] reply to: "[writer] [local] reply to: "Write a post""',
        "[(('market',), 'market'), (('research',), None), (('research', 'search'), None), "
        "(('science',), 'science'), (('team',), None)]",
        "[(('market',), 'market'), (('research', 'search'), None), (('science',), 'science')]",
        "done step\ninside ('inner', 'step')\ndone inner\nend outer 2",
        "['prepare', 'step', 'inner'] 0 0",
        "[('GRAPH_NODE_START', 'prepare'), ('GRAPH_NODE_END', 'prepare'), "
        "('GRAPH_ROUTING', 'prepare')]",
    ],
    "howto/budgets.md": [
        "token_budget degraded 258",
        "['write', 'critique', 'write', 'critique']",
        "token_budget 400 258 177 critique",
        "critique cancelled stopped: token_budget",
        "cost_budget ['draft', 'redraft', 'draft'] 0.06",
        "time_budget",
        "end done after 220 tokens",
        "['dig', 'dig', 'dig', 'report'] 340",
        "token_budget budget",
        "max_steps ['critique', 'write', 'critique'] 6",
        "cancelled degraded",
        "['answer']\n['plan', 'answer']",
    ],
    "howto/parallel.md": ["market on sodium batteries; science on sodium batteries"],
    "howto/research.md": [
        "['think', 'gap', 'decide', 'select', 'search', 'think', 'gap', 'decide', 'write']\n"
        "['sun.md', 'tides.md']\n# What causes tides?",
        "['plan', 'research', 'synthesize', 'assemble']\n1\n",
        "section",
        "done (end)\npaused 2\nend",
    ],
    "howto/streaming.md": [
        "[writer] [local] reply to",
        "writer -> editor",
        "writer took",
        "updates {'fetch': {'pages': 2}}\n"
        "updates {'write': {'__last_output__': '[local] reply to: \"Hi\"'}}",
        "values {}\nvalues {'pages': 2}\n",
        "custom {'fetched': 1, 'of': 2}\ncustom {'fetched': 2, 'of': 2}",
        "'[local]' ('write',) None\n' reply' ('write',) None",
        "custom {'fetched': 2, 'of': 2}\nupdates {'fetch': {'pages': 2}}",
    ],
    "howto/subgraphs.md": ["notes on owls", "['notes on owls']"],
    "howto/time-travel.md": [
        "('translate',) error node 'translate' raised ConnectionError: translation service is down",
        "Hello, Ada! {'translate': 2}",
        "2 node_complete () translate",
        "1 error ('translate',) None",
        "True Hello, Ada! {'translate': 3}",
        "fork True",
        "Hello, Grace. Kind regards.",
        "Hello, Alan!",
    ],
    "supervisor.md": [
        "['researcher', 'writer', 'researcher', 'writer']\nend 2 6",
        "['plan', 'researcher', 'writer', 'replan', 'editor', 'finish']",
        "the article 1 ProviderRequestError: model gone",
        "replanned after 3 stalls: 1. web: search the archive\nIt was in the archive.",
        "paused ['researcher']\nend ['researcher', 'writer']",
        "running route\nrunning researcher\nrunning route\nrunning writer\nrunning finish",
        "Publish this?\napproved: yes",
    ],
    "persistence.md": [
        "interrupted post-1|2:review|0",
        "end published",
        "['end', 'node_complete', 'node_complete', 'answer', 'interrupt', 'node_complete', "
        "'input']",
    ],
}
"""Output a page shows in its comments, which its code must really print."""


def test_every_page_with_code_is_run() -> None:
    with_code = {
        str(page.relative_to(DOCS))
        for page in DOCS.rglob("*.md")
        if "```python\n" in page.read_text()
    }
    assert with_code == set(RUNNABLE_PAGES) | set(NOT_RUN_HERE)


@pytest.mark.parametrize("page", RUNNABLE_PAGES)
def test_page_code_runs(
    page: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = DOCS / page
    if not path.exists():
        pytest.fail(f"docs/{page} is listed as runnable but does not exist")
    monkeypatch.setenv("SELECTGRAPH_PROVIDER", "local")
    monkeypatch.chdir(tmp_path)  # pages that write files write them here
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # and their temp dirs
    monkeypatch.setattr(sys, "path", list(sys.path))  # a page may add its own package
    modules = set(sys.modules)
    blocks = re.findall(r"```python\n(.*?)```", path.read_text(), re.S)
    assert blocks, f"docs/{page} has no python blocks"
    namespace: dict[str, object] = {}
    try:
        for block in blocks:
            exec(compile(block, str(path), "exec", dont_inherit=True), namespace)
    finally:
        for name in set(sys.modules) - modules:  # forget what the page wrote and imported
            if str(getattr(sys.modules[name], "__file__", None) or "").startswith(str(tmp_path)):
                del sys.modules[name]
    printed = capsys.readouterr().out
    for line in PRINTED.get(page, []):
        assert line in printed, f"docs/{page} does not print {line!r}"


def _modules_with_examples() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(selectgraph.__path__, "selectgraph."):
        module = importlib.import_module(info.name)
        if doctest.DocTestFinder().find(module):
            names.append(info.name)
    return names


@pytest.mark.parametrize("name", _modules_with_examples())
def test_docstring_examples_run(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SELECTGRAPH_PROVIDER", "local")
    module = importlib.import_module(name)
    outcome = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert outcome.failed == 0
