"""Interrupts: what a generator node yields to ask a human, and what a paused run reports."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from selectgraph.core._answers import ResponseSchema, json_schema_of
from selectgraph.core._branch import BranchRef

__all__ = [
    "Interrupt",
    "InterruptRequest",
    "NodeInterrupt",
    "PauseToken",
    "ResponseSchema",
    "interrupt_run_id",
]


@dataclass(frozen=True, slots=True)
class InterruptRequest:
    """Yielded by a generator node to pause the run until someone answers.

    Example:
        >>> def review(state):
        ...     answer = yield InterruptRequest("Approve?", {"draft": state.data["draft"]})
        ...     state.data["approved"] = answer == "yes"

    With ``response_schema=Verdict`` (a Pydantic model), ``resume`` refuses an answer
    that does not fit with ``AnswerInvalid`` before anything runs, and the node
    receives a ``Verdict``.
    """

    prompt: str = ""
    """The question, as shown to the person answering."""
    payload: Any = None
    """Anything that helps them answer (JSON data: it is saved with the checkpoint)."""
    response_schema: ResponseSchema | None = None
    """What the answer must fit, checked by ``resume`` before anything runs: a Pydantic
    model class (the node then receives an instance of it) or a JSON schema dict (the
    node receives the JSON value). None: any answer is taken as it is."""

    def __post_init__(self) -> None:
        json_schema_of(self.response_schema)  # a clear error at the yield for a bad schema


@dataclass(frozen=True, slots=True)
class Interrupt:
    """A pending question of a paused run; answer it with ``graph.resume(interrupt.id, answer)``."""

    id: str
    """``"<run id>|<task id>|<yield index>"``: unique within the run, parallel branches included."""
    node: str
    """The generator node that asked."""
    prompt: str
    """The question."""
    payload: Any = None
    """What the node attached to it."""
    index: int = 0
    """Which yield of the node's visit this is (0 for the first)."""
    response_schema: dict[str, Any] | None = None
    """The JSON schema the answer must fit (a model's ``model_json_schema()``), for a UI
    to render a form from; None when the question takes any answer."""
    response_model: type[BaseModel] | None = field(default=None, compare=False, repr=False)
    """The Pydantic model class the node asked with, in a process where the node yielded
    it; None for a question read back from a checkpoint (its ``response_schema`` stays)."""
    branch: BranchRef | None = None
    """The fan-out branch that asked (``branch.label``, ``branch.index`` and the branches
    around it), so a reviewer knows which of the items the question is about; None
    outside fan-outs."""

    @property
    def run_id(self) -> str:
        """The run the interrupt belongs to."""
        return interrupt_run_id(self.id)

    @property
    def interrupt_id(self) -> str:
        """The same as ``id``: what ``resume(interrupt_id, answer)`` takes."""
        return self.id


def interrupt_run_id(interrupt_id: str) -> str:
    """The run id an interrupt id starts with.

    Raises:
        ValueError: ``interrupt_id`` is not of the form ``run|task|index``.
    """
    if type(interrupt_id) is not str or interrupt_id.count("|") < 2:
        raise ValueError(
            f"{interrupt_id!r} is not an interrupt id; use result.interrupt_id or the id of "
            "one of result.interrupts (they look like 'run|task|index')"
        )
    return interrupt_id.split("|", 1)[0]


class NodeInterrupt(BaseException):
    """Raised through the node call when a generator asks a question with no answer yet.

    A BaseException, like ``GeneratorExit``: retries, error policies and
    ``except Exception`` in user code between the node and the runner must
    not swallow it.
    """

    def __init__(self, interrupt: Interrupt) -> None:
        super().__init__(interrupt.id)
        self.interrupt = interrupt


class PauseToken:
    """Asks a run to pause at its next node boundary: ``token.pause()`` from anywhere.

    The node that is running finishes, its output is merged and checkpointed,
    and the run returns with ``result.paused``. Continue it with
    ``graph.run(None, checkpoint_store=store, run_id=result.run_id)``. A
    ``threading.Event`` or ``asyncio.Event`` may be passed instead of a token.
    """

    __slots__ = ("_set",)

    def __init__(self) -> None:
        self._set = False

    def pause(self) -> None:
        """Request the pause (thread-safe: it only sets a flag)."""
        self._set = True

    def clear(self) -> None:
        """Withdraw the request, e.g. before continuing the run with the same token."""
        self._set = False

    def is_set(self) -> bool:
        """Whether a pause was requested."""
        return self._set

    def __repr__(self) -> str:
        return f"PauseToken(paused={self._set})"
