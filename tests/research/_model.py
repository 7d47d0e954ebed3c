"""A scripted research model: answers each research agent's call from what the call asks.

Deep research runs its section loops in parallel, so calls arrive in no fixed
order; the replies are chosen from the request (its schema, its agent's
instructions and the section it is about), not from a queue.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from selectgraph import Usage
from selectgraph.providers import CompletionRequest, LocalReply
from selectgraph.testing import ScriptedProvider

Reply = str | LocalReply | Exception


def section_of(request: CompletionRequest) -> str:
    """The section question a loop's call is about ("" for the planner and synthesizer)."""
    text = request.messages[-1].text
    found = re.search(r"Section question: (.*)", text) or re.search(
        r"Research question: (.*)", text
    )
    return found.group(1).strip() if found else ""


def role_of(request: CompletionRequest) -> str:
    if request.response_format is not None:
        return request.response_format.name
    system = request.messages[0].text
    return "write" if "You write clear, factual prose" in system else "think"


@dataclass
class ResearchModel:
    """Replies by role and section; records who asked what."""

    plan: dict[str, Any] = field(default_factory=dict)
    gaps: Callable[[str, int], dict[str, Any]] = lambda section, n: {
        "research_complete": n > 1,
        "outstanding_gaps": [] if n > 1 else [f"facts about {section}"],
    }
    queries: Callable[[str, int], list[str]] = lambda section, n: [section]
    write: Callable[[str], Reply] = lambda section: f"About {section} [1]. More [2]."
    synthesis: dict[str, str] = field(
        default_factory=lambda: {"introduction": "Intro.", "conclusion": "Conclusion."}
    )
    tokens_per_call: int | None = None
    calls: Counter[tuple[str, str]] = field(default_factory=Counter)
    tool: str = "search_corpus"
    task_tools: list[str] | None = None
    """Tools of the tasks in order (cycled); ``tool`` for all when None."""

    def __call__(self, request: CompletionRequest) -> Reply:
        role, section = role_of(request), section_of(request)
        self.calls[(role, section)] += 1
        n = self.calls[(role, section)]
        reply = self._reply(role, section, n)
        if isinstance(reply, Exception) or self.tokens_per_call is None:
            return reply
        text = reply.text if isinstance(reply, LocalReply) else reply
        half = self.tokens_per_call // 2
        return LocalReply(text=text, usage=Usage(input_tokens=half, output_tokens=half, calls=1))

    def _reply(self, role: str, section: str, n: int) -> Reply:
        if role == "ReportPlan":
            return LocalReply.json(self.plan)
        if role == "KnowledgeGap":
            return LocalReply.json(self.gaps(section, n))
        if role == "ToolSelection":
            tools = self.task_tools or [self.tool]
            tasks = [
                {"gap": section, "tool": tools[i % len(tools)], "query": q}
                for i, q in enumerate(self.queries(section, n))
            ]
            return LocalReply.json({"tasks": tasks})
        if role == "Synthesis":
            return LocalReply.json(self.synthesis)
        if role == "write":
            return self.write(section)
        return f"Thinking about {section}."

    def provider(self, calls: int = 500) -> ScriptedProvider:
        return ScriptedProvider([self] * calls)


def sections_plan(*questions: str, title: str = "Storage report") -> dict[str, Any]:
    return {
        "title": title,
        "background": "",
        "sections": [{"title": q.title(), "key_question": q} for q in questions],
    }


def as_json(reply: Reply) -> Any:
    assert isinstance(reply, LocalReply)
    return json.loads(reply.text)
