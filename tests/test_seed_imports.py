"""Seed 004's examples import from ``selectools`` modules; under ``selectgraph`` they must resolve.

Names that later issues add are listed with the issue, so this test shows what
is still missing and fails once something lands without being crossed off.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

SEEDS = Path(__file__).resolve().parents[2] / "shared" / "seeds"
LATER: dict[str, str] = {}


def _seed_imports() -> list[tuple[str, str]]:
    seed = next(iter(sorted(SEEDS.glob("004_*.txt"))), None)
    if seed is None:
        pytest.skip("../shared/seeds is not beside this checkout")
    text = seed.read_text()
    found: list[tuple[str, str]] = []
    pattern = r"from (selectools[\w.]*) import (\([^)]*\)|[^\n]*)"
    for module, names in re.findall(pattern, text):
        for name in re.split(r"[\s,()]+", names):
            if name and name.isidentifier():
                found.append((module.replace("selectools", "selectgraph", 1), name))
    return sorted(set(found))


def test_every_name_seed_004_imports_resolves_or_waits_for_its_issue() -> None:
    imports = _seed_imports()
    assert len(imports) > 20
    missing = []
    for module, name in imports:
        if not hasattr(importlib.import_module(module), name):
            missing.append(name)
    assert sorted(set(missing)) == sorted(LATER), (
        f"missing from selectgraph: {sorted(set(missing) - set(LATER))}; "
        f"now present (cross them off LATER): {sorted(set(LATER) - set(missing))}"
    )
