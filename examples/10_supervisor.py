"""A supervisor and its team, with each of the four strategies.

Offline the supervisor and the team use the local provider (deterministic replies,
so the plan is short and the ledgers never see progress: the MAGENTIC run replans).
With OPENAI_API_KEY or ANTHROPIC_API_KEY set, the same code asks a real model:
the planner model plans and routes, the cheaper executor model does the work.

Run: python examples/10_supervisor.py [plan_and_execute|round_robin|dynamic|magentic]
"""

from __future__ import annotations

import sys

from selectgraph import (
    Agent,
    AgentConfig,
    ModelSplit,
    SupervisorAgent,
    SupervisorResult,
    SupervisorStrategy,
)
from selectgraph.agents import default_provider

SPLITS = {
    "openai": ModelSplit(planner_model="gpt-4o", executor_model="gpt-4o-mini"),
    "anthropic": ModelSplit(planner_model="claude-sonnet-4-5", executor_model="claude-haiku-4-5"),
}

researcher = Agent(
    AgentConfig(name="researcher", instructions="Gather the key facts the task needs.")
)
writer = Agent(AgentConfig(name="writer", instructions="Write clear prose from the facts."))
reviewer = Agent(AgentConfig(name="reviewer", instructions="Check the text and correct it."))


def report(result: SupervisorResult) -> None:
    print(f"== {result.strategy.name}: {result.stop_reason}, {result.rounds} round(s)")
    for turn in result.turns:
        print(f"  turn {turn.number}: {turn.agent} <- {turn.instruction[:60]!r}")
    if result.replans:
        print(f"  replans: {result.replans}")
    usage = result.total_usage
    print(f"  tokens: {usage.input_tokens} in, {usage.output_tokens} out, {usage.calls} calls")
    print(f"  answer: {str(result.content)[:100]}")


def supervisor(strategy: SupervisorStrategy) -> SupervisorAgent:
    provider = default_provider()
    split = SPLITS.get(
        provider.name, ModelSplit(planner_model="local-planner", executor_model="local-worker")
    )
    return SupervisorAgent(
        agents={"researcher": researcher, "writer": writer, "reviewer": reviewer},
        provider=provider,
        strategy=strategy,
        max_rounds=3,
        model_split=split,
    )


# What `selectgraph run/studio examples/10_supervisor.py` load: a supervisor loads like a
# graph (its .graph runs), and text given to it is the task.
graph = supervisor(SupervisorStrategy.PLAN_AND_EXECUTE)


def main(strategies: list[SupervisorStrategy]) -> None:
    for strategy in strategies:
        report(supervisor(strategy).run("Write a short explainer on why the sky is blue"))


if __name__ == "__main__":
    chosen = [SupervisorStrategy(arg) for arg in sys.argv[1:]] or list(SupervisorStrategy)
    main(chosen)
