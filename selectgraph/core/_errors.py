"""Errors: every exception selectgraph raises on purpose.

The tree::

    SelectGraphError
    ├── GraphBuildError              the graph definition is invalid (compile time)
    │   └── ReducerConfigurationError  a reducer factory got bad parameters
    ├── GraphRunError                a run stopped; carries the state at failure
    │   ├── NodeError                a node raised          (category node_exception)
    │   │   ├── NodeContractError    a node broke its declared reads/writes or return type
    │   │   └── VisitLimitExceeded   a node hit its max_visits
    │   ├── EdgeError                an edge function raised (category edge_exception)
    │   ├── ReducerError             a reducer raised while merging (category reducer_error)
    │   ├── RoutingError             no valid next node       (category routing_error)
    │   ├── StateValidationError     state failed its schema  (category state_validation_error)
    │   ├── MaxStepsExceeded         the step limit was hit with on_max_steps=THROW
    │   └── LoopDetected             an identical state came back to the same node
    ├── StateSerializationError      a state value cannot be written as JSON
    │   └── StateDecodeError         a stored state is malformed
    │       ├── CheckpointDecodeError  a stored checkpoint is malformed
    │       └── TypeNotAllowedError  it names a class the serializer does not allow
    ├── CheckpointNotFound           no checkpoint has this id
    ├── CheckpointConflict           another writer moved the run's head first
    │   └── ThreadTakenOver          a newer run took the run's thread over (double-texting)
    ├── ThreadBusy                   a run is running or paused on the thread (double-texting)
    ├── ThreadIdError                a thread id a store cannot hold
    ├── ResumeError                  a run cannot be continued as asked (unknown interrupt...)
    │   ├── AnswerInvalid            an answer does not fit its question's response schema
    │   └── GraphChanged             the graph changed since the checkpoint, in what the run needs
    │       └── StateMigrationError  a stored state's version has no (working) migration
    ├── GraphSpecError               a declarative GraphSpec is malformed
    ├── GuardrailBlocked             a guardrail refused a run's input or output
    ├── ToolDefinitionError          a function cannot be described as a tool (agents._tools)
    └── ProviderError                an LLM provider call failed
        ├── ProviderRetryableError   rate limits, 5xx, timeouts, dropped connections
        └── ProviderRequestError     bad request, authentication, unknown model
            └── ScriptExhausted      a scripted test provider ran out of replies (providers._local)

Every run-time error keeps what is needed to recover: ``error.state`` is the
state at the point of failure (before the failing merge), and ``error.result``
is a partial :class:`~selectgraph.GraphResult` when the runner got far enough
to build one. Those errors (``GraphRunError`` and its kinds, ``GuardrailBlocked``)
are defined in ``core/_run_errors.py``, the rest here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "AnswerInvalid",
    "Diagnostic",
    "GraphBuildError",
    "GraphChanged",
    "GraphSpecError",
    "ProviderError",
    "ProviderRequestError",
    "ProviderRetryableError",
    "ReducerConfigurationError",
    "ResumeError",
    "SelectGraphError",
    "StateDecodeError",
    "StateMigrationError",
    "StateSerializationError",
    "StoreError",
    "StoreUnavailable",
    "ThreadBusy",
    "ThreadIdError",
    "ThreadTakenOver",
    "TypeNotAllowedError",
]

Severity = Literal["error", "warning"]
"""How serious a compile diagnostic is.

- ``"error"``: the graph cannot be compiled.
- ``"warning"``: the graph compiles, but something is probably not what was meant.
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Diagnostic:
    """One problem found while validating a graph definition."""

    category: str
    """Stable identifier, e.g. ``"unreachable_node"`` or ``"dangling_edge"``."""
    message: str
    """What is wrong, naming the node, edge or field, and how to fix it."""
    severity: Severity = "error"
    """Whether the problem stops compilation."""
    node: str | None = None
    """The node the problem is about, when there is one."""

    def __str__(self) -> str:
        return f"[{self.category}] {self.message}"


class SelectGraphError(Exception):
    """Base class of every error selectgraph raises on purpose."""


class GraphBuildError(SelectGraphError):
    """The graph definition is invalid; every problem found is listed."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = diagnostics
        """Every error-severity problem compile found, in a stable order."""
        lines = "\n".join(f"  - {d}" for d in diagnostics)
        noun = "problem" if len(diagnostics) == 1 else "problems"
        super().__init__(f"graph is invalid ({len(diagnostics)} {noun}):\n{lines}")

    @property
    def categories(self) -> list[str]:
        """The category of each diagnostic, in order."""
        return [d.category for d in self.diagnostics]


class ReducerConfigurationError(GraphBuildError):
    """A reducer factory was given invalid parameters (e.g. ``bounded_append(0)``)."""

    def __init__(self, message: str) -> None:
        super().__init__([Diagnostic(category="reducer_configuration_invalid", message=message)])


class StateSerializationError(SelectGraphError):
    """A value in the state cannot be written as JSON; ``path`` says where it is."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"cannot serialize state at {path}: {reason}")
        self.path = path
        """Where the value sits, e.g. ``data.results[2].when``."""


class GraphSpecError(SelectGraphError):
    """A declarative GraphSpec is malformed; the message names the offending entry."""


class ProviderError(SelectGraphError):
    """An LLM provider call failed. Messages never contain API keys."""

    retryable: bool = False
    """Whether trying the same call again may succeed."""

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        status_code: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.provider = provider
        """The provider's name, e.g. ``"openai"``."""
        self.status_code = status_code
        """The HTTP status, when the failure came from one."""
        self.retry_after = retry_after
        """Seconds the server asked us to wait, when it said."""


class ProviderRetryableError(ProviderError):
    """A transient failure: rate limited, server error, timeout or dropped connection."""

    retryable = True


class ProviderRequestError(ProviderError):
    """A failure that retrying cannot fix: bad request, bad key, unknown model."""


class StateDecodeError(StateSerializationError):
    """A stored state cannot be loaded (malformed input); ``path`` says where."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(path, reason)
        self.args = (f"cannot load state at {path}: {reason}",)


class TypeNotAllowedError(StateDecodeError):
    """A stored state names a class its serializer does not allow (see docs/security.md)."""

    def __init__(self, path: str, reason: str, *, type_name: str) -> None:
        super().__init__(path, reason)
        self.type_name = type_name
        """The class as the stored state names it, ``module:qualname``."""


class CheckpointNotFound(SelectGraphError, ValueError):
    """No checkpoint has this id (a ``ValueError`` too, as seed 004's ``load`` documents)."""

    def __init__(self, checkpoint_id: str, *, where: str = "") -> None:
        place = f" in {where}" if where else ""
        super().__init__(f"no checkpoint {checkpoint_id!r}{place}")
        self.checkpoint_id = checkpoint_id
        """The id that was asked for."""


class CheckpointConflict(SelectGraphError):
    """A checkpoint write was based on a stale version of its run; nothing was written.

    Two writers that resume the same run race on its head version: exactly one
    wins, the other gets this error and must reload the run before trying again.
    """

    def __init__(self, run_id: str, *, expected_version: int, actual_version: int) -> None:
        super().__init__(
            f"run {run_id!r} is at version {actual_version}, not {expected_version}: another "
            "writer saved first; reload the run's head before writing again"
        )
        self.run_id = run_id
        """The run both writers wrote to."""
        self.expected_version = expected_version
        """The version the losing write was based on."""
        self.actual_version = actual_version
        """The run's head version when the write was refused."""


class ThreadTakenOver(CheckpointConflict):
    """A newer run took this run's thread over; the checkpoint was not written.

    Raised by a store when a run on a thread saves after an input with
    ``multitask_strategy`` interrupt or rollback claimed the thread; the run
    stops where it was.
    """

    def __init__(self, run_id: str, thread_id: str, owner: str | None) -> None:
        SelectGraphError.__init__(
            self,
            f"run {run_id!r} no longer owns thread {thread_id!r}"
            + (f" (run {owner!r} does)" if owner else "")
            + ": a newer input took the thread over; nothing was written",
        )
        self.run_id = run_id
        """The run that lost its thread."""
        self.thread_id = thread_id
        """The thread."""
        self.owner = owner
        """The run that owns the thread now."""
        self.expected_version = self.actual_version = 0


class ThreadBusy(SelectGraphError):
    """A new input for a thread while a run is running or paused on it, refused.

    Raised for ``multitask_strategy="reject"`` (and, while it waits, for
    ``"enqueue"``); nothing was changed.
    """

    def __init__(self, thread_id: str, owner: str | None, *, queued: bool = False) -> None:
        if queued:
            message = f"thread {thread_id!r} has inputs queued before this one"
        else:
            message = (
                f"thread {thread_id!r} is busy: run {owner!r} is running or paused on it. "
                "Answer or continue that run, or send the input with multitask_strategy="
                "'enqueue' (run after it), 'interrupt' (stop it and go on from where it is) "
                "or 'rollback' (discard it)"
            )
        super().__init__(message)
        self.thread_id = thread_id
        """The thread."""
        self.owner = owner
        """The run that owns it."""


class ThreadIdError(SelectGraphError, ValueError):
    """A thread id a store cannot hold (empty, too long, control characters, ``|``)."""


class CheckpointDecodeError(StateDecodeError):
    """A stored checkpoint cannot be read: malformed, failing its checksum, or of another run.

    Names the run, the checkpoint, the path inside it and where it is stored.
    """

    def __init__(
        self, checkpoint_id: str, path: str, reason: str, *, location: str = "", run_id: str = ""
    ) -> None:
        super().__init__(path, reason)
        run = f" of run {run_id!r}" if run_id else ""
        place = f" ({location})" if location else ""
        self.args = (f"cannot load checkpoint {checkpoint_id!r}{run}{place} at {path}: {reason}",)
        self.checkpoint_id = checkpoint_id
        """The checkpoint whose stored record is malformed."""
        self.run_id = run_id
        """The run it was read for ("" when the reader did not know it)."""
        self.location = location
        """Where the record is stored: a file, a table row."""


class StoreError(SelectGraphError):
    """A checkpoint store cannot serve the request; the message names the store and what to do.

    The location is not a store of this kind, its schema is newer than this
    version of selectgraph, or its database stopped answering.
    """


class StoreUnavailable(StoreError):
    """The store's database did not answer, even after reconnecting and retrying.

    Raised instead of the driver's own errors (``PoolTimeout``,
    ``OperationalError``) once the store has given up; nothing was half-written.
    """


class ResumeError(SelectGraphError, ValueError):
    """A run cannot be continued as asked; nothing was written.

    Raised for an unknown or already-answered interrupt id, a run with no
    checkpoint, answers missing for a paused run, or a checkpoint whose next
    node no longer exists in the graph (its structure changed incompatibly).
    """

    def __init__(self, message: str, *, run_id: str | None = None) -> None:
        super().__init__(message)
        self.run_id = run_id
        """The run concerned, when known."""


class AnswerInvalid(ResumeError):
    """An answer does not fit the ``response_schema`` of the question it answers.

    Raised by ``resume`` (and by the DBOS executor's ``resume``) before anything
    runs or is written: the run stays paused on the same questions, and a
    corrected answer may be sent at once. Of several answers given together,
    the first that does not fit is reported and none is applied.
    """

    def __init__(
        self,
        message: str,
        *,
        interrupt_id: str,
        errors: Mapping[str, str],
        run_id: str | None = None,
    ) -> None:
        super().__init__(message, run_id=run_id)
        self.interrupt_id = interrupt_id
        """The question whose answer was refused."""
        self.errors = dict(errors)
        """What is wrong, by field path (``"score"``, ``"items[0].qty"``; ``""`` for the
        answer as a whole) -> the message."""


class GraphChanged(ResumeError):
    """The graph changed since a checkpoint was saved, in something the run needs to go on.

    Raised when a run is continued, resumed or forked under a graph that lost a
    node the run continues at (or routes from, or that asked a question), an
    edge the run routes over, or whose state schema no longer fits the stored
    state. Nothing ran and nothing was written. The message lists every change
    found and what to do: ``migrate={"old": "new"}`` to map a renamed node, a
    state schema version with migrations to upgrade a stored state.
    """

    def __init__(
        self,
        message: str,
        *,
        run_id: str | None = None,
        changes: Sequence[str] = (),
        nodes: Sequence[str] = (),
        edges: Sequence[tuple[str, str]] = (),
        fields: Sequence[str] = (),
    ) -> None:
        super().__init__(message, run_id=run_id)
        self.changes = tuple(changes)
        """Each change found, in words."""
        self.nodes = tuple(nodes)
        """Nodes the run needs that the graph no longer has (or has as another kind)."""
        self.edges = tuple(edges)
        """``(source, target)`` edges the run may route over that the graph no longer has."""
        self.fields = tuple(fields)
        """State fields whose stored values no longer fit the schema."""


class StateMigrationError(GraphChanged):
    """A stored state cannot be brought to the graph's state version.

    Its version is newer than the graph's, a migration between two versions
    is missing, or a migration raised or returned something other than a mapping.
    """

    def __init__(
        self,
        message: str,
        *,
        run_id: str | None = None,
        from_version: int,
        to_version: int,
    ) -> None:
        super().__init__(message, run_id=run_id, changes=(message,))
        self.from_version = from_version
        """The version the state was stored at."""
        self.to_version = to_version
        """The version the migration failed to reach (the graph's, or the next step)."""
