"""A run's InterruptBook as JSON data, and back.

A checkpoint carries the book (questions with their response schemas, answers,
memoized ``context.once`` results, paused subgraph runs, finished branches'
writes), and an executor that records tasks elsewhere carries the part of it a
task changed. Both go through these functions, so the two forms cannot drift
apart.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from selectgraph.core._branch import branch_from_json, branch_to_json
from selectgraph.core._errors import StateDecodeError
from selectgraph.core._interrupts import Interrupt
from selectgraph.core._serialization import StateSerializer
from selectgraph.core._state import GraphState
from selectgraph.runtime._pending import decode_branch_writes, encode_branch_writes

if TYPE_CHECKING:
    from selectgraph.runtime._book import InterruptBook

__all__ = [
    "decode_children",
    "decode_interrupt_records",
    "decode_memo",
    "decode_pending_writes",
    "encode_book",
    "encode_child",
    "PausedChild",
]


class PausedChild(Protocol):
    """A subgraph's run paused in this process, as its parent's checkpoint stores it."""

    state: GraphState
    steps: int
    written_keys: set[str] | None

    @property
    def visits(self) -> dict[str, int]:
        """How many times each node ran."""
        ...

    @property
    def resume_next(self) -> list[Any]:
        """Where it continues (a checkpoint's ``next``)."""
        ...


def encode_child(
    child: PausedChild | Mapping[str, Any], serializer: StateSerializer
) -> dict[str, Any]:
    """A paused subgraph run (live, or as restored from a checkpoint) as JSON data."""
    if isinstance(child, Mapping):
        state, steps, visits, next_ = child["state"], child["steps"], child["visits"], child["next"]
        written = child.get("written")
    else:
        state, steps, visits, next_ = child.state, child.steps, child.visits, child.resume_next
        written = child.written_keys
    record = {
        "state": state.to_dict(serializer=serializer),
        "steps": steps,
        "visits": dict(visits),
        "next": list(next_),
    }
    if written is not None:
        record["written"] = sorted(written)  # what a passthrough subgraph hands back
    return record


def encode_book(
    book: InterruptBook, serializer: StateSerializer, pending: Iterable[Interrupt]
) -> tuple[dict[str, dict[str, Any]], dict[str, Any], dict[str, list[Any]]]:
    """(interrupt records, metadata, pending writes) of ``book``, as a checkpoint holds them.

    The interrupt records are ``pending`` plus the answers given to nodes not done.
    """
    encode = serializer.encode
    records: dict[str, dict[str, Any]] = {}
    for item in pending:
        record = records[item.id] = {
            "node": item.node,
            "prompt": item.prompt,
            "payload": encode(item.payload, f"interrupts[{item.id!r}].payload"),
            "index": item.index,
        }
        if item.response_schema is not None:
            # JSON data already, stored as it is (a copy: the Interrupt's is the caller's
            # to change), so any process checks answers against it.
            record["response_schema"] = copy.deepcopy(item.response_schema)
        if item.branch is not None:
            record["branch"] = branch_to_json(item.branch)
    for interrupt_id, answer in book.answers.items():
        if interrupt_id not in records:
            records[interrupt_id] = {
                "answered": True,
                "answer": encode(answer, f"interrupts[{interrupt_id!r}].answer"),
            }
    extra: dict[str, Any] = {}
    pending_writes: dict[str, list[Any]] = {}
    if book.branches_done:
        pending_writes = {
            key: [encode_branch_writes(writes, serializer, f"pending_writes[{key!r}]")]
            for key, writes in book.branches_done.items()
        }
    if book.children:
        extra["children"] = {
            key: encode_child(child, serializer) for key, child in book.children.items()
        }
    memo = {
        task: {key: encode(value, f"memo[{task!r}].{key}") for key, value in steps.items()}
        for task, steps in book.memo.items()
        if steps
    }
    if memo:
        extra["memo"] = memo
    return records, extra, pending_writes


def decode_interrupt_records(
    records: Mapping[str, Any], serializer: StateSerializer, where: str
) -> tuple[dict[str, Interrupt], dict[str, Any]]:
    """(pending questions, recorded answers) of interrupt records :func:`encode_book` wrote."""
    pending: dict[str, Interrupt] = {}
    answers: dict[str, Any] = {}
    for interrupt_id, record in records.items():
        at = f"{where} interrupts[{interrupt_id!r}]"
        if record.get("answered"):
            answers[interrupt_id] = serializer.decode(record.get("answer"), f"{at}.answer")
        else:
            schema = record.get("response_schema")
            if schema is not None and type(schema) is not dict:
                raise StateDecodeError(f"{at}.response_schema", "expected a JSON schema object")
            try:
                branch = branch_from_json(record.get("branch"))
            except ValueError as exc:
                raise StateDecodeError(f"{at}.branch", str(exc)) from None
            pending[interrupt_id] = Interrupt(
                id=interrupt_id,
                node=str(record.get("node", "")),
                prompt=str(record.get("prompt", "")),
                payload=serializer.decode(record.get("payload"), f"{at}.payload"),
                index=int(record.get("index", 0)),
                response_schema=copy.deepcopy(schema),
                branch=branch,
            )
    return pending, answers


def decode_memo(
    memo: Mapping[str, Any], serializer: StateSerializer, where: str
) -> dict[str, dict[str, Any]]:
    """Memoized ``context.once`` results by task, as :func:`encode_book` wrote them."""
    return {
        task: {
            name: serializer.decode(value, f"{where} memo[{task!r}].{name}")
            for name, value in steps.items()
        }
        for task, steps in memo.items()
    }


def decode_children(
    children: Mapping[str, Any], serializer: StateSerializer
) -> dict[str, dict[str, Any]]:
    """Paused subgraph runs by parent task, in the form ``continue_child`` takes."""
    return {
        key: {
            "state": GraphState.from_dict(child["state"], serializer=serializer),
            "steps": int(child["steps"]),
            "visits": dict(child["visits"]),
            "next": list(child["next"]),
            "written": set(child["written"]) if "written" in child else None,
        }
        for key, child in children.items()
    }


def decode_pending_writes(
    pending_writes: Mapping[str, list[Any]], serializer: StateSerializer, where: str
) -> dict[str, Any]:
    """Finished branches' writes by ``"<step>:<branch task id>"``."""
    return {
        key: decode_branch_writes(records[-1], serializer, f"{where} pending_writes[{key!r}]")
        for key, records in pending_writes.items()
        if records
    }
