"""LLM-decided edges: a fast model picks the next node, with a fallback when it cannot."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator

from selectgraph.agents._calls import call_model
from selectgraph.agents._defaults import DEFAULT_SHORT_ANSWER_TOKENS
from selectgraph.agents._judge import InvalidReplyError, none_as_empty, parse_json_reply
from selectgraph.core._messages import Message
from selectgraph.core._sentinels import END, EndType
from selectgraph.core._state import GraphState
from selectgraph.providers._base import CompletionRequest, Provider, ResponseFormat
from selectgraph.routing._edges import RouteContext, RouteDecision

__all__ = ["LLMDecider"]

_END_NAME = "END"


def _name(target: str | EndType) -> str:
    return _END_NAME if target is END else str(target)


class _RouteReply(BaseModel):
    """A routing model's reply; a missing or null reasoning is harmless, extra keys too."""

    target: str
    reasoning: Annotated[str, BeforeValidator(none_as_empty)] = ""


class LLMDecider:
    """Asks a model which candidate should run next, given the goal and the node's output."""

    def __init__(
        self,
        *,
        provider: Provider | None = None,
        model: str | None = None,
        instructions: str = "",
    ) -> None:
        """Create a decider.

        Args:
            provider: Who to ask (default: the offline-aware default provider).
            model: Which model (default: the provider's default; pick a fast one).
            instructions: Extra routing guidance.
        """
        from selectgraph.agents._defaults import default_provider

        self.provider = provider or default_provider()
        self.model = model or self.provider.default_model
        self.instructions = instructions

    async def __call__(self, state: GraphState, route: RouteContext) -> RouteDecision:
        """Ask the model; any failure to name a candidate is an error the engine falls back on."""
        names = {_name(target): target for target in route.candidates}
        options = "\n".join(
            f"- {name}: {route.candidates[target] or '(no description)'}"
            for name, target in names.items()
        )
        prompt = (
            f"Goal: {route.goal or 'not stated'}\n\n"
            f"Step {route.source!r} just produced:\n{route.output}\n\n"
            f"Choose what runs next. Options:\n{options}\n"
            + (f"\n{self.instructions}\n" if self.instructions else "")
            + '\nReply with JSON: {"target": "<one option>", "reasoning": "<one sentence>"}.'
        )
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {
                "target": {"type": "string", "enum": sorted(names)},
                "reasoning": {"type": "string"},
            },
            "required": ["target", "reasoning"],
            "additionalProperties": False,
        }
        completion = await call_model(
            self.provider,
            CompletionRequest(
                model=self.model,
                messages=(
                    Message.system("You route work between the steps of a workflow."),
                    Message.user(prompt),
                ),
                response_format=ResponseFormat(name="route", json_schema=schema),
                temperature=0.0,
                max_tokens=DEFAULT_SHORT_ANSWER_TOKENS,
                max_tokens_fits_budget=True,
            ),
        )
        text = completion.message.text
        try:
            reply = parse_json_reply(text, _RouteReply)
        except InvalidReplyError as exc:
            return RouteDecision(
                target=None,
                usage=completion.usage,
                error=f"unparseable reply ({exc}): {text[:120]!r}",
            )
        chosen, reasoning = reply.target, reply.reasoning
        if chosen not in names:
            return RouteDecision(
                target=None,
                reasoning=reasoning,
                usage=completion.usage,
                error=f"chose {chosen!r}, which is not one of {sorted(names)}",
            )
        return RouteDecision(target=names[chosen], reasoning=reasoning, usage=completion.usage)
