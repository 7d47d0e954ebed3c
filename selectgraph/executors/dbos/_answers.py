"""Answers to interrupts: checked against the question's schema, then claimed.

``resume`` first checks the answer against the ``response_schema`` stored with
the question (in the run's published checkpoints), so an answer that does not
fit is refused with :class:`~selectgraph.AnswerInvalid` before it is claimed or
sent. It then claims the interrupt by inserting its answer under the
interrupt's id (a primary key). The insert that lands wins and sends the
answer to the run; a second answer finds the claim: the same answer again is
a harmless retry (it is sent again, and DBOS drops the duplicate message),
a different one is refused with :class:`AnswerConflictError`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import sqlalchemy as sa

from selectgraph.core._answers import check_answer
from selectgraph.core._errors import ResumeError
from selectgraph.executors.dbos._database import ANSWERS_TABLE, create_tables

__all__ = ["AnswerConflictError", "Claims", "checked_answer", "stored_schema"]


class AnswerConflictError(ResumeError):
    """The interrupt was already answered, with a different answer."""


def stored_schema(
    interrupt_id: str,
    listed: Iterable[Mapping[str, Any]],
    checkpoints: Callable[[], list[dict[str, Any]]],
) -> dict[str, Any] | None:
    """The JSON schema question ``interrupt_id`` was asked with, or None (any answer).

    ``listed`` are the run's pending questions as its interrupts event lists them:
    when one carries its schema, that settles it. Otherwise the newest of the run's
    published ``checkpoints`` (stored records, oldest first) that holds the question
    unanswered does: its interrupt record is where a run keeps the schema.
    """
    for raw in listed:
        if raw.get("id") == interrupt_id and type(raw.get("response_schema")) is dict:
            return dict(raw["response_schema"])
    for checkpoint in reversed(checkpoints()):
        records = checkpoint.get("interrupts")
        record = records.get(interrupt_id) if type(records) is dict else None
        if type(record) is dict and not record.get("answered"):
            schema = record.get("response_schema")
            return schema if type(schema) is dict else None
    return None


def checked_answer(
    run_id: str,
    interrupt_id: str,
    value: Any,
    listed: Iterable[Mapping[str, Any]],
    checkpoints: Callable[[], list[dict[str, Any]]],
) -> Any:
    """``value`` as the answer to send: checked against the question's stored schema.

    An answer to a question with a schema comes back as the JSON data it was
    checked as; any other as it was given.

    Raises:
        AnswerInvalid: the answer does not fit the question's schema.
    """
    schema = stored_schema(interrupt_id, listed, checkpoints)
    return check_answer(interrupt_id, value, schema, run_id=run_id)


class Claims:
    """The ``selectgraph_answers`` table, through one engine."""

    def __init__(self, engine: sa.Engine) -> None:
        self._engine = engine
        self._ready = False

    def _ensure(self) -> None:
        if not self._ready:
            create_tables(self._engine)
            self._ready = True

    def claim(self, run_id: str, interrupt_id: str, answer: Any) -> bool:
        """Claim ``interrupt_id`` for ``answer`` (JSON data); False: this same answer won before.

        Raises:
            AnswerConflictError: another answer won.
        """
        self._ensure()
        text = json.dumps(answer, sort_keys=True, separators=(",", ":"))
        if self._engine.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert  # type: ignore[assignment]
        statement = (
            insert(ANSWERS_TABLE)
            .values(interrupt_id=interrupt_id, run_id=run_id, answer=text)
            .on_conflict_do_nothing(index_elements=["interrupt_id"])
        )
        with self._engine.begin() as connection:
            if connection.execute(statement).rowcount == 1:
                return True
            won = connection.execute(
                sa.select(ANSWERS_TABLE.c.answer).where(
                    ANSWERS_TABLE.c.interrupt_id == interrupt_id
                )
            ).scalar_one()
        if won == text:
            return False
        raise AnswerConflictError(
            f"interrupt {interrupt_id!r} of run {run_id!r} was already answered with {won}; "
            f"the answer {text} was not applied",
            run_id=run_id,
        )

    def answered(self, interrupt_id: str) -> Any:
        """The answer that won ``interrupt_id`` (JSON data), or None when nobody claimed it."""
        self._ensure()
        with self._engine.connect() as connection:
            won = connection.execute(
                sa.select(ANSWERS_TABLE.c.answer).where(
                    ANSWERS_TABLE.c.interrupt_id == interrupt_id
                )
            ).scalar_one_or_none()
        return None if won is None else json.loads(won)

    def any_answered(self, interrupt_ids: list[str]) -> bool:
        """Whether any of ``interrupt_ids`` has an answer (the run is about to move on)."""
        if not interrupt_ids:
            return False
        self._ensure()
        with self._engine.connect() as connection:
            found = connection.execute(
                sa.select(ANSWERS_TABLE.c.interrupt_id)
                .where(ANSWERS_TABLE.c.interrupt_id.in_(interrupt_ids))
                .limit(1)
            ).first()
        return found is not None

    def close(self) -> None:
        """Release the engine's connections."""
        self._engine.dispose()
