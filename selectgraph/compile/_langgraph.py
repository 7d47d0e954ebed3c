"""LangGraph's spellings: ``invoke``, ``stream``, ``config`` dicts and ``Command(resume=...)``.

A LangGraph user's first lines work unchanged: ``graph.invoke(inputs, config)``
runs the graph and returns the final state's data (a dict, as LangGraph does; use
``run()`` for selectgraph's full GraphResult). ``config`` is LangGraph's:
``{"configurable": {"thread_id": ..., "checkpoint_id": ...}, "recursion_limit": n}``,
read as selectgraph's ``thread_id`` (a conversation: each call is a new run on it),
``checkpoint_id``, the nodes' ``context.config`` and ``max_steps``. The mapping of
every concept is in docs/coming-from-langgraph.md.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from selectgraph.core._errors import ResumeError
from selectgraph.persistence._protocol import CheckpointStore
from selectgraph.routing._directives import NO_RESUME, Command
from selectgraph.runtime._settings import GraphSettings

if TYPE_CHECKING:
    from selectgraph.core._result import GraphResult
    from selectgraph.runtime._thread_view import ThreadSnapshot

__all__ = ["ConfigurableGraph", "from_config", "invoke_run", "state_values"]


class ConfigurableGraph(Protocol):
    """A compiled graph as a LangGraph ``config`` reads and changes it."""

    settings: GraphSettings
    """Its run-time rules; ``recursion_limit`` replaces ``max_steps`` in a copy."""
    checkpointer: CheckpointStore | None
    """The store of runs given none, where ``Command(resume=...)`` finds the run."""

    def get_thread(
        self, thread_id: str, *, checkpoint_store: CheckpointStore | None = None
    ) -> ThreadSnapshot:
        """The thread (its pending interrupts)."""
        ...


G = TypeVar("G", bound=ConfigurableGraph)

_CONFIG_KEYS = frozenset({"configurable", "recursion_limit", "tags", "metadata", "run_name"})


def from_config(
    graph: G, config: Mapping[str, Any] | None, options: dict[str, Any]
) -> tuple[G, dict[str, Any]]:
    """The graph and run options a LangGraph ``config`` means.

    ``configurable.thread_id`` is the thread the run goes on, ``configurable.checkpoint_id``
    a checkpoint to go on from (a fork); every ``configurable`` key (those two
    included) reaches the nodes as ``context.config``. ``recursion_limit`` is the step
    limit. ``tags``, ``metadata`` and ``run_name`` (tracing labels in LangGraph) are
    accepted and ignored; anything else is refused, naming it.

    Raises:
        TypeError: ``config`` is not a mapping.
        ValueError: it has a key selectgraph does not read.
    """
    if config is None:
        return graph, options
    if not isinstance(config, Mapping):
        raise TypeError(f"config must be a dict (LangGraph's RunnableConfig), got {config!r}")
    unknown = sorted(set(config) - _CONFIG_KEYS)
    if unknown:
        raise ValueError(
            f"config has {', '.join(map(repr, unknown))}, which selectgraph does not read; it "
            "reads configurable (thread_id, checkpoint_id and values for the nodes) and "
            "recursion_limit"
        )
    options = dict(options)
    configurable = config.get("configurable") or {}
    if not isinstance(configurable, Mapping):
        raise TypeError(f"config['configurable'] must be a dict, got {configurable!r}")
    if configurable:
        options["config"] = dict(configurable)
    if "thread_id" in configurable:
        options["thread_id"] = str(configurable["thread_id"])
    if "checkpoint_id" in configurable:
        options["checkpoint_id"] = str(configurable["checkpoint_id"])
    limit = config.get("recursion_limit")
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"recursion_limit must be an integer >= 1, got {limit!r}")
        graph = copy.copy(graph)
        graph.settings = dataclasses.replace(graph.settings, max_steps=limit)
    return graph, options


def invoke_run(
    graph: G, input: Any, config: Mapping[str, Any] | None, options: dict[str, Any]
) -> tuple[str, G, Any, dict[str, Any]]:
    """What ``invoke`` does: ``("run", graph, input, options)`` or ``("resume", ...)``.

    Raises:
        ResumeError: ``Command(resume=...)`` without a run to resume.
        TypeError: a Command as input that does not resume.
    """
    graph, options = from_config(graph, config, options)
    if not isinstance(input, Command):
        return "run", graph, input, options
    if input.resume is NO_RESUME:
        raise TypeError(
            "invoke() takes a Command only to resume: Command(resume=answer); a node or a "
            "router returns Command(goto=..., update=...)"
        )
    store = options.get("checkpoint_store") or graph.checkpointer
    thread_id = options.pop("thread_id", None)
    options.pop("checkpoint_id", None)
    if store is None or thread_id is None:
        raise ResumeError(
            "Command(resume=...) continues a saved run: give the graph a checkpointer "
            "(compile(checkpointer=...)) and the thread_id in config['configurable']"
        )
    pending = graph.get_thread(thread_id, checkpoint_store=store).interrupts
    if not pending:
        raise ResumeError(f"thread {thread_id!r} is not waiting for an answer")
    answer = input.resume
    if len(pending) == 1 and not (
        isinstance(answer, Mapping) and set(answer) <= {i.id for i in pending} and answer
    ):
        answers: Any = {pending[0].id: answer}
    elif isinstance(answer, Mapping) and set(answer) <= {i.id for i in pending}:
        answers = dict(answer)
    else:
        raise ResumeError(
            f"thread {thread_id!r} waits on {len(pending)} questions; resume with a mapping "
            f"of their ids to answers: {[i.id for i in pending]}"
        )
    options["checkpoint_store"] = store
    return "resume", graph, answers, options


def state_values(result: GraphResult) -> dict[str, Any]:
    """What LangGraph's ``invoke`` returns: the final state's data.

    A run waiting for answers also has ``"__interrupt__"``: its pending Interrupts.
    """
    values = dict(result.state.data)
    if result.interrupts:
        values["__interrupt__"] = list(result.interrupts)
    return values
