"""Structured answers: a model's JSON read the way small models write it, then validated.

Small models put raw newlines and tabs inside JSON strings, stop in the middle of
an object when their token limit cuts them, wrap the object in prose or code
fences, or add a trailing comma. :func:`parse_answer` validates strictly first;
when the text is not valid JSON it reads it again with ``json.loads(strict=False)``
(control characters allowed in strings), then with the ``json-repair`` library,
and validates what that gives. Only the JSON is repaired: a value that breaks the
schema still fails, and the agent re-asks with the validation error.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

import json_repair
from pydantic import BaseModel, ValidationError

__all__ = ["lenient_json", "parse_answer", "strip_fences"]

M = TypeVar("M", bound=BaseModel)


def strip_fences(text: str) -> str:
    """Drop a surrounding markdown code fence, which models often add around JSON."""
    stripped = text.strip()
    if not stripped.startswith("```"):
        return stripped
    closed = stripped.endswith("```") and len(stripped) >= 6
    stripped = stripped[3:-3] if closed else stripped[3:]
    first, newline, rest = stripped.partition("\n")
    # Drop a language tag ("json") on the opening fence's line, keep one-line JSON.
    if newline and (not first.strip() or first.strip().isalpha()):
        stripped = rest
    return stripped.strip()


def lenient_json(text: str | bytes | bytearray) -> Any:
    """The JSON value ``text`` holds, repaired where that is possible.

    Returns:
        The parsed object or array, or ``None`` when nothing JSON-like could be read.
    """
    raw = text.decode("utf-8", errors="replace") if isinstance(text, bytes | bytearray) else text
    try:
        return json.loads(raw, strict=False)
    except ValueError:
        pass
    try:
        repaired = json_repair.loads(raw)
    except Exception:  # json-repair gives up on some inputs by raising
        return None
    return repaired if isinstance(repaired, dict | list) else None


def parse_answer(schema: type[M], text: str) -> M:
    """``text`` validated as ``schema``, its JSON repaired first when it is not valid.

    Raises:
        ValidationError: the value does not fit the schema, or no JSON object could be
            read even after repair (then the first, strict error).
    """
    stripped = strip_fences(text)
    try:
        return schema.model_validate_json(stripped)
    except ValidationError as error:
        if not any(item["type"] == "json_invalid" for item in error.errors()):
            raise
        value = lenient_json(stripped)
        if not isinstance(value, dict):
            raise
        return schema.model_validate(value)
