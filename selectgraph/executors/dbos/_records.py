"""What a workflow step records, and what a replay rebuilds from it.

A step's record is JSON data. A node's step records the node's output (or its
failure, its question, its budget stop) together with what the run needs to
carry on exactly as it did: the retry count, the events the node emitted, and
the entries it added to the run's InterruptBook (questions, ``context.once``
results, paused subgraph runs). A branch's step records the branch's writes
and what its walk counts into the run (visits, steps, usage). Replaying a
record gives the step loop the same values the first execution gave it, so
routing, step numbers, task ids and checkpoints come out the same.

A failure is recorded as its type's name and message, and rebuilt as an
exception class of that name made here (never the original class: a record
never names code to load).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

from selectgraph.core._branch import branch_from_json, branch_to_json
from selectgraph.core._control import BudgetStop
from selectgraph.core._interrupts import Interrupt
from selectgraph.core._result import GraphResult
from selectgraph.core._run_errors import GraphRunError, NodeError
from selectgraph.core._sentinels import END
from selectgraph.core._serialization import StateSerializer
from selectgraph.core._state import GraphState
from selectgraph.core._usage import NO_USAGE, Usage
from selectgraph.observe._codec import event_from_json
from selectgraph.observe._events import GraphEvent
from selectgraph.persistence._checkpoint import Checkpoint
from selectgraph.persistence._codec import checkpoint_from_json
from selectgraph.routing._edges import RouteDecision
from selectgraph.runtime._tasks import BranchTally

__all__ = [
    "ReplayedError",
    "ReplayedRunError",
    "checkpoint_from_record",
    "decode_decision",
    "decode_events",
    "decode_interrupt",
    "decode_result",
    "decode_tally",
    "encode_budget_stop",
    "encode_decision",
    "encode_failure",
    "encode_interrupt",
    "encode_result",
    "encode_tally",
    "rebuild_budget_stop",
    "rebuild_failure",
]


class ReplayedError(Exception):
    """A node's failure read back from its step record: the original's type name and message.

    The class is made under the original's name, so error records, events and
    ``except`` by name read the same as in the first execution.
    """


class ReplayedRunError(NodeError):
    """A recorded engine error (a ``GraphRunError``), rebuilt under its type's name."""


_made: dict[tuple[str, bool], type[Exception]] = {}
_MAX_CHAIN: Final = 8


def _replayed_class(name: str, engine: bool) -> type[Exception]:
    if not name.isidentifier():
        name = "ReplayedError"
    key = (name, engine)
    cls = _made.get(key)
    if cls is None:
        base: type[Exception] = ReplayedRunError if engine else ReplayedError
        cls = _made[key] = type(name, (base,), {"__module__": __name__})
    return cls


def encode_failure(exc: BaseException, depth: int = 0) -> dict[str, Any]:
    """``exc`` as a record: type name, message, the node and step it names, usage, cause."""
    record: dict[str, Any] = {"type": type(exc).__name__, "message": str(exc)}
    if isinstance(exc, ReplayedError | ReplayedRunError):
        record["engine"] = isinstance(exc, ReplayedRunError)
    else:
        record["engine"] = isinstance(exc, GraphRunError)
    node = getattr(exc, "node", None)
    if isinstance(node, str):
        record["node"] = node
    step = getattr(exc, "step", None)
    if isinstance(step, int):
        record["step"] = step
    usage = getattr(exc, "usage", None)
    if isinstance(usage, Usage):
        record["usage"] = usage.to_dict()
    cause = exc.__cause__
    if cause is not None and depth < _MAX_CHAIN:
        record["cause"] = encode_failure(cause, depth + 1)
    return record


def rebuild_failure(record: Mapping[str, Any]) -> Exception:
    """The exception :func:`encode_failure` recorded, as a class of the same name made here."""
    cls = _replayed_class(str(record.get("type", "ReplayedError")), bool(record.get("engine")))
    message = str(record.get("message", ""))
    exc: Exception
    if issubclass(cls, GraphRunError):
        node = record.get("node")
        step = record.get("step")
        exc = cls(
            message,
            node=node if isinstance(node, str) else None,
            step=step if isinstance(step, int) else None,
        )
    else:
        exc = cls(message)
        if isinstance(record.get("node"), str):
            exc.node = record["node"]  # type: ignore[attr-defined]
    usage = record.get("usage")
    if type(usage) is dict:
        exc.usage = Usage.from_dict(usage)  # type: ignore[attr-defined]
    cause = record.get("cause")
    if type(cause) is dict:
        exc.__cause__ = rebuild_failure(cause)
    return exc


def encode_budget_stop(stop: BudgetStop) -> dict[str, Any]:
    """A budget's refusal inside a node, to be raised again on replay."""
    return {"kind": stop.kind, "limit": stop.limit, "used": stop.used, "needed": stop.needed}


def rebuild_budget_stop(record: Mapping[str, Any]) -> BudgetStop:
    """The BudgetStop :func:`encode_budget_stop` recorded."""
    return BudgetStop(
        record["kind"], float(record["limit"]), float(record["used"]), float(record["needed"])
    )


def encode_interrupt(item: Interrupt, serializer: StateSerializer) -> dict[str, Any]:
    """A question as JSON data (its payload through the graph's serializer)."""
    record: dict[str, Any] = {
        "id": item.id,
        "node": item.node,
        "prompt": item.prompt,
        "payload": serializer.encode(item.payload, f"interrupts[{item.id!r}].payload"),
        "index": item.index,
    }
    if item.response_schema is not None:  # what an answer must fit travels with the question
        record["response_schema"] = copy.deepcopy(item.response_schema)
    if item.branch is not None:
        record["branch"] = branch_to_json(item.branch)
    return record


def decode_interrupt(record: Mapping[str, Any], serializer: StateSerializer) -> Interrupt:
    """The Interrupt :func:`encode_interrupt` wrote."""
    interrupt_id = str(record["id"])
    schema = record.get("response_schema")
    return Interrupt(
        id=interrupt_id,
        node=str(record.get("node", "")),
        prompt=str(record.get("prompt", "")),
        payload=serializer.decode(record.get("payload"), f"interrupts[{interrupt_id!r}].payload"),
        index=int(record.get("index", 0)),
        response_schema=copy.deepcopy(schema) if type(schema) is dict else None,
        branch=branch_from_json(record.get("branch")),
    )


def encode_tally(walks: list[Any]) -> dict[str, Any]:
    """What a branch's walks (usually one) count into the run, summed."""
    usage = NO_USAGE
    ran: dict[str, int] = {}
    steps = 0
    degraded = hit_limit = False
    stopped_at: Any = None
    for walk in walks:
        if walk.usage is not NO_USAGE:
            usage = usage + walk.usage
        for node, count in walk.ran.items():
            ran[node] = ran.get(node, 0) + count
        steps = max(steps, walk.steps)
        degraded = degraded or walk.degraded
        if walk.hit_limit:
            hit_limit = True
            stopped_at = walk.stopped_at
    record: dict[str, Any] = {"ran": ran, "steps": steps}
    if usage is not NO_USAGE:
        record["usage"] = usage.to_dict()
    if degraded:
        record["degraded"] = True
    if hit_limit:
        record["hit_limit"] = True
        record["stopped_at"] = "__end__" if stopped_at is END else stopped_at
    return record


def decode_tally(record: Mapping[str, Any]) -> BranchTally:
    """The BranchTally :func:`encode_tally` recorded."""
    usage = record.get("usage")
    stopped_at = record.get("stopped_at")
    return BranchTally(
        usage=Usage.from_dict(usage) if type(usage) is dict else NO_USAGE,
        ran={str(k): int(v) for k, v in dict(record.get("ran", {})).items()},
        steps=int(record.get("steps", 0)),
        degraded=bool(record.get("degraded", False)),
        hit_limit=bool(record.get("hit_limit", False)),
        stopped_at=END if stopped_at == "__end__" else stopped_at,
    )


def encode_decision(decision: RouteDecision) -> dict[str, Any]:
    """An llm_decide edge's decision as JSON data."""
    target = decision.target
    record: dict[str, Any] = {
        "target": "__end__" if target is END else target,
        "reasoning": decision.reasoning,
    }
    if decision.usage is not None:
        record["usage"] = decision.usage.to_dict()
    if decision.error is not None:
        record["error"] = decision.error
    return record


def decode_decision(record: Mapping[str, Any]) -> RouteDecision:
    """The RouteDecision :func:`encode_decision` wrote."""
    target = record.get("target")
    usage = record.get("usage")
    error = record.get("error")
    return RouteDecision(
        target=END if target == "__end__" else target,
        reasoning=str(record.get("reasoning", "")),
        usage=Usage.from_dict(usage) if type(usage) is dict else None,
        error=error if isinstance(error, str) else None,
    )


def encode_result(result: GraphResult, serializer: StateSerializer) -> dict[str, Any]:
    """A run's GraphResult as JSON data (its trace travels separately, as the event stream)."""
    return {
        "state": result.state.to_dict(serializer=serializer),
        "steps": result.steps,
        "quality": result.quality,
        "stop_reason": result.stop_reason,
        "run_id": result.run_id,
        "duration_ms": result.duration_ms,
        "stalls": result.stalls,
        "loops_detected": result.loops_detected,
        "max_steps_reached": result.max_steps_reached,
        "usage": result.total_usage.to_dict(),
        "history_start": result.history_start,
        "interrupts": [encode_interrupt(item, serializer) for item in result.interrupts],
        "checkpoint_id": result.checkpoint_id,
        "observer_errors": result.observer_errors,
    }


def decode_result(
    record: Mapping[str, Any], serializer: StateSerializer, trace: list[GraphEvent]
) -> GraphResult:
    """The GraphResult :func:`encode_result` wrote, with ``trace`` as its events."""
    usage = record.get("usage")
    return GraphResult(
        state=GraphState.from_dict(record["state"], serializer=serializer),
        steps=int(record["steps"]),
        trace=trace,
        quality=record["quality"],
        stop_reason=record["stop_reason"],
        run_id=str(record["run_id"]),
        duration_ms=float(record["duration_ms"]),
        stalls=int(record.get("stalls", 0)),
        loops_detected=int(record.get("loops_detected", 0)),
        max_steps_reached=bool(record.get("max_steps_reached", False)),
        total_usage=Usage.from_dict(usage) if type(usage) is dict else Usage(),
        history_start=int(record.get("history_start", 0)),
        interrupts=tuple(decode_interrupt(i, serializer) for i in record.get("interrupts", [])),
        checkpoint_id=record.get("checkpoint_id"),
        observer_errors=int(record.get("observer_errors", 0)),
    )


def checkpoint_from_record(raw: Mapping[str, Any]) -> Checkpoint:
    """A checkpoint published on a run's stream (its stored JSON record), checked field by field."""
    # Parsed once already (the stream is JSON): its fields are checked, not its checksum.
    return checkpoint_from_json(raw, str(raw.get("checkpoint_id")), location="a run's stream")


def decode_events(batch: Any) -> list[GraphEvent]:
    """The events of one stream item (a list of :func:`event_to_json` dicts)."""
    return [event_from_json(raw) for raw in batch]
