"""Checking the shape of what a stored checkpoint holds for the runner, once, as it is decoded.

A record that reads as JSON may still hold the wrong shapes: an interrupt whose
``index`` is a string, a ``memo`` that is a list, a ``goto`` that is a list. The
runner reads these fields without checking them again, so every store's decoder
calls :func:`check_fields` (and :func:`check_state` on a rebuilt state): whatever
it lets through is what the runner expects, and anything else is a
:class:`~selectgraph.CheckpointDecodeError` naming the path, never a ``KeyError``
or ``TypeError`` far from the record.

Only structure is checked here; the values inside (encoded states, payloads,
answers) are checked by the :class:`~selectgraph.StateSerializer` that decodes them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from selectgraph.core._errors import CheckpointDecodeError
from selectgraph.core._serialization import brief

__all__ = ["check_fields", "check_state", "check_run_state"]

Fail = Callable[[str, str], CheckpointDecodeError]
"""Makes the error for ``(path, reason)``, naming the checkpoint and where it is stored."""

_USAGE_INTS: Final = ("input_tokens", "output_tokens", "calls", "unpriced_calls")
_STATE_LISTS: Final = ("messages", "history", "errors")


def _is_int(value: Any) -> bool:
    return type(value) is int


def _is_number(value: Any) -> bool:
    return type(value) in (int, float)


def _is_str(value: Any) -> bool:
    return type(value) is str


def _is_bool(value: Any) -> bool:
    return type(value) is bool


def _is_str_or_none(value: Any) -> bool:
    return value is None or type(value) is str


def _is_dict_or_none(value: Any) -> bool:
    return value is None or type(value) is dict


def _need(ok: bool, fail: Fail, path: str, what: str, value: Any) -> None:
    if not ok:
        raise fail(path, f"expected {what}, got {brief(value)}")


def _check_str_keys(value: Any, fail: Fail, path: str, what: str = "an object") -> None:
    _need(type(value) is dict, fail, path, what, value)


def check_usage(usage: Any, fail: Fail, path: str) -> None:
    """A ``Usage.to_dict()`` record: counts are ints, the cost a number."""
    _check_str_keys(usage, fail, path, "a usage record (an object)")
    for name in _USAGE_INTS:
        if name in usage:
            _need(_is_int(usage[name]), fail, f"{path}.{name}", "an int", usage[name])
    if "cost_usd" in usage:
        _need(
            _is_number(usage["cost_usd"]), fail, f"{path}.cost_usd", "a number", usage["cost_usd"]
        )


def _check_next(entries: list[Any], fail: Fail, path: str) -> None:
    for i, entry in enumerate(entries):
        at = f"{path}[{i}]"
        if type(entry) is str:
            continue
        if type(entry) is not dict:
            continue  # the runner refuses such a next itself, with a ResumeError
        after, goto = entry.get("after"), entry.get("goto")
        _need(after is None or type(after) is str, fail, f"{at}.after", "a node name", after)
        _need(goto is None or type(goto) is str, fail, f"{at}.goto", "a node name", goto)


def _check_interrupts(records: dict[str, Any], fail: Fail) -> None:
    for interrupt_id, record in records.items():
        at = f"interrupts[{interrupt_id!r}]"
        _check_str_keys(record, fail, at)
        if record.get("answered"):
            continue
        for name, test, what in (
            ("node", _is_str, "a node name"),
            ("prompt", _is_str, "a string"),
            ("index", _is_int, "an int"),
        ):
            if name in record:
                _need(test(record[name]), fail, f"{at}.{name}", what, record[name])
        schema = record.get("response_schema")
        _need(
            schema is None or type(schema) is dict,
            fail,
            f"{at}.response_schema",
            "a JSON schema object",
            schema,
        )
        _check_branch(record.get("branch"), fail, f"{at}.branch")


def _check_branch(branch: Any, fail: Fail, path: str) -> None:
    depth = 0
    while branch is not None:
        _check_str_keys(branch, fail, path, "a branch (an object)")
        _need(
            type(branch.get("source")) is str,
            fail,
            f"{path}.source",
            "a node name",
            branch.get("source"),
        )
        _need(_is_int(branch.get("index")), fail, f"{path}.index", "an int", branch.get("index"))
        name = branch.get("name")
        _need(name is None or type(name) is str, fail, f"{path}.name", "a string", name)
        branch, path, depth = branch.get("parent"), f"{path}.parent", depth + 1
        _need(depth < 1000, fail, path, "a branch nested less deeply", "…")


def _check_children(children: Any, fail: Fail) -> None:
    _check_str_keys(children, fail, "metadata.children")
    for key, child in children.items():
        at = f"metadata.children[{key!r}]"
        _check_str_keys(child, fail, at, "a paused subgraph run (an object)")
        check_state(child.get("state"), fail, f"{at}.state")
        steps = child.get("steps")
        _need(_is_int(steps) and steps >= 0, fail, f"{at}.steps", "an int >= 0", steps)
        visits = child.get("visits")
        _check_str_keys(visits, fail, f"{at}.visits", "visit counts (an object)")
        for node, count in visits.items():
            _need(_is_int(count), fail, f"{at}.visits[{node!r}]", "an int", count)
        next_ = child.get("next")
        _need(type(next_) is list, fail, f"{at}.next", "a list", next_)
        _check_next(next_, fail, f"{at}.next")
        if "written" in child:
            written = child["written"]
            _need(
                type(written) is list and all(type(k) is str for k in written),
                fail,
                f"{at}.written",
                "a list of keys",
                written,
            )


def _check_memo(memo: Any, fail: Fail) -> None:
    _check_str_keys(memo, fail, "metadata.memo")
    for task, steps in memo.items():
        _check_str_keys(steps, fail, f"metadata.memo[{task!r}]", "an object of step results")


def _check_metadata(metadata: dict[str, Any], fail: Fail) -> None:
    if "usage" in metadata and metadata["usage"] is not None:
        check_usage(metadata["usage"], fail, "metadata.usage")
    if "history_start" in metadata:
        start = metadata["history_start"]
        _need(_is_int(start) and start >= 0, fail, "metadata.history_start", "an int >= 0", start)
    if metadata.get("memo"):
        _check_memo(metadata["memo"], fail)
    if metadata.get("children"):
        _check_children(metadata["children"], fail)
    for name, test, what in (
        ("degraded", _is_bool, "true or false"),
        ("thread_id", _is_str_or_none, "a thread id"),
        ("trigger", _is_str, "a string"),
        ("graph", _is_str_or_none, "a graph hash"),
        ("state_version", _is_int, "an int"),
        ("fan_out", _is_dict_or_none, "an object"),
    ):
        if name in metadata:
            _need(test(metadata[name]), fail, f"metadata.{name}", what, metadata[name])


def _check_output(output: Any, fail: Fail, at: str) -> None:
    _check_str_keys(output, fail, at, "a node's output (an object)")
    if "update" in output:
        _check_str_keys(output["update"], fail, f"{at}.update", "what the node wrote (an object)")
    goto = output.get("goto")
    _need(goto is None or type(goto) is str, fail, f"{at}.goto", "a node name", goto)
    if output.get("usage") is not None:
        check_usage(output["usage"], fail, f"{at}.usage")
    if "writes" in output:
        writes = output["writes"]
        _check_str_keys(writes, fail, f"{at}.writes")
        for name in ("deletions", "messages", "history", "metadata_deletions"):
            if name in writes:
                _need(
                    type(writes[name]) is list, fail, f"{at}.writes.{name}", "a list", writes[name]
                )
        for name in ("deletions", "metadata_deletions"):
            for i, item in enumerate(writes.get(name, ())):
                _need(type(item) is str, fail, f"{at}.writes.{name}[{i}]", "a key", item)
        if "assignments" in writes:
            _check_str_keys(writes["assignments"], fail, f"{at}.writes.assignments")
        for i, message in enumerate(writes.get("messages", ())):
            _check_str_keys(message, fail, f"{at}.writes.messages[{i}]", "a message (an object)")


def _check_pending_writes(pending: dict[str, Any], fail: Fail) -> None:
    for key, records in pending.items():
        for j, record in enumerate(records):
            at = f"pending_writes[{key!r}][{j}]"
            if type(record) is not dict or "outputs" not in record:
                continue  # not a branch's writes: a caller's own, handed back as stored
            outputs = record["outputs"]
            _need(type(outputs) is list, fail, f"{at}.outputs", "a list", outputs)
            for i, item in enumerate(outputs):
                _need(
                    type(item) is list and len(item) == 2 and type(item[0]) is str,
                    fail,
                    f"{at}.outputs[{i}]",
                    "[node, output]",
                    item,
                )
                _check_output(item[1], fail, f"{at}.outputs[{i}][1]")
            for name in ("history", "errors"):
                value = record.get(name, [])
                _need(type(value) is list, fail, f"{at}.{name}", "a list", value)
            _need(
                _is_int(record.get("index", 0)), fail, f"{at}.index", "an int", record.get("index")
            )
            label = record.get("label", "")
            _need(type(label) is str, fail, f"{at}.label", "a string", label)


def check_fields(body: Mapping[str, Any], fail: Fail) -> None:
    """Refuse a decoded body whose runner fields do not have the shapes the runner reads.

    The fields are ``next``, ``interrupts``, ``metadata`` and ``pending_writes``.

    Raises:
        CheckpointDecodeError: through ``fail``, naming the path of the first bad field.
    """
    _check_next(body["next"], fail, "next")
    _check_interrupts(body["interrupts"], fail)
    _check_metadata(body["metadata"], fail)
    _check_pending_writes(body["pending_writes"], fail)


def check_state(state: Any, fail: Fail, path: str = "values") -> None:
    """Refuse a whole encoded state (a snapshot, or one rebuilt from deltas) of the wrong shape.

    ``data`` and ``metadata`` must be objects and ``messages``, ``history`` and
    ``errors`` lists (each present in what ``GraphState.to_dict`` writes).
    """
    _check_str_keys(state, fail, path, "an encoded state (an object)")
    for name in ("data", "metadata"):
        _need(type(state.get(name)) is dict, fail, f"{path}.{name}", "an object", state.get(name))
    for name in _STATE_LISTS:
        if name in state:
            _need(type(state[name]) is list, fail, f"{path}.{name}", "a list", state[name])


def check_run_state(state: Any, checkpoint_id: str, run_id: str) -> None:
    """:func:`check_state` for the state a run is rebuilt from, its errors naming the run.

    Raises:
        CheckpointDecodeError: the state is not shaped like ``GraphState.to_dict()``'s.
    """

    def fail(path: str, reason: str) -> CheckpointDecodeError:
        return CheckpointDecodeError(checkpoint_id, path, reason, run_id=run_id)

    check_state(state, fail)
