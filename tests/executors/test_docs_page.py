"""docs/scaling-out.md: every code block runs, each in its own process (one DBOS per process)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "scaling-out.md"
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)


@pytest.mark.slow
@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_code_block_runs_and_prints_what_it_says(block: str, tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-c", block],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)},
    )
    assert completed.returncode == 0, completed.stderr
    promised = [
        line.split("  # ", 1)[1]
        for line in block.splitlines()
        if line.lstrip().startswith("print(")
    ]
    assert completed.stdout.splitlines() == promised
