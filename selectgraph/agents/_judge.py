"""Judges: review an agent's answer and accept it, ask for a retry with feedback, or escalate.

An agent with a judge retries through the judge only: the engine never
retries an agent node on top (executor retries apply to function nodes), so a
failure cannot multiply into attempts x iterations model calls. ESCALATE (or
retries running out) makes the node fail with :class:`JudgeEscalated`, which
``on_failure`` edges can route to a human or a fallback.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, BeforeValidator, ValidationError

from selectgraph.agents._calls import call_model
from selectgraph.agents._defaults import DEFAULT_SHORT_ANSWER_TOKENS
from selectgraph.agents._structured import parse_answer
from selectgraph.agents._verdict import JudgeDecision, Verdict
from selectgraph.core._errors import SelectGraphError
from selectgraph.core._messages import Message
from selectgraph.providers._base import CompletionRequest, Provider, ResponseFormat

if TYPE_CHECKING:
    from selectgraph.agents._result import AgentResult

__all__ = [
    "FunctionJudge",
    "Judge",
    "JudgeEscalated",
    "JudgeRequest",
    "LLMJudge",
    "as_judge",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class JudgeRequest:
    """What a judge is shown."""

    task: str
    """What the agent was asked (its last input)."""
    answer: AgentResult
    """The answer to judge."""
    attempt: int
    """1 for the first answer, 2 after one retry, ..."""
    goal: str = ""
    """The graph's goal, when the agent runs as a node."""


@runtime_checkable
class Judge(Protocol):
    """Something that reviews answers."""

    async def evaluate(self, request: JudgeRequest) -> Verdict:
        """Decide about ``request.answer``."""
        ...


class JudgeEscalated(SelectGraphError):
    """A judge escalated, or kept asking for retries past the limit."""

    def __init__(self, message: str, *, result: AgentResult, verdicts: tuple[Verdict, ...]) -> None:
        super().__init__(message)
        self.result = result
        """The last answer the judge saw."""
        self.verdicts = verdicts
        """Every verdict, in order."""


JudgeFunction = Callable[..., "Verdict | bool | Awaitable[Verdict | bool]"]


class FunctionJudge:
    """A plain function as a judge: ``fn(result)`` or ``fn(result, request)``, sync or async.

    It returns a Verdict, or a bool (``True`` accepts, ``False`` retries with
    generic feedback).
    """

    def __init__(self, fn: JudgeFunction) -> None:
        self._fn = fn
        parameters = inspect.signature(fn).parameters
        self._wants_request = len(parameters) >= 2

    async def evaluate(self, request: JudgeRequest) -> Verdict:
        """Call the function and normalise its answer."""
        value: Any = (
            self._fn(request.answer, request) if self._wants_request else self._fn(request.answer)
        )
        if inspect.isawaitable(value):
            value = await value
        if isinstance(value, Verdict):
            return value
        if value is True:
            return Verdict.accept()
        if value is False:
            return Verdict.retry("The answer was not accepted; improve it and answer again.")
        raise TypeError(
            f"judge function {getattr(self._fn, '__name__', self._fn)!r} returned {value!r}; "
            "return a Verdict or a bool"
        )


_VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decision": {"type": "string", "enum": ["accept", "retry", "escalate"]},
        "feedback": {"type": "string"},
    },
    "required": ["decision", "feedback"],
    "additionalProperties": False,
}


class LLMJudge:
    """A model as a judge, told the task, the answer and the criteria, answering in JSON."""

    def __init__(
        self,
        criteria: str,
        *,
        provider: Provider | None = None,
        model: str | None = None,
    ) -> None:
        """Create a judge.

        Args:
            criteria: What a good answer does; the model judges against this.
            provider: Who to ask (default: the offline-aware default provider).
            model: Which model (default: the provider's default).
        """
        from selectgraph.agents._defaults import default_provider

        self.criteria = criteria
        self.provider = provider or default_provider()
        self.model = model or self.provider.default_model

    async def evaluate(self, request: JudgeRequest) -> Verdict:
        """Ask the model; an answer that is not a valid verdict escalates."""
        prompt = (
            f"Task given to the agent:\n{request.task}\n\n"
            f"The agent's answer (attempt {request.attempt}):\n{request.answer.content}\n\n"
            f"Criteria:\n{self.criteria}\n\n"
            'Reply with JSON: {"decision": "accept" | "retry" | "escalate", "feedback": "..."}. '
            "Use retry with concrete feedback when the answer can be fixed, escalate when it "
            "cannot."
        )
        system = "You review answers strictly and fairly." + (
            f" The overall goal: {request.goal}" if request.goal else ""
        )
        completion = await call_model(
            self.provider,
            CompletionRequest(
                model=self.model,
                messages=(Message.system(system), Message.user(prompt)),
                response_format=ResponseFormat(name="verdict", json_schema=_VERDICT_SCHEMA),
                temperature=0.0,
                max_tokens=DEFAULT_SHORT_ANSWER_TOKENS,
                max_tokens_fits_budget=True,
            ),
        )
        try:
            reply = parse_json_reply(completion.message.text, _VerdictReply)
        except InvalidReplyError as exc:
            return Verdict(
                decision=JudgeDecision.ESCALATE,
                feedback=f"the judge's reply was not a valid verdict ({exc}): "
                f"{completion.message.text[:200]!r}",
                usage=completion.usage,
            )
        return Verdict(decision=reply.decision, feedback=reply.feedback, usage=completion.usage)


def _lower(value: object) -> object:
    return value.lower() if isinstance(value, str) else value


def none_as_empty(value: object) -> object:
    """A JSON ``null`` where text is expected reads as no text."""
    return "" if value is None else value


class _VerdictReply(BaseModel):
    """A judge model's reply.

    Lenient where models vary harmlessly: the decision's case, a missing or null
    feedback, extra keys.
    """

    decision: Annotated[JudgeDecision, BeforeValidator(_lower)]
    feedback: Annotated[str, BeforeValidator(none_as_empty)] = ""


class InvalidReplyError(ValueError):
    """A model's reply is not the JSON asked for; the message says what is wrong."""


_Reply = TypeVar("_Reply", bound=BaseModel)


def parse_json_reply(text: str, model: type[_Reply]) -> _Reply:
    """Validate a model's JSON reply, in a markdown code fence or not, as ``model``.

    Raises:
        InvalidReplyError: the reply is not JSON, or not the shape ``model`` asks for.
    """
    try:
        return parse_answer(model, text)
    except ValidationError as exc:
        problems = []
        for error in exc.errors(include_url=False):
            where = ".".join(str(part) for part in error["loc"])
            problems.append(f"{where}: {error['msg']}" if where else error["msg"])
        raise InvalidReplyError("; ".join(problems)) from None


def as_judge(judge: Any) -> Judge:
    """A Judge from a Judge or a plain function.

    Raises:
        TypeError: ``judge`` is neither.
    """
    if isinstance(judge, Judge):
        return judge
    if callable(judge):
        return FunctionJudge(judge)
    raise TypeError(f"a judge needs an evaluate() method or must be a function, got {judge!r}")
