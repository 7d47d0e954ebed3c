"""Guardrails: results, the pipeline's ordering and errors, callables, and the built-ins."""

from __future__ import annotations

import asyncio
import functools
import re
import threading
from collections.abc import Callable
from typing import Any

import pytest

from selectgraph import GuardrailBlocked
from selectgraph.guardrails import (
    Guardrail,
    GuardrailReport,
    GuardrailResult,
    GuardrailsPipeline,
    MaxLength,
    RedactEmails,
    RedactSecrets,
    RegexBlock,
    as_pipeline,
)


class Recorder:
    """A guardrail that records the text it saw and answers as told."""

    def __init__(self, name: str, result: GuardrailResult, seen: list[tuple[str, str]]) -> None:
        self.name = name
        self.result = result
        self.seen = seen

    def check(self, text: str) -> GuardrailResult:
        self.seen.append((self.name, text))
        return self.result


class AsyncUpper:
    """A guardrail object whose check is a coroutine."""

    name = "async_upper"

    async def check(self, text: str) -> GuardrailResult:
        await asyncio.sleep(0)
        return GuardrailResult.rewritten(text.upper(), "shouted")


# ---------------------------------------------------------------- GuardrailResult


def test_result_constructors_set_action_reason_and_text() -> None:
    assert GuardrailResult.passed() == GuardrailResult(action="pass")
    assert GuardrailResult.blocked("rude") == GuardrailResult(action="block", reason="rude")
    rewrite = GuardrailResult.rewritten("new", "tidied")
    assert (rewrite.action, rewrite.text, rewrite.reason) == ("rewrite", "new", "tidied")
    assert GuardrailResult.rewritten("new").reason == ""


def test_result_is_frozen() -> None:
    result = GuardrailResult.passed()
    with pytest.raises(AttributeError):
        result.action = "block"  # type: ignore[misc]


def test_result_rejects_inconsistent_fields() -> None:
    with pytest.raises(ValueError, match="action must be one of"):
        GuardrailResult(action="allow")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="a rewrite needs its new text"):
        GuardrailResult(action="rewrite")
    with pytest.raises(ValueError, match="only for rewrites"):
        GuardrailResult(action="pass", text="x")
    with pytest.raises(TypeError, match="reason must be a str"):
        GuardrailResult.blocked(3)  # type: ignore[arg-type]


def test_builtins_satisfy_the_guardrail_protocol() -> None:
    for guardrail in (MaxLength(5), RegexBlock("x"), RedactEmails(), RedactSecrets()):
        assert isinstance(guardrail, Guardrail)
    assert not isinstance(len, Guardrail)


# ---------------------------------------------------------------- pipeline order


def test_empty_pipeline_returns_the_text() -> None:
    pipeline = GuardrailsPipeline([])
    assert pipeline.check("hello", stage="input") == "hello"
    assert pipeline.check_detailed("hello", stage="output") == GuardrailReport(text="hello")


def test_guardrails_run_in_order_and_the_first_block_stops_the_rest() -> None:
    seen: list[tuple[str, str]] = []
    pipeline = GuardrailsPipeline(
        [
            Recorder("first", GuardrailResult.passed(), seen),
            Recorder("second", GuardrailResult.blocked("too spicy"), seen),
            Recorder("third", GuardrailResult.blocked("never asked"), seen),
        ]
    )
    with pytest.raises(GuardrailBlocked) as caught:
        pipeline.check("salsa", stage="output")
    assert seen == [("first", "salsa"), ("second", "salsa")]
    assert caught.value.guardrail == "second"
    assert caught.value.stage == "output"
    assert caught.value.reason == "too spicy"
    assert "output guardrail 'second' blocked the text: too spicy" in str(caught.value)


def test_a_rewrite_feeds_the_next_guardrail() -> None:
    seen: list[tuple[str, str]] = []
    pipeline = GuardrailsPipeline(
        [
            Recorder("one", GuardrailResult.rewritten("draft two", "first pass"), seen),
            Recorder("two", GuardrailResult.rewritten("draft three", "second pass"), seen),
            Recorder("check", GuardrailResult.passed(), seen),
        ]
    )
    report = pipeline.check_detailed("draft one", stage="input")
    assert seen == [("one", "draft one"), ("two", "draft two"), ("check", "draft three")]
    assert report == GuardrailReport(
        text="draft three", rewrites=(("one", "first pass"), ("two", "second pass"))
    )


def test_a_block_after_a_rewrite_names_the_blocker() -> None:
    pipeline = GuardrailsPipeline([RedactEmails(), MaxLength(10)])
    with pytest.raises(GuardrailBlocked) as caught:
        pipeline.check("mail ada@example.com now", stage="input")
    assert caught.value.guardrail == "max_length"
    assert caught.value.stage == "input"


def test_a_rewrite_to_the_same_text_is_not_reported() -> None:
    pipeline = GuardrailsPipeline([lambda text: text, str.strip])
    report = pipeline.check_detailed("  padded ", stage="input")
    assert report == GuardrailReport(text="padded", rewrites=(("strip", ""),))


def test_a_block_without_a_reason_still_explains() -> None:
    pipeline = GuardrailsPipeline([lambda text: GuardrailResult.blocked("")])
    with pytest.raises(GuardrailBlocked, match="no reason given"):
        pipeline.check("x", stage="input")


def test_report_is_frozen() -> None:
    report = GuardrailsPipeline([]).check_detailed("x", stage="input")
    with pytest.raises(AttributeError):
        report.text = "y"  # type: ignore[misc]


def test_nested_pipelines_run_their_guardrails_in_place() -> None:
    inner = GuardrailsPipeline([RedactEmails()], name="inner")
    outer = GuardrailsPipeline([inner, MaxLength(100)])
    assert outer.names == ("redact_emails", "max_length")
    assert len(outer) == 2
    assert outer.check("ada@example.com", stage="input") == "[email]"


def test_pipeline_can_check_texts_from_many_threads() -> None:
    def tag(text: str) -> str:
        return f"{text}!"

    pipeline = GuardrailsPipeline([tag, RedactEmails()])
    results: dict[int, GuardrailReport] = {}

    def worker(i: int) -> None:
        results[i] = pipeline.check_detailed(f"user{i}@example.com", stage="input")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(report.text == "[email]!" for report in results.values())
    assert all(len(report.rewrites) == 2 for report in results.values())


# ---------------------------------------------------------------- callables


@pytest.mark.parametrize(
    ("returned", "expected"),
    [(None, "text"), (True, "text"), ("other", "other"), (GuardrailResult.passed(), "text")],
)
def test_callable_answers_that_let_the_text_through(returned: object, expected: str) -> None:
    pipeline = GuardrailsPipeline([lambda text: returned])
    assert pipeline.check("text", stage="input") == expected


def test_callable_returning_false_blocks_with_its_name() -> None:
    def no_shouting(text: str) -> bool:
        return not text.isupper()

    pipeline = GuardrailsPipeline([no_shouting])
    assert pipeline.check("calm", stage="input") == "calm"
    with pytest.raises(GuardrailBlocked) as caught:
        pipeline.check("LOUD", stage="input")
    assert (caught.value.guardrail, caught.value.reason) == ("no_shouting", "returned False")


def test_callable_returning_a_result_blocks() -> None:
    def refuse(text: str) -> GuardrailResult:
        return GuardrailResult.blocked("not today")

    with pytest.raises(GuardrailBlocked, match="not today"):
        GuardrailsPipeline([refuse]).check("x", stage="output")


@pytest.mark.parametrize("returned", [0, 1, b"bytes", ["list"], 2.5])
def test_callable_returning_anything_else_is_a_type_error(returned: object) -> None:
    def odd(text: str) -> object:
        return returned

    with pytest.raises(TypeError, match=rf"'odd' returned a {type(returned).__name__}"):
        GuardrailsPipeline([odd]).check("x", stage="input")


def test_callable_names() -> None:
    class Polite:
        def __call__(self, text: str) -> None:
            return None

    def shout(text: str, suffix: str) -> str:
        return text + suffix

    pipeline = GuardrailsPipeline([Polite(), functools.partial(shout, suffix="!"), str.lower])
    assert pipeline.names == ("Polite", "shout", "lower")


def test_guardrail_errors_propagate_unchanged() -> None:
    def broken(text: str) -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        GuardrailsPipeline([broken]).check("x", stage="input")


# ---------------------------------------------------------------- async


async def _no_secrets(text: str) -> bool:
    await asyncio.sleep(0)
    return "password" not in text


async def _append_sig(text: str) -> str:
    await asyncio.sleep(0)
    return text + " --bot"


def test_acheck_runs_async_and_sync_guardrails_in_order() -> None:
    pipeline = GuardrailsPipeline([str.strip, _append_sig, AsyncUpper(), _no_secrets])
    report = asyncio.run(pipeline.acheck_detailed(" hi ", stage="output"))
    assert report == GuardrailReport(
        text="HI --BOT", rewrites=(("strip", ""), ("_append_sig", ""), ("async_upper", "shouted"))
    )
    assert asyncio.run(pipeline.acheck(" hi ", stage="output")) == "HI --BOT"


def test_acheck_raises_on_an_async_block() -> None:
    pipeline = GuardrailsPipeline([_no_secrets])
    with pytest.raises(GuardrailBlocked) as caught:
        asyncio.run(pipeline.acheck("my password", stage="input"))
    assert (caught.value.guardrail, caught.value.stage) == ("_no_secrets", "input")


async def test_acheck_under_pytest_asyncio() -> None:
    assert await GuardrailsPipeline([_append_sig]).acheck("a", stage="input") == "a --bot"


@pytest.mark.parametrize("guardrail", [_no_secrets, AsyncUpper()], ids=["function", "object"])
def test_check_refuses_async_guardrails_before_running_any(guardrail: Any) -> None:
    seen: list[tuple[str, str]] = []
    pipeline = GuardrailsPipeline([Recorder("sync", GuardrailResult.passed(), seen), guardrail])
    assert pipeline.is_async
    with pytest.raises(TypeError, match=r"is async; run pipeline 'guardrails' with acheck\(\)"):
        pipeline.check("x", stage="input")
    assert seen == []


def test_check_refuses_a_sync_callable_that_returns_a_coroutine() -> None:
    pipeline = GuardrailsPipeline([lambda text: _no_secrets(text)])
    assert not pipeline.is_async  # it cannot be told from its signature
    with pytest.raises(TypeError, match="'lambda' returned an awaitable"):
        pipeline.check("x", stage="input")  # and no "never awaited" warning (warnings are errors)
    assert asyncio.run(pipeline.acheck("x", stage="input")) == "x"


# ---------------------------------------------------------------- bad construction


def test_pipeline_rejects_items_that_are_not_guardrails_naming_the_position() -> None:
    with pytest.raises(TypeError, match=r"guardrails\[1\] is a int, which is neither"):
        GuardrailsPipeline([MaxLength(3), 42])  # type: ignore[list-item]


def test_pipeline_rejects_a_guardrail_class_instead_of_an_instance() -> None:
    with pytest.raises(TypeError, match=r"guardrails\[0\] is the class RedactEmails.*RedactEmails"):
        GuardrailsPipeline([RedactEmails])  # type-checks: the class is a callable of a str


def test_pipeline_rejects_a_guardrail_without_a_usable_name() -> None:
    class Nameless:
        name = ""

        def check(self, text: str) -> GuardrailResult:
            return GuardrailResult.passed()

    with pytest.raises(TypeError, match=r"guardrails\[0\] \(Nameless\) needs a non-empty str"):
        GuardrailsPipeline([Nameless()])


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (MaxLength(3), "wrap a single guardrail in a list"),
        ("no swearing", "not a str"),
        (7, "not a int"),
    ],
)
def test_pipeline_wants_a_sequence(value: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        GuardrailsPipeline(value)


def test_check_validates_its_arguments() -> None:
    pipeline = GuardrailsPipeline([])
    with pytest.raises(ValueError, match="stage must be 'input' or 'output'"):
        pipeline.check("x", stage="middle")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="check a str, not a dict"):
        pipeline.check({"x": 1}, stage="input")  # type: ignore[arg-type]


# ---------------------------------------------------------------- as_pipeline


def test_as_pipeline_accepts_every_form() -> None:
    pipeline = GuardrailsPipeline([MaxLength(3)], name="mine")
    assert as_pipeline(None) is None
    assert as_pipeline(pipeline) is pipeline
    from_list = as_pipeline([RedactEmails(), MaxLength(50)], name="input_guardrails")
    assert from_list is not None
    assert (from_list.name, from_list.names) == (
        "input_guardrails",
        ("redact_emails", "max_length"),
    )
    one = as_pipeline(RedactEmails())
    assert one is not None
    assert one.names == ("redact_emails",)
    fn = as_pipeline(str.strip)
    assert fn is not None
    assert fn.check(" x ", stage="input") == "x"


@pytest.mark.parametrize(
    ("value", "message"),
    [("no swearing", "RegexBlock"), (3.5, "not a float"), ([1], r"guardrails\[0\]")],
)
def test_as_pipeline_rejects_other_values(value: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        as_pipeline(value)


def test_as_pipeline_explains_a_guardrail_class() -> None:
    with pytest.raises(TypeError, match="pass an instance"):
        as_pipeline(MaxLength)  # type: ignore[arg-type]


# ---------------------------------------------------------------- MaxLength


def test_max_length_passes_up_to_the_limit_and_blocks_beyond() -> None:
    guardrail = MaxLength(5)
    assert guardrail.check("12345") == GuardrailResult.passed()
    assert guardrail.check("") == GuardrailResult.passed()
    assert guardrail.check("123456") == GuardrailResult.blocked(
        "text has 6 characters; the limit is 5"
    )


@pytest.mark.parametrize("bad", [0, -1])
def test_max_length_needs_a_positive_limit(bad: int) -> None:
    with pytest.raises(ValueError, match=f"at least 1, not {bad}"):
        MaxLength(bad)


def test_max_length_needs_an_int() -> None:
    with pytest.raises(TypeError, match="must be an int"):
        MaxLength(True)


# ---------------------------------------------------------------- RegexBlock


def test_regex_block_blocks_a_match_anywhere() -> None:
    guardrail = RegexBlock(r"\bdrop\s+table\b", flags=re.IGNORECASE)
    assert guardrail.check("please DROP  TABLE users").action == "block"
    assert guardrail.check("drop tables are furniture").action == "pass"
    assert (
        guardrail.check("please DROP  TABLE users").reason == r"text matches '\\bdrop\\s+table\\b'"
    )


def test_regex_block_flags_matter() -> None:
    assert RegexBlock("secret").check("SECRET").action == "pass"
    assert RegexBlock("secret", flags=re.I).check("SECRET").action == "block"


def test_regex_block_uses_the_given_reason_and_name() -> None:
    guardrail = RegexBlock(re.compile(r"\d{3}-\d{2}-\d{4}"), reason="looks like an SSN", name="ssn")
    pipeline = GuardrailsPipeline([guardrail])
    with pytest.raises(GuardrailBlocked) as caught:
        pipeline.check("mine is 123-45-6789", stage="output")
    assert (caught.value.guardrail, caught.value.reason) == ("ssn", "looks like an SSN")
    assert pipeline.check("call 123-4567", stage="output") == "call 123-4567"


def test_regex_block_rejects_a_bad_pattern_naming_it() -> None:
    with pytest.raises(ValueError, match=r"pattern '\(unclosed' is not valid"):
        RegexBlock("(unclosed")


def test_regex_block_rejects_flags_with_a_compiled_pattern() -> None:
    with pytest.raises(ValueError, match="already compiled"):
        RegexBlock(re.compile("x"), flags=re.I)


# ---------------------------------------------------------------- RedactEmails


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("write to ada@example.com.", "write to [email]."),
        ("<grace.hopper+navy@mail.example.co.uk>", "<[email]>"),
        ("a@b.io, c_d@e-f.org", "[email], [email]"),
        ("mailto:ops@example.com", "mailto:[email]"),
    ],
)
def test_redact_emails_replaces_addresses(text: str, expected: str) -> None:
    result = RedactEmails().check(text)
    assert (result.action, result.text) == ("rewrite", expected)


@pytest.mark.parametrize(
    "text",
    ["no address here", "ping @ada on chat", "root@localhost", "price: 3@5 each", "a@b", "@@"],
)
def test_redact_emails_passes_text_without_addresses(text: str) -> None:
    assert RedactEmails().check(text) == GuardrailResult.passed()


def test_redact_emails_counts_and_keeps_the_replacement_literal() -> None:
    result = RedactEmails(replacement=r"<\1>").check("x@example.com y@example.com")
    assert result == GuardrailResult.rewritten(r"<\1> <\1>", "redacted 2 e-mail addresses")


# ---------------------------------------------------------------- RedactSecrets

# Built at run time so that no secret scanner mistakes this file for a leak.
_OPENAI = "sk-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0U1v2W3x4"
_OPENAI_PROJECT = "sk-proj-" + "Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78_St90-Uv12"
_ANTHROPIC = "sk-ant-api03-" + "Zy98Xw76Vu54Ts32Rq10Po98Nm76Lk54Ji32Hg10-AbCdEfAA"
_AWS = "AKIA" + "IOSFODNN7EXAMPLE"
_GITHUB = "ghp_" + "16C7e42F292c6912E7710c838347Ae178B4a"
_GITHUB_PAT = "github_pat_" + "11ABCDEFG0123456789abc_" + "x" * 40
_SLACK = "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
_JWT = (
    "eyJhbGciOiJIUzI1NiJ9"
    + ".eyJzdWIiOiIxMjM0NTY3ODkwIn0"
    + ".dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
)
_HEX40 = "0123456789abcdef" * 2 + "01234567"


@pytest.mark.parametrize(
    ("text", "expected", "kind"),
    [
        (f"key {_OPENAI} here", "key [secret] here", "openai key"),
        (f"OPENAI_API_KEY={_OPENAI_PROJECT}", "OPENAI_API_KEY=[secret]", "openai key"),
        (f"use {_ANTHROPIC}", "use [secret]", "anthropic key"),
        (f"id {_AWS} ok", "id [secret] ok", "aws access key id"),
        (f"token {_GITHUB}", "token [secret]", "github token"),
        (f"{_GITHUB_PAT}", "[secret]", "github token"),
        (f"slack={_SLACK}", "slack=[secret]", "slack token"),
        (f"token={_JWT}", "token=[secret]", "json web token"),
        ("Authorization: Bearer abc.DEF-123_xyz", "Authorization: Bearer [secret]", "bearer"),
        ('{"authorization": "bearer Zm9vYmFy9"}', '{"authorization": "bearer [secret]"}', "bearer"),
        (f"api_key={_HEX40}", "api_key=[secret]", "credential"),
        (f"password: {_HEX40}&next", "password: [secret]&next", "credential"),
        (
            "client_secret='Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2Rl=='",
            "client_secret='[secret]'",
            "credential",
        ),
        (f'"access_token": "{_HEX40}"', '"access_token": "[secret]"', "credential"),
    ],
)
def test_redact_secrets_replaces_each_kind(text: str, expected: str, kind: str) -> None:
    result = RedactSecrets().check(text)
    assert result.action == "rewrite"
    assert result.text == expected
    assert kind in result.reason


def test_redact_secrets_reason_counts_kinds_and_never_quotes_a_secret() -> None:
    text = f"{_OPENAI} and {_AWS} and {_OPENAI_PROJECT}"
    result = RedactSecrets(replacement="***").check(text)
    assert result.text == "*** and *** and ***"
    assert result.reason == "redacted 2 openai key, 1 aws access key id"
    assert _OPENAI not in result.reason
    assert _AWS not in result.reason


@pytest.mark.parametrize(
    "text",
    [
        "an ordinary sentence about keys, tokens, secrets and passwords",
        "id 550e8400-e29b-41d4-a716-446655440000",  # a UUID alone
        f"commit {_HEX40}",  # a git sha with no key= before it
        "color #a1b2c3 and hash deadbeef",  # short hex
        "key=abc123",  # a short value
        "sk-learn-compatible-estimators-and-pipelines",  # no digit: words, not a key
        "task-0123456789012345678901234",  # 'sk' inside a word
        "AKIA1234",  # too short for an access key id
        "Authorization: Bearer <token>",  # a placeholder
        "primary key: customer_region_and_account_name_long",  # letters only
        "the ghp_ prefix and the xoxb- prefix",
    ],
)
def test_redact_secrets_leaves_ordinary_text_alone(text: str) -> None:
    assert RedactSecrets().check(text) == GuardrailResult.passed()


def test_redact_secrets_is_linear_on_adversarial_input() -> None:
    # A super-linear pattern would take many seconds here; the timeout would catch it.
    text = "sk-" + "a-" * 50_000 + " key" * 20_000 + " a@" + "b." * 20_000
    assert RedactSecrets().check(text).action == "pass"
    assert RedactEmails().check(text).action == "pass"


# ---------------------------------------------------------------- typing helpers


def _takes_guardrail(guardrail: Guardrail) -> str:
    return guardrail.name


def test_builtins_type_check_as_guardrails() -> None:
    # mypy checks these calls; at run time they read each name.
    makers: list[Callable[[], Guardrail]] = [
        lambda: MaxLength(1),
        lambda: RegexBlock("x"),
        RedactEmails,
        RedactSecrets,
    ]
    assert [_takes_guardrail(make()) for make in makers] == [
        "max_length",
        "regex_block",
        "redact_emails",
        "redact_secrets",
    ]
