"""An agent node's memory of its model answers and tool results, for a resume inside a tool.

When an agent calls a graph as a tool and a node inside that graph asks a
question, the whole run pauses in the middle of the agent's answer. On resume
the agent's node runs again; with this memory (the node's ``context.once``
memo, saved in the pause's checkpoint) it gets the same model answers and the
results of the tool calls that had finished, in the same order, without asking
the model again, and so reaches the paused tool call, which continues its graph.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from selectgraph.core._control import current_control
from selectgraph.core._messages import Message
from selectgraph.core._usage import Usage
from selectgraph.providers._base import Completion

if TYPE_CHECKING:
    from selectgraph.core._messages import ToolCall
    from selectgraph.runtime._nested import CallingNode

__all__ = ["Replay", "replay_for"]


class Replay:
    """The memo of one visit of an agent node, read and written in call order."""

    __slots__ = ("memo", "where")

    def __init__(self, where: CallingNode, memo: dict[str, Any]) -> None:
        self.where = where
        self.memo = memo

    def completion(self) -> Completion | None:
        """The next model answer, if this visit had it before the pause (counted again)."""
        saved = self.memo.get(f"llm:{self.where.replayed}")
        if not isinstance(saved, dict):
            return None
        self.where.replayed += 1
        completion = Completion(
            message=Message.model_validate(saved["message"]),
            usage=Usage(**saved["usage"]),
            model=str(saved.get("model", "")),
            finish_reason=saved.get("finish_reason"),
        )
        control = current_control()
        if control is not None:
            # Spent before the pause; the resumed run's budget starts without it.
            control.add(completion.usage)
        return completion

    def keep_completion(self, completion: Completion) -> None:
        """Remember a model answer just received."""
        usage = completion.usage
        self.memo[f"llm:{self.where.replayed}"] = {
            "message": completion.message.model_dump(mode="json", exclude_none=True),
            "usage": {
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
                "cost_usd": usage.cost_usd,
                "calls": usage.calls,
                "unpriced_calls": usage.unpriced_calls,
            },
            "model": completion.model,
            "finish_reason": completion.finish_reason,
        }
        self.where.replayed += 1

    def tool_result(self, call: ToolCall) -> Message | None:
        """The result of ``call`` if it finished before the pause."""
        saved = self.memo.get(f"tool:{call.id}")
        return Message.model_validate(saved) if isinstance(saved, dict) else None

    def keep_tool_result(self, call: ToolCall, result: Message) -> None:
        """Remember the result of a finished tool call."""
        self.memo[f"tool:{call.id}"] = result.model_dump(mode="json", exclude_none=True)


def replay_for(where: CallingNode | None) -> Replay | None:
    """The replay memory of the agent node ``where``, when its tools may pause the run."""
    if where is None or where.memo is None:
        return None
    return Replay(where, where.memo)
