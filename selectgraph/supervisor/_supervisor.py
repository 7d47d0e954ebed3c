"""SupervisorAgent: a team of agents coordinated by a supervising model, compiled to an AgentGraph.

The supervisor builds one :class:`~selectgraph.AgentGraph` for its strategy:
its own calls (plan, verdict, routing, ledgers) are nodes, each member is a
node, and routers between them record every turn in the state. Running a
supervisor is running that graph, so streaming, observers, budgets,
cancellation, checkpoints and human-in-the-loop apply unchanged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, Unpack

import selectgraph.supervisor._dynamic as _dynamic
import selectgraph.supervisor._magentic as _magentic
import selectgraph.supervisor._plan_execute as _plan_execute
import selectgraph.supervisor._round_robin as _round_robin
from selectgraph.agents._agent import AgentOutputError
from selectgraph.agents._defaults import default_provider
from selectgraph.build._builder import AgentGraph
from selectgraph.compile._graph_tool import GraphTool
from selectgraph.compile._options import NO_RESPONSE, ResumeOptions, RunOptions, StreamOptions
from selectgraph.core._control import CancellationToken
from selectgraph.core._messages import Message
from selectgraph.core._result import GraphResult
from selectgraph.core._run_errors import GraphRunError
from selectgraph.core._state import GraphState
from selectgraph.observe._events import RunFinished
from selectgraph.providers._base import Provider
from selectgraph.supervisor._build import Build
from selectgraph.supervisor._config import ModelSplit, SupervisorStrategy
from selectgraph.supervisor._errors import SupervisorError
from selectgraph.supervisor._graph_member import GraphMember
from selectgraph.supervisor._prompts import task_of
from selectgraph.supervisor._result import SupervisorResult
from selectgraph.supervisor._schemas import SupervisorState
from selectgraph.supervisor._team import Team

__all__ = ["SupervisorAgent"]

_STRATEGIES: dict[SupervisorStrategy, tuple[frozenset[str], Callable[[Build], None], int]] = {
    # strategy: (its own node names, the builder, turns of history a member is shown)
    SupervisorStrategy.PLAN_AND_EXECUTE: (
        _plan_execute.NODES,
        _plan_execute.build_plan_and_execute,
        1,
    ),
    SupervisorStrategy.ROUND_ROBIN: (_round_robin.NODES, _round_robin.build_round_robin, 0),
    SupervisorStrategy.DYNAMIC: (_dynamic.NODES, _dynamic.build_dynamic, 0),
    SupervisorStrategy.MAGENTIC: (_magentic.NODES, _magentic.build_magentic, 0),
}

TaskInput = str | Mapping[str, Any] | GraphState | None
"""What a supervised run starts from: the task as text (usual), a mapping of data with
a ``"task"``, a GraphState, or None to continue a checkpointed run."""


def _checked_strategy(
    strategy: SupervisorStrategy | str,
    *,
    max_rounds: int,
    max_stalls: int,
    model_split: ModelSplit | None,
) -> SupervisorStrategy:
    """The strategy ``strategy`` names, once the supervisor's other settings are checked too.

    Raises:
        ValueError: an unknown strategy, or ``max_rounds`` / ``max_stalls`` below 1.
        TypeError: ``model_split`` is not a ModelSplit.
    """
    try:
        chosen = SupervisorStrategy(strategy)
    except ValueError:
        choices = ", ".join(s.name for s in SupervisorStrategy)
        raise ValueError(
            f"SupervisorAgent: unknown strategy {strategy!r}; choose one of {choices}"
        ) from None
    for what, value in (("max_rounds", max_rounds), ("max_stalls", max_stalls)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"SupervisorAgent: {what} must be an integer >= 1, got {value!r}")
    if model_split is not None and not isinstance(model_split, ModelSplit):
        raise TypeError(
            f"SupervisorAgent: model_split must be a ModelSplit, got {type(model_split).__name__}"
        )
    return chosen


CALL_MAX_TOKENS = 512
"""Default tokens one supervisor answer may have: room for a ledger or a plan, and a
bound on a small model that rambles (an answer cut short is repaired, then re-asked)."""
CALL_TIMEOUT = 60.0
"""Default seconds one supervisor call may take, its provider's own retries included."""
CALL_RETRIES = 0
"""Default further tries of a supervisor call that timed out or whose provider failed:
none, since a local model that ran out of time once is likely to again; the
supervisor falls back instead."""


def _checked_call_limits(
    call_max_tokens: int | None, call_timeout: float | None, call_retries: int
) -> None:
    """Raise ValueError naming the supervisor call setting that is out of range."""
    if call_max_tokens is not None and (
        isinstance(call_max_tokens, bool)
        or not isinstance(call_max_tokens, int)
        or call_max_tokens < 1
    ):
        raise ValueError(
            f"SupervisorAgent: call_max_tokens must be an integer >= 1 or None, "
            f"got {call_max_tokens!r}"
        )
    if call_timeout is not None and (
        isinstance(call_timeout, bool)
        or not isinstance(call_timeout, int | float)
        or not call_timeout > 0
    ):
        raise ValueError(
            f"SupervisorAgent: call_timeout must be a number of seconds > 0 or None, "
            f"got {call_timeout!r}"
        )
    if isinstance(call_retries, bool) or not isinstance(call_retries, int) or call_retries < 0:
        raise ValueError(
            f"SupervisorAgent: call_retries must be an integer >= 0, got {call_retries!r}"
        )


class SupervisorAgent:
    """A supervisor and its team, run with one of four strategies.

    Every supervisor call is bounded (``call_max_tokens``, ``call_timeout``) and its
    JSON parsed leniently (control characters in strings, an answer cut short). An
    answer that still cannot be used never fails the run: the supervisor falls back
    (the next member in order, or the best answer so far), records why in
    ``result.fallbacks`` and the run is "degraded".

    Example:
        >>> from selectgraph import Agent, AgentConfig, SupervisorAgent, SupervisorStrategy
        >>> from selectgraph.providers import LocalProvider
        >>> team = {
        ...     "researcher": Agent(AgentConfig(name="researcher", instructions="Find facts.")),
        ...     "writer": Agent(AgentConfig(name="writer", instructions="Write it up.")),
        ... }
        >>> supervisor = SupervisorAgent(
        ...     agents=team, provider=LocalProvider(), strategy=SupervisorStrategy.ROUND_ROBIN,
        ...     max_rounds=2,
        ... )
        >>> result = supervisor.run("Explain tides")
        >>> [turn.agent for turn in result.turns]
        ['researcher', 'writer', 'researcher', 'writer']
    """

    def __init__(
        self,
        agents: Mapping[str, Any],
        *,
        provider: Provider | None = None,
        strategy: SupervisorStrategy | str = SupervisorStrategy.PLAN_AND_EXECUTE,
        max_rounds: int = 10,
        model_split: ModelSplit | None = None,
        max_stalls: int = 3,
        instructions: str = "",
        call_max_tokens: int | None = CALL_MAX_TOKENS,
        call_timeout: float | None = CALL_TIMEOUT,
        call_retries: int = CALL_RETRIES,
        name: str = "supervisor",
        observers: Sequence[Any] = (),
        max_total_tokens: int | None = None,
        max_cost_usd: float | None = None,
        max_duration: float | None = None,
        cancellation_token: CancellationToken | None = None,
        pause_before: Iterable[str] = (),
        pause_after: Iterable[str] = (),
    ) -> None:
        """Create a supervisor over ``agents``.

        Args:
            agents: The team: name -> Agent (or a function of the state; see
                docs/supervisor.md). Names are also node names.
            provider: Who answers the supervisor's own calls (default: the offline-aware
                default provider). Members keep their own providers.
            strategy: PLAN_AND_EXECUTE, ROUND_ROBIN, DYNAMIC or MAGENTIC.
            max_rounds: Plan steps, full rounds, turns, or progress rounds at most.
            model_split: Which model plans and which one works.
            max_stalls: MAGENTIC: rounds without progress before the ledger is remade.
            instructions: Extra guidance for every supervisor call.
            call_max_tokens: Tokens each supervisor answer may have (default 512; None:
                no limit); an answer cut short is repaired, else re-asked once.
            call_timeout: Seconds one supervisor call may take, provider retries and the
                re-ask included (default 60; None: no limit).
            call_retries: Further tries of a call that timed out or whose provider failed
                (default 0); then the supervisor falls back (``result.fallbacks``).
            name: The supervised graph's name (traces, events, diagrams).
            observers: Told every event of every run.
            max_total_tokens: Token budget of a run (supervisor and members together).
            max_cost_usd: Cost budget of a run, in US dollars.
            max_duration: Time budget of a run, in seconds.
            cancellation_token: Stops runs when cancelled.
            pause_before: Nodes (members or the supervisor's own) a checkpointed run
                pauses before.
            pause_after: Nodes a checkpointed run pauses after.

        Raises:
            ValueError: no agents, a bad or reserved agent name, an unknown strategy,
                ``max_rounds`` / ``max_stalls`` below 1, or a call setting out of range.
            TypeError: a member is neither an Agent nor a function.
        """
        self.strategy = _checked_strategy(
            strategy, max_rounds=max_rounds, max_stalls=max_stalls, model_split=model_split
        )
        _checked_call_limits(call_max_tokens, call_timeout, call_retries)
        self.model_split = model_split or ModelSplit()
        self.max_rounds = max_rounds
        self.max_stalls = max_stalls
        self.provider: Provider = provider or default_provider()
        reserved, builder, history = _STRATEGIES[self.strategy]
        self.team = Team(agents, executor_model=self.model_split.executor_model, reserved=reserved)
        """The members, in the order given, each prepared as a node (agents as copies)."""
        graph = AgentGraph(
            name,
            state_schema=SupervisorState,
            # A safety net only: every strategy stops itself after max_rounds.
            max_steps=(len(self.team.members) + 4) * (max_rounds + 2),
            observers=observers,
            description=f"{self.strategy.name.lower()} supervisor of {', '.join(self.team.names)}",
            max_total_tokens=max_total_tokens,
            max_cost_usd=max_cost_usd,
            max_duration=max_duration,
            cancellation_token=cancellation_token,
            pause_before=pause_before,
            pause_after=pause_after,
        )
        builder(
            Build(
                graph=graph,
                team=self.team,
                provider=self.provider,
                planner_model=self.model_split.planner_model,
                instructions=instructions,
                call_max_tokens=call_max_tokens,
                call_timeout=None if call_timeout is None else float(call_timeout),
                call_retries=call_retries,
                max_rounds=max_rounds,
                max_stalls=max_stalls,
                member_history=history or 2 * len(self.team.members),
            )
        )
        self.graph: AgentGraph = graph
        """The graph this supervisor runs (to nest the team in another graph, add the
        supervisor itself: ``graph.add_node("team", supervisor)``)."""
        graph.compile()  # report a broken team now, not at the first run

    # ------------------------------------------------------------------ runs
    def run(self, task: TaskInput = None, **options: Unpack[RunOptions]) -> SupervisorResult:
        """Run the team on ``task`` and return the result (blocking).

        Raises:
            SupervisorError: a PLAN_AND_EXECUTE step failed again after its replan.
            GraphRunError: the run failed otherwise; ``error.result`` keeps what was done.
        """
        try:
            result = self.graph.run(self.graph_input(task, options), **options)
        except GraphRunError as error:
            raise _explained(error) from error
        return self._wrap(result)

    async def arun(self, task: TaskInput = None, **options: Unpack[RunOptions]) -> SupervisorResult:
        """Run the team on ``task`` and return the result."""
        try:
            result = await self.graph.arun(self.graph_input(task, options), **options)
        except GraphRunError as error:
            raise _explained(error) from error
        return self._wrap(result)

    async def astream(
        self, task: TaskInput = None, **options: Unpack[StreamOptions]
    ) -> AsyncIterator[Any]:
        """Run the team on ``task``, yielding what happens (see ``AgentGraph.astream``).

        In the default ``"events"`` mode the last event is ``RunFinished`` (its
        ``result`` a SupervisorResult), ``RunPaused``, ``RunFailed`` or ``RunCancelled``.
        """
        try:
            async for item in self.graph.astream(self.graph_input(task, options), **options):
                if isinstance(item, RunFinished) and item.result is not None:
                    item = _with_result(item, self._wrap(item.result))
                yield item
        except GraphRunError as error:
            raise _explained(error) from error

    def resume(
        self,
        interrupt_id: str | Mapping[str, Any],
        response: Any = NO_RESPONSE,
        **options: Unpack[ResumeOptions],
    ) -> SupervisorResult:
        """Answer a paused run's interrupt and continue it (see ``AgentGraph.resume``)."""
        try:
            result = self.graph.resume(interrupt_id, response, **options)
        except GraphRunError as error:
            raise _explained(error) from error
        return self._wrap(result)

    async def aresume(
        self,
        interrupt_id: str | Mapping[str, Any],
        response: Any = NO_RESPONSE,
        **options: Unpack[ResumeOptions],
    ) -> SupervisorResult:
        """Async :meth:`resume`."""
        try:
            result = await self.graph.aresume(interrupt_id, response, **options)
        except GraphRunError as error:
            raise _explained(error) from error
        return self._wrap(result)

    def graph_input(self, task: TaskInput, options: Mapping[str, Any] | None = None) -> Any:
        """The graph input a run of ``task`` starts from.

        Raises:
            ValueError: no task (and no checkpointed run to continue), or a mapping
                without a ``"task"``.
        """
        if task is None:
            if options is not None and options.get("checkpoint_store") is not None:
                return None  # continue a checkpointed run
            raise ValueError(
                "a supervised run needs a task (or, to continue a checkpointed run, "
                "checkpoint_store= and run_id=)"
            )
        if isinstance(task, GraphState):
            return task
        if isinstance(task, str):
            if not task.strip():
                raise ValueError("the task is empty; say what the team should do")
            return GraphState(messages=[Message.user(task)], data={"task": task})
        if isinstance(task, Mapping):
            if not str(task.get("task", "")).strip():
                raise ValueError(
                    f"a supervised run's input mapping needs a non-empty 'task'; got keys "
                    f"{sorted(map(str, task))}"
                )
            text = str(task["task"])
            return GraphState(messages=[Message.user(text)], data=dict(task))
        raise TypeError(
            f"a supervised run starts from a task (text), a mapping with a 'task', a "
            f"GraphState or None; got {type(task).__name__}"
        )

    def as_tool(
        self,
        name: str | None = None,
        description: str | None = None,
        *,
        output: Callable[[GraphResult], Any] | None = None,
    ) -> GraphTool:
        """This team as a tool an agent can call with a task: its final answer comes back.

        As for ``AgentGraph.as_tool``: inside a graph run its usage counts in the
        run's budget, its events nest under the calling node and its questions
        pause the run.

        Args:
            name: The name the model calls it by (default: this supervisor's name).
            description: What it does (default: the strategy and the team's members).
            output: What goes back from the finished run (default: its final answer).

        Raises:
            ValueError: the name is not 1-64 letters, digits, '_' or '-'.
        """
        return GraphTool(
            self.graph,
            name=name,
            description=description,
            text_input=self.graph_input,
            output=output,
        )

    def __selectgraph_node__(self, name: str) -> Any:
        """This team as a node of another graph: it works on the task, its answer is the output.

        The task is the state's ``task`` field, else its first user message; the
        final answer is the node's output and a message by the node.
        """
        return GraphMember(self.graph, self.graph_input).node(name, task_of)

    def result_of(self, result: GraphResult) -> SupervisorResult:
        """The supervisor's view of a result of this supervisor's graph."""
        return self._wrap(result)

    def _wrap(self, result: GraphResult) -> SupervisorResult:
        if isinstance(result, SupervisorResult):
            return result
        return SupervisorResult.wrap(result, self.strategy, tuple(self.team.names))

    # -------------------------------------------------------------- drawing
    def to_mermaid(self, result: GraphResult | None = None) -> str:
        """The supervised graph as a Mermaid diagram (with a run's path, when given)."""
        return self.graph.to_mermaid(result)

    def visualize(
        self,
        format: Literal["ascii", "mermaid", "png"] = "ascii",
        result: GraphResult | None = None,
        *,
        path: str | None = None,
        show: bool = True,
    ) -> str:
        """Print the supervised graph and return it (see ``AgentGraph.visualize``)."""
        return self.graph.visualize(format, result, path=path, show=show)

    def __repr__(self) -> str:
        return (
            f"SupervisorAgent(strategy={self.strategy.name}, agents={self.team.names}, "
            f"max_rounds={self.max_rounds})"
        )


def _with_result(event: RunFinished, result: SupervisorResult) -> RunFinished:
    return dataclasses.replace(event, result=result)


def _explained(error: GraphRunError) -> GraphRunError:
    """A run error, with the supervisor's own failures said plainly."""
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, SupervisorError):
            return _supervisor_error(str(cause), error)
        if isinstance(cause, AgentOutputError) and error.node is not None:
            return _supervisor_error(
                f"the supervisor's {error.node!r} answer did not validate, even after "
                f"re-asking with the validation error: {cause}",
                error,
            )
        cause = cause.__cause__
    return error


def _supervisor_error(message: str, error: GraphRunError) -> SupervisorError:
    explained = SupervisorError(message, state=error.state, node=error.node, step=error.step)
    explained.result = error.result
    return explained
