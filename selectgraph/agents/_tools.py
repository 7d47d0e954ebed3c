"""Tools: turn typed Python functions into tools a model can call, and run its calls.

A tool's JSON schema comes from Pydantic, built from the function's type hints,
defaults and docstring (Google, NumPy, reST or Epydoc style, read by
docstring-parser). :meth:`Tool.execute` validates a model's
arguments with that same Pydantic model before the function runs, and reports
every failure back to the model as a tool result (``is_error=True``) instead
of raising, so an agent can correct itself.

Result rendering, in order:

- ``str`` is sent unchanged.
- ``dict``, ``list``, ``tuple``, ``set``, Pydantic models and dataclasses become
  structured JSON content (nested dates, enums, UUIDs... converted as Pydantic
  serialises them in JSON mode; non-finite floats become ``null``).
- Other JSON-able values (numbers, booleans, ``None``, enums, dates) are sent as
  their JSON text, e.g. ``42``, ``true``, ``null``.
- Anything Pydantic cannot serialise is sent as ``str(value)``.

Sync functions run directly on the event loop thread: the same thread as the
caller, so thread-bound resources (a ``sqlite3`` connection, a non-thread-safe
client) work and parallel branches never run one tool function concurrently.
A sync tool that blocks on I/O should be written ``async`` or marked
``blocking=True`` to run in a worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import inspect
import re
import warnings
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    Generic,
    ParamSpec,
    Protocol,
    TypeVar,
    get_args,
    get_origin,
    get_type_hints,
    overload,
    runtime_checkable,
)

from docstring_parser import Docstring, ParseError, epydoc, google, numpydoc, rest
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic.json_schema import PydanticJsonSchemaWarning

from selectgraph.core._errors import SelectGraphError
from selectgraph.core._messages import Message, ToolCall, tool_content
from selectgraph.providers._base import ToolSpec

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["RunnableTool", "Tool", "ToolDefinitionError", "Toolset", "tool"]

P = ParamSpec("P")
R = TypeVar("R")

# OpenAI and Anthropic both accept tool names of this shape.
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
# Long tool errors waste the model's context; the head says what went wrong.
_MAX_ERROR_CHARS = 2000


class ToolDefinitionError(SelectGraphError):
    """A function cannot be made into a tool; the message names the function and the fix."""


class RunnableTool(Protocol):
    """What an agent runs a model's tool call with: a :class:`Tool`, or a toolset's tool."""

    @property
    def name(self) -> str:
        """The name the model calls the tool by."""
        ...

    @property
    def spec(self) -> ToolSpec:
        """The tool as a model sees it."""
        ...

    async def execute(self, call: ToolCall) -> Message:
        """Answer one call; failures come back as an error result, not raised."""
        ...


@runtime_checkable
class Toolset(Protocol):
    """Tools found when a run starts, not when the agent is made (an MCP server's).

    An agent asks for them at the start of each answer; a toolset caches them.
    """

    async def list_tools(self) -> Sequence[RunnableTool]:
        """The tools to offer the model now.

        Raises:
            SelectGraphError: they cannot be listed (the run fails with it).
        """
        ...


class Tool(Generic[P, R]):
    """A Python function a model can call, with its JSON schema and validated execution.

    Build one with :meth:`from_function` or the :func:`tool` decorator. A tool
    is still callable as the plain function.

    Example:
        >>> def add(a: int, b: int = 1) -> int:
        ...     '''Add two numbers.
        ...
        ...     Args:
        ...         a: The first number.
        ...         b: The second number.
        ...     '''
        ...     return a + b
        >>> t = Tool.from_function(add)
        >>> t.spec.parameters["required"]
        ['a']
        >>> t(2, 3)
        5
    """

    # Set by functools.update_wrapper, so a tool introspects like its function.
    __name__: str
    __wrapped__: Callable[P, R]

    def __init__(
        self,
        function: Callable[P, R],
        *,
        name: str | None = None,
        description: str | None = None,
        blocking: bool = False,
    ) -> None:
        """Describe ``function`` as a tool.

        Args:
            function: A sync or async function whose parameters all have type hints.
            name: The name the model sees; defaults to the function's name.
            description: What the tool does; defaults to the docstring's prose.
            blocking: Run a sync function in a worker thread (it blocks on I/O).

        Raises:
            ToolDefinitionError: the function cannot be described as a tool.
        """
        qualname = getattr(function, "__qualname__", repr(function))
        tool_name = name if name is not None else getattr(function, "__name__", "")
        if not _TOOL_NAME.fullmatch(tool_name):
            raise ToolDefinitionError(
                f"tool name {tool_name!r} of {qualname} must be 1-64 letters, digits, '_' or "
                "'-'; pass name=..."
            )
        if inspect.isgeneratorfunction(function) or inspect.isasyncgenfunction(function):
            raise ToolDefinitionError(
                f"tool {tool_name!r} ({qualname}) is a generator; return the whole result instead"
            )
        docstring = _parse_docstring(
            inspect.getdoc(_unwrap_partial(function)) or "", f"tool {tool_name!r} ({qualname})"
        )
        summary = description if description is not None else docstring.description
        if not summary.strip():
            raise ToolDefinitionError(
                f"tool {tool_name!r} ({qualname}) has no description; "
                "give the function a docstring or pass description=..."
            )
        self._function = function
        # The same function, typed loosely: execute() calls it with validated JSON.
        self._call: Callable[..., Any] = function
        self._name = tool_name
        self._description = summary.strip()
        self._blocking = blocking
        self._is_async = inspect.iscoroutinefunction(function)
        self._params, self._arguments_model, self._schema = _describe_parameters(
            function, tool_name, qualname, docstring.params
        )
        # Copy the function's name, docstring and __wrapped__, but not its
        # __dict__: a callable object's attributes would overwrite the tool's.
        functools.update_wrapper(self, function, updated=())

    @classmethod
    def from_function(
        cls,
        function: Callable[P, R],
        name: str | None = None,
        description: str | None = None,
        *,
        blocking: bool = False,
    ) -> Tool[P, R]:
        """Describe ``function`` as a tool; see :class:`Tool` for the arguments.

        Raises:
            ToolDefinitionError: the function cannot be described as a tool.
        """
        return cls(function, name=name, description=description, blocking=blocking)

    @property
    def name(self) -> str:
        """The name the model calls the tool by."""
        return self._name

    @property
    def description(self) -> str:
        """What the tool does, as the model reads it."""
        return self._description

    @property
    def function(self) -> Callable[P, R]:
        """The wrapped Python function."""
        return self._function

    @property
    def is_async(self) -> bool:
        """Whether the function is a coroutine function."""
        return self._is_async

    @property
    def spec(self) -> ToolSpec:
        """The tool as a model sees it; a fresh copy, safe for providers to adapt."""
        return ToolSpec(
            name=self._name,
            description=self._description,
            parameters=copy.deepcopy(self._schema),
        )

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Tool(name={self._name!r})"

    async def execute(self, call: ToolCall) -> Message:
        """Run one call from the model and return its result message.

        The arguments are validated (and coerced, as Pydantic does) before the
        function runs. Invalid arguments and exceptions raised by the function
        come back as a ``Role.TOOL`` message with ``is_error=True`` that names
        the tool and the problem; they are not raised.

        Args:
            call: The model's request; the result answers ``call.id``.

        Returns:
            A tool message answering ``call.id``.
        """
        if call.name != self._name:
            return self._error(call, f"tool {self._name!r} cannot answer a call to {call.name!r}")
        if call.raw_arguments is not None and not call.arguments:
            raw = _clip(call.raw_arguments, 200)
            return self._error(
                call,
                f"arguments for tool {self._name!r} are not valid JSON: {raw!r}; "
                "send a JSON object",
                kind="invalid_arguments",
            )
        try:
            validated = self._arguments_model.model_validate(call.arguments)
        except ValidationError as exc:
            return self._error(call, self._describe_invalid(exc), kind="invalid_arguments")
        args, kwargs = self._bind(validated)
        try:
            if self._blocking and not self._is_async:
                result = await asyncio.to_thread(self._call, *args, **kwargs)
            else:
                result = self._call(*args, **kwargs)
            if inspect.isawaitable(result):
                # Async functions, and sync ones that hand back a coroutine (a
                # partial of an async function): the caller means its result.
                result = await result
        except Exception as exc:  # every failure goes back to the model as a result
            message = f"tool {self._name!r} raised {type(exc).__name__}: {exc}"
            return self._error(call, message, kind="exception", exception=type(exc).__name__)
        return Message.tool(call.id, tool_content(result), name=self._name)

    def _bind(self, validated: BaseModel) -> tuple[list[Any], dict[str, Any]]:
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for param in self._params:
            value = getattr(validated, param.field)
            if param.positional_only:
                args.append(value)
            else:
                kwargs[param.name] = value
        return args, kwargs

    def _describe_invalid(self, exc: ValidationError) -> str:
        problems = []
        for error in exc.errors(include_url=False):
            where = ".".join(str(part) for part in error["loc"]) or "arguments"
            if error["type"] == "extra_forbidden":
                problems.append(f"{where}: not a parameter of this tool")
            elif error["type"] == "missing":
                problems.append(f"{where}: {error['msg']}")
            else:
                got = _clip(repr(error["input"]), 80)
                problems.append(f"{where}: {error['msg']} (got {got})")
        return (
            f"invalid arguments for tool {self._name!r}: "
            + "; ".join(problems)
            + ". Fix the arguments and call the tool again."
        )

    def _error(
        self,
        call: ToolCall,
        message: str,
        *,
        kind: str = "invalid_call",
        exception: str | None = None,
    ) -> Message:
        metadata: dict[str, Any] = {"tool_error": kind}
        if exception is not None:
            metadata["exception"] = exception
        return Message.tool(
            call.id,
            _clip(message, _MAX_ERROR_CHARS),
            name=self._name,
            is_error=True,
            metadata=metadata,
        )


@overload
def tool(function: Callable[P, R], /) -> Tool[P, R]: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    blocking: bool = False,
) -> Callable[[Callable[P, R]], Tool[P, R]]: ...


def tool(
    function: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    blocking: bool = False,
) -> Tool[P, R] | Callable[[Callable[P, R]], Tool[P, R]]:
    """Make a function a :class:`Tool`; use as ``@tool`` or ``@tool(name=...)``.

    Args:
        function: The function, when used bare.
        name: The name the model sees; defaults to the function's name.
        description: What the tool does; defaults to the docstring's prose.
        blocking: Run a sync function in a worker thread (it blocks on I/O).

    Returns:
        The tool, or a decorator that makes one.

    Raises:
        ToolDefinitionError: the function cannot be described as a tool.
    """
    if function is not None:
        return Tool(function, name=name, description=description, blocking=blocking)

    def decorate(fn: Callable[P, R]) -> Tool[P, R]:
        return Tool(fn, name=name, description=description, blocking=blocking)

    return decorate


class _Param:
    """How one function parameter maps onto the arguments model."""

    __slots__ = ("field", "name", "positional_only")

    def __init__(self, name: str, field: str, *, positional_only: bool) -> None:
        self.name = name
        self.field = field
        self.positional_only = positional_only


def _describe_parameters(
    function: Callable[..., Any],
    tool_name: str,
    qualname: str,
    documented: dict[str, str],
) -> tuple[list[_Param], type[BaseModel], dict[str, Any]]:
    where = f"tool {tool_name!r} ({qualname})"
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError) as exc:
        raise ToolDefinitionError(f"cannot read the signature of {where}: {exc}") from exc
    try:
        hints = _type_hints(function)
    except Exception as exc:
        raise ToolDefinitionError(
            f"cannot resolve the type hints of {where}: {exc}; define the types they name "
            "at module level"
        ) from exc
    params: list[_Param] = []
    fields: dict[str, Any] = {}
    for index, param in enumerate(signature.parameters.values()):
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            stars = "*" if param.kind is param.VAR_POSITIONAL else "**"
            raise ToolDefinitionError(
                f"parameter {stars}{param.name} of {where} cannot be described to a model; "
                "replace it with named parameters (a list or a Pydantic model if needed)"
            )
        if param.name not in hints:
            raise ToolDefinitionError(
                f"parameter {param.name!r} of {where} has no type hint; annotate it "
                f"(e.g. {param.name}: str) so its JSON schema can be derived"
            )
        annotation = hints[param.name]
        _check_schema(annotation, f"parameter {param.name!r} of {where}")
        description = documented.pop(param.name, None)
        if _annotated_description(annotation) is not None:
            description = None  # an explicit Field(description=...) wins over the docstring
        default = ... if param.default is param.empty else param.default
        # Fields get neutral names with the parameter name as alias, so parameters
        # called "json", "schema" or "model_id" cannot clash with BaseModel's own
        # attributes, and validation errors still name the parameter.
        field = f"p{index}"
        info = (
            Field(default, alias=param.name)
            if description is None
            else Field(default, alias=param.name, description=description)
        )
        fields[field] = (annotation, info)
        params.append(
            _Param(param.name, field, positional_only=param.kind is param.POSITIONAL_ONLY)
        )
    # Parameters a functools.partial already bound may stay documented.
    ghosts = set(documented) - set(inspect.signature(_unwrap_partial(function)).parameters)
    if ghosts:
        raise ToolDefinitionError(
            f"the docstring of {where} documents {sorted(ghosts)} but the function "
            "has no such parameter; fix the Args: section"
        )
    model = create_model(
        f"{tool_name}_arguments",
        __config__=ConfigDict(extra="forbid"),
        **fields,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", PydanticJsonSchemaWarning)
        try:
            schema = model.model_json_schema()
        except PydanticJsonSchemaWarning as exc:
            raise ToolDefinitionError(f"a default value of {where} is not JSON: {exc}") from exc
    return params, model, _strip_titles(schema)


def _unwrap_partial(function: Callable[..., Any]) -> Callable[..., Any]:
    while isinstance(function, functools.partial):
        function = function.func
    return function


def _type_hints(function: Callable[..., Any]) -> dict[str, Any]:
    target: Any = _unwrap_partial(function)
    if not inspect.isroutine(target):
        target = type(target).__call__  # a callable object: its __call__ has the hints
    return get_type_hints(target, include_extras=True)


def _check_schema(annotation: Any, what: str) -> None:
    """Fail early, naming the parameter, when a type has no JSON schema."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", PydanticJsonSchemaWarning)
            TypeAdapter(annotation).json_schema()
    except Exception as exc:
        raise ToolDefinitionError(
            f"{what} has type {annotation!r}, which has no JSON schema; use JSON-like types "
            f"(str, int, float, bool, list, dict, Literal, Enum, Pydantic models): {exc}"
        ) from exc


def _annotated_description(annotation: Any) -> str | None:
    if get_origin(annotation) is Annotated:
        for meta in get_args(annotation)[1:]:
            if isinstance(meta, FieldInfo) and meta.description:
                return meta.description
    return None


# Schema keywords whose values are schemas, or maps / lists of schemas.
_SUBSCHEMA = ("items", "additionalProperties", "not", "if", "then", "else", "contains")
_SUBSCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")


def _strip_titles(schema: Any) -> Any:
    """Drop Pydantic's generated ``title`` keywords: names the model already has, paid in tokens."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title":
            continue
        if key in _SUBSCHEMA:
            out[key] = _strip_titles(value)
        elif key in _SUBSCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: _strip_titles(sub) for name, sub in value.items()}
        elif key in _SUBSCHEMA_LISTS and isinstance(value, list):
            out[key] = [_strip_titles(sub) for sub in value]
        else:
            out[key] = value
    return out


class _Docstring:
    __slots__ = ("description", "params")

    def __init__(self, description: str, params: dict[str, str]) -> None:
        self.description = description
        self.params = params


# Google style, plus the sections its default parser does not know: without them a
# "Keyword Args:" section is lost and a "Note:" section runs into the description.
_GOOGLE = google.GoogleParser(
    [
        *google.DEFAULT_SECTIONS,
        google.Section("Keyword Args", "param", google.SectionType.MULTIPLE),
        google.Section("Keyword Arguments", "param", google.SectionType.MULTIPLE),
        google.Section("Other Parameters", "param", google.SectionType.MULTIPLE),
        *(
            google.Section(title, "notes", google.SectionType.SINGULAR)
            for title in ("Note", "Notes", "Warning", "Warnings", "See Also", "Todo", "References")
        ),
    ]
)
# The other styles, tried after Google (the house style, so it wins a tie).
_OTHER_STYLES = (numpydoc.parse, rest.parse, epydoc.parse)
# Meta kinds that describe a parameter (Attributes sections describe something else).
_PARAM_KINDS = frozenset({"param", "parameter", "arg", "argument", "key", "keyword", "other_param"})


def _parse_docstring(doc: str, where: str) -> _Docstring:
    """Split a Google, NumPy, reST or Epydoc docstring into its prose and per-parameter text.

    The style that finds the most sections wins, as docstring-parser's own
    autodetection does.

    Raises:
        ToolDefinitionError: the docstring has Google sections, none of them
            readable, and no other style reads it either.
    """
    parsed: list[Docstring] = []
    google_error: ParseError | None = None
    try:
        parsed.append(_GOOGLE.parse(doc))
    except ParseError as exc:
        google_error = exc
    for parse in _OTHER_STYLES:
        with contextlib.suppress(ParseError):
            parsed.append(parse(doc))
    best = max(parsed, key=lambda d: len(d.meta), default=None)
    if best is None or (google_error is not None and not best.meta):
        raise ToolDefinitionError(
            f"the docstring of {where} cannot be read: {google_error}; fix its sections "
            "(Google style: 'Args:' then one 'name: description' line per parameter)"
        )
    params = {
        param.arg_name.lstrip("*"): _unwrap(param.description or "")
        for param in best.params
        if param.args[0] in _PARAM_KINDS
    }
    return _Docstring((best.description or "").strip(), params)


def _unwrap(text: str) -> str:
    """Join the lines of each paragraph: docstrings wrap at a width, models need not."""
    paragraphs = (" ".join(p.split()) for p in re.split(r"\n\s*\n", text))
    return "\n\n".join(p for p in paragraphs if p)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
