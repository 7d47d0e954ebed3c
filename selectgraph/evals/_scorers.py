"""Scorers: how a case's output is judged (pydantic-evals evaluators).

``ExactMatch`` and ``ContainsExpected`` compare with the case's expected output;
``FunctionScorer`` calls a Python function; ``JudgeScorer`` asks selectgraph's
LLM judge whether the output meets criteria. Any other pydantic-evals evaluator
can be given as well.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic_evals.evaluators import EvaluationReason, Evaluator, EvaluatorContext

from selectgraph.agents._judge import JudgeRequest, LLMJudge
from selectgraph.agents._result import AgentResult
from selectgraph.agents._verdict import JudgeDecision

__all__ = ["ContainsExpected", "ExactMatch", "FunctionScorer", "JudgeScorer", "as_text"]


def as_text(value: Any) -> str:
    """A value as the text a person reads: strings as they are, data as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


@dataclass(repr=False)
class ExactMatch(Evaluator[Any, Any, Any]):
    """The output equals the expected output (text compared without surrounding spaces)."""

    def evaluate(self, ctx: EvaluatorContext[Any, Any, Any]) -> dict[str, bool] | bool:
        """Skipped (no result) for a case with no expected output."""
        if ctx.expected_output is None:
            return {}
        if isinstance(ctx.output, str) and isinstance(ctx.expected_output, str):
            return ctx.output.strip() == ctx.expected_output.strip()
        return bool(ctx.output == ctx.expected_output)

    def get_default_evaluation_name(self) -> str:
        """Its column in reports."""
        return "exact"


@dataclass(repr=False)
class ContainsExpected(Evaluator[Any, Any, Any]):
    """The output's text contains the expected output's text, ignoring case."""

    def evaluate(self, ctx: EvaluatorContext[Any, Any, Any]) -> dict[str, bool] | bool:
        """Skipped (no result) for a case with no expected output."""
        if ctx.expected_output is None:
            return {}
        return as_text(ctx.expected_output).casefold() in as_text(ctx.output).casefold()

    def get_default_evaluation_name(self) -> str:
        """Its column in reports."""
        return "contains"


@dataclass(repr=False)
class FunctionScorer(Evaluator[Any, Any, Any]):
    """``fn(output, expected)`` (or ``fn(output)``): a bool, a number, or a label."""

    fn: Callable[..., Any]
    """The function; it may be async."""
    name: str = ""
    """Its column in reports (default: the function's name)."""

    def __post_init__(self) -> None:
        """Check the function takes one or two arguments."""
        if not callable(self.fn):
            raise TypeError(f"a scorer function must be callable, got {type(self.fn).__name__}")
        self.name = self.name or getattr(self.fn, "__name__", "score")
        try:
            parameters = inspect.signature(self.fn).parameters
        except (TypeError, ValueError):
            self._arity = 2
            return
        self._arity = 1 if len(parameters) == 1 else 2

    async def evaluate(self, ctx: EvaluatorContext[Any, Any, Any]) -> Any:
        """Call the function; an awaitable result is awaited."""
        args = (ctx.output,) if self._arity == 1 else (ctx.output, ctx.expected_output)
        value = self.fn(*args)
        if inspect.isawaitable(value):
            value = await value
        if not isinstance(value, bool | int | float | str | EvaluationReason):
            raise TypeError(
                f"scorer {self.name!r} returned {type(value).__name__}; "
                "return a bool, a number or a string"
            )
        return value

    def get_default_evaluation_name(self) -> str:
        """Its column in reports: the function's name."""
        return self.name


@dataclass(repr=False)
class JudgeScorer(Evaluator[Any, Any, Any]):
    """selectgraph's LLM judge: does the output meet ``criteria``? (accept is a pass)."""

    criteria: str
    """What a good answer does; the judge decides against this."""
    judge: LLMJudge | None = field(default=None)
    """The judge to ask (default: an LLMJudge on the default provider)."""

    async def evaluate(self, ctx: EvaluatorContext[Any, Any, Any]) -> EvaluationReason:
        """Ask the judge, with the case's input as the task and its expected output as a hint."""
        judge = self.judge or LLMJudge(self.criteria)
        task = as_text(ctx.inputs)
        if ctx.expected_output is not None:
            task += f"\n\nA reference answer: {as_text(ctx.expected_output)}"
        verdict = await judge.evaluate(
            JudgeRequest(task=task, answer=AgentResult(content=as_text(ctx.output)), attempt=1)
        )
        return EvaluationReason(
            value=verdict.decision is JudgeDecision.ACCEPT, reason=verdict.feedback or None
        )

    def get_default_evaluation_name(self) -> str:
        """Its column in reports."""
        return "judge"
