"""Guardrails: check, block or rewrite a run's input prompt and its final output.

A :class:`GuardrailsPipeline` runs guardrails in order: objects with a ``name``
and a ``check(text) -> GuardrailResult`` method, or plain (sync or async)
callables. The built-ins cover a length limit, a pattern block, and e-mail and
secret redaction.
"""

from __future__ import annotations

from selectgraph.guardrails._builtin import MaxLength, RedactEmails, RedactSecrets, RegexBlock
from selectgraph.guardrails._protocol import (
    Guardrail,
    GuardrailReport,
    GuardrailResult,
    GuardrailsPipeline,
    as_pipeline,
)

__all__ = [
    "Guardrail",
    "GuardrailReport",
    "GuardrailResult",
    "GuardrailsPipeline",
    "MaxLength",
    "RedactEmails",
    "RedactSecrets",
    "RegexBlock",
    "as_pipeline",
]
