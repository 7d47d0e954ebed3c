"""A graph, or another supervisor, as a member of a supervisor's team.

On its turn the member is told what an agent member is told (the task, its
instruction, recent turns), as text: that becomes its run's input (the graph's
input field, else its first user message; a supervisor's task). It runs as a
child of its node, as a subgraph does: its usage counts in the team's budget,
its events are nested under the member's node, and a question asked inside it
pauses the team's run. Its answer (last output, else last assistant message)
is the turn's output.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic_core import to_json

from selectgraph.compile._outside import final_output, text_state
from selectgraph.compile._runs import RunMethods
from selectgraph.core._messages import Message
from selectgraph.core._run_errors import GraphRunError, NodeError
from selectgraph.core._state import LAST_OUTPUT
from selectgraph.runtime._nested import run_child
from selectgraph.runtime._start import prepare_state
from selectgraph.state._output import NodeOutput
from selectgraph.state._views import ViewWrites

if TYPE_CHECKING:
    from selectgraph.nodes._spec import NodeContext
    from selectgraph.state._views import StateView

__all__ = ["GraphMember", "graph_member"]

Prompt = Callable[[Any], str]
"""What the member is told on its turn, from the team's state."""


@dataclass(frozen=True, slots=True)
class GraphMember:
    """A team member that is a graph: how its turn's text becomes the graph's input."""

    graph: RunMethods
    text_input: Callable[[str], Any] | None = None
    """A supervisor's ``graph_input``; None for a graph (its input field or a user message)."""

    def node(self, name: str, prompt: Prompt) -> _MemberNode:
        """The member's node in the team's graph."""
        return _MemberNode(self, name, prompt)


class _MemberNode:
    """Runs the member graph for one turn."""

    kind = "graph"
    is_async = True
    executor_retries = True
    wants_context = True

    def __init__(self, member: GraphMember, name: str, prompt: Prompt) -> None:
        self.member = member
        self.name = name
        self.prompt = prompt
        self.program = member.graph._compiled_graph()

    def __selectgraph_node__(self, name: str) -> _MemberNode:
        return self

    async def __call__(self, state: StateView, context: NodeContext | None) -> Any:
        assert context is not None
        text = self.prompt(state)
        shape = self.member.text_input
        start = shape(text) if shape is not None else text_state(self.program, text)
        try:
            _, result = await run_child(self.program, prepare_state(self.program, start), context)
        except GraphRunError as error:
            failed = NodeError(
                f"team member {self.name!r} (the graph {self.program.name!r}) failed: {error}",
                node=context.node,
            )
            if error.result is not None:
                failed.usage = error.result.total_usage  # type: ignore[attr-defined]
            raise failed from error
        found = final_output(result)
        answer = found if isinstance(found, str) else to_json(found).decode()
        # Written as an agent node writes its answer: the output, and a message by the node.
        return NodeOutput(
            update={LAST_OUTPUT: answer},
            writes=ViewWrites(messages=[Message.assistant(answer, name=context.node)]),
            usage=result.total_usage,
        )


def graph_member(value: Any) -> tuple[GraphMember, str] | None:
    """``value`` as a graph member and its description, or None when it is not a graph.

    A SupervisorAgent is recognised by its ``graph`` and ``graph_input``.
    """
    if isinstance(value, RunMethods):
        return GraphMember(value), _about(value)
    inner = getattr(value, "graph", None)
    shape = getattr(value, "graph_input", None)
    if isinstance(inner, RunMethods) and callable(shape):
        return GraphMember(inner, shape), _about(inner)
    return None


def _about(graph: RunMethods) -> str:
    description = getattr(graph._compiled_graph(), "description", "") or ""
    return str(description).strip().split("\n")[0]
