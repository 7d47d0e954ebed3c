"""Edges: how a graph's builder declares where a run goes after each node, and where it starts."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, Self

from selectgraph.build._checks import check_options
from selectgraph.compile._declarations import Blueprint, EdgeDecl
from selectgraph.core._sentinels import END, START, EndType, StartType
from selectgraph.core._state import GraphState
from selectgraph.routing._edges import Trigger
from selectgraph.routing._parallel import Branches, FailureMode, FanOutOptions, MergePolicy

__all__ = ["EdgeDeclarations"]


class EdgeDeclarations:
    """AgentGraph's edge methods: conditions, routers, model-made choices, fan-outs, the entry."""

    _blueprint: Blueprint
    """What the graph has declared so far (AgentGraph makes it)."""

    def _changed(self) -> None:
        """Note a change to the declarations (AgentGraph drops its compiled graph)."""
        raise NotImplementedError

    def add_edge(
        self,
        source: str | EndType | StartType,
        target: str | EndType | Sequence[str],
        *,
        condition: str | Callable[[GraphState], Any] | None = None,
        on: Trigger = "success",
        label: str | None = None,
        merge_policy: MergePolicy = MergePolicy.LAST_WINS,
        failure_mode: FailureMode = "fail_all",
        max_concurrency: int | None = None,
    ) -> Self:
        """Add an edge. Conditional edges are tried in declaration order; the first match wins.

        Args:
            source: The node the edge leaves.
            target: The next node, or END.
            condition: A safe expression over state keys (``"score >= 0.8"``) or a
                predicate ``(state) -> bool``. Without one, the edge is the
                unconditional fallback, taken only when no conditional edge matches.
            on: ``"success"`` (default), ``"failure"`` (route a failed node to
                recovery) or ``"always"``.
            label: Text for diagrams and traces (defaults to the condition).
            merge_policy: For a list of targets: how keys without a reducer that
                several branches wrote are settled.
            failure_mode: For a list of targets: what a branch's failure does.
            max_concurrency: For a list of targets: branches running at once.

        A list of targets fans out: each target starts a branch, the branches
        run at once on their own views of the state, each follows its edges
        until the nearest node all of them lead to (the join), and that node
        runs once, after all of them, on their merged writes.
        """
        if source is START:
            # LangGraph's spelling of the entry: add_edge(START, "first").
            if condition is not None or not isinstance(target, str):
                raise TypeError(
                    "add_edge(START, ...) names the one node every run starts at; "
                    f"got {target!r}" + (" with a condition" if condition is not None else "")
                )
            return self.set_entry(target)
        declared: str | EndType | Branches
        if isinstance(target, list | tuple):
            check_options(
                f"add_edge({source!r}, {list(target)!r})",
                merge_policy=merge_policy,
                failure_mode=failure_mode,
                max_concurrency=max_concurrency,
            )
            options = FanOutOptions(
                merge_policy=merge_policy,
                failure_mode=failure_mode,
                max_concurrency=max_concurrency,
            )
            declared = Branches(tuple(target), options, f"edge from {source!r}")
        else:
            declared = target  # type: ignore[assignment]  # checked at compile time
        if on not in ("success", "failure", "always"):
            raise ValueError(
                f"add_edge(on=...) must be 'success', 'failure' or 'always', got {on!r}"
            )
        if condition is not None and not (isinstance(condition, str) or callable(condition)):
            raise TypeError(
                f"add_edge({source!r}, {target!r}): condition must be a safe expression string "
                f"or a function of the state, got {condition!r}"
            )
        self._blueprint.edges.append(
            EdgeDecl(
                source=source,
                target=declared,
                kind="static" if condition is None else "condition",
                trigger=on,
                condition=condition,
                label=label,
                order=len(self._blueprint.edges),
            )
        )
        self._changed()
        return self

    def add_conditional_edge(
        self,
        source: str,
        router: Callable[[GraphState], Any],
        path_map: Mapping[Hashable, str | EndType] | Sequence[str | EndType] | None = None,
        *,
        on: Trigger = "success",
        merge_policy: MergePolicy = MergePolicy.LAST_WINS,
        failure_mode: FailureMode = "fail_all",
        max_concurrency: int | None = None,
    ) -> Self:
        """Route from ``source`` with a function of the state.

        Args:
            source: The node the router runs after.
            router: ``(state) -> target``; returns a node name, END, a path_map
                key, or ``goto(target, update)``. May be async.
            path_map: Allowed return values and the node each means (a list of
                node names maps each to itself). Checked when the graph is built.
                END is always allowed, listed or not: stopping needs no node.
            on: Which outcomes of ``source`` the router decides for.
            merge_policy: When the router returns a list (node names or Scatter):
                how keys without a reducer that several branches wrote are settled.
            failure_mode: When it returns a list: what a branch's failure does.
            max_concurrency: When it returns a list: branches running at once.
        """
        check_options(
            f"add_conditional_edge({source!r}, ...)",
            merge_policy=merge_policy,
            failure_mode=failure_mode,
            max_concurrency=max_concurrency,
        )
        if not callable(router):
            raise TypeError(
                f"add_conditional_edge({source!r}, ...) needs a function, got {router!r}"
            )
        self._blueprint.edges.append(
            EdgeDecl(
                source=source,
                kind="router",
                trigger=on,
                router=router,
                path_map=path_map,
                order=len(self._blueprint.edges),
                fanout=FanOutOptions(
                    merge_policy=merge_policy,
                    failure_mode=failure_mode,
                    max_concurrency=max_concurrency,
                ),
            )
        )
        self._changed()
        return self

    def add_llm_edge(
        self,
        source: str,
        targets: Sequence[str | EndType],
        *,
        fallback: str | EndType,
        provider: Any = None,
        model: str | None = None,
        instructions: str = "",
        on: Trigger = "success",
    ) -> Self:
        """Let a (fast) model choose where to go after ``source``.

        The model is told the graph's goal, the node's output and each
        target's description, and answers with JSON naming a target and its
        reasoning. An unparseable answer, an unknown target or a failed call
        fires ``fallback``. The choice and the reasoning appear in the trace.

        Args:
            source: The node after which the model decides.
            targets: Nodes (or END) the model may choose among.
            fallback: Where to go when no valid choice is made.
            provider: The provider to ask (default: the offline-aware default provider).
            model: The model to ask (default: the provider's default model).
            instructions: Extra routing guidance for the model.
            on: Which outcomes of ``source`` the decision applies to.
        """
        from selectgraph.agents._decide import LLMDecider

        decider = LLMDecider(provider=provider, model=model, instructions=instructions)
        self._blueprint.edges.append(
            EdgeDecl(
                source=source,
                kind="llm",
                trigger=on,
                target=fallback,
                router=decider,
                path_map=list(targets),
                order=len(self._blueprint.edges),
            )
        )
        self._changed()
        return self

    def set_entry(self, name: str) -> Self:
        """Declare the node every run starts at."""
        self._blueprint.entry = name
        self._changed()
        return self

    set_entry_point = set_entry

    def set_finish_point(self, name: str) -> Self:
        """End the run after ``name`` (LangGraph's spelling of ``add_edge(name, END)``)."""
        return self.add_edge(name, END)

    def add_conditional_edges(
        self,
        source: str,
        path: Callable[[GraphState], Any],
        path_map: Mapping[Hashable, str | EndType] | Sequence[str | EndType] | None = None,
        **options: Any,
    ) -> Self:
        """LangGraph's spelling of :meth:`add_conditional_edge`."""
        return self.add_conditional_edge(source, path, path_map, **options)
