"""An agent node's memory of its model answers, verdicts and tool results, for a resume.

When an agent calls a graph as a tool and a node inside that graph asks a
question, the whole run pauses in the middle of the agent's answer. On resume
the agent's node runs again; with this memory (the node's ``context.once``
memo, saved in the pause's checkpoint) it gets the same model answers, the
same judge verdicts and the results of the tool calls that had finished, in
the same order, without asking again, and so reaches the paused tool call,
which continues its graph.

Each model answer is kept with a fingerprint of the request that got it. A
request that differs on resume (an edited fork, a changed prompt) ends the
replay there: what was remembered from that point on is dropped and the model
is asked. Tool results are keyed by the answer that asked for them and the
call's position in it (ids are the model's and may repeat), and a graph tool's
usage is kept with its result, so it is counted again when the result is
replayed.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from selectgraph.agents._verdict import JudgeDecision, Verdict
from selectgraph.core._control import current_control
from selectgraph.core._messages import Message
from selectgraph.core._usage import Usage
from selectgraph.providers._base import Completion

if TYPE_CHECKING:
    from selectgraph.providers._base import CompletionRequest
    from selectgraph.runtime._nested import CallingNode

__all__ = ["Replay", "fingerprint", "replay_for"]


class Replay:
    """The memo of one visit of an agent node, read and written in call order."""

    __slots__ = ("memo", "where")

    def __init__(self, where: CallingNode, memo: dict[str, Any]) -> None:
        self.where = where
        self.memo = memo

    # ---------------------------------------------------------------- answers
    def completion(self, request: CompletionRequest) -> Completion | None:
        """The next model answer, if this visit had it for this same request before."""
        key = f"llm:{self.where.replayed}"
        saved = self.memo.get(key)
        if not isinstance(saved, dict):
            return None
        if saved.get("request") != fingerprint(request):
            self._forget_from(self.where.replayed)
            return None
        self.where.replayed += 1
        completion = Completion(
            message=Message.model_validate(saved["message"]),
            usage=Usage.from_dict(saved["usage"]),
            model=str(saved.get("model", "")),
            finish_reason=saved.get("finish_reason"),
        )
        _spent(completion.usage)
        return completion

    def keep_completion(self, request: CompletionRequest, completion: Completion) -> None:
        """Remember a model answer just received."""
        self.memo[f"llm:{self.where.replayed}"] = {
            "request": fingerprint(request),
            "message": completion.message.model_dump(mode="json", exclude_none=True),
            "usage": completion.usage.to_dict(),
            "model": completion.model,
            "finish_reason": completion.finish_reason,
        }
        self.where.replayed += 1

    def turn(self) -> int:
        """The number of the answer being acted on (its tool calls are keyed by it)."""
        return self.where.replayed - 1

    # --------------------------------------------------------------- verdicts
    def verdict(self, attempt: int) -> Verdict | None:
        """The judge's verdict on this visit's ``attempt``-th answer, if it was given."""
        saved = self.memo.get(f"judge:{self.turn()}:{attempt}")
        if not isinstance(saved, dict):
            return None
        usage = Usage.from_dict(saved["usage"]) if saved.get("usage") else None
        if usage is not None:
            _spent(usage)
        return Verdict(
            decision=JudgeDecision(saved["decision"]), feedback=str(saved["feedback"]), usage=usage
        )

    def keep_verdict(self, attempt: int, verdict: Verdict) -> None:
        """Remember the judge's verdict on an answer."""
        self.memo[f"judge:{self.turn()}:{attempt}"] = {
            "decision": verdict.decision.value,
            "feedback": verdict.feedback,
            "usage": verdict.usage.to_dict() if verdict.usage is not None else None,
        }

    # ------------------------------------------------------------ tool calls
    def tool_result(self, slot: str) -> Message | None:
        """The result of the call at ``slot`` if it finished before the pause.

        What a graph tool spent for it is counted again (the resumed run's budget
        and the node's usage start without it).
        """
        saved = self.memo.get(f"tool:{slot}")
        if not isinstance(saved, dict):
            return None
        spent = self.memo.get(f"usage:{slot}")
        if isinstance(spent, dict):
            usage = Usage.from_dict(spent)
            self.where.add(usage)
            _spent(usage)
        return Message.model_validate(saved)

    def keep_tool_result(self, slot: str, result: Message) -> None:
        """Remember the result of a finished tool call."""
        self.memo[f"tool:{slot}"] = result.model_dump(mode="json", exclude_none=True)

    def _forget_from(self, answer: int) -> None:
        """Drop every answer from ``answer`` on, and what was keyed by them."""
        for key in list(self.memo):
            kind, _, rest = key.partition(":")
            if kind in ("llm", "judge", "tool", "usage") and int(rest.split(":")[0]) >= answer:
                del self.memo[key]


def fingerprint(request: CompletionRequest) -> str:
    """A short hash of what a request asks: the model, the conversation and the tools."""
    shown = {
        "model": request.model,
        "messages": [m.model_dump(mode="json", exclude_none=True) for m in request.messages],
        "tools": [tool.name for tool in request.tools],
    }
    text = json.dumps(shown, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _spent(usage: Usage) -> None:
    control = current_control()
    if control is not None:
        # Spent before the pause; the resumed run's budget starts without it.
        control.add(usage)


def replay_for(where: CallingNode | None) -> Replay | None:
    """The replay memory of the agent node ``where``, when its tools may pause the run."""
    if where is None or where.memo is None:
        return None
    return Replay(where, where.memo)
