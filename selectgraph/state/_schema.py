"""Schema: the typed shape of ``state.data`` — its fields, defaults, reducers and validation.

A schema comes from a Pydantic model (validated at graph entry and exit), a
TypedDict (reducers only, no validation, as LangGraph users know it), or just a
``reducers={...}`` table. Reducers are declared with ``Annotated``::

    class Research(BaseModel):
        topic: str = ""
        findings: Annotated[list[str], append] = []
"""

from __future__ import annotations

import copy
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, get_type_hints

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticUndefined
from typing_extensions import is_typeddict

from selectgraph.core._errors import Diagnostic
from selectgraph.core._run_errors import StateValidationError
from selectgraph.core._state import RESERVED_KEYS
from selectgraph.state._reducers import Reducer, as_reducer, last_write_wins, reducers_equal

__all__ = ["StateSchema", "build_schema"]

_NO_DEFAULT: Final = object()


@dataclass(frozen=True, slots=True, kw_only=True)
class StateSchema:
    """The compiled shape of ``state.data``."""

    model: type[BaseModel] | None = None
    """The Pydantic model validated at entry and exit, if any."""
    fields: frozenset[str] | None = None
    """Declared field names; ``None`` means any key is allowed."""
    reducers: Mapping[str, Reducer] = field(default_factory=dict)
    """Non-default reducers by field (fields not listed use last-write-wins)."""
    allow_extra: bool = False
    """Whether keys outside ``fields`` may be written."""
    source: str = "no schema"
    """Where the schema came from, for messages."""

    def reducer_for(self, key: str) -> Reducer:
        """The reducer that merges updates of ``key``."""
        return self.reducers.get(key, last_write_wins)

    def check_keys(self, keys: Any, *, node: str, step: int | None = None) -> None:
        """Raise StateValidationError if a node writes keys the schema does not declare."""
        if self.fields is None or self.allow_extra:
            return
        unknown = [k for k in keys if k not in self.fields and k not in RESERVED_KEYS]
        if unknown:
            known = ", ".join(sorted(self.fields))
            raise StateValidationError(
                f"node {node!r} wrote {', '.join(map(repr, sorted(unknown)))}, which "
                f"{'is' if len(unknown) == 1 else 'are'} not a field of {self.source} "
                f"(fields: {known})",
                fields=sorted(unknown),
                node=node,
                step=step,
            )

    def initial_data(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """Validate the caller's input and fill in defaults.

        Raises:
            StateValidationError: the input does not satisfy the schema.
        """
        if self.model is None:
            return dict(data)
        extra = {
            k: v for k, v in data.items() if k in RESERVED_KEYS or k not in self.fields_or_empty
        }
        if extra and not self.allow_extra:
            unknown = sorted(k for k in extra if k not in RESERVED_KEYS)
            if unknown:
                raise StateValidationError(
                    f"the input has {', '.join(map(repr, unknown))}, not "
                    f"{'a field' if len(unknown) == 1 else 'fields'} of {self.source} "
                    f"(fields: {', '.join(sorted(self.fields_or_empty))})",
                    fields=unknown,
                )
        declared = {k: v for k, v in data.items() if k in self.fields_or_empty}
        instance = self._validate(declared, when="at graph entry")
        values = {name: getattr(instance, name) for name in type(instance).model_fields}
        values.update(extra)
        return values

    def check_input_keys(self, keys: Any, *, where: str) -> None:
        """Raise StateValidationError if an input names keys the schema does not declare."""
        if self.fields is None or self.allow_extra:
            return
        unknown = sorted(k for k in keys if k not in self.fields and k not in RESERVED_KEYS)
        if unknown:
            raise StateValidationError(
                f"{where} has {', '.join(map(repr, unknown))}, not "
                f"{'a field' if len(unknown) == 1 else 'fields'} of {self.source} "
                f"(fields: {', '.join(sorted(self.fields))})",
                fields=unknown,
            )

    def check_partial(self, data: Mapping[str, Any], *, where: str) -> None:
        """Raise StateValidationError if a field given in ``data`` has a wrong value.

        Fields ``data`` leaves out are not asked for: it is an update of a state
        that may hold them already (a thread's input, checked before the thread
        is claimed).
        """
        if self.model is None:
            return
        declared = {k: v for k, v in data.items() if k in self.fields_or_empty}
        try:
            self.model.model_validate(declared)
        except ValidationError as exc:
            wrong = [err for err in exc.errors() if err["type"] != "missing"]
            if wrong:
                raise StateValidationError(
                    f"{where} does not match {self.source}: "
                    + "; ".join(
                        f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in wrong
                    ),
                    fields=[".".join(str(part) for part in err["loc"]) for err in wrong],
                ) from exc

    def validate_exit(self, data: Mapping[str, Any], *, state: Any = None) -> None:
        """Raise StateValidationError if the final data does not satisfy the schema."""
        if self.model is None:
            return
        declared = {k: v for k, v in data.items() if k in self.fields_or_empty}
        self._validate(declared, when="at graph exit", state=state)

    def default_for(self, key: str) -> tuple[bool, Any]:
        """``(True, default)`` when the schema gives ``key`` a default, else ``(False, None)``."""
        if self.model is None or key not in self.model.model_fields:
            return False, None
        value = field_default(self.model, key)
        return (value is not _NO_DEFAULT), (None if value is _NO_DEFAULT else value)

    @property
    def fields_or_empty(self) -> frozenset[str]:
        """Declared field names, or the empty set when any key is allowed."""
        return self.fields or frozenset()

    def _validate(self, values: Mapping[str, Any], *, when: str, state: Any = None) -> BaseModel:
        assert self.model is not None
        try:
            return self.model.model_validate(values)
        except ValidationError as exc:
            paths = [".".join(str(part) for part in err["loc"]) for err in exc.errors()]
            details = "; ".join(
                f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
            )
            raise StateValidationError(
                f"state does not match {self.source} {when}: {details}",
                fields=paths,
                state=state,
            ) from exc


def _reducers_in(metadata: Any) -> list[Reducer]:
    found: list[Reducer] = []
    for item in metadata:
        candidate = as_reducer(item)
        if candidate is not None:
            found.append(candidate)
    return found


def _annotated_metadata(annotation: Any) -> tuple[Any, ...]:
    if typing.get_origin(annotation) is typing.Annotated:
        return tuple(annotation.__metadata__)
    return ()


def build_schema(
    state_schema: type[Any] | None,
    reducers: Mapping[str, Any] | None,
    diagnostics: list[Diagnostic],
) -> StateSchema:
    """Compile a schema declaration, adding any problem found to ``diagnostics``."""
    table: dict[str, list[Reducer]] = {}
    model: type[BaseModel] | None = None
    fields: frozenset[str] | None = None
    allow_extra = False
    source = "no schema"
    if state_schema is not None:
        if isinstance(state_schema, type) and issubclass(state_schema, BaseModel):
            model = state_schema
            source = state_schema.__name__
            fields = frozenset(state_schema.model_fields)
            allow_extra = state_schema.model_config.get("extra") == "allow"
            for name, info in state_schema.model_fields.items():
                table.setdefault(name, []).extend(_reducers_in(info.metadata))
        elif is_typeddict(state_schema):
            source = state_schema.__name__
            hints = get_type_hints(state_schema, include_extras=True)
            fields = frozenset(hints)
            for name, hint in hints.items():
                table.setdefault(name, []).extend(_reducers_in(_annotated_metadata(hint)))
        else:
            diagnostics.append(
                Diagnostic(
                    category="invalid_state_schema",
                    message=(
                        f"state_schema must be a Pydantic model or a TypedDict, "
                        f"got {state_schema!r}"
                    ),
                )
            )
    for name, declared in (reducers or {}).items():
        candidate = as_reducer(declared)
        if candidate is None:
            diagnostics.append(
                Diagnostic(
                    category="invalid_reducer",
                    message=f"reducers[{name!r}] is {declared!r}, not a reducer function",
                )
            )
            continue
        if fields is not None and name not in fields:
            diagnostics.append(
                Diagnostic(
                    category="unknown_state_key",
                    message=(
                        f"reducers names {name!r}, which is not a field of {source} "
                        f"(fields: {', '.join(sorted(fields))})"
                    ),
                )
            )
            continue
        table.setdefault(name, []).append(candidate)

    resolved: dict[str, Reducer] = {}
    types = _field_types(state_schema) if fields is not None else {}
    for name, found in table.items():
        distinct: list[Reducer] = []
        for candidate in found:
            if not any(reducers_equal(candidate, seen) for seen in distinct):
                distinct.append(candidate)
        if len(distinct) > 1:
            names = ", ".join(r.name for r in distinct)
            diagnostics.append(
                Diagnostic(
                    category="conflicting_reducers",
                    message=f"field {name!r} declares {len(distinct)} reducers ({names}); keep one",
                )
            )
        elif distinct and distinct[0] is not last_write_wins:
            chosen = distinct[0]
            start = _EMPTY_VALUES.get(_origin(types.get(name)))
            if start is not None:
                chosen = chosen.starting_from(start)
            resolved[name] = chosen
    return StateSchema(
        model=model, fields=fields, reducers=resolved, allow_extra=allow_extra, source=source
    )


_EMPTY_VALUES: Final[dict[Any, Callable[[], Any]]] = {
    list: list,
    dict: dict,
    set: set,
    frozenset: frozenset,
    tuple: tuple,
    str: str,
    int: int,
    float: float,
}
"""Where a field with a function reducer starts when it has no value yet, by its type."""


def _field_types(state_schema: Any) -> dict[str, Any]:
    """Each field's annotation (``Annotated`` kept off), for a model or a TypedDict."""
    if isinstance(state_schema, type) and issubclass(state_schema, BaseModel):
        return {name: info.annotation for name, info in state_schema.model_fields.items()}
    try:
        return dict(get_type_hints(state_schema))
    except Exception:  # unresolvable forward references: no starting values, nothing worse
        return {}


def _origin(annotation: Any) -> Any:
    """``list`` for ``list``, ``list[str]`` or ``typing.List[str]``; else the annotation."""
    origin = typing.get_origin(annotation)
    return annotation if origin is None else origin


def field_default(model: type[BaseModel], name: str) -> Any:
    """The default value of a model field, or a marker when it is required."""
    info = model.model_fields[name]
    if info.default is not PydanticUndefined:
        # A copy: the engine may extend this value in place, and the model's
        # default object must never change.
        return copy.deepcopy(info.default)
    if info.default_factory is not None:
        return info.default_factory()  # type: ignore[call-arg]
    return _NO_DEFAULT
