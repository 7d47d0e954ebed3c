from __future__ import annotations

import dataclasses
import doctest
import functools
import threading
from collections.abc import (
    Awaitable,
    Callable,
    Iterator,
)
from datetime import datetime
from enum import Enum
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from selectgraph.agents import _tools
from selectgraph.agents._tools import Tool, ToolDefinitionError, tool
from selectgraph.core._errors import SelectGraphError
from selectgraph.core._messages import Role, ToolCall


class Priority(Enum):
    LOW = "low"
    HIGH = "high"


class Address(BaseModel):
    city: str
    postcode: str | None = None


def create_ticket(
    title: str,
    priority: Priority,
    tags: list[str],
    assignee: str | None = None,
    channel: Literal["email", "chat"] = "email",
    address: Address | None = None,
    limit: Annotated[int, Field(ge=1, description="At most this many related tickets.")] = 10,
) -> dict[str, Any]:
    """Open a support ticket.

    Use it when the user reports a problem that needs follow-up.

    Args:
        title: One-line summary
            of the problem.
        priority (Priority): How urgent it is.
        tags: Labels for routing.
        assignee: Who should handle it, if known.
        channel: How to reply to the user.
        address: Where the user is.
        limit: Overridden by the Field description.

    Returns:
        The new ticket.
    """
    return {"title": title, "priority": priority, "tags": tags}


def call(name: str, arguments: dict[str, Any], call_id: str = "c1") -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


# --- schema ------------------------------------------------------------------


def test_spec_of_a_realistic_function() -> None:
    spec = Tool.from_function(create_ticket).spec

    assert spec.name == "create_ticket"
    assert spec.description == (
        "Open a support ticket.\n\nUse it when the user reports a problem that needs follow-up."
    )
    assert spec.parameters == {
        "type": "object",
        "additionalProperties": False,
        "required": ["title", "priority", "tags"],
        "properties": {
            "title": {"type": "string", "description": "One-line summary of the problem."},
            "priority": {"$ref": "#/$defs/Priority", "description": "How urgent it is."},
            "tags": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Labels for routing.",
            },
            "assignee": {
                "anyOf": [{"type": "string"}, {"type": "null"}],
                "default": None,
                "description": "Who should handle it, if known.",
            },
            "channel": {
                "type": "string",
                "enum": ["email", "chat"],
                "default": "email",
                "description": "How to reply to the user.",
            },
            "address": {
                "anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}],
                "default": None,
                "description": "Where the user is.",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "default": 10,
                "description": "At most this many related tickets.",
            },
        },
        "$defs": {
            "Address": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "postcode": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
                },
                "required": ["city"],
            },
            "Priority": {"type": "string", "enum": ["low", "high"]},
        },
    }


def test_spec_is_a_fresh_copy_each_time() -> None:
    ticket = Tool.from_function(create_ticket)

    ticket.spec.parameters["properties"].clear()

    assert "title" in ticket.spec.parameters["properties"]


def test_name_and_description_can_be_given() -> None:
    ticket = Tool.from_function(create_ticket, name="open_ticket", description="Open one.")

    assert (ticket.spec.name, ticket.spec.description) == ("open_ticket", "Open one.")


def test_parameters_named_like_pydantic_attributes_are_fine() -> None:
    def render(json: str, schema: str, model_id: str, copy: bool = False) -> str:
        """Render a document."""
        return json

    spec = Tool.from_function(render).spec

    assert list(spec.parameters["properties"]) == ["json", "schema", "model_id", "copy"]


def test_function_without_parameters_has_an_empty_object_schema() -> None:
    def now() -> str:
        """The current time."""
        return "noon"

    assert Tool.from_function(now).spec.parameters == {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
    }


# --- decorator forms ---------------------------------------------------------


def test_bare_decorator_makes_a_tool_that_still_works_as_a_function() -> None:
    @tool
    def add(a: int, b: int = 1) -> int:
        """Add two numbers."""
        return a + b

    assert isinstance(add, Tool)
    assert add.name == "add"
    assert add(2, 3) == 5
    assert add.__name__ == "add"


def test_decorator_with_arguments() -> None:
    @tool(name="plus", description="Sum of two integers.")
    def add(a: int, b: int) -> int:
        return a + b

    assert (add.name, add.description) == ("plus", "Sum of two integers.")


def test_decorator_with_empty_parentheses() -> None:
    @tool()
    def ping() -> str:
        """Check the service is up."""
        return "pong"

    assert ping.name == "ping"


def test_tool_keeps_the_function() -> None:
    ticket = Tool.from_function(create_ticket)

    assert ticket.function is create_ticket
    assert ticket.is_async is False


def test_partial_needs_a_name_and_describes_its_remaining_parameters() -> None:
    def search(index: str, query: str) -> str:
        """Search an index.

        Args:
            index: Which index.
            query: What to look for.
        """
        return f"{index}:{query}"

    searcher = Tool.from_function(functools.partial(search, "docs"), name="search_docs")

    assert searcher.spec.parameters["properties"] == {
        "query": {"type": "string", "description": "What to look for."}
    }
    assert searcher.description == "Search an index."


def google_style(title: str, priority: int = 1) -> str:
    """Open a ticket.

    Read by the triage team.

    Args:
        title: One-line summary
            of the problem.
        priority (int): How urgent it is.

    Returns:
        The ticket id.
    """
    return title


def numpy_style(title: str, priority: int = 1) -> str:
    """Open a ticket.

    Read by the triage team.

    Parameters
    ----------
    title : str
        One-line summary
        of the problem.
    priority : int, optional
        How urgent it is.

    Returns
    -------
    str
        The ticket id.
    """
    return title


def rest_style(title: str, priority: int = 1) -> str:
    """Open a ticket.

    Read by the triage team.

    :param title: One-line summary
        of the problem.
    :param int priority: How urgent it is.
    :returns: The ticket id.
    :raises ValueError: When the title is empty.
    """
    return title


def epydoc_style(title: str, priority: int = 1) -> str:
    """Open a ticket.

    Read by the triage team.

    @param title: One-line summary
        of the problem.
    @type title: str
    @param priority: How urgent it is.
    @return: The ticket id.
    """
    return title


@pytest.mark.parametrize(
    "function",
    [google_style, numpy_style, rest_style, epydoc_style],
    ids=["google", "numpy", "rest", "epydoc"],
)
def test_every_docstring_style_describes_the_tool_and_its_parameters(
    function: Callable[..., str],
) -> None:
    spec = Tool.from_function(function, name="open_ticket").spec

    assert spec.description == "Open a ticket.\n\nRead by the triage team."
    assert spec.parameters["properties"] == {
        "title": {"type": "string", "description": "One-line summary of the problem."},
        "priority": {"type": "integer", "default": 1, "description": "How urgent it is."},
    }


def test_google_keyword_args_are_parameters_and_notes_stay_out_of_the_description() -> None:
    def search(query: str, *, limit: int = 10, exact: bool = False) -> str:
        """Search the docs.

        Note:
            Results are cached for a minute.

        Args:
            query: What to look for.

        Keyword Args:
            limit: At most this many hits.

        Other Parameters:
            exact: Match whole words only.

        Attributes:
            cache: Not a parameter, and not reported as one.
        """
        return query

    spec = Tool.from_function(search).spec

    assert spec.description == "Search the docs."
    assert {name: p["description"] for name, p in spec.parameters["properties"].items()} == {
        "query": "What to look for.",
        "limit": "At most this many hits.",
        "exact": "Match whole words only.",
    }


def test_paragraphs_of_a_parameter_description_stay_apart() -> None:
    def fetch(url: str) -> str:
        """Fetch a page.

        Args:
            url: The address,
                with its scheme.

                Only http and https.
        """
        return url

    properties = Tool.from_function(fetch).spec.parameters["properties"]

    assert properties["url"]["description"] == (
        "The address, with its scheme.\n\nOnly http and https."
    )


def test_a_numpy_docstring_that_documents_a_ghost_is_rejected() -> None:
    def lookup(key: str) -> str:
        """Look a key up.

        Parameters
        ----------
        key : str
            The key.
        default : str
            No such parameter.
        """
        return key

    with pytest.raises(ToolDefinitionError, match=r"documents \['default'\]"):
        Tool.from_function(lookup)


def test_an_unreadable_google_section_is_a_definition_error_naming_the_tool() -> None:
    def lookup(key: str) -> str:
        """Look a key up.

        Args:
            the key to look up
        """
        return key

    with pytest.raises(
        ToolDefinitionError, match=r"docstring of tool 'lookup' .* cannot be read: Expected a colon"
    ):
        Tool.from_function(lookup)


class Counter:
    """Count words, the slow way."""

    def __init__(self) -> None:
        self._name = "not the tool's name"  # must not leak into the Tool

    async def _count(self, text: str) -> int:
        return len(text.split())

    def __call__(self, text: str) -> Awaitable[int]:
        return self._count(text)


async def test_callable_object_returning_a_coroutine_is_awaited() -> None:
    counter = Tool.from_function(Counter(), name="count_words")

    result = await counter.execute(call("count_words", {"text": "a b c"}))

    assert counter.name == "count_words"
    assert result.content == "3"


def test_docstring_examples_run() -> None:
    result = doctest.testmod(_tools)

    assert result.attempted > 0
    assert result.failed == 0


# --- execution ---------------------------------------------------------------


async def test_execute_validates_and_coerces_arguments_before_calling() -> None:
    received: list[tuple[int, Priority, Address]] = []

    @tool
    def record(count: int, priority: Priority, address: Address) -> str:
        """Record a count."""
        received.append((count, priority, address))
        return "done"

    result = await record.execute(
        call("record", {"count": "5", "priority": "high", "address": {"city": "Oslo"}}, "c9")
    )

    assert received == [(5, Priority.HIGH, Address(city="Oslo"))]
    assert result.role is Role.TOOL
    assert (result.content, result.tool_call_id, result.name) == ("done", "c9", "record")
    assert result.is_error is False


async def test_invalid_arguments_come_back_as_an_error_result() -> None:
    calls: list[object] = []

    @tool
    def search(query: str, limit: int = 10) -> str:
        """Search the docs."""
        calls.append(query)
        return "found"

    result = await search.execute(call("search", {"limit": "ten", "colour": "red"}))

    assert result.is_error is True
    assert result.tool_call_id == "c1"
    assert calls == []  # the function never ran
    text = result.text
    assert text.startswith("invalid arguments for tool 'search': ")
    assert "query: Field required" in text
    assert "limit: Input should be a valid integer" in text
    assert "(got 'ten')" in text
    assert "colour: not a parameter of this tool" in text
    assert "Traceback" not in text
    assert result.metadata == {"tool_error": "invalid_arguments"}


async def test_nested_argument_errors_name_the_path() -> None:
    @tool
    def ship(address: Address) -> str:
        """Ship to an address."""
        return "ok"

    result = await ship.execute(call("ship", {"address": {"postcode": "123"}}))

    assert "address.city: Field required" in result.text


async def test_exception_in_the_tool_comes_back_as_an_error_result() -> None:
    @tool
    def divide(a: float, b: float) -> float:
        """Divide a by b."""
        return a / b

    result = await divide.execute(call("divide", {"a": 1, "b": 0}))

    assert result.is_error is True
    assert result.text == "tool 'divide' raised ZeroDivisionError: float division by zero"
    assert result.metadata == {"tool_error": "exception", "exception": "ZeroDivisionError"}


async def test_long_error_messages_are_clipped() -> None:
    @tool
    def noisy() -> str:
        """Fail loudly."""
        raise ValueError("x" * 10_000)

    result = await noisy.execute(call("noisy", {}))

    assert len(result.text) == 2000
    assert result.text.endswith("…")


async def test_async_tool_is_awaited() -> None:
    @tool
    async def fetch(url: str) -> dict[str, str]:
        """Fetch a page."""
        return {"url": url, "body": "<html>"}

    result = await fetch.execute(call("fetch", {"url": "https://example.com"}))

    assert fetch.is_async
    assert result.content == {"url": "https://example.com", "body": "<html>"}


async def test_sync_tool_runs_on_the_callers_thread() -> None:
    @tool
    def where() -> int:
        """Report the thread."""
        return threading.get_ident()

    result = await where.execute(call("where", {}))

    assert result.text == str(threading.get_ident())


async def test_blocking_tool_runs_in_a_worker_thread() -> None:
    @tool(blocking=True)
    def where() -> int:
        """Report the thread."""
        return threading.get_ident()

    result = await where.execute(call("where", {}))

    assert result.text != str(threading.get_ident())


async def test_positional_only_parameters_are_passed_positionally() -> None:
    @tool
    def greet(name: str, /, punctuation: str = "!") -> str:
        """Greet someone."""
        return f"hi {name}{punctuation}"

    result = await greet.execute(call("greet", {"name": "Ada"}))

    assert result.content == "hi Ada!"


async def test_unparseable_arguments_come_back_as_an_error_result() -> None:
    @tool
    def search(query: str) -> str:
        """Search."""
        return query

    broken = ToolCall(id="c1", name="search", raw_arguments='{"query": "x"')

    result = await search.execute(broken)

    assert result.is_error is True
    assert "not valid JSON" in result.text


async def test_a_call_for_another_tool_is_an_error_result() -> None:
    @tool
    def search(query: str) -> str:
        """Search."""
        return query

    result = await search.execute(call("fetch", {"query": "x"}))

    assert result.is_error is True
    assert result.text == "tool 'search' cannot answer a call to 'fetch'"


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Opaque:
    def __str__(self) -> str:
        return "<opaque thing>"


@pytest.mark.parametrize(
    ("value", "content"),
    [
        ("plain text", "plain text"),
        ({"a": 1, "when": datetime(2024, 1, 2, 3, 4, 5)}, {"a": 1, "when": "2024-01-02T03:04:05"}),
        ([1, "two", None], [1, "two", None]),
        ((1, 2), [1, 2]),
        (Address(city="Oslo"), {"city": "Oslo", "postcode": None}),
        (Point(x=1, y=2), {"x": 1, "y": 2}),
        ({"ratio": float("nan")}, {"ratio": None}),
        (42, "42"),
        (True, "true"),
        (None, "null"),
        (Priority.LOW, '"low"'),
        (datetime(2024, 1, 2), '"2024-01-02T00:00:00"'),
        (Opaque(), "<opaque thing>"),
    ],
)
async def test_results_are_rendered_by_the_documented_rule(value: object, content: object) -> None:
    @tool
    def produce() -> object:
        """Produce a value."""
        return value

    result = await produce.execute(call("produce", {}))

    assert result.is_error is False
    assert result.content == content


# --- rejected definitions ----------------------------------------------------


def star_args(*items: str) -> str:
    """Join items."""
    return "".join(items)


def star_kwargs(**options: str) -> str:
    """Use options."""
    return ""


def untyped(query) -> str:  # type: ignore[no-untyped-def]
    """Search."""
    return str(query)


def generator(n: int) -> Iterator[int]:
    """Count."""
    yield n


def takes_callback(callback: Callable[[int], int]) -> int:
    """Call back."""
    return callback(1)


def undocumented(query: str) -> str:
    return query


def documents_a_ghost(query: str) -> str:
    """Search.

    Args:
        query: The query.
        limit: No such parameter.
    """
    return query


def bad_default(when: object = Opaque()) -> str:
    """Use an opaque default."""
    return ""


@pytest.mark.parametrize(
    ("function", "message"),
    [
        (star_args, r"parameter \*items of tool 'star_args' .* cannot be described"),
        (star_kwargs, r"parameter \*\*options of tool 'star_kwargs'"),
        (untyped, r"parameter 'query' of tool 'untyped' .* has no type hint"),
        (generator, r"tool 'generator' .* is a generator"),
        (takes_callback, r"parameter 'callback' of tool 'takes_callback' .* no JSON schema"),
        (undocumented, r"tool 'undocumented' .* has no description"),
        (documents_a_ghost, r"documents \['limit'\] but the function has no such parameter"),
        (bad_default, r"default value of tool 'bad_default'"),
        (lambda x: x, r"tool name '<lambda>' .* pass name="),
    ],
)
def test_functions_that_cannot_be_described_are_rejected(
    function: Callable[..., Any], message: str
) -> None:
    with pytest.raises(ToolDefinitionError, match=message):
        Tool.from_function(function)


def test_unresolvable_type_hints_are_rejected() -> None:
    def lookup(item: NotDefinedAnywhere) -> str:  # type: ignore[name-defined]  # noqa: F821
        """Look up."""
        return ""

    with pytest.raises(ToolDefinitionError, match=r"cannot resolve the type hints of tool 'lookup"):
        Tool.from_function(lookup)


def test_tool_definition_error_is_a_selectgraph_error() -> None:
    assert issubclass(ToolDefinitionError, SelectGraphError)


def test_repr_names_the_tool() -> None:
    assert repr(Tool.from_function(create_ticket)) == "Tool(name='create_ticket')"
