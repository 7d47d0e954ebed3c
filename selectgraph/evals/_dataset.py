"""Datasets: the cases an experiment runs a graph over, from JSONL or Python.

A case is an input (text, or a JSON object: the state), optionally what the output
should be, a name and metadata. Cases become pydantic-evals ``Case``s, so a
``pydantic_evals.Dataset`` built by hand is a dataset too.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic_evals import Case, Dataset

from selectgraph.core._errors import SelectGraphError

__all__ = ["DatasetError", "dataset_from_file", "dataset_of"]

_KEYS = frozenset({"input", "expected", "name", "metadata"})


class DatasetError(SelectGraphError):
    """A dataset cannot be read; the message names the file, the line or case, and the field."""


def dataset_from_file(path: str | Path) -> Dataset[Any, Any, Any]:
    """The cases of a JSONL file: one JSON object per line (``input``, ``expected``...).

    Raises:
        DatasetError: the file is missing, a line is not a JSON object, or a case is wrong.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise DatasetError(f"{path}: cannot be read ({error})") from None
    rows: list[tuple[str, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            rows.append((where, json.loads(line)))
        except json.JSONDecodeError as error:
            raise DatasetError(f"{where}: not JSON ({error.msg})") from None
    return _dataset(rows, name=path.stem)


def dataset_of(value: Any, *, name: str = "dataset") -> Dataset[Any, Any, Any]:
    """A dataset from Python: a pydantic-evals Dataset, or a list of cases (dicts or Cases).

    Raises:
        DatasetError: it is neither, or a case is wrong.
    """
    if isinstance(value, Dataset):
        return value
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        raise DatasetError(
            f"a dataset is a list of cases or a pydantic_evals.Dataset, got {type(value).__name__}"
        )
    return _dataset([(f"case {index}", row) for index, row in enumerate(value)], name=name)


def _dataset(rows: list[tuple[str, Any]], *, name: str) -> Dataset[Any, Any, Any]:
    if not rows:
        raise DatasetError(f"dataset {name!r} has no cases")
    cases: list[Case[Any, Any, Any]] = []
    seen: set[str] = set()
    for index, (where, row) in enumerate(rows):
        case = row if isinstance(row, Case) else _case(where, row, index)
        if case.name is None:
            case.name = f"case-{index + 1}"
        if case.name in seen:
            raise DatasetError(f"{where}: case name {case.name!r} is used twice")
        seen.add(case.name)
        cases.append(case)
    return Dataset(name=name, cases=cases)


def _case(where: str, row: Any, index: int) -> Case[Any, Any, Any]:
    if not isinstance(row, Mapping):
        raise DatasetError(f"{where}: a case is a JSON object, got {type(row).__name__}")
    unknown = sorted(set(map(str, row)) - _KEYS)
    if unknown:
        raise DatasetError(
            f"{where}: unknown field(s) {', '.join(unknown)}; a case has {', '.join(sorted(_KEYS))}"
        )
    if "input" not in row:
        raise DatasetError(f"{where}: a case needs an 'input' (text or an object)")
    if not isinstance(row["input"], str | Mapping):
        raise DatasetError(
            f"{where}: 'input' is text or an object, got {type(row['input']).__name__}"
        )
    name = row.get("name", f"case-{index + 1}")
    if not isinstance(name, str) or not name or "|" in name:
        raise DatasetError(f"{where}: 'name' is a non-empty string without '|', got {name!r}")
    metadata = row.get("metadata")
    if metadata is not None and not isinstance(metadata, Mapping):
        raise DatasetError(f"{where}: 'metadata' is an object")
    return Case(
        name=name,
        inputs=row["input"],
        expected_output=row.get("expected"),
        metadata=dict(metadata) if metadata else None,
    )
