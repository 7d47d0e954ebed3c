"""The judge scorer with a real model: SmolLM2 in-process judging a graph's answers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from selectgraph import END, AgentGraph
from selectgraph.agents import LLMJudge
from selectgraph.evals import JudgeScorer, dataset_of, evaluate_graph

if TYPE_CHECKING:
    from selectgraph.providers._llama import LlamaCppProvider

pytestmark = pytest.mark.real_model


async def test_smollm2_judges_every_case_with_a_verdict(llama_provider: LlamaCppProvider) -> None:
    def answer(state: Any) -> dict[str, str]:
        return {"answer": "Paris is the capital of France."}

    graph = AgentGraph("geo")
    graph.add_node("answer", answer, next_node=END)
    judge = LLMJudge("The answer names the capital city asked about.", provider=llama_provider)

    found = await evaluate_graph(
        graph,
        dataset_of(
            [
                {"name": "france", "input": "What is the capital of France?"},
                {"name": "spain", "input": "What is the capital of Spain?"},
            ]
        ),
        scorers=[JudgeScorer("The answer names the capital city asked about.", judge=judge)],
        experiment="judged",
    )

    assert found.report is not None
    assert [case.evaluator_failures for case in found.report.cases] == [[], []]
    # Each case has the judge's True/False: the model's reply was read as a verdict (an
    # unreadable reply is an escalation, which scores False with the reason given).
    assert all(isinstance(case.scores["judge"], bool) for case in found.cases)
    assert [case.case for case in found.cases] == ["france", "spain"]
