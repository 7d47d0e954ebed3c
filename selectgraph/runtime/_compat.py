"""A run continued under a graph that changed since its checkpoint: checked, renamed, upgraded.

Every checkpoint names the graph it was written under by its shape's hash
(``metadata["graph"]``, written by the run's ``Durable``); the first one a run
writes under a graph also holds the shape itself (``metadata["graph_shape"]``),
and the state's version is stored when it is not 1 (``metadata["state_version"]``).

When a run is continued, resumed or forked under a graph with another hash,
:func:`adapt` compares what the run needs with the graph as it is now: the
node it continues at or routes from (and the edges it may route over), the
generator nodes whose questions are pending or answered, the nodes holding
``context.once`` results, paused subgraph runs and finished branches. Node
names may first be mapped with ``migrate={"old": "new"}``. Then
:func:`upgrade_state` brings the stored state to the graph's state version
through its migrations and checks it against the schema. Anything the run
needs that changed is a :class:`~selectgraph.GraphChanged` naming it; a change
elsewhere (a node added, an edge added, an optional field added) does not stop
the run. A checkpoint written under the same graph is not checked at all.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from pydantic import TypeAdapter, ValidationError

from selectgraph.core._errors import GraphChanged, StateMigrationError
from selectgraph.core._state import GraphState
from selectgraph.persistence._checkpoint import Checkpoint
from selectgraph.persistence._protocol import CheckpointStore
from selectgraph.runtime._shape import GraphShape, describe_type, is_generator
from selectgraph.state._schema import StateSchema

if TYPE_CHECKING:
    from selectgraph.runtime._program import GraphProgram

__all__ = [
    "AdaptedCheckpoint",
    "Change",
    "adapt",
    "changed_error",
    "describe_changes",
    "find_shape",
    "node_changes",
    "rename_answers",
    "upgrade_state",
]

_BRANCH: Final = re.compile(r".+:\d+")
"""A branch's part of a task id: ``"<source>:<index>"``."""
_VISIT: Final = re.compile(r"\d+:.+")
"""A node visit's part of a task id: ``"<step>:<node>"``."""
_PAGE: Final = 64
"""Checkpoints read at a time when looking back for the shape a run was saved under."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AdaptedCheckpoint(Checkpoint):
    """A checkpoint checked against the graph that continues it, its node names migrated.

    Only in memory: what continues from it writes checkpoints of its own.
    """

    graph_was: str | None = None
    """The hash of the graph it was saved under (None: saved before graphs were named)."""
    old_shape: Mapping[str, Any] | None = None
    """The shape record of that graph, when the run's history still has it."""
    renames: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """The node names ``migrate=`` mapped, old -> new."""


@dataclasses.dataclass(frozen=True, slots=True)
class Change:
    """One thing a run needs that the graph no longer has (or no longer has as it was)."""

    kind: str
    """``"node"``, ``"edge"`` or ``"field"``."""
    name: Any
    """The node (its path inside subgraphs), the ``(source, target)`` edge, or the field."""
    text: str
    """What changed, in words (for a node: why the run needs it)."""
    problem: str = ""
    """For a node: what it is now (``"gone (graph 'g' does not have it)"``...)."""


# ------------------------------------------------------------ the checkpoint marks
def marks_for(shape: GraphShape, graph_hash: str | None) -> dict[str, Any]:
    """The metadata every checkpoint of a run gets: the graph's hash and the state version."""
    marks: dict[str, Any] = {} if graph_hash is None else {"graph": graph_hash}
    if shape.state_version != 1:
        marks["state_version"] = shape.state_version
    return marks


# -------------------------------------------------------------------- checking
async def adapt(
    graph: GraphProgram,
    checkpoint: Checkpoint,
    store: CheckpointStore,
    migrate: Mapping[str, str] | None,
    blocking: bool,
) -> Checkpoint:
    """``checkpoint`` made ready to continue under ``graph``, or GraphChanged saying why not.

    A checkpoint saved under this graph comes back as it is. Otherwise its node
    names are mapped through ``migrate`` and what the run needs is checked: the
    result is an :class:`AdaptedCheckpoint` (the state is checked when it is loaded).

    Raises:
        GraphChanged: a node, kind of node or edge the run needs changed.
    """
    shape = graph.shape
    stored = checkpoint.metadata.get("graph")
    if stored == shape.hash:
        return checkpoint
    was = stored if isinstance(stored, str) else None
    old = None if was is None else await find_shape(store, checkpoint, was, blocking)
    migrate = dict(migrate or {})
    renames = {old_name: new for old_name, new in migrate.items() if old_name != new}
    renamed = _renamed(checkpoint, renames) if renames else checkpoint
    changes = node_changes(graph, renamed)
    changes += _edge_changes(graph, checkpoint, renamed, old, migrate)
    if changes:
        raise changed_error(graph, checkpoint, changes, old)
    fields = {f.name: getattr(renamed, f.name) for f in dataclasses.fields(Checkpoint)}
    return AdaptedCheckpoint(**fields, graph_was=was, old_shape=old, renames=renames)


async def find_shape(
    store: CheckpointStore, checkpoint: Checkpoint, graph_hash: str, blocking: bool
) -> Mapping[str, Any] | None:
    """The shape record ``graph_hash`` names, from ``checkpoint`` or the run's history before it."""
    found = _shape_in(checkpoint, graph_hash)
    before = checkpoint.checkpoint_id
    while found is None:
        if blocking:
            page = store.list(checkpoint.run_id, limit=_PAGE, before=before)
        else:
            page = await store.alist(checkpoint.run_id, limit=_PAGE, before=before)
        for earlier in reversed(page):
            found = _shape_in(earlier, graph_hash)
            if found is not None:
                break
        if len(page) < _PAGE:
            break
        before = page[0].checkpoint_id
    return found


def _shape_in(checkpoint: Checkpoint, graph_hash: str) -> Mapping[str, Any] | None:
    metadata = checkpoint.metadata
    record = metadata.get("graph_shape")
    if metadata.get("graph") == graph_hash and isinstance(record, Mapping):
        return record
    return None


def node_changes(graph: GraphProgram, checkpoint: Checkpoint) -> list[Change]:
    """The nodes ``checkpoint`` needs that ``graph`` lacks (or has as another kind).

    The node the run continues at or routes from (and a ``goto`` target), the
    nodes that asked its pending or answered questions (which must still be
    generator nodes), those holding ``context.once`` results, the subgraph nodes
    of paused subgraph runs (and where those continue), and the sources of
    finished branches.
    """
    changes: list[Change] = []
    for entry in checkpoint.next[:1]:
        if isinstance(entry, str):
            _check_node(graph, entry, changes, "the run continues at it")
            continue
        after = entry.get("after") if type(entry) is dict else None
        if isinstance(after, str):
            _check_node(graph, after, changes, "the run routes from it next")
        goto = entry.get("goto") if type(entry) is dict else None
        if isinstance(goto, str) and goto != "__end__":
            _check_node(graph, goto, changes, f"node {after!r} sent the run to it with goto()")
    for interrupt_id, record in checkpoint.interrupts.items():
        parts = interrupt_id.split("|")
        if len(parts) >= 3:
            state = "answered" if type(record) is dict and record.get("answered") else "pending"
            why = f"it asked question {interrupt_id!r} ({state})"
            _check_task(graph, "|".join(parts[1:-1]), changes, why, generator=True)
    metadata = checkpoint.metadata
    memo, children = metadata.get("memo"), metadata.get("children")
    for task in memo if type(memo) is dict else ():
        _check_task(graph, task, changes, "it holds context.once results")
    for key, child in children.items() if type(children) is dict else ():
        after = child.get("next") if type(child) is dict else None
        _check_task(graph, key, changes, "it holds a paused subgraph run", child_next=after or [])
    for key in checkpoint.pending_writes:
        source = key.partition(":")[2].split("/")[0].rpartition(":")[0]
        if source:
            _check_node(graph, source, changes, "it started branches that finished")
    unique: dict[tuple[str, str, str], Change] = {}
    for change in changes:
        unique.setdefault((str(change.name), change.problem, change.text), change)
    return list(unique.values())


def _check_node(graph: Any, node: str, changes: list[Change], why: str, label: str = "") -> Any:
    """``graph``'s spec of ``node``; when it has none, a change saying why the run needs it."""
    spec = graph.nodes.get(node)
    if spec is None:
        problem = f"gone (graph {graph.name!r} does not have it)"
        changes.append(Change("node", label or node, why, problem))
    return spec


def _split_task(task: str) -> tuple[list[str], str]:
    """(the subgraph nodes a task id runs inside, the node it is a visit of)."""
    parts = task.split("/")
    last = parts[-1]
    node = last.partition(":")[2] if _VISIT.fullmatch(last) else last
    return [part for part in parts[:-1] if not _BRANCH.fullmatch(part)], node


def _check_task(
    graph: GraphProgram,
    task: str,
    changes: list[Change],
    why: str,
    *,
    generator: bool = False,
    child_next: Sequence[Any] | None = None,
) -> None:
    """Add to ``changes`` what the node of ``task`` (inside its subgraphs) lost."""
    namespace, node = _split_task(task)
    current: Any = graph
    path: list[str] = []
    for part in namespace:
        label = "/".join((*path, part))
        spec = _check_node(current, part, changes, f"the run paused inside it ({why})", label)
        child = getattr(spec.adapter, "child", None) if spec is not None else None
        if spec is not None and child is None:
            problem = f"no longer a graph node of graph {current.name!r}"
            changes.append(Change("node", label, f"the run paused inside it ({why})", problem))
        if child is None:
            return
        path.append(part)
        current = child
    label = "/".join((*path, node))
    spec = _check_node(current, node, changes, why, label)
    if spec is None:
        return
    if generator and not is_generator(spec):
        problem = f"no longer a generator node of graph {current.name!r}"
        changes.append(Change("node", label, why, problem))
    if child_next is None:
        return
    child = getattr(spec.adapter, "child", None)
    if child is None:
        problem = f"no longer a graph node of graph {current.name!r}"
        changes.append(Change("node", label, why, problem))
        return
    for entry in child_next[:1]:
        inner = entry.get("after") if type(entry) is dict else entry
        if isinstance(inner, str):
            why = f"the subgraph run paused in node {label!r} continues at it"
            _check_node(child, inner, changes, why, f"{label}/{inner}")


def _edge_changes(
    graph: GraphProgram,
    original: Checkpoint,
    renamed: Checkpoint,
    old: Mapping[str, Any] | None,
    migrate: Mapping[str, str],
) -> list[Change]:
    """The edges the run may route over next that the graph lost (routing from a node)."""
    if old is None or not original.next or not renamed.next:
        return []
    entry, now = original.next[0], renamed.next[0]
    if type(entry) is not dict or type(now) is not dict or entry.get("goto") is not None:
        return []
    source, target_node = entry.get("after"), now.get("after")
    old_nodes = old.get("nodes")
    if not isinstance(source, str) or source in migrate or not isinstance(old_nodes, Mapping):
        return []  # a node named in migrate= is taken as it is now
    was = old_nodes.get(source)
    leads = graph.shape.nodes.get(str(target_node))
    if not isinstance(was, Mapping) or not isinstance(leads, Mapping):
        return []
    renames = {o: n for o, n in migrate.items() if o != n}
    targets = [str(t) for t in leads.get("to", ())]
    changes = []
    for target in was.get("to", ()):
        target = renames.get(target, target)
        if target not in targets:
            shown = ", ".join(_end(t) for t in targets) or "nowhere"
            changes.append(
                Change(
                    "edge",
                    (str(target_node), target),
                    f"the run routes from node {target_node!r} next, and its edge to "
                    f"{_end(target)} is gone (it now leads to {shown})",
                )
            )
    return changes


def _end(target: str) -> str:
    return "END" if target == "__end__" else repr(target)


def changed_error(
    graph: GraphProgram,
    checkpoint: Checkpoint,
    changes: Sequence[Change],
    old: Mapping[str, Any] | None,
) -> GraphChanged:
    """The GraphChanged for ``changes``: what changed, the graph's nodes now, what to do."""
    described = describe_changes(changes)
    lines = [
        f"run {checkpoint.run_id!r} cannot go on under graph {graph.name!r} as it is now: the "
        f"graph changed since checkpoint {checkpoint.checkpoint_id!r} was saved, in what the "
        "run needs:",
        *(f"  - {line}" for line in described),
    ]
    now = list(graph.nodes)
    old_nodes = old.get("nodes") if old is not None else None
    added: list[str] = []
    if isinstance(old_nodes, Mapping):
        added = [node for node in now if node not in old_nodes]
    if any(change.kind != "field" for change in changes):
        line = f"Nodes now: {', '.join(now)}"
        if isinstance(old_nodes, Mapping):
            gone = [node for node in old_nodes if node not in graph.nodes]
            line += "".join(
                f"; {what} since: {', '.join(names)}"
                for what, names in (("added", added), ("gone", gone))
                if names
            )
        lines.append(line + ".")
    hints = _hints(changes, added, graph.settings.state_version)
    lines.append("To go on: " + "; ".join(hints) + ".")
    return GraphChanged(
        "\n".join(lines),
        run_id=checkpoint.run_id,
        changes=described,
        nodes=list(dict.fromkeys(c.name for c in changes if c.kind == "node")),
        edges=list(dict.fromkeys(c.name for c in changes if c.kind == "edge")),
        fields=list(dict.fromkeys(c.name for c in changes if c.kind == "field")),
    )


def describe_changes(changes: Sequence[Change]) -> list[str]:
    """One line per change; a node's reasons gathered on one line."""
    lines: list[str] = []
    reasons: dict[tuple[str, str], list[str]] = {}
    for change in changes:
        if change.kind != "node":
            lines.append(change.text)
            continue
        key = (str(change.name), change.problem)
        if key not in reasons:
            reasons[key] = []
            lines.append("")  # filled in below, in order
        reasons[key].append(change.text)
    filled = iter(
        f"node {name!r} is {problem}: {'; '.join(why)}" for (name, problem), why in reasons.items()
    )
    return [line or next(filled) for line in lines]


def _hints(changes: Sequence[Change], added: Sequence[str], version: int) -> list[str]:
    hints: list[str] = []
    missing = list(
        dict.fromkeys(
            c.name
            for c in changes
            if c.kind == "node" and "/" not in c.name and "gone" in c.problem
        )
    )
    if missing:
        guess = added[0] if len(added) == 1 and len(missing) == 1 else "<its new name>"
        example = ", ".join(f"{name!r}: {guess!r}" for name in missing)
        hints.append(
            f"if a node was renamed, map its old name to the new one with migrate={{{example}}} "
            "(run(None, run_id=..., migrate=...), resume(..., migrate=...))"
        )
    sources = dict.fromkeys(c.name[0] for c in changes if c.kind == "edge")
    if sources:
        example = ", ".join(f"{name!r}: {name!r}" for name in sources)
        hints.append(f"to route as the graph now does, accept the node with migrate={{{example}}}")
    if any(c.kind == "field" for c in changes):
        hints.append(
            "to convert stored states, raise the graph's state version and give the migration "
            f"(AgentGraph(..., state_version={version + 1}, state_migrations={{{version}: "
            "upgrade}), upgrade(data) -> data), or give a new field a default"
        )
    hints.append("or fork the run from an earlier checkpoint (checkpoint_id=...)")
    return hints


# --------------------------------------------------------------------- renaming
def _renamed(checkpoint: Checkpoint, renames: Mapping[str, str]) -> Checkpoint:
    """``checkpoint`` with every node name ``renames`` maps replaced, wherever it names one."""
    metadata = dict(checkpoint.metadata)
    for key in ("memo", "children"):
        value = metadata.get(key)
        if type(value) is dict:
            metadata[key] = {_rename_task(task, renames): item for task, item in value.items()}
    interrupts: dict[str, dict[str, Any]] = {}
    for interrupt_id, record in checkpoint.interrupts.items():
        new_id = _rename_id(interrupt_id, renames)
        asked = "|".join(interrupt_id.split("|")[1:-1])
        if type(record) is dict and "node" in record and asked and not _split_task(asked)[0]:
            record = {**record, "node": renames.get(record["node"], record["node"])}
        interrupts[new_id] = record
    pending_writes = {}
    for key, writes in checkpoint.pending_writes.items():
        step, _, branch = key.partition(":")
        pending_writes[f"{step}:{_rename_task(branch, renames, visit=False)}"] = writes
    return dataclasses.replace(
        checkpoint,
        next=[_rename_next(entry, renames) for entry in checkpoint.next],
        interrupts=interrupts,
        pending_writes=pending_writes,
        metadata=metadata,
    )


def _rename_next(entry: Any, renames: Mapping[str, str]) -> Any:
    if isinstance(entry, str):
        return renames.get(entry, entry)
    if type(entry) is not dict:
        return entry
    renamed = dict(entry)
    for key in ("after", "goto"):
        if isinstance(renamed.get(key), str):
            renamed[key] = renames.get(renamed[key], renamed[key])
    return renamed


def _rename_task(task: str, renames: Mapping[str, str], *, visit: bool = True) -> str:
    """A task id with the graph's own node names mapped (a subgraph's inner names are kept)."""
    parts = task.split("/")
    out: list[str] = []
    for index, part in enumerate(parts):
        if visit and index == len(parts) - 1:
            step, _, node = part.partition(":")
            out.append(f"{step}:{renames.get(node, node)}" if _VISIT.fullmatch(part) else part)
        elif _BRANCH.fullmatch(part):
            source, _, number = part.rpartition(":")
            out.append(f"{renames.get(source, source)}:{number}")
        else:  # a subgraph node: what follows is inside its graph
            out.append(renames.get(part, part))
            out.extend(parts[index + 1 :])
            break
    return "/".join(out)


def _rename_id(interrupt_id: str, renames: Mapping[str, str]) -> str:
    parts = interrupt_id.split("|")
    if len(parts) < 3:
        return interrupt_id
    task = _rename_task("|".join(parts[1:-1]), renames)
    return f"{parts[0]}|{task}|{parts[-1]}"


def rename_answers(checkpoint: Checkpoint, answers: Mapping[str, Any]) -> dict[str, Any]:
    """``answers`` keyed by the interrupt ids of ``checkpoint`` (its node names migrated).

    Answers are given under the ids the run paused with; an adapted checkpoint's
    pending questions carry the new names.
    """
    if not isinstance(checkpoint, AdaptedCheckpoint) or not checkpoint.renames:
        return dict(answers)
    renames = checkpoint.renames
    return {_rename_id(interrupt_id, renames): answer for interrupt_id, answer in answers.items()}


# ------------------------------------------------------------------------ state
def upgrade_state(graph: GraphProgram, checkpoint: Checkpoint, state: GraphState) -> bool:
    """Bring ``state`` (stored with ``checkpoint``) to the graph's state version and check it.

    Under the graph it was saved under (same hash), nothing is done. Otherwise the
    migrations run from the stored version up, fields the schema gives a default
    and the state lacks get it, and the state is checked against the schema: the
    fields whose type changed (every field, when the saved shape is unknown).

    Returns:
        Whether ``state.data`` changed (the next checkpoint must then be a snapshot).

    Raises:
        StateMigrationError: the stored version is newer than the graph's, or a
            migration is missing, raised, or returned something other than a mapping.
        GraphChanged: a stored value does not fit the schema (naming the field).
    """
    shape = graph.shape
    metadata = checkpoint.metadata
    adapted = isinstance(checkpoint, AdaptedCheckpoint)
    stored = (
        checkpoint.graph_was if isinstance(checkpoint, AdaptedCheckpoint) else metadata.get("graph")
    )
    version = metadata.get("state_version", 1)
    version = version if type(version) is int else 1
    current = graph.settings.state_version
    migrated = version != current
    if migrated:
        state.data = _migrated(graph, checkpoint.run_id, dict(state.data), version, current)
    if stored == shape.hash and not migrated:
        return False
    old = checkpoint.old_shape if isinstance(checkpoint, AdaptedCheckpoint) else None
    old_fields = old.get("fields") if old is not None else None
    only: set[str] | None = None
    if adapted and isinstance(old_fields, Mapping) and not migrated:
        only = {name for name, kind in shape.fields.items() if old_fields.get(name) != kind}
    filled = _fill_defaults(graph.schema, state.data)
    changes = _field_changes(graph, state.data, only, old_fields, version, current)
    if changes:
        raise changed_error(graph, checkpoint, changes, old)
    return migrated or filled


def _migrated(
    graph: GraphProgram, run_id: str, data: dict[str, Any], version: int, current: int
) -> dict[str, Any]:
    """``data`` stored at ``version``, through the graph's migrations up to ``current``."""
    where = f"run {run_id!r} was saved at state version {version}"
    if version > current:
        raise StateMigrationError(
            f"{where}, newer than graph {graph.name!r}'s state version {current}: continue it "
            "with the graph that saved it (or a later one)",
            run_id=run_id,
            from_version=version,
            to_version=current,
        )
    migrations = graph.settings.state_migrations
    for step in range(version, current):
        upgrade = migrations.get(step)
        if upgrade is None:
            raise StateMigrationError(
                f"{where}; graph {graph.name!r} is at version {current} and has no migration "
                f"from version {step} to {step + 1}: add state_migrations={{{step}: fn}}, "
                f"fn(data) -> data",
                run_id=run_id,
                from_version=step,
                to_version=step + 1,
            )
        try:
            result = upgrade(dict(data))
        except Exception as error:
            raise StateMigrationError(
                f"{where}; the state migration from version {step} to {step + 1} raised "
                f"{type(error).__name__}: {error}",
                run_id=run_id,
                from_version=step,
                to_version=step + 1,
            ) from error
        if not isinstance(result, Mapping):
            raise StateMigrationError(
                f"{where}; the state migration from version {step} to {step + 1} returned "
                f"{type(result).__name__}, not the state's data (a dict)",
                run_id=run_id,
                from_version=step,
                to_version=step + 1,
            )
        data = dict(result)
    return data


def _fill_defaults(schema: StateSchema, data: Any) -> bool:
    """Give every field the schema has a default for, and ``data`` lacks, its default."""
    filled = False
    for name in sorted(schema.fields_or_empty) if schema.model is not None else ():
        if name not in data:
            has, value = schema.default_for(name)
            if has:
                data[name] = value
                filled = True
    return filled


def _field_changes(
    graph: GraphProgram,
    data: Mapping[str, Any],
    only: set[str] | None,
    old_fields: Any,
    version: int,
    current: int,
) -> list[Change]:
    """The fields whose stored values do not fit the schema (of ``only``, when given)."""
    schema = graph.schema
    shape = graph.shape
    problems: dict[str, str] = {}
    if schema.model is not None:
        declared = {key: value for key, value in data.items() if key in schema.fields_or_empty}
        try:
            schema.model.model_validate(declared)
        except ValidationError as error:
            for item in error.errors():
                field = str(item["loc"][0]) if item["loc"] else ""
                if field and (only is None or field in only):
                    problems.setdefault(field, item["msg"])
    elif only:
        for field in sorted(only):
            annotation = shape.field_types.get(field)
            if field in data and annotation is not None:
                try:
                    TypeAdapter(annotation).validate_python(data[field])
                except ValidationError as error:
                    problems[field] = error.errors()[0]["msg"]
                except Exception:  # a type pydantic cannot check: trust it
                    continue
    changes = []
    for field, message in problems.items():
        kind = describe_type(shape.fields.get(field))
        was = old_fields.get(field) if isinstance(old_fields, Mapping) else None
        if field not in data:
            text = f"state field {field!r} is required, and the stored state has no value for it"
        else:
            text = (
                f"state field {field!r}: the stored value {_short(data[field])} does not fit "
                f"{kind} ({message})"
            )
        if was is not None and was != shape.fields.get(field):
            text += f"; it was {describe_type(was)} when the run was saved"
        elif isinstance(old_fields, Mapping) and field not in old_fields:
            text += "; the field is new since the run was saved"
        if version != current:
            text += f" (after the state migrations from version {version} to {current})"
        changes.append(Change("field", field, text))
    return changes


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
