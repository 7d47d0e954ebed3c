"""Testing: model test doubles (the echo provider, a scripted one) and what they were sent.

``LocalProvider`` is the echo test double: it answers every request with a
placeholder (``[local] reply to: ...``) or a script, deterministically, with no
model. Agents use it only when asked to (``provider=LocalProvider()`` or
``SELECTGRAPH_PROVIDER=local``) or when no model is installed at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from selectgraph.providers._local import (
    LocalProvider,
    LocalReply,
    ScriptEntry,
    ScriptExhausted,
    _last_user_text,
)
from selectgraph.providers._retry import ProviderRetry

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable

    from selectgraph.providers._base import CompletionRequest

__all__ = ["LocalProvider", "LocalReply", "ScriptEntry", "ScriptExhausted", "ScriptedProvider"]

_DEFAULT_RETRY = ProviderRetry()


async def _no_wait(_seconds: float) -> None:
    """Return at once: retries are still counted and recorded, just not waited for."""


class ScriptedProvider(LocalProvider):
    """A provider for tests that answers each call with the next scripted reply.

    It is a strict :class:`LocalProvider`: script entries are strings,
    :class:`LocalReply` records, exception instances or functions of the
    request, and a call past the end of the script raises
    :class:`ScriptExhausted` saying how many replies were scripted. Failures
    are retried with the same policy a real provider uses, but retry waits
    are skipped (and recorded in :attr:`retry_delays`) unless ``sleep`` is
    given.

    Example:
        >>> import asyncio
        >>> from selectgraph.core._messages import Message
        >>> from selectgraph.providers._base import CompletionRequest
        >>> provider = ScriptedProvider(["reply 1", "reply 2"])
        >>> request = CompletionRequest(model="m", messages=(Message.user("hi"),))
        >>> asyncio.run(provider.complete(request)).message.text
        'reply 1'
        >>> provider.prompts
        ['hi']
    """

    name = "scripted"

    def __init__(
        self,
        script: Iterable[ScriptEntry] = (),
        *,
        retry: ProviderRetry = _DEFAULT_RETRY,
        sleep: Callable[[float], Awaitable[None]] = _no_wait,
        latency: float = 0.0,
        default_model: str = "local",
    ) -> None:
        """Create a provider that plays ``script`` back, one entry per attempt.

        Args:
            script: The replies, in the order the calls will take them.
            retry: How scripted transient failures are retried.
            sleep: Awaitable sleep between retries; by default retries do not wait.
            latency: Seconds every attempt takes unless its reply says otherwise.
            default_model: Model reported when a request names none.
        """
        super().__init__(
            script,
            strict=True,
            retry=retry,
            sleep=sleep,
            latency=latency,
            default_model=default_model,
        )

    @property
    def last_request(self) -> CompletionRequest:
        """The most recent request.

        Raises:
            AssertionError: the provider has not been called.
        """
        if not self.requests:
            raise AssertionError("ScriptedProvider has not been called yet")
        return self.requests[-1]

    @property
    def prompts(self) -> list[str]:
        """The text of each request's last user message ("" when it had none), in order."""
        return [_last_user_text(request) for request in self.requests]

    def assert_all_used(self) -> None:
        """Check that every scripted reply was consumed.

        Raises:
            AssertionError: some replies were never asked for.
        """
        if self.remaining:
            raise AssertionError(
                f"{self.remaining} of {self.scripted} scripted replies were never used "
                f"(the provider was called {len(self.requests)} times)"
            )
