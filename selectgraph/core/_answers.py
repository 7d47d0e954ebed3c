"""Typed answers: the schema a question's answer must fit, checking an answer, handing it over.

A generator node may ask with ``InterruptRequest(..., response_schema=Model)``
(a Pydantic model class) or with a JSON schema dict. The question then carries
the schema as JSON schema, in memory (``Interrupt.response_schema``) and in the
checkpoint, so every process checks an answer the same way:

1. the answer is made JSON data (a model instance becomes its JSON dump);
2. it is validated against the JSON schema with ``jsonschema`` (every
   process has the schema, even one that only has the checkpoint);
3. where the model class is at hand (the process the node asked in), the
   model validates it too, which adds what a JSON schema cannot say (the
   model's own validators).

The JSON value is what is recorded. The node receives it converted to the
model (``Model.model_validate``), or as it is for a JSON-schema dict.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError, to_jsonable_python

from selectgraph.core._errors import AnswerInvalid

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError as SchemaViolation
    from jsonschema.protocols import Validator

__all__ = [
    "ResponseSchema",
    "answer_for_node",
    "check_answer",
    "json_schema_of",
    "model_of",
]

ResponseSchema: TypeAlias = type[BaseModel] | Mapping[str, Any]
"""What an answer must fit: a Pydantic model class, or a JSON schema (a dict)."""

_ROOT = ""
"""The path of the answer as a whole in :attr:`AnswerInvalid.errors`."""


def model_of(schema: ResponseSchema | None) -> type[BaseModel] | None:
    """The Pydantic model class ``schema`` is, or None (a JSON schema dict, or no schema)."""
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema
    return None


def json_schema_of(schema: ResponseSchema | None) -> dict[str, Any] | None:
    """``schema`` as a JSON schema dict (a fresh copy, free to change), or None.

    Raises:
        TypeError: ``schema`` is neither a Pydantic model class nor a mapping, or the
            model cannot be described as a JSON schema.
        ValueError: the mapping is not JSON data, or not a valid JSON schema.
    """
    if schema is None:
        return None
    model = model_of(schema)
    if model is not None:
        return json.loads(_model_schema_text(model))  # type: ignore[no-any-return]
    if not isinstance(schema, Mapping):
        raise TypeError(
            "response_schema must be a Pydantic model class or a JSON schema (a dict), got "
            f"{type(schema).__name__} {schema!r}"
        )
    try:
        text = json.dumps(schema)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"response_schema is not JSON data: {exc}") from None
    copied: dict[str, Any] = json.loads(text)
    from jsonschema.exceptions import SchemaError

    try:
        _validator_class(copied).check_schema(copied)
    except SchemaError as exc:
        where = _path(exc.absolute_path)
        raise ValueError(
            f"response_schema is not a valid JSON schema: {exc.message}"
            + (f" (at {where})" if where else "")
        ) from None
    return copied


@functools.lru_cache(maxsize=256)
def _model_schema_text(model: type[BaseModel]) -> str:
    try:
        schema = model.model_json_schema()
    except Exception as exc:  # PydanticInvalidForJsonSchema and the like
        raise TypeError(
            f"response_schema {model.__name__} cannot be described as a JSON schema, which "
            f"a question's answer is checked against in every process: {exc}"
        ) from None
    return json.dumps(schema)


def check_answer(
    interrupt_id: str,
    answer: Any,
    schema: Mapping[str, Any] | None,
    model: type[BaseModel] | None = None,
    *,
    run_id: str | None = None,
) -> Any:
    """The answer to record for question ``interrupt_id``: checked, as JSON data.

    Without a schema the answer is returned as it is. With one, it is made JSON
    data, validated against ``schema`` and, when given, by ``model``.

    Raises:
        AnswerInvalid: the answer does not fit; ``errors`` names each field.
    """
    if schema is None:
        return answer
    try:
        value = to_jsonable_python(answer)
    except PydanticSerializationError as exc:
        errors = {_ROOT: f"not JSON data ({exc})"}
        raise _invalid(interrupt_id, errors, run_id) from None
    errors = _schema_errors(_validator(schema), value)
    if not errors and model is not None:
        try:
            model.model_validate(value)
        except ValidationError as exc:
            errors = _model_errors(exc)
    if errors:
        raise _invalid(interrupt_id, errors, run_id)
    return value


def answer_for_node(schema: ResponseSchema | None, value: Any, interrupt_id: str) -> Any:
    """What the node receives for a recorded answer: an instance of the model, or the value.

    Raises:
        AnswerInvalid: the recorded answer does not fit the model: it was accepted where
            only the JSON schema was at hand, and the model's own validators refuse it
            (or the node now asks with another model than the checkpoint recorded).
    """
    model = model_of(schema)
    if model is None or isinstance(value, model):
        return value
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise _invalid(interrupt_id, _model_errors(exc), None, applied=True) from exc


# ----------------------------------------------------------------- checking
def _validator_class(schema: Mapping[str, Any]) -> type[Validator]:
    from jsonschema.validators import Draft202012Validator, validator_for

    # Pydantic writes draft 2020-12 schemas; a dict naming another draft ($schema) gets it.
    return validator_for(schema, default=Draft202012Validator)


def _validator(schema: Mapping[str, Any]) -> Validator:
    return _validator_class(schema)(schema)


def _schema_errors(validator: Validator, value: Any) -> dict[str, str]:
    """Each field path the JSON schema refuses -> why (several reasons joined)."""
    found: dict[str, list[str]] = {}
    for error in validator.iter_errors(value):
        for path, message in _explained(error):
            reasons = found.setdefault(path, [])
            if message not in reasons:
                reasons.append(message)
    return {path: "; ".join(reasons) for path, reasons in found.items()}


def _explained(error: SchemaViolation) -> list[tuple[str, str]]:
    """(path, message) pairs for one violation, naming the field itself where it can."""
    at = list(error.absolute_path)
    instance = error.instance
    if error.validator == "required" and isinstance(instance, dict):
        required = error.validator_value if isinstance(error.validator_value, list) else []
        missing = [name for name in required if name not in instance]
        return [(_path([*at, name]), "is required") for name in missing]
    if (
        error.validator == "additionalProperties"
        and error.validator_value is False
        and isinstance(instance, dict)
        and isinstance(error.schema, Mapping)
    ):
        known = error.schema.get("properties", {})
        patterns = list(error.schema.get("patternProperties", {}))
        extra = [
            name
            for name in instance
            if name not in known and not any(re.search(p, name) for p in patterns)
        ]
        if extra:
            return [(_path([*at, name]), "is not a field of the answer") for name in extra]
    return [(_path(at), error.message)]


def _model_errors(exc: ValidationError) -> dict[str, str]:
    found: dict[str, str] = {}
    for item in exc.errors(include_url=False):
        path = _path(item["loc"])
        found[path] = f"{found[path]}; {item['msg']}" if path in found else item["msg"]
    return found


def _path(parts: Iterable[Any]) -> str:
    """``["items", 0, "qty"]`` -> ``"items[0].qty"``; the answer itself is ``""``."""
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def _invalid(
    interrupt_id: str, errors: Mapping[str, str], run_id: str | None, *, applied: bool = False
) -> AnswerInvalid:
    listed = "; ".join(f"{path or 'the answer'}: {message}" for path, message in errors.items())
    outcome = (
        "it was recorded where only its JSON schema was checked"
        if applied
        else "nothing was applied and the question is still pending"
    )
    return AnswerInvalid(
        f"the answer to interrupt {interrupt_id!r} does not fit its response schema ({listed}); "
        + outcome,
        interrupt_id=interrupt_id,
        errors=errors,
        run_id=run_id,
    )
