"""Claims on interrupts: of two answers to one question, exactly one wins.

``resume`` first claims the interrupt by inserting its answer under the
interrupt's id (a primary key). The insert that lands wins and sends the
answer to the run; a second answer finds the claim: the same answer again is
a harmless retry (it is sent again, and DBOS drops the duplicate message),
a different one is refused with :class:`AnswerConflictError`.
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa

from selectgraph.core._errors import ResumeError
from selectgraph.executors.dbos._database import ANSWERS_TABLE, create_tables

__all__ = ["AnswerConflictError", "Claims"]


class AnswerConflictError(ResumeError):
    """The interrupt was already answered, with a different answer."""


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
