"""The documentation stays true: its code runs, its links resolve, its reference is complete.

Code blocks. Every ```python block in README.md and in any .md file under docs/ runs
on its own, in a fresh namespace and a fresh working directory, as a reader who copies
that one block would run it. A block whose fence is preceded, on the line immediately
before it, by the comment ``<!-- continues -->`` instead continues the block(s) before
it on the same page: it runs after them, in their namespace. Pages are found, not
listed, so a new page is tested as soon as it exists; a page that cannot run here says
why in :data:`NOT_RUN_HERE`, a single block in :data:`NOT_RUN_BLOCKS`. The blocks are
also checked without running them: no name they do not define or import, no import
from a private module, no unused import. What a page's comments say it prints is in
:data:`PRINTED`.

API reference. docs/reference/*.md render the docstrings with mkdocstrings
(``::: selectgraph.Name`` directives); every name in a public module's ``__all__`` must
have a docstring (and its public methods, fields, attributes and members too) and be
rendered by a directive there. ``mkdocs build --strict`` builds the site (a slow test;
it needs the ``docs`` extra, and fails rather than skips without it when CI=true).

Links. Relative links are checked here: each target must exist, inside docs/ (the
built site holds nothing else: README.md, examples/ and benchmarks/ are named as
text). mkdocs.yml reports a missing link target at INFO level only, so the slow
build test also reads the built site's HTML and fails on any link it cannot follow.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import doctest
import enum
import functools
import importlib
import importlib.util
import inspect
import json
import os
import pkgutil
import re
import subprocess
import sys
import tempfile
import textwrap
import types
import typing
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
import yaml

import selectgraph

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
REFERENCE = DOCS / "reference"

CONTINUES = "<!-- continues -->"
"""On the line right before a ```python fence: this block continues the ones before it."""

PUBLIC_MODULES = [
    "selectgraph",
    "selectgraph.agents",
    "selectgraph.providers",
    "selectgraph.observe",
    "selectgraph.persistence",
    "selectgraph.graph",
    "selectgraph.guardrails",
    "selectgraph.testing",
    "selectgraph.supervisor",
    "selectgraph.research",
    "selectgraph.executors",
    "selectgraph.evals",
    "selectgraph.serve",
]
"""Modules whose ``__all__`` is the public API the reference documents."""


# --- code blocks -------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Block:
    """One ```python block of a page."""

    page: str
    """The page, relative to the repository root (``docs/howto/hitl.md``)."""
    line: int
    """The page's line number of the block's first line of code."""
    code: str
    continues: bool
    """Whether ``<!-- continues -->`` stands right before the fence."""


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def _name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def code_blocks(page: Path) -> list[Block]:
    """The page's ```python blocks, in order."""
    lines = page.read_text().splitlines()
    blocks: list[Block] = []
    start = None
    for number, line in enumerate(lines, start=1):
        if start is None and line == "```python":
            start = number
        elif start is not None and line == "```":
            before = lines[start - 2].strip() if start > 1 else ""
            code = "\n".join(lines[start : number - 1]) + "\n"
            blocks.append(Block(_name(page), start + 1, code, before == CONTINUES))
            start = None
    assert start is None, f"{_name(page)}: the ```python fence at line {start} is never closed"
    return blocks


def programs(page: Path) -> list[list[Block]]:
    """The page's blocks grouped as they run: a standalone block and its continuations."""
    grouped: list[list[Block]] = []
    for block in code_blocks(page):
        if block.continues:
            assert grouped, f"{block.page}:{block.line}: {CONTINUES} with no block before it"
            grouped[-1].append(block)
        else:
            grouped.append([block])
    return grouped


NOT_RUN_HERE = {
    "docs/howto/local-models.md": "needs a model; tests/real_models/test_local_models_doc.py",
    "docs/howto/checkpoint-stores.md": "needs Postgres; tests/persistence/test_docs_page.py",
    "docs/scaling-out.md": "starts DBOS, one per process; tests/executors/test_docs_page.py",
}
"""Pages with code that another test runs, and why it is not run here."""

NOT_RUN_BLOCKS: dict[str, dict[str, str]] = {}
"""Single blocks that cannot run here, by page: text the block contains -> why.

A block listed here is not run, nor are the blocks that continue it; the rest of its
page is. (None so far: every block of a page run here runs.)
"""

PRINTED = {
    "docs/tutorial.md": [
        "Hello, Ada!\n['greet'] end",
        "['draft 1', 'reviewed draft 1', 'draft 2', 'reviewed draft 2']\nflowchart TD",
        "['planner', 'writer']",
        "interrupted Publish this?\nTrue ['approve']",
        "finished poet\ndone in 1 step",
        "['researcher', 'writer', 'researcher', 'writer']",
        "# How do animals hunt at night?\n['owls.md', 'bats.md']",
    ],
    "docs/coming-from-langgraph.md": [
        "{'topic': 'owls', 'notes': ['facts about owls', 'a draft']}\n"
        "['facts about owls', 'a draft']\n"
        "{'research': {'notes': ['facts about bats']}}\n{'write': {'notes': ['a draft']}}",
        "Publish?\nTrue",
    ],
    "docs/studio.md": ["['/', '/api/graph', '/api/runs']"],
    "docs/interop.md": [
        "['wx_forecast'] Sunny.",
        "Publish 'A post about owls'?\nDone: A post about owls (yes) 2",
        "['writer', 'editor'] EXPLAIN TIDES",
    ],
    "docs/serving.md": [
        "review - Reviews a draft before it is published.\ninterrupted - Publish this draft?\n"
        "The draft was published.",
        "review http://agents.local/a2a/review/\nTASK_STATE_INPUT_REQUIRED {'draft': 'my draft'}\n"
        "TASK_STATE_COMPLETED The draft was published.",
    ],
    "docs/howto/evaluate.md": [
        "0.0 1.0\n[('ann', 'Hello, Ann!'), ('bob', 'Hello, Bob!')]\n"
        "[('ann', 'fixed'), ('bob', 'fixed')]\nv2",
    ],
    "docs/howto/chat.md": [
        "Hello, Ann!\nYour name is Ann.\n['My name is Ann.', 'Hello, Ann!', 'What is my name?']",
        "You told me: Ann.",
        "['First answer.', 'Second answer.']",
    ],
    "docs/threads.md": [
        "2 ['hello', 'and again']\n['hello', 'and again']\nTrue",
        "['hi', 'echo: hi', 'bye', 'echo: bye']\n['echo: hi', 'bye']",
        "refused: t\none two",
        "['RunStarted', 'CheckpointSaved', 'NodeStarted']\nRunFinished",
        "{'n': 2}\n['t1']\n2\n3\nTrue\n['t2']",
    ],
    "README.md": [
        "['write', 'review', 'write', 'review', 'write', 'review']",
        "reply to",  # the offline agent chain answered
    ],
    "docs/howto/tracing.md": [
        "invoke_workflow chain",
        "  invoke_agent researcher",
        "    execute_tool lookup",
        "  invoke_agent writer",
        "gen_ai.operation.name = chat",
        "gen_ai.usage.input_tokens = 47",
        "tool lookup call_1_1",
    ],
    "docs/howto/declarative.md": [
        "classify -> billing ['tagged billing', 'billing']",
        "classify -> research -> general ['tagged other', 'looked up How to export?', 'general']",
    ],
    "docs/howto/errors.md": [
        "fetch 2 node_exception",
        "ConnectionError('https://example.com/world.rss is not answering')",
        "['load', 'fetch']",
    ],
    "docs/howto/hitl.md": [
        "end published ['draft', 'review', 'publish']",
        "news-1|1:confirm|1 To all 40,000 subscribers. Sure?",
        "['chg-1|start:0/2:legal|0', 'chg-1|start:1/2:security|0']",
        "interrupted ['security']",
        "True ['owls']",
        "True {'draft': 1, 'review': 2, 'summary': 1}",
        "paused True False ['fetch', 'clean']",
        "paused ['clean', 'fetch']",
    ],
    "docs/events.md": [
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
    "docs/howto/budgets.md": [
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
    "docs/howto/parallel.md": ["market on sodium batteries; science on sodium batteries"],
    "docs/howto/research.md": [
        "['think', 'gap', 'decide', 'select', 'search', 'think', 'gap', 'decide', 'write', "
        "'report']\n"
        "['sun.md', 'tides.md']\n# What causes tides?",
        "['plan', 'research', 'synthesize', 'assemble']\n1\n",
        "section",
        "done (end)\npaused 2\nend",
    ],
    "docs/howto/streaming.md": [
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
    "docs/howto/subgraphs.md": ["notes on owls", "['notes on owls']"],
    "docs/howto/time-travel.md": [
        "('translate',) error node 'translate' raised ConnectionError: translation service is down",
        "Hello, Ada! {'translate': 2}",
        "2 node_complete () translate",
        "1 error ('translate',) None",
        "True Hello, Ada! {'translate': 3}",
        "fork True",
        "Hello, Grace. Kind regards.",
        "Hello, Alan!",
    ],
    "docs/supervisor.md": [
        "['researcher', 'writer', 'researcher', 'writer']\nend 2 6",
        "['plan', 'researcher', 'writer', 'replan', 'editor', 'finish']",
        "the article 1 ProviderRequestError: model gone",
        "replanned after 3 stalls: 1. web: search the archive\nIt was in the archive.",
        "paused ['researcher']\nend ['researcher', 'writer']",
        "running route\nrunning researcher\nrunning route\nrunning writer\nrunning finish",
        "Publish this?\napproved: yes",
    ],
    "docs/persistence.md": [
        "interrupted post-1|2:review|0",
        "end published",
        "['end', 'node_complete', 'node_complete', 'answer', 'interrupt', 'node_complete', "
        "'input']",
    ],
}
"""Output a page shows in its comments, which its code must really print."""

PAGES_WITH_CODE = [_name(page) for page in _pages() if code_blocks(page)]
RUN_HERE = [page for page in PAGES_WITH_CODE if page not in NOT_RUN_HERE]


def test_the_lists_name_pages_with_code() -> None:
    stale = set(NOT_RUN_HERE) - set(PAGES_WITH_CODE)
    stale |= (set(PRINTED) | set(NOT_RUN_BLOCKS)) - set(RUN_HERE)
    assert stale == set(), "a list names a page that has no python block, or is not run here"
    assert "README.md" in RUN_HERE
    for page, skipped in NOT_RUN_BLOCKS.items():
        for text in skipped:
            found = [block for block in code_blocks(ROOT / page) if text in block.code]
            assert len(found) == 1, f"NOT_RUN_BLOCKS: {text!r} is in {len(found)} blocks of {page}"


@pytest.mark.parametrize("page", sorted(NOT_RUN_HERE))
def test_pages_run_elsewhere_have_standalone_blocks(page: str) -> None:
    # Their tests run each block alone, so a continuation could not work there.
    continued = [block.line for block in code_blocks(ROOT / page) if block.continues]
    assert continued == [], f"{page}: {CONTINUES} is not supported on this page"


@pytest.mark.parametrize("page", _pages(), ids=_name)
def test_continues_markers_stand_before_a_python_fence(page: Path) -> None:
    lines = page.read_text().splitlines()
    for number, line in enumerate(lines, start=1):
        if line.strip() == CONTINUES:
            after = lines[number] if number < len(lines) else ""
            assert after == "```python", f"{_name(page)}:{number}: {CONTINUES} before no block"
    programs(page)  # and never before a page's first block


@pytest.mark.parametrize("page", RUN_HERE)
def test_page_code_runs(
    page: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("SELECTGRAPH_PROVIDER", "local")
    monkeypatch.setattr(sys, "path", list(sys.path))
    skipped = NOT_RUN_BLOCKS.get(page, {})
    for program in programs(ROOT / page):
        first = program[0]
        workdir = tmp_path / f"line{first.line}"
        workdir.mkdir()
        with _fresh_process(monkeypatch, workdir):
            namespace: dict[str, object] = {}  # a fresh one for each standalone block
            for block in program:
                if any(text in block.code for text in skipped):
                    break  # and the blocks that continue it
                # Padded so a traceback names the page's own line numbers; dont_inherit:
                # run as a reader would, without this module's __future__ imports.
                source = "\n" * (block.line - 1) + block.code
                code = compile(source, str(ROOT / page), "exec", dont_inherit=True)
                exec(code, namespace)
    printed = capsys.readouterr().out
    for line in PRINTED.get(page, []):
        assert line in printed, f"{page} does not print {line!r}"


@pytest.mark.slow
def test_the_tutorial_runs_twice_in_a_row(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # A reader runs a step again in the same folder: its runs.db then holds the first run.
    monkeypatch.setenv("SELECTGRAPH_PROVIDER", "local")
    monkeypatch.setattr(sys, "path", list(sys.path))
    for program in programs(ROOT / "docs/tutorial.md"):
        workdir = tmp_path / f"line{program[0].line}"
        workdir.mkdir()
        for _ in range(2):
            with _fresh_process(monkeypatch, workdir):
                namespace: dict[str, object] = {}
                for block in program:
                    source = "\n" * (block.line - 1) + block.code
                    exec(compile(source, "docs/tutorial.md", "exec", dont_inherit=True), namespace)


@contextlib.contextmanager
def _fresh_process(monkeypatch: pytest.MonkeyPatch, workdir: Path) -> Iterator[None]:
    """Run a block as if in a new process started in ``workdir``, and forget it after."""
    path = list(sys.path)
    modules = set(sys.modules)
    monkeypatch.chdir(workdir)  # pages that write files write them here
    monkeypatch.setattr(tempfile, "tempdir", str(workdir))  # and their temp dirs
    try:
        yield
    finally:
        sys.path[:] = path  # a block may add its own package to the path
        for name in set(sys.modules) - modules:  # forget what the block wrote and imported
            if str(getattr(sys.modules[name], "__file__", None) or "").startswith(str(workdir)):
                del sys.modules[name]


IMPORT = re.compile(r"^\s*(?:from|import) (selectgraph[\w.]*)", re.M)

STATIC_RULES = "F"
"""Pyflakes' rules: an undefined name, an unused import, ``await`` outside a function..."""


def test_code_blocks_define_what_they_use(tmp_path: Path) -> None:
    # One script per program, padded so ruff reports the page's line numbers.
    scripts: dict[Path, str] = {}
    private: list[str] = []
    for page in PAGES_WITH_CODE:
        for program in programs(ROOT / page):
            text = ""
            for block in program:
                text += "\n" * (block.line - 1 - text.count("\n")) + block.code
                for match in re.finditer(
                    r"^\s*(?:from|import) (selectgraph[\w.]*)", block.code, re.M
                ):
                    if any(part.startswith("_") for part in match[1].split(".")):
                        private.append(f"{page}:{block.line}: imports {match[1]}")
            script = tmp_path / f"{len(scripts)}.py"
            script.write_text(text)
            scripts[script] = page
    assert private == [], "docs import from a private module"
    ruff = _ruff()
    completed = subprocess.run(
        [
            *ruff,
            "check",
            "--isolated",
            "--select",
            STATIC_RULES,
            "--target-version",
            "py311",
            "--output-format",
            "json",
            "--no-cache",
            *map(str, scripts),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode in (0, 1), completed.stderr
    found = sorted(
        (
            scripts[Path(problem["filename"])],
            problem["location"]["row"],
            problem["code"],
            problem["message"],
        )
        for problem in json.loads(completed.stdout)
    )
    problems = "\n".join(f"{page}:{row}: {code} {message}" for page, row, code, message in found)
    assert not problems, (
        f"names the blocks use but do not define, or import but do not use:\n{problems}"
    )


def _ruff() -> list[str]:
    if importlib.util.find_spec("ruff") is None:
        _missing("ruff", "dev")
    return [sys.executable, "-m", "ruff"]


def _missing(tool: str, extra: str) -> typing.NoReturn:
    reason = f"{tool} is not installed: pip install -e '.[{extra}]'"
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


# --- links --------------------------------------------------------------------------


def _markdown_files() -> list[Path]:
    return [*_pages(), ROOT / "benchmarks" / "README.md"]


@pytest.mark.parametrize("page", _markdown_files(), ids=_name)
def test_relative_links_resolve(page: Path) -> None:
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", page.read_text()):
        if "://" in target:
            continue
        assert (page.parent / target).exists(), f"{page.name} links to missing {target}"


def _accepted_providers() -> set[str]:
    """The values ``SELECTGRAPH_PROVIDER`` may take, as the code's own refusal lists them."""
    from selectgraph.agents import default_provider

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SELECTGRAPH_PROVIDER", "no-such-provider")
        with pytest.raises(ValueError) as refused:
            default_provider()
    listed = str(refused.value).split("; use ", 1)[1]
    return set(re.findall(r"\w+", listed)) - {"or"}


@pytest.mark.parametrize("page", _pages(), ids=_name)
def test_pages_agree_with_the_code_about_selectgraph_provider(page: Path) -> None:
    accepted = _accepted_providers()
    text = page.read_text()
    for value in re.findall(r"SELECTGRAPH_PROVIDER=(\w+)", text):
        assert value in accepted, f"{_name(page)}: SELECTGRAPH_PROVIDER={value} is not accepted"
    # A page listing the values, "SELECTGRAPH_PROVIDER` (`a`, `b`...)", lists them all.
    for listed in re.findall(r"SELECTGRAPH_PROVIDER`\s*\(([^)]*)\)", text):
        assert set(re.findall(r"`(\w+)`", listed)) == accepted, f"{_name(page)}: {listed}"


def test_the_agents_page_lists_every_provider_value() -> None:
    text = (DOCS / "agents.md").read_text()
    assert re.search(r"SELECTGRAPH_PROVIDER`\s*\(", text), "agents.md no longer lists them"


@pytest.mark.parametrize("page", sorted(DOCS.rglob("*.md")), ids=_name)
def test_pages_link_only_to_what_the_site_has(page: Path) -> None:
    # The built site holds docs/ only: a link to ../README.md or ../examples/ is dead there.
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
        if "://" in target or target.startswith("mailto:"):
            continue
        assert (page.parent / target).resolve().is_relative_to(DOCS), (
            f"{page.name} links to {target}, outside docs/: name it as text instead"
        )


# --- API reference ------------------------------------------------------------------


def _public(module_name: str) -> list[tuple[str, object]]:
    module = importlib.import_module(module_name)
    return [(name, getattr(module, name)) for name in module.__all__]


def _directives() -> dict[str, str]:
    """Every ``::: path`` of the reference pages: path -> the page it is on."""
    found = {}
    for page in sorted(REFERENCE.glob("*.md")):
        for path in re.findall(r"^::: ([\w.]+)\s*$", page.read_text(), re.M):
            assert path not in found, f"{path} is rendered twice"
            found[path] = page.name
    return found


def _resolve(path: str) -> object:
    parts = path.split(".")
    for split in range(len(parts), 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for attribute in parts[split:]:
            target = getattr(target, attribute)
        return target
    raise ImportError(path)


def test_reference_directives_name_real_objects() -> None:
    directives = _directives()
    assert directives, "docs/reference/ renders nothing"
    for path in directives:
        _resolve(path)  # raises for a misspelt path


@pytest.mark.parametrize("module", PUBLIC_MODULES)
def test_every_public_name_is_rendered_in_the_reference(module: str) -> None:
    rendered = {(path.rsplit(".", 1)[1], id(_resolve(path))) for path in _directives()}
    missing = [name for name, value in _public(module) if (name, id(value)) not in rendered]
    assert missing == [], f"no ::: directive in docs/reference/ renders these {module} names"


def test_the_api_index_links_every_reference_page() -> None:
    index = (DOCS / "api.md").read_text()
    unlinked = [p.name for p in REFERENCE.glob("*.md") if f"reference/{p.name}" not in index]
    assert unlinked == []


def test_the_site_navigation_lists_every_page() -> None:
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_MkdocsLoader)

    def listed(entries: object) -> Iterator[str]:
        if isinstance(entries, str):
            yield entries
        elif isinstance(entries, dict):
            for value in entries.values():
                yield from listed(value)
        elif isinstance(entries, list):
            for entry in entries:
                yield from listed(entry)

    pages = {page.relative_to(DOCS).as_posix() for page in DOCS.rglob("*.md")}
    assert pages - set(listed(config["nav"])) == set(), "pages missing from mkdocs.yml's nav"


class _MkdocsLoader(yaml.SafeLoader):
    """Reads mkdocs.yml, whose ``!!python/name:`` and ``!ENV`` tags safe_load refuses."""


_MkdocsLoader.add_multi_constructor("", lambda loader, suffix, node: None)


@pytest.mark.parametrize("module", PUBLIC_MODULES)
def test_every_public_name_has_a_docstring(module: str) -> None:
    undocumented = [
        f"{name}{problem}" for name, value in _public(module) for problem in _undocumented(value)
    ]
    assert not undocumented, f"{module}: these lack documentation:\n" + "\n".join(undocumented)


def _undocumented(value: object) -> Iterator[str]:
    """What about a public object has no documentation: "" for itself, or ".member"."""
    if inspect.isclass(value):
        node = _definition(value)
        docstring = ast.get_docstring(node) or ""
        if not docstring.strip():
            yield ""
        yield from _undocumented_members(value, node, docstring)
    elif inspect.isfunction(value):
        if not (value.__doc__ or "").strip():
            yield ""
    else:  # a constant, a type alias, a reducer instance: an attribute docstring
        docstring = _attribute_docstring(value)
        if not docstring:
            yield ""
        elif typing.get_origin(value) is typing.Literal:  # that explains every value
            for choice in typing.get_args(value):
                if f'"{choice}"' not in docstring:
                    yield f"[{choice!r}]"


def _definition(cls: type) -> ast.ClassDef:
    node = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0]
    assert isinstance(node, ast.ClassDef), cls
    return node


def _undocumented_members(cls: type, node: ast.ClassDef, docstring: str) -> Iterator[str]:
    """Public methods without a docstring; fields and enum members nobody describes."""
    for name, member in vars(cls).items():
        if name.startswith("_"):
            continue
        function = member.fget if isinstance(member, property) else member
        function = getattr(function, "__func__", function)  # classmethod, staticmethod
        if inspect.isfunction(function) and not (function.__doc__ or "").strip():
            yield f".{name}"
    if issubclass(cls, enum.Enum):
        fields: Iterable[str] = cls.__members__
    else:  # new ones: a subclass setting a base's attribute (``category``) needs no words
        fields = [
            name
            for name in _fields(node)
            if not name.startswith("_")
            and not callable(vars(cls).get(name))
            and not any(hasattr(base, name) for base in cls.__mro__[1:])
        ]
    for name in fields:
        if not _described(name, node, docstring):
            yield f".{name}"
    for name in _undocumented_instance_attributes(node):
        inherited = any(hasattr(base, name) for base in cls.__mro__[1:])
        if not inherited and not _described(name, node, docstring):
            yield f".{name}"


def _undocumented_instance_attributes(node: ast.ClassDef) -> Iterator[str]:
    """Public ``self.x = ...`` of ``__init__`` with no docstring under it, and no
    ``Args:`` entry of that name (a parameter kept as it was given)."""
    for init in node.body:
        if not isinstance(init, ast.FunctionDef) or init.name != "__init__":
            continue
        parameters = ast.get_docstring(init) or ""
        body = init.body
        for statement, following in zip(body, [*body[1:], None], strict=True):
            target: ast.expr | None = None
            if isinstance(statement, ast.AnnAssign):
                target = statement.target
            elif isinstance(statement, ast.Assign) and len(statement.targets) == 1:
                target = statement.targets[0]
            if not (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == "self"
                and not target.attr.startswith("_")
            ):
                continue
            if _is_docstring(following):
                continue
            if not re.search(rf"^\s*{target.attr}( \(.*\))?:", parameters, re.M):
                yield target.attr


def _fields(node: ast.ClassDef) -> Iterator[str]:
    for statement in node.body:
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            if "ClassVar" not in ast.unparse(statement.annotation):
                yield statement.target.id
        elif isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target = statement.targets[0]
            if isinstance(target, ast.Name):
                yield target.id


def _described(name: str, node: ast.ClassDef, docstring: str) -> bool:
    """An attribute docstring, a ``Field(description=...)``, or named in the class docstring."""
    if re.search(rf"``{name}``|`{name}`|^\s*{name}( \(.*\))?:", docstring, re.M):
        return True
    for statement, following in zip(node.body, [*node.body[1:], None], strict=True):
        target = _assigned(statement)
        if target != name:
            continue
        if _is_docstring(following):
            return True
        value = statement.value if isinstance(statement, ast.Assign | ast.AnnAssign) else None
        if isinstance(value, ast.Call) and any(
            keyword.arg == "description" for keyword in value.keywords
        ):
            return True
    return False


def _assigned(statement: ast.stmt) -> str | None:
    if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
        return statement.target.id
    if isinstance(statement, ast.Assign) and isinstance(statement.targets[0], ast.Name):
        return statement.targets[0].id
    return None


def _is_docstring(statement: ast.stmt | None) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
        and bool(statement.value.value.strip())
    )


def _attribute_docstring(value: object) -> str:
    """The docstring under the module-level assignment that defines ``value``, or ""."""
    for module in _selectgraph_modules():
        for name, bound in vars(module).items():
            if bound is not value:
                continue
            source = inspect.getsource(module)
            body = ast.parse(source).body
            for statement, following in zip(body, [*body[1:], None], strict=True):
                if _assigned(statement) == name and _is_docstring(following):
                    assert isinstance(following, ast.Expr)
                    return str(following.value.value)  # type: ignore[attr-defined]
    return ""


@functools.cache
def _selectgraph_modules() -> list[types.ModuleType]:
    names = [info.name for info in pkgutil.walk_packages(selectgraph.__path__, "selectgraph.")]
    found = []
    for name in ["selectgraph", *names]:
        try:
            found.append(importlib.import_module(name))
        except ImportError:  # an optional extra's module (llama.cpp, psycopg)
            continue
    return found


@pytest.mark.slow
def test_mkdocs_build_strict(tmp_path: Path) -> None:
    if (
        importlib.util.find_spec("mkdocs") is None
        or importlib.util.find_spec("mkdocstrings") is None
    ):
        _missing("mkdocs", "docs")
    completed = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert _broken_site_links(tmp_path / "site") == []


def _broken_site_links(site: Path) -> list[str]:
    """Every link of the built site to a page or file the site does not have.

    mkdocs reports a link to a missing file only at INFO level (see mkdocs.yml), so
    ``--strict`` alone lets one through: this reads the HTML it wrote.
    """
    broken = []
    for page in sorted(site.rglob("*.html")):
        for target in re.findall(r'(?:href|src)="([^"#?]+)', page.read_text(encoding="utf-8")):
            if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("//"):
                continue  # another site (https:, mailto:): not this site's to check
            found = (site / target.lstrip("/")) if target.startswith("/") else page.parent / target
            if not (found.is_file() or (found / "index.html").is_file()):
                broken.append(f"{page.relative_to(site)} -> {target}")
    return broken


def test_the_site_link_check_finds_a_broken_link(tmp_path: Path) -> None:
    (tmp_path / "guide").mkdir()
    (tmp_path / "guide" / "index.html").write_text(
        '<a href="../">home</a> <a href="../../README.md">readme</a> <a href="https://x.org">x</a>'
    )
    (tmp_path / "index.html").write_text('<a href="guide/">guide</a>')

    assert _broken_site_links(tmp_path) == ["guide/index.html -> ../../README.md"]


# --- docstring examples ---------------------------------------------------------------


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
