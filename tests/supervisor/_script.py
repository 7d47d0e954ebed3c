"""Scripted answers for supervisor tests: the JSON each supervisor call expects."""

from __future__ import annotations

from typing import Any

from selectgraph import Agent, AgentConfig
from selectgraph.providers import LocalReply
from selectgraph.testing import ScriptedProvider


def member(name: str, *replies: Any, model: str | None = None, about: str = "") -> Agent:
    """An agent answering from its own script."""
    config = AgentConfig(name=name, model=model, instructions=about or f"The {name}.")
    return Agent(config, provider=ScriptedProvider(list(replies)))


def requests_of(agent: Agent) -> list[Any]:
    provider = agent.provider
    assert isinstance(provider, ScriptedProvider)
    return provider.requests


def plan(*steps: tuple[str, str]) -> LocalReply:
    return LocalReply.json({"steps": [{"agent": a, "instruction": i} for a, i in steps]})


def verdict(complete: bool, reason: str = "because") -> LocalReply:
    return LocalReply.json({"complete": complete, "reason": reason})


def route(agent: str = "", instruction: str = "", *, done: bool = False) -> LocalReply:
    return LocalReply.json(
        {"done": done, "next_agent": agent, "instruction": instruction, "reason": "why not"}
    )


def ledger(
    *plan_steps: str, facts: tuple[str, ...] = (), guesses: tuple[str, ...] = ()
) -> LocalReply:
    return LocalReply.json(
        {"facts": list(facts), "guesses": list(guesses), "plan": list(plan_steps)}
    )


def progress(
    speaker: str = "",
    instruction: str = "",
    *,
    satisfied: bool = False,
    loop: bool = False,
    progressing: bool = True,
) -> LocalReply:
    def answer(value: Any) -> dict[str, Any]:
        return {"reason": f"r:{value}", "answer": value}

    return LocalReply.json(
        {
            "is_request_satisfied": answer(satisfied),
            "is_in_loop": answer(loop),
            "is_progress_being_made": answer(progressing),
            "next_speaker": answer(speaker),
            "instruction_or_question": answer(instruction),
        }
    )


def last_user(request: Any) -> str:
    return str(request.messages[-1].text)


def system(request: Any) -> str:
    return str(request.messages[0].text)
