"""A run's timeline, read from its stored event log: what ``runs show`` prints under the state.

The log (``store.read_events``) holds each event as JSON (``observe/_codec``), so a
run made by any process reads back the same. A line per thing that happened: node
starts and finishes with their durations, model calls with model, tokens, cost and
latency, tool calls, questions, pauses, errors, and how the run ended.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["Moment", "Totals", "moments", "rows", "totals"]

Event = Mapping[str, Any]

QUIET: Final = frozenset({"CheckpointSaved", "EdgeFired", "NodeChunk", "LLMCallStarted"})
"""Events left out unless every event is asked for: bookkeeping, or told by another line
(a model call's start by its finish)."""


@dataclass(frozen=True, slots=True)
class Moment:
    """One line of the timeline."""

    at: float
    """Seconds since the run's first event."""
    step: int
    what: str
    """What happened, in a word or two."""
    detail: str
    """Where and how: the node, its outcome and duration, the model and its usage..."""
    event: str
    """The event's class name."""


@dataclass(frozen=True, slots=True)
class Totals:
    """What the run's model and tool calls added up to."""

    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    unpriced: int = 0
    tool_calls: int = 0

    def line(self) -> str:
        """The totals in one line."""
        cost = f"${self.cost_usd:.4f}" + (f" (+{self.unpriced} unpriced)" if self.unpriced else "")
        return (
            f"{self.model_calls} model call(s): {self.input_tokens} tokens in, "
            f"{self.output_tokens} out, {cost}; {self.tool_calls} tool call(s)"
        )


def moments(events: Iterable[Event], *, everything: bool = False) -> list[Moment]:
    """The timeline of ``events`` (a run's stored log, in order).

    ``everything`` keeps the bookkeeping events too (checkpoints, edges, text chunks).
    """
    found: list[Moment] = []
    first: float | None = None
    for event in events:
        name = str(event.get("event", "?"))
        if name in QUIET and not everything:
            continue
        stamp = _number(event.get("timestamp"))
        first = stamp if first is None else first
        describe = _DESCRIBE.get(name, _generic)
        what, detail = describe(event)
        found.append(Moment(stamp - first, int(_number(event.get("step"))), what, detail, name))
    return found


def totals(events: Iterable[Event]) -> Totals:
    """The model calls' tokens and cost, and the number of tool calls, in ``events``."""
    calls = tokens_in = tokens_out = unpriced = tools = 0
    cost = 0.0
    for event in events:
        name = event.get("event")
        if name == "LLMCallFinished":
            calls += 1
            tokens_in += int(_number(event.get("input_tokens")))
            tokens_out += int(_number(event.get("output_tokens")))
            if event.get("cost_usd") is None:
                unpriced += 1
            else:
                cost += _number(event.get("cost_usd"))
        elif name == "ToolCallFinished":
            tools += 1
    return Totals(calls, tokens_in, tokens_out, cost, unpriced, tools)


# ------------------------------------------------------------------ each event


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _where(event: Event) -> str:
    """The node, with the subgraphs around it and the fan-out branch it ran in."""
    path = event.get("node_path") or [event.get("node") or ""]
    where = " / ".join(str(part) for part in path if part)
    branch = event.get("branch")
    if isinstance(branch, Mapping):
        label = branch.get("label") or branch.get("name") or branch.get("index")
        where += f" [branch {label}]"
    return where


def _ms(value: Any) -> str:
    ms = _number(value)
    return f"{ms / 1000:.2f} s" if ms >= 1000 else f"{ms:.1f} ms"


def _short(value: Any, limit: int = 120) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _node_started(event: Event) -> tuple[str, str]:
    visit = int(_number(event.get("visit")))
    return "node started", _where(event) + (f" (visit {visit})" if visit > 1 else "")


def _node_finished(event: Event) -> tuple[str, str]:
    parts = [_where(event), str(event.get("outcome", "")), _ms(event.get("duration_ms"))]
    attempts = int(_number(event.get("attempts")))
    if attempts > 1:
        parts.append(f"{attempts} attempts")
    if event.get("error") and event.get("outcome") not in ("success", "interrupted"):
        parts.append(_short(event["error"]))
    return "node finished", "  ".join(p for p in parts if p)


def _model_call(event: Event) -> tuple[str, str]:
    cost = event.get("cost_usd")
    parts = [
        _where(event) or str(event.get("agent") or ""),
        str(event.get("model", "")),
        f"{int(_number(event.get('input_tokens')))} in / "
        f"{int(_number(event.get('output_tokens')))} out",
        "unpriced" if cost is None else f"${_number(cost):.4f}",
        _ms(event.get("duration_ms")),
    ]
    if event.get("error"):
        parts.append(f"error: {_short(event['error'])}")
    return "model call", "  ".join(p for p in parts if p)


def _tool_call(event: Event) -> tuple[str, str]:
    parts = [str(event.get("tool", "")), _where(event), _ms(event.get("duration_ms"))]
    if event.get("error"):
        parts.append(f"error: {_short(event['error'])}")
    return "tool call", "  ".join(p for p in parts if p)


def _tool_started(event: Event) -> tuple[str, str]:
    return "tool started", f"{event.get('tool', '')}  {_where(event)}".strip()


def _question(event: Event) -> tuple[str, str]:
    return "question", f"{_where(event)} asks: {_short(event.get('prompt', ''))}"


def _paused(event: Event) -> tuple[str, str]:
    upcoming = ", ".join(str(n) for n in event.get("next") or [])
    return "paused", str(event.get("reason", "")) + (f"; next: {upcoming}" if upcoming else "")


def _resumed(event: Event) -> tuple[str, str]:
    if event.get("interrupt_id"):
        return "resumed", f"answered {event['interrupt_id']}"
    return "resumed", f"from checkpoint {event.get('checkpoint_id') or '-'}"


def _retried(event: Event) -> tuple[str, str]:
    return "retry", (
        f"{_where(event)}  attempt {int(_number(event.get('attempt')))} failed: "
        f"{_short(event.get('error', ''))}; again in {_number(event.get('delay_s')):.2f} s"
    )


def _failed(event: Event) -> tuple[str, str]:
    where = f" at {event['node']}" if event.get("node") else ""
    return "failed", f"{event.get('category', '')}{where}: {_short(event.get('error', ''), 200)}"


def _finished(event: Event) -> tuple[str, str]:
    return "finished", (
        f"{event.get('stop_reason', '')} ({event.get('quality', '')}), "
        f"{int(_number(event.get('steps')))} steps in {_ms(event.get('duration_ms'))}"
    )


def _generic(event: Event) -> tuple[str, str]:
    skip = {"event", "type", "run_id", "graph", "step", "timestamp", "namespace", "branch"}
    fields = {k: v for k, v in event.items() if k not in skip and k != "node_path"}
    return str(event.get("event", "?")), _short(fields, 160)


_DESCRIBE: Final[dict[str, Callable[[Event], tuple[str, str]]]] = {
    "RunStarted": lambda e: ("started", f"at {e.get('entry', '')}"),
    "NodeStarted": _node_started,
    "NodeFinished": _node_finished,
    "NodeRetried": _retried,
    "NodeCacheHit": lambda e: ("cache hit", _where(e)),
    "LLMCallFinished": _model_call,
    "ToolCallStarted": _tool_started,
    "ToolCallFinished": _tool_call,
    "InterruptRaised": _question,
    "RunPaused": _paused,
    "RunResumed": _resumed,
    "RunFailed": _failed,
    "RunCancelled": lambda e: ("cancelled", str(e.get("reason", ""))),
    "RunFinished": _finished,
    "ParallelStarted": lambda e: (
        "fan-out",
        f"{e.get('source', '')} -> {', '.join(map(str, e.get('branches') or []))}",
    ),
    "ParallelFinished": lambda e: (
        "joined",
        f"{e.get('source', '')}: {len(e.get('succeeded') or [])} succeeded, "
        f"{len(e.get('failed') or [])} failed  {_ms(e.get('duration_ms'))}",
    ),
    "BudgetExceeded": lambda e: (
        "budget",
        f"{e.get('budget', '')}: used {e.get('used')} of {e.get('limit')}",
    ),
    "LoopDetected": lambda e: ("loop", f"{_where(e)} repeats step {e.get('first_step')}"),
    "StallDetected": lambda e: (
        "stall",
        f"{_where(e)}: no change for {e.get('unchanged_steps')} steps",
    ),
    "EdgeFired": lambda e: ("edge", f"{e.get('source', '')} -> {_target(e.get('target'))}"),
    "CheckpointSaved": lambda e: ("checkpoint", f"{e.get('trigger', '')} {e.get('checkpoint_id')}"),
    "NodeChunk": lambda e: ("text", f"{_where(e)}: {_short(e.get('delta', ''))}"),
    "LLMCallStarted": lambda e: ("model call started", f"{_where(e)}  {e.get('model', '')}"),
}


def _target(target: Any) -> str:
    return "END" if isinstance(target, Mapping) and target.get("$end") else str(target)


def rows(found: Sequence[Moment]) -> list[tuple[str, str, str, str]]:
    """The timeline as table rows: time, step, what, detail."""
    return [(f"+{m.at:.3f}s", str(m.step), m.what, m.detail) for m in found]
