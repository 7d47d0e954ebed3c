"""Guardrails: the result type, the protocol, and the pipeline that runs them in order.

A guardrail looks at one piece of text (a run's input prompt or its final
output) and passes it, blocks it, or rewrites it. :class:`GuardrailsPipeline`
runs several in order, feeding each rewrite to the next guardrail, and raises
:class:`~selectgraph.GuardrailBlocked` at the first block.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from selectgraph.core._callables import callable_name, is_async_callable
from selectgraph.core._run_errors import GuardrailBlocked

__all__ = [
    "AsyncGuardrail",
    "Guardrail",
    "GuardrailLike",
    "GuardrailReport",
    "GuardrailResult",
    "GuardrailsPipeline",
    "Stage",
    "as_pipeline",
]

Action = Literal["pass", "block", "rewrite"]
"""What a guardrail decided.

- ``"pass"``: the text goes on unchanged.
- ``"block"``: the text is refused; the pipeline raises ``GuardrailBlocked``.
- ``"rewrite"``: the text goes on as ``GuardrailResult.text``.
"""

Stage = Literal["input", "output"]
"""Where a pipeline runs.

- ``"input"``: on a run's input prompt, before the first node.
- ``"output"``: on a run's final output.
"""

_ACTIONS = ("pass", "block", "rewrite")
_STAGES = ("input", "output")


@dataclass(frozen=True, slots=True, kw_only=True)
class GuardrailResult:
    """One guardrail's decision about one text.

    Build one with :meth:`passed`, :meth:`blocked` or :meth:`rewritten`.
    """

    action: Action
    """Whether the text passes, is blocked, or is rewritten."""
    reason: str = ""
    """Why; shown in ``GuardrailBlocked`` and in a report's rewrites."""
    text: str | None = None
    """The new text; set for ``"rewrite"`` and only for it."""

    def __post_init__(self) -> None:
        if self.action not in _ACTIONS:
            raise ValueError(f"action must be one of {_ACTIONS}, not {self.action!r}")
        if not isinstance(self.reason, str):
            raise TypeError(f"reason must be a str, not {type(self.reason).__name__}")
        if self.action == "rewrite" and not isinstance(self.text, str):
            raise TypeError(f"a rewrite needs its new text as a str, not {self.text!r}")
        if self.action != "rewrite" and self.text is not None:
            raise ValueError(f"text is only for rewrites; a {self.action!r} result has none")

    @classmethod
    def passed(cls) -> GuardrailResult:
        """The text goes on unchanged."""
        return cls(action="pass")

    @classmethod
    def blocked(cls, reason: str) -> GuardrailResult:
        """The text is refused, for ``reason``."""
        return cls(action="block", reason=reason)

    @classmethod
    def rewritten(cls, text: str, reason: str = "") -> GuardrailResult:
        """The text goes on as ``text``; ``reason`` says what was changed."""
        return cls(action="rewrite", reason=reason, text=text)


@runtime_checkable
class Guardrail(Protocol):
    """A named check on a text: anything with a ``name`` and a sync ``check`` method."""

    name: str
    """Names the guardrail in ``GuardrailBlocked`` and in reports."""

    def check(self, text: str) -> GuardrailResult:
        """Decide whether ``text`` passes, is blocked, or is rewritten."""
        ...


@runtime_checkable
class AsyncGuardrail(Protocol):
    """A guardrail whose ``check`` is a coroutine; usable only through ``acheck``."""

    name: str
    """Names the guardrail in ``GuardrailBlocked`` and in reports."""

    async def check(self, text: str) -> GuardrailResult:
        """Decide whether ``text`` passes, is blocked, or is rewritten."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class GuardrailReport:
    """What a pipeline did to a text that it let through."""

    text: str
    """The text after every rewrite."""
    rewrites: tuple[tuple[str, str], ...] = ()
    """``(guardrail name, reason)`` for each guardrail that changed the text, in order."""


@dataclass(frozen=True, slots=True)
class _Entry:
    """One guardrail, reduced to what running it needs."""

    name: str
    call: Callable[[str], Any]
    is_async: bool


def _entries(guardrail: object, position: int) -> list[_Entry]:
    if isinstance(guardrail, GuardrailsPipeline):
        return list(guardrail._entries)  # a nested pipeline runs its guardrails in place
    if isinstance(guardrail, type):
        # A class has a ``check`` attribute too; calling it unbound would fail later, obscurely.
        raise TypeError(
            f"guardrails[{position}] is the class {guardrail.__name__}, not a guardrail; "
            f"pass an instance, e.g. {guardrail.__name__}(...)"
        )
    if isinstance(guardrail, Guardrail | AsyncGuardrail):
        name = guardrail.name
        if not isinstance(name, str) or not name:
            raise TypeError(
                f"guardrails[{position}] ({type(guardrail).__name__}) needs a non-empty str "
                f"name, not {name!r}"
            )
        check = guardrail.check
        return [_Entry(name, check, is_async_callable(check))]
    if callable(guardrail):
        return [_Entry(callable_name(guardrail), guardrail, is_async_callable(guardrail))]
    raise TypeError(
        f"guardrails[{position}] is a {type(guardrail).__name__}, which is neither a Guardrail "
        "(a name and a check(text) method) nor a callable taking the text"
    )


def _to_result(name: str, value: object) -> GuardrailResult:
    """Read what a guardrail returned as a GuardrailResult."""
    if isinstance(value, GuardrailResult):
        return value
    if value is None or value is True:
        return GuardrailResult.passed()
    if value is False:
        return GuardrailResult.blocked("returned False")
    if isinstance(value, str):
        return GuardrailResult.rewritten(value)
    raise TypeError(
        f"guardrail {name!r} returned a {type(value).__name__}; expected None, a bool, "
        "a str (the rewritten text) or a GuardrailResult"
    )


def _check_arguments(text: object, stage: object) -> None:
    if stage not in _STAGES:
        raise ValueError(f"stage must be 'input' or 'output', not {stage!r}")
    if not isinstance(text, str):
        raise TypeError(f"guardrails check a str, not a {type(text).__name__}")


class GuardrailsPipeline:
    """Guardrails run in order over one text.

    Each guardrail sees the text as the previous one left it. The first block
    raises :class:`~selectgraph.GuardrailBlocked` naming that guardrail and the
    stage; nothing after it runs. A pipeline holds no per-call state, so one
    pipeline may check many texts at once, from several threads or tasks.

    Example:
        >>> from selectgraph.guardrails import GuardrailsPipeline, MaxLength, RedactEmails
        >>> pipeline = GuardrailsPipeline([RedactEmails(), MaxLength(100)])
        >>> pipeline.check("write to ada@example.com", stage="input")
        'write to [email]'
    """

    def __init__(self, guardrails: Sequence[GuardrailLike], *, name: str = "guardrails") -> None:
        """Check and keep the guardrails.

        Args:
            guardrails: Guardrail objects, callables, or nested pipelines, in the
                order they run.
            name: Names the pipeline itself (for logs and events).

        Raises:
            TypeError: ``guardrails`` is not a sequence, or an item in it is neither
                a guardrail nor callable (the message gives its position).
        """
        if isinstance(guardrails, str | bytes) or not isinstance(guardrails, Sequence):
            hint = (
                "; wrap a single guardrail in a list"
                if callable(guardrails) or isinstance(guardrails, Guardrail | AsyncGuardrail)
                else ""
            )
            raise TypeError(
                f"GuardrailsPipeline takes a sequence of guardrails, not a "
                f"{type(guardrails).__name__}{hint}"
            )
        self.name = name
        """Names the pipeline itself."""
        self.guardrails: tuple[GuardrailLike, ...] = tuple(guardrails)
        """The guardrails as given."""
        self._entries: tuple[_Entry, ...] = tuple(
            entry
            for position, guardrail in enumerate(self.guardrails)
            for entry in _entries(guardrail, position)
        )

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        names = ", ".join(entry.name for entry in self._entries)
        return f"GuardrailsPipeline([{names}], name={self.name!r})"

    @property
    def names(self) -> tuple[str, ...]:
        """The name of each guardrail, in the order they run (nested pipelines flattened)."""
        return tuple(entry.name for entry in self._entries)

    @property
    def is_async(self) -> bool:
        """Whether some guardrail is async, so that only ``acheck`` can run the pipeline."""
        return any(entry.is_async for entry in self._entries)

    def check(self, text: str, *, stage: Stage) -> str:
        """Run every guardrail over ``text`` and return the text they let through.

        Raises:
            GuardrailBlocked: A guardrail blocked the text.
            TypeError: A guardrail is async (use :meth:`acheck`) or returned
                something that is not a guardrail answer.
        """
        return self.check_detailed(text, stage=stage).text

    async def acheck(self, text: str, *, stage: Stage) -> str:
        """Like :meth:`check`, but awaits async guardrails too.

        Sync guardrails run inline, on the event loop: they are meant to be quick.
        """
        return (await self.acheck_detailed(text, stage=stage)).text

    def check_detailed(self, text: str, *, stage: Stage) -> GuardrailReport:
        """Like :meth:`check`, but also say which guardrails rewrote the text and why."""
        _check_arguments(text, stage)
        for entry in self._entries:
            if entry.is_async:
                # Refuse before running anything: a sync check could never finish this pipeline.
                raise TypeError(
                    f"guardrail {entry.name!r} is async; run pipeline {self.name!r} "
                    "with acheck() or acheck_detailed()"
                )
        run = _Run(text, stage)
        for entry in self._entries:
            value = entry.call(run.text)
            if inspect.isawaitable(value):
                if inspect.iscoroutine(value):
                    value.close()  # never awaited on purpose; closing avoids a warning
                raise TypeError(
                    f"guardrail {entry.name!r} returned an awaitable; run pipeline "
                    f"{self.name!r} with acheck() or acheck_detailed()"
                )
            run.apply(entry.name, value)
        return run.report()

    async def acheck_detailed(self, text: str, *, stage: Stage) -> GuardrailReport:
        """Like :meth:`check_detailed`, but awaits async guardrails too."""
        _check_arguments(text, stage)
        run = _Run(text, stage)
        for entry in self._entries:
            value = entry.call(run.text)
            if inspect.isawaitable(value):
                value = await _await(value)
            run.apply(entry.name, value)
        return run.report()


GuardrailLike: TypeAlias = Guardrail | AsyncGuardrail | GuardrailsPipeline | Callable[[str], Any]
"""What a pipeline accepts: a guardrail object, a (sync or async) callable, or a pipeline.

A callable may return ``None`` or ``True`` (pass), ``False`` (block), a ``str``
(rewrite to it) or a :class:`GuardrailResult`.
"""


async def _await(value: Awaitable[object]) -> object:
    return await value


class _Run:
    """One pass of a pipeline over one text; local to a call, so pipelines stay shareable."""

    __slots__ = ("rewrites", "stage", "text")

    def __init__(self, text: str, stage: Stage) -> None:
        self.text = text
        self.stage: Stage = stage
        self.rewrites: list[tuple[str, str]] = []

    def apply(self, name: str, value: object) -> None:
        result = _to_result(name, value)
        if result.action == "block":
            reason = result.reason or "no reason given"
            raise GuardrailBlocked(reason, guardrail=name, stage=self.stage)
        if result.action == "rewrite" and result.text != self.text:
            # The text is a str here: GuardrailResult refuses a rewrite without one.
            self.text = str(result.text)
            self.rewrites.append((name, result.reason))

    def report(self) -> GuardrailReport:
        return GuardrailReport(text=self.text, rewrites=tuple(self.rewrites))


def as_pipeline(
    value: GuardrailsPipeline | Sequence[GuardrailLike] | GuardrailLike | None,
    *,
    name: str = "guardrails",
) -> GuardrailsPipeline | None:
    """Accept a pipeline, a list of guardrails, one guardrail, or ``None``.

    Args:
        value: What a caller gave where a pipeline is expected.
        name: The name for a pipeline built here; a pipeline given keeps its own.

    Returns:
        ``None`` for ``None``, the same pipeline for a pipeline, and otherwise a
        new pipeline over the guardrail or guardrails.

    Raises:
        TypeError: ``value`` is none of these (a ``str`` included).
    """
    if value is None or isinstance(value, GuardrailsPipeline):
        return value
    if isinstance(value, str | bytes):
        raise TypeError(
            f"expected guardrails, not a {type(value).__name__}; to block a phrase use "
            "RegexBlock(...)"
        )
    if isinstance(value, Guardrail | AsyncGuardrail) or callable(value):
        # A class lands here too, and the pipeline explains that it wants an instance.
        return GuardrailsPipeline([value], name=name)
    if isinstance(value, Sequence):
        return GuardrailsPipeline(value, name=name)
    raise TypeError(
        f"expected a GuardrailsPipeline, a list of guardrails, a guardrail or None, "
        f"not a {type(value).__name__}"
    )
