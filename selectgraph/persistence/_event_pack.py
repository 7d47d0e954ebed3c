"""A batch of a run's stored events as one compact value, for the SQL stores.

A run appends a few events with each checkpoint (a node started, ended, the
checkpoint was saved, an edge fired): about a kilobyte a step as JSON, mostly
the same keys and names over and over, several times the size of the step's
checkpoint delta. The SQLite and PostgreSQL stores keep each batch as one row,
its JSON lines deflated against a preset dictionary of what events are made
of, about five times smaller.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence
from typing import Any, Final

from selectgraph.core._errors import CheckpointDecodeError
from selectgraph.persistence._codec import RUN_DICT_BYTES, decode_event, inflate
from selectgraph.persistence._threads import StoredEvent

__all__ = ["event_lines", "pack_events", "unpack_events", "unpacked"]

_LINES: Final = b"j"  # JSON lines as they are
_DEFLATED: Final = b"e"  # JSON lines, raw deflate with _EVENT_DICT
_RUN: Final = b"r"  # JSON lines, raw deflate with _EVENT_DICT and the run's dictionary
_EVENT_DICT: Final = (
    # What a run's event log is mostly made of, the commonest last (deflate reaches
    # back to it cheaply). Rows written with it need it to load: never change it;
    # add a new marker for a new dictionary.
    b'"event":"SupervisorReplanned","type":"supervisor_replan","stall_count":"new_plan":'
    b'"event":"BudgetExceeded","type":"budget_exceeded","budget":"limit":"used":"needed":'
    b'"event":"CustomEvent","type":"custom","data":{"event":"NodeCacheHit","type":'
    b'"node_cache_hit","key":"event":"StallDetected","type":"stall_detected",'
    b'"unchanged_steps":"event":"LoopDetected","type":"loop_detected","first_step":'
    b'"event":"ParallelStarted","type":"parallel_start","branches":["failure_mode":"'
    b'"event":"ParallelFinished","type":"parallel_end","succeeded":["failed":[],"cancelled":'
    b'"event":"NodeRetried","type":"node_retried","attempt":"delay_s":'
    b'"event":"RunFailed","type":"error","category":"exception":"'
    b'"event":"RunCancelled","type":"run_cancelled","event":"InterruptRaised","type":'
    b'"graph_interrupt","interrupt_id":"","prompt":"event":"RunPaused","type":"run_paused",'
    b'"event":"RunResumed","type":"graph_resume","live":"next":["'
    b'"event":"ToolCallStarted","type":"tool_call_started","tool":"","call_id":"'
    b'"event":"ToolCallFinished","type":"tool_call_finished","result":'
    b'"event":"LLMCallStarted","type":"llm_call_started","provider":"","model":"",'
    b'"agent":null,"streaming":false,"request":"event":"LLMCallFinished","type":'
    b'"llm_call_finished","input_tokens":,"output_tokens":,"cost_usd":,'
    b'"response_model":null,"finish_reason":"stop","completion":'
    b'{"event":"RunStarted","type":"graph_start","entry":"'
    b'{"event":"RunFinished","type":"graph_end","steps":,"quality":null,'
    b'"stop_reason":"completed","result":"state":null,'
    b'{"event":"NodeFinished","type":"node_end","run_id":"","graph":"","step":'
    b',"duration_ms":0.0,"outcome":"success","attempts":1,"error":null,"update":null,'
    b'{"event":"EdgeFired","type":"routing","source":"","target":"","kind":"static",'
    b'"label":"","reason":"","node_path":["'
    b'{"event":"CheckpointSaved","type":"checkpoint","checkpoint_id":"",'
    b'"trigger":"node_complete","version":,"node_path":[]}\n'
    b'{"event":"NodeStarted","type":"node_start","run_id":"","graph":"","step":1,'
    b'"timestamp":17,"namespace":[],"branch":null,"node":"","visit":1,"node_path":["'
)


def pack_events(events: list[bytes], run_dict: bytes | None = None) -> bytes:
    """Encoded events (``encode_events``) as one stored value.

    ``run_dict``: bytes a store keeps once per run (:func:`event_lines` of one of
    its batches, see ``run_dict_of``): deflated against them as well, a step's
    batch costs about half, its keys, names and ids being the run's again.
    Unpacking needs the same bytes.
    """
    lines = event_lines(events)
    marker, zdict = (_DEFLATED, _EVENT_DICT) if run_dict is None else (_RUN, _zdict(run_dict))
    packer = zlib.compressobj(6, zlib.DEFLATED, -15, 8, zlib.Z_DEFAULT_STRATEGY, zdict)
    packed = packer.compress(lines) + packer.flush()
    return marker + packed if len(packed) < len(lines) else _LINES + lines


def event_lines(events: list[bytes]) -> bytes:
    """Encoded events as the JSON lines a batch holds."""
    return b"\n".join(events)  # compact JSON holds no raw newline


def _zdict(run_dict: bytes) -> bytes:
    return _EVENT_DICT + run_dict[-RUN_DICT_BYTES:]


def unpack_events(
    raw: bytes, run_id: str, first: int, *, location: str = "", run_dict: bytes | None = None
) -> list[dict[str, Any]]:
    """The events :func:`pack_events` stored, the first of them numbered ``first``.

    ``run_dict``: the run's dictionary, for a batch packed against it.

    Raises:
        CheckpointDecodeError: the value is not such a batch.
    """
    marker, body = raw[:1], raw[1:]

    def fail(path: str, reason: str) -> CheckpointDecodeError:
        return CheckpointDecodeError(
            f"{run_id}#{first}", path, f"not a deflated batch: {reason}", location=location
        )

    if marker == _DEFLATED:
        lines = inflate(body, -15, _EVENT_DICT, fail, "events")
    elif marker == _RUN:
        if run_dict is None:
            raise CheckpointDecodeError(
                f"{run_id}#{first}",
                "events",
                "deflated against its run's dictionary, which is missing",
                location=location,
            )
        lines = inflate(body, -15, _zdict(run_dict), fail, "events")
    elif marker == _LINES:
        lines = body
    else:
        raise CheckpointDecodeError(
            f"{run_id}#{first}", "events", f"unknown batch marker {marker!r}", location=location
        )
    return [
        decode_event(line, run_id, seq, location=location)
        for seq, line in enumerate(lines.split(b"\n"), first)
    ]


def unpacked(
    rows: Iterable[Sequence[Any]],
    run_id: str,
    after: int,
    limit: int | None,
    location: str,
    run_dict: bytes | None = None,
) -> list[StoredEvent]:
    """The events after seq ``after`` (at most ``limit``) in ``(first_seq, body)`` batch rows."""
    found: list[StoredEvent] = []
    for first, body in rows:
        batch = unpack_events(bytes(body), run_id, int(first), location=location, run_dict=run_dict)
        for seq, event in enumerate(batch, int(first)):
            if limit is not None and len(found) >= limit:
                return found
            if seq > after:
                found.append(StoredEvent(run_id, seq, event))
    return found
