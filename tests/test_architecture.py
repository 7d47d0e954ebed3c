"""The package's shape holds: imports run one way down the layers, no import circles,
no module over 800 lines, no function over 100 (see tests/architecture.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests import architecture
from tests.architecture import Import


def test_no_import_circles_anywhere_type_checking_and_lazy_imports_included() -> None:
    assert architecture.circles(architecture.imports()) == []


def test_imports_run_down_the_layers() -> None:
    wrong = [str(item) for item in architecture.upward(architecture.imports())]
    assert wrong == []


@pytest.mark.parametrize("below", ["nodes", "routing", "state", "core", "observe", "persistence"])
def test_what_a_step_is_made_of_never_imports_the_runtime_or_compile(below: str) -> None:
    found = architecture.imports()
    reaching = [
        str(item)
        for item in found
        if architecture.folder(item.source) == below
        and architecture.folder(item.target) in ("runtime", "compile", "build")
    ]
    assert reaching == []


def test_the_runtime_never_imports_compile_or_build() -> None:
    found = architecture.imports()
    reaching = [
        str(item)
        for item in found
        if architecture.folder(item.source) == "runtime"
        and architecture.folder(item.target) in ("compile", "build")
    ]
    assert reaching == []


def test_no_module_over_800_lines() -> None:
    assert architecture.long_modules() == []


def test_no_function_over_100_lines() -> None:
    assert architecture.long_functions() == []


def test_every_folder_is_in_a_layer() -> None:
    for name in architecture.modules():
        architecture.layer_of(name)  # raises LookupError for a folder nobody placed


# The checks above are only as good as the reader under them: it must see each kind of import.
_SAMPLE = """
from __future__ import annotations
from typing import TYPE_CHECKING
import selectgraph.core._errors
from selectgraph.state import _merge
if TYPE_CHECKING:
    from selectgraph.runtime._run import Run
def f():
    from selectgraph.compile._compiled import CompiledGraph
class C:
    def g(self):
        try:
            from ._usage import Usage
        except ImportError:
            pass
"""


def test_the_import_reader_sees_load_typing_and_lazy_imports(tmp_path: Path) -> None:
    known = {
        name: Path()
        for name in (
            "selectgraph.core._errors",
            "selectgraph.core._usage",
            "selectgraph.state._merge",
            "selectgraph.runtime._run",
            "selectgraph.compile._compiled",
            "selectgraph.core.sample",
        )
    }
    tree = ast.parse(_SAMPLE)
    found = []
    for node, kind in architecture._walk(tree.body, "load"):
        for target in architecture._targets("selectgraph.core.sample", False, node, known):
            found.append(Import("selectgraph.core.sample", target, kind, node.lineno))
    assert {(item.target, item.kind) for item in found} == {
        ("selectgraph.core._errors", "load"),
        ("selectgraph.state._merge", "load"),
        ("selectgraph.runtime._run", "typing"),
        ("selectgraph.compile._compiled", "lazy"),
        ("selectgraph.core._usage", "lazy"),
    }
    assert architecture.upward(found) == [
        item for item in found if item.target.split(".")[1] in ("state", "runtime", "compile")
    ]


def test_a_circle_is_found_through_any_length_of_imports(monkeypatch: pytest.MonkeyPatch) -> None:
    found = [
        Import("selectgraph.core.a", "selectgraph.core.b", "load", 1),
        Import("selectgraph.core.b", "selectgraph.core.c", "typing", 1),
        Import("selectgraph.core.c", "selectgraph.core.a", "lazy", 1),
        Import("selectgraph.core.c", "selectgraph.core.d", "load", 1),
    ]
    modules = {f"selectgraph.core.{n}": Path() for n in "abcd"}
    monkeypatch.setattr(architecture, "modules", lambda: modules)
    assert architecture.circles(found) == [
        ["selectgraph.core.a", "selectgraph.core.b", "selectgraph.core.c"]
    ]
