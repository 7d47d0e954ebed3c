"""Two versions of a graph to evaluate, and their datasets: an experiment of each compares.

``v1`` gets case ``q`` wrong, ``v2`` case ``abc``; ``zz`` is wrong in both but answered
differently, ``hi`` right in both; ``old`` is only in the first dataset, ``new`` only
in the second. So v1 -> v2 has one case of each change: fixed, broke, changed, same,
removed, added.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from selectgraph import END, AgentGraph

FIRST = [
    {"name": "abc", "input": "abc", "expected": {"answer": "ABC"}},
    {"name": "q", "input": "q", "expected": {"answer": "Q"}},
    {"name": "hi", "input": "hi", "expected": {"answer": "HI"}},
    {"name": "zz", "input": "zz", "expected": {"answer": "nope"}},
    {"name": "old", "input": "old", "expected": {"answer": "OLD"}},
]
SECOND = [*FIRST[:4], {"name": "new", "input": "new", "expected": {"answer": "NEW"}}]


def _shout(version: int) -> AgentGraph:
    def shout(state: Any) -> dict[str, str]:
        text = state.messages[-1].text
        if version == 1 and text == "q":
            return {"answer": "no"}
        if version == 2 and text == "abc":
            return {"answer": "abc!"}
        if text == "zz":
            return {"answer": f"zz{version}"}
        return {"answer": text.upper()}

    graph = AgentGraph("shout")
    graph.add_node("shout", shout, next_node=END)
    return graph


v1 = _shout(1)
v2 = _shout(2)


def write_datasets(folder: Path) -> tuple[Path, Path]:
    """The two datasets as JSONL files in ``folder``."""
    paths = folder / "first.jsonl", folder / "second.jsonl"
    for path, rows in zip(paths, (FIRST, SECOND), strict=True):
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return paths
