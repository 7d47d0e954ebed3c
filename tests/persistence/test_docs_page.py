"""docs/howto/checkpoint-stores.md: every code block runs, and prints what its comments say."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.persistence.conftest import drop_schema, postgres_or_skip

PAGE = Path(__file__).resolve().parents[2] / "docs" / "howto" / "checkpoint-stores.md"
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)


def test_the_page_has_an_example_per_store() -> None:
    text = "\n".join(BLOCKS)
    for store in ("InMemory", "File", "SQLite", "Postgres"):
        assert f"{store}CheckpointStore(" in text


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_code_block_runs_and_prints_what_it_says(
    block: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    if "PostgresCheckpointStore(" in block:
        postgres_or_skip()
    try:
        exec(compile(block, str(PAGE), "exec", dont_inherit=True), {})
    finally:
        if "PostgresCheckpointStore(" in block:
            drop_schema("docs_example")
    printed = capsys.readouterr().out.splitlines()
    prints = [line for line in block.splitlines() if line.lstrip().startswith("print(")]
    assert printed == [_promised(line) for line in prints]


def _promised(line: str) -> str:
    """What a ``print(...)  # output: explanation`` line's comment says it prints."""
    comment = line.split("  # ", 1)[1]
    if comment.startswith("[") and "]:" in comment:
        return comment.split("]:")[0] + "]"
    return comment if comment[0] in "[{" else comment.split(":")[0].strip()
