"""Lenient JSON: a supervisor's structured answers parsed the way small models write them.

Small models put raw newlines and tabs inside JSON strings (``Invalid JSON:
control character``), stop in the middle of an object when their token limit
cuts them, or add a trailing comma. :class:`LenientModel` validates strictly
first; when the text is not valid JSON it parses it again with
``json.loads(strict=False)`` (control characters allowed in strings), then with
the ``json-repair`` library (unclosed brackets and strings, trailing commas,
single quotes, stray prose), and validates what that gives. Only the JSON is
repaired: a value that breaks the schema still fails validation, and the agent
re-asks with the error as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Self

from pydantic import BaseModel, ValidationError

from selectgraph.agents._structured import lenient_json

if TYPE_CHECKING:
    from pydantic.config import ExtraValues

__all__ = ["LenientModel", "lenient_json"]


class LenientModel(BaseModel):
    """A model whose ``model_validate_json`` repairs the JSON before giving up on it."""

    @classmethod
    def model_validate_json(
        cls,
        json_data: str | bytes | bytearray,
        *,
        strict: bool | None = None,
        extra: ExtraValues | None = None,
        context: Any | None = None,
        by_alias: bool | None = None,
        by_name: bool | None = None,
    ) -> Self:
        """Validate ``json_data``; when it is not valid JSON, validate its repaired value.

        Raises:
            ValidationError: the text holds no JSON object even after repair, or its
                value does not fit the model (the first, strict error is raised when
                repair found nothing to validate).
        """
        options: dict[str, Any] = {"strict": strict, "context": context}
        if by_alias is not None:
            options["by_alias"] = by_alias
        if by_name is not None:
            options["by_name"] = by_name
        if extra is not None:
            options["extra"] = extra
        try:
            return super().model_validate_json(json_data, **options)
        except ValidationError as error:
            if not any(item["type"] == "json_invalid" for item in error.errors()):
                raise
            value = lenient_json(json_data)
            if not isinstance(value, dict):
                raise
            return cls.model_validate(value, **options)
