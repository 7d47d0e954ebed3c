"""Built-in guardrails: a length limit, a pattern block, and e-mail and secret redaction.

Each is a small class with a ``name`` and a sync ``check``; all use only the
standard library's ``re`` and keep nothing between calls.
"""

from __future__ import annotations

import re

from selectgraph.guardrails._protocol import GuardrailResult

__all__ = ["MaxLength", "RedactEmails", "RedactSecrets", "RegexBlock"]


class MaxLength:
    """Block a text longer than ``max_chars`` characters."""

    def __init__(self, max_chars: int, *, name: str = "max_length") -> None:
        """Set the limit.

        Args:
            max_chars: The most characters a text may have (at least 1).
            name: Names the guardrail in ``GuardrailBlocked`` and reports.

        Raises:
            ValueError: ``max_chars`` is below 1.
        """
        if isinstance(max_chars, bool) or not isinstance(max_chars, int):
            raise TypeError(f"max_chars must be an int, not {type(max_chars).__name__}")
        if max_chars < 1:
            raise ValueError(f"max_chars must be at least 1, not {max_chars}")
        self.max_chars = max_chars
        """The most characters a text may have."""
        self.name = name
        """Names the guardrail."""

    def __repr__(self) -> str:
        return f"MaxLength({self.max_chars})"

    def check(self, text: str) -> GuardrailResult:
        """Block ``text`` when it is over the limit."""
        if len(text) > self.max_chars:
            return GuardrailResult.blocked(
                f"text has {len(text)} characters; the limit is {self.max_chars}"
            )
        return GuardrailResult.passed()


class RegexBlock:
    """Block a text in which a regular expression matches anywhere (``re.search``)."""

    def __init__(
        self,
        pattern: str | re.Pattern[str],
        *,
        reason: str | None = None,
        flags: int | re.RegexFlag = 0,
        name: str = "regex_block",
    ) -> None:
        """Compile the pattern once.

        Args:
            pattern: The regular expression, as a string or already compiled.
            reason: What ``GuardrailBlocked`` says; by default it names the pattern.
            flags: ``re`` flags for a string pattern (a compiled one has its own).
            name: Names the guardrail in ``GuardrailBlocked`` and reports.

        Raises:
            ValueError: The pattern does not compile, or flags were given with a
                compiled pattern.
        """
        source = pattern.pattern if isinstance(pattern, re.Pattern) else pattern
        try:
            self.pattern: re.Pattern[str] = re.compile(pattern, flags)
            """The compiled expression."""
        except re.error as error:
            raise ValueError(f"RegexBlock pattern {source!r} is not valid: {error}") from error
        except ValueError as error:  # flags given alongside a compiled pattern
            raise ValueError(
                f"RegexBlock pattern {source!r} is already compiled; set its flags when "
                f"compiling it, not here ({error})"
            ) from error
        self.reason = reason if reason is not None else f"text matches {source!r}"
        """What ``GuardrailBlocked`` says when the pattern matches."""
        self.name = name
        """Names the guardrail."""

    def __repr__(self) -> str:
        return f"RegexBlock({self.pattern.pattern!r})"

    def check(self, text: str) -> GuardrailResult:
        """Block ``text`` when the pattern matches somewhere in it."""
        if self.pattern.search(text):
            return GuardrailResult.blocked(self.reason)
        return GuardrailResult.passed()


# Local part per RFC 5322's unquoted form; the domain needs a dot and an alphabetic
# top-level label, so "user@localhost" and "@handles" stay as they are.
_EMAIL = re.compile(
    r"(?<![\w.!#$%&'*+/=?^`{|}~-])"
    r"[\w!#$%&'*+/=?^`{|}~-]+(?:\.[\w!#$%&'*+/=?^`{|}~-]+)*"
    r"@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}\b"
)


class RedactEmails:
    """Replace e-mail addresses; a rewrite only when there was one to replace."""

    def __init__(self, replacement: str = "[email]", *, name: str = "redact_emails") -> None:
        """Set what an address becomes.

        Args:
            replacement: The text put where each address was.
            name: Names the guardrail in reports.
        """
        self.replacement = replacement
        """The text put where each address was."""
        self.name = name
        """Names the guardrail."""

    def __repr__(self) -> str:
        return f"RedactEmails({self.replacement!r})"

    def check(self, text: str) -> GuardrailResult:
        """Rewrite ``text`` with its e-mail addresses replaced, if it has any."""
        # A function replacement keeps backslashes in ``replacement`` literal.
        redacted, count = _EMAIL.subn(lambda _: self.replacement, text)
        if count == 0:
            return GuardrailResult.passed()
        noun = "address" if count == 1 else "addresses"
        return GuardrailResult.rewritten(redacted, f"redacted {count} e-mail {noun}")


# Provider keys are recognised by their prefix. The random part of a real key has
# digits; requiring one keeps hyphenated words such as "sk-learn-compatible-models" out.
_HAS_DIGIT = r"(?=[A-Za-z_-]*[0-9])"
_START = r"(?<![\w-])"

_SECRET_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("anthropic key", re.compile(_START + r"sk-ant-" + _HAS_DIGIT + r"[A-Za-z0-9_-]{20,}")),
    ("openai key", re.compile(_START + r"sk-" + _HAS_DIGIT + r"[A-Za-z0-9_-]{20,}")),
    ("aws access key id", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("github token", re.compile(_START + r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_\w{22,})")),
    ("slack token", re.compile(_START + r"xox[baprs]-" + _HAS_DIGIT + r"[A-Za-z0-9-]{10,}")),
    # A JWT ("eyJ" is base64 for '{"'), so that "token=<jwt>" loses all three parts, not one.
    (
        "json web token",
        re.compile(_START + r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"),
    ),
)
"""Secrets that carry their own prefix: the whole match is replaced."""

_CONTEXT_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "bearer token",
        re.compile(
            r"(?P<keep>\bauthorization[\"']?\s*[:=]\s*[\"']?bearer\s+)[A-Za-z0-9._~+/=-]{8,}",
            re.IGNORECASE,
        ),
    ),
    (
        # "api_key=", "client_secret: ", '"access_token": "' and so on, then a long
        # hex or base64 value; short values and bare hashes or UUIDs are left alone.
        # Matching from the end of the name ("...key") covers every prefix of it. The value
        # needs a digit, as random ones have: "key: customer_region_and_account_name" stays.
        "credential",
        re.compile(
            r"(?P<keep>(?:key|token|secret|password)[\"']?\s*[=:]\s*[\"']?)"
            r"(?=[A-Za-z+/_-]*[0-9])(?:[A-Fa-f0-9]{32,}|[A-Za-z0-9+/_-]{32,}={0,2})(?![A-Za-z0-9+/=_-])",
            re.IGNORECASE,
        ),
    ),
)
"""Secrets recognised by what comes before them: only the value is replaced."""


class RedactSecrets:
    """Replace API keys, tokens and passwords; a rewrite only when one was found.

    Recognised: OpenAI (``sk-...``, ``sk-proj-...``) and Anthropic (``sk-ant-...``)
    keys, AWS access key ids, GitHub tokens (``ghp_...``, ``github_pat_...``),
    Slack tokens (``xoxb-...``), the token in ``Authorization: Bearer ...``, and
    JSON web tokens, and a hex or base64 value of 32 or more characters, with at
    least one digit, after a name ending in ``key``, ``token``, ``secret`` or
    ``password`` and ``=`` or ``:`` (``api_key=...``, ``"client_secret": "..."``).
    """

    def __init__(self, replacement: str = "[secret]", *, name: str = "redact_secrets") -> None:
        """Set what a secret becomes.

        Args:
            replacement: The text put where each secret was.
            name: Names the guardrail in reports.
        """
        self.replacement = replacement
        """The text put where each secret was."""
        self.name = name
        """Names the guardrail."""

    def __repr__(self) -> str:
        return f"RedactSecrets({self.replacement!r})"

    def check(self, text: str) -> GuardrailResult:
        """Rewrite ``text`` with its secrets replaced, if it has any.

        The reason counts what was found by kind and never quotes a secret.
        """
        found: dict[str, int] = {}
        for kind, pattern in _SECRET_PATTERNS:
            text, count = pattern.subn(lambda _: self.replacement, text)
            if count:
                found[kind] = found.get(kind, 0) + count
        for kind, pattern in _CONTEXT_PATTERNS:
            text, count = pattern.subn(lambda m: m.group("keep") + self.replacement, text)
            if count:
                found[kind] = found.get(kind, 0) + count
        if not found:
            return GuardrailResult.passed()
        kinds = ", ".join(f"{count} {kind}" for kind, count in found.items())
        return GuardrailResult.rewritten(text, f"redacted {kinds}")
