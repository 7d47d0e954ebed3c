"""The team: the members a supervisor directs, as graph nodes, and how a named member is found."""

from __future__ import annotations

import copy
import dataclasses
import difflib
import inspect
import re
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any

from selectgraph.agents._agent import Agent
from selectgraph.core._callables import callable_name, is_generator_callable, takes_context
from selectgraph.core._state import LAST_OUTPUT
from selectgraph.nodes._spec import NodeContext
from selectgraph.supervisor._graph_member import graph_member

__all__ = ["Member", "Team"]

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


@dataclass(frozen=True, slots=True)
class Member:
    """One team member: its name (also its node's name), what runs, and what it does."""

    name: str
    node: Any
    """An Agent (a copy when the executor model applies), a GraphMember or a function node."""
    description: str


class Team:
    """The members, in declaration order."""

    def __init__(
        self,
        agents: Mapping[str, Any],
        *,
        executor_model: str | None,
        reserved: frozenset[str],
    ) -> None:
        """Check the members and prepare each as a node.

        Raises:
            ValueError: no members, a name that is not a plain identifier, or one the
                strategy's own nodes use.
            TypeError: a member is not an Agent, a graph, a supervisor or a function.
        """
        if not isinstance(agents, Mapping):
            raise TypeError(
                f"SupervisorAgent(agents=...) takes a mapping of name to agent, got "
                f"{type(agents).__name__}"
            )
        if not agents:
            raise ValueError("SupervisorAgent needs at least one agent in agents={...}")
        self.members: dict[str, Member] = {}
        for name, value in agents.items():
            if not isinstance(name, str) or not _NAME.match(name):
                raise ValueError(
                    f"agent name {name!r} must be a plain name (letters, digits, '_', '-', '.')"
                )
            if name in reserved:
                raise ValueError(
                    f"agent name {name!r} is the name of one of the supervisor's own nodes "
                    f"({', '.join(sorted(reserved))}); give the agent another name"
                )
            self.members[name] = _member(name, value, executor_model)

    @property
    def names(self) -> list[str]:
        """Member names in declaration order."""
        return list(self.members)

    @property
    def roster(self) -> dict[str, str]:
        """Each member's name and what it does, for prompts."""
        return {name: member.description for name, member in self.members.items()}

    def resolve(self, asked: str, fallback: str) -> tuple[str, str]:
        """The member the model meant by ``asked``, and a note when it had to be guessed.

        An exact name is taken as is; otherwise a case- and punctuation-insensitive
        match, then the closest name; when nothing is close, ``fallback``.
        """
        found, note = self.match(asked)
        if found is not None:
            return found, note
        return fallback, f"the model named {asked!r}, not a team member; fell back to {fallback!r}"

    def match(self, asked: str) -> tuple[str | None, str]:
        """The member the model meant by ``asked`` (``None`` when no name is close), and a note."""
        if asked in self.members:
            return asked, ""
        wanted = _squash(asked)
        for name in self.members:
            if _squash(name) == wanted and wanted:
                return name, f"the model named {asked!r}; taken as {name!r}"
        close = difflib.get_close_matches(asked.strip().lower(), list(self.members), 1, 0.6)
        if close and asked.strip():
            return close[0], f"the model named {asked!r}; taken as the closest name {close[0]!r}"
        return None, ""


def _squash(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _member(name: str, value: Any, executor_model: str | None) -> Member:
    if isinstance(value, Agent):
        agent = value
        if executor_model is not None and agent.config.model is None:
            # A copy, so the caller's agent keeps its own settings outside this team.
            agent = copy.copy(value)
            agent.config = dataclasses.replace(value.config, model=executor_model)
        return Member(name, agent, agent.description)
    found = graph_member(value)
    if found is not None:
        return Member(name, found[0], found[1])
    if isinstance(value, type):
        raise TypeError(
            f"agent {name!r} is the class {value.__name__}; pass an instance (an Agent) or a "
            "function of the state"
        )
    if callable(value) and not hasattr(value, "__selectgraph_node__"):
        doc = inspect.getdoc(value) or ""
        return Member(name, _function_member(value), doc.strip().split("\n")[0])
    raise TypeError(
        f"agent {name!r} is a {type(value).__name__}; a team member is an Agent, a graph, "
        "another SupervisorAgent, or a function of the state"
    )


def _as_update(value: Any) -> Any:
    """A member function's return value as a node output: text becomes the turn's output."""
    if isinstance(value, str):
        return {LAST_OUTPUT: value}
    return value


def _function_member(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a member function so a returned string is its turn's output.

    An async generator (which cannot return a value) is used as it is; it sets
    ``state.last_output`` itself.
    """
    wants_context = takes_context(fn)
    if inspect.isasyncgenfunction(fn) or (
        is_generator_callable(fn) and not inspect.isgeneratorfunction(fn)
    ):
        return fn

    def call(state: Any, context: NodeContext) -> Any:
        return fn(state, context) if wants_context else fn(state)

    wrapped: Callable[..., Any]
    if inspect.isgeneratorfunction(fn):

        def generator_member(state: Any, context: NodeContext) -> Generator[Any, Any, Any]:
            result = yield from call(state, context)
            return _as_update(result)

        wrapped = generator_member
    elif inspect.iscoroutinefunction(fn):

        async def async_member(state: Any, context: NodeContext) -> Any:
            return _as_update(await call(state, context))

        wrapped = async_member
    else:

        def member(state: Any, context: NodeContext) -> Any:
            return _as_update(call(state, context))

        wrapped = member
    wrapped.__name__ = wrapped.__qualname__ = callable_name(fn)
    wrapped.__doc__ = fn.__doc__
    return wrapped
