"""Agent on its own: prompts, the tool loop, structured output, usage, streaming, judges."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

from selectgraph import (
    Agent,
    AgentConfig,
    AgentOutputError,
    AgentResult,
    JudgeDecision,
    JudgeEscalated,
    LLMJudge,
    Message,
    Role,
    ToolCall,
    Verdict,
    tool,
)
from selectgraph.agents import AgentChunk, JudgeRequest, LLMDecider, _defaults, default_provider
from selectgraph.core._errors import ProviderRequestError, ProviderRetryableError
from selectgraph.providers import (
    AnthropicProvider,
    LocalProvider,
    OpenAIProvider,
    ProviderRetry,
    ResponseFormat,
    _llama,
)
from selectgraph.testing import LocalReply, ScriptedProvider
from tests.agents.conftest import sent, system_of, usage


class Weather(BaseModel):
    city: str
    temp_c: int


@tool
def get_weather(city: str) -> dict[str, Any]:
    """Current weather for a city.

    Args:
        city: The city.
    """
    return {"city": city, "temp_c": 21}


def agent_with(
    script: list[Any], *, judge: Any = None, judge_attempts: int = 3, **config: Any
) -> tuple[Agent, ScriptedProvider]:
    provider = ScriptedProvider(script)
    tools = config.pop("tools", ())
    agent = Agent(
        AgentConfig(**config),
        provider=provider,
        tools=tools,
        judge=judge,
        judge_attempts=judge_attempts,
    )
    return agent, provider


# --- running and prompting ------------------------------------------------------------


def test_run_returns_the_answer_to_a_prompt_sent_as_a_user_message() -> None:
    agent, provider = agent_with(["Paris."], name="geo")

    result = agent.run("Capital of France?")

    assert result.content == "Paris."
    assert sent(provider.last_request) == [("user", "Capital of France?")]
    assert result.new_messages == (Message.assistant("Paris.", name="geo"),)
    assert result.messages == (Message.user("Capital of France?"), *result.new_messages)
    provider.assert_all_used()


async def test_arun_answers_inside_a_running_event_loop() -> None:
    agent, provider = agent_with(["Paris."])

    result = await agent.arun("Capital of France?")

    assert result.content == "Paris."
    assert provider.prompts == ["Capital of France?"]


def test_system_prompt_is_identity_then_instructions() -> None:
    agent, provider = agent_with(
        ["ok"], identity="You are a terse geographer.", instructions="Answer in one word."
    )

    agent.run("Capital of France?")

    assert sent(provider.last_request) == [
        ("system", "# Identity\nYou are a terse geographer.\n\n# Your task\nAnswer in one word."),
        ("user", "Capital of France?"),
    ]


def test_no_system_message_without_identity_or_instructions() -> None:
    agent, provider = agent_with(["ok"])

    agent.run("hi")

    assert [m.role for m in provider.last_request.messages] == [Role.USER]


def test_input_may_be_a_message_or_a_whole_conversation() -> None:
    agent, provider = agent_with(["one", "two"], identity="Helper.")
    conversation = [
        Message.user("Remember 7."),
        Message.assistant("Noted."),
        Message.user("What number?"),
    ]

    agent.run(Message.user("hello"))
    agent.run(conversation)

    assert sent(provider.requests[0])[1:] == [("user", "hello")]
    assert provider.requests[1].messages[1:] == tuple(conversation)


def test_config_settings_reach_the_request() -> None:
    agent, provider = agent_with(
        ["ok"], model="m-large", temperature=0.2, max_tokens=50, extra={"seed": 7}
    )

    result = agent.run("hi")

    request = provider.last_request
    assert (request.model, request.temperature, request.max_tokens, request.extra) == (
        "m-large",
        0.2,
        50,
        {"seed": 7},
    )
    assert result.model == "m-large"


def test_model_defaults_to_the_providers_default_model() -> None:
    provider = ScriptedProvider(["ok"], default_model="house-model")
    agent = Agent(provider=provider)

    result = agent.run("hi")

    assert agent.model == "house-model"
    assert provider.last_request.model == "house-model"
    assert result.model == "house-model"


def test_name_argument_overrides_the_config_name_on_answers() -> None:
    provider = ScriptedProvider(["ok"])
    agent = Agent(AgentConfig(name="from-config"), provider=provider, name="explicit")

    result = agent.run("hi")

    assert agent.name == "explicit"
    assert result.new_messages[-1].name == "explicit"


# --- the tool loop --------------------------------------------------------------------


def test_a_tool_call_is_executed_and_its_result_fed_back_to_the_model() -> None:
    agent, provider = agent_with(
        [LocalReply.tool_call("get_weather", {"city": "Paris"}, call_id="c1"), "Sunny, 21 C."],
        tools=[get_weather],
    )

    result = agent.run("Weather in Paris?")

    call = ToolCall(id="c1", name="get_weather", arguments={"city": "Paris"})
    tool_result = Message.tool("c1", {"city": "Paris", "temp_c": 21}, name="get_weather")
    assert provider.requests[1].messages == (
        Message.user("Weather in Paris?"),
        Message.assistant(None, tool_calls=(call,), name="agent"),
        tool_result,
    )
    assert result.content == "Sunny, 21 C."
    assert result.tool_calls == (call,)
    assert result.new_messages == (
        Message.assistant(None, tool_calls=(call,), name="agent"),
        tool_result,
        Message.assistant("Sunny, 21 C.", name="agent"),
    )
    assert result.iterations == 2


def test_tool_specs_are_sent_with_every_call() -> None:
    agent, provider = agent_with(
        [LocalReply.tool_call("get_weather", {"city": "Oslo"}), "Cold."], tools=[get_weather]
    )

    agent.run("Weather in Oslo?")

    for request in provider.requests:
        assert [spec.name for spec in request.tools] == ["get_weather"]
        assert request.tools[0].description == "Current weather for a city."
        assert request.tools[0].parameters["required"] == ["city"]


def test_plain_functions_become_tools() -> None:
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    agent, provider = agent_with(
        [LocalReply.tool_call("add", {"a": 2, "b": 3}, call_id="c1"), "5"], tools=[add]
    )

    agent.run("2+3?")

    assert provider.requests[1].messages[-1] == Message.tool("c1", "5", name="add")


async def test_several_tool_calls_in_one_turn_run_concurrently() -> None:
    both_running = asyncio.Barrier(2)

    async def fetch(key: str) -> str:
        """Fetch a value by key."""
        # Only returns once both calls are in flight together.
        await asyncio.wait_for(both_running.wait(), timeout=2)
        return f"value of {key}"

    calls = [
        ToolCall(id="a", name="fetch", arguments={"key": "x"}),
        ToolCall(id="b", name="fetch", arguments={"key": "y"}),
    ]
    agent, provider = agent_with([LocalReply(tool_calls=calls), "done"], tools=[fetch])

    result = await agent.arun("fetch x and y")

    assert provider.requests[1].messages[-2:] == (
        Message.tool("a", "value of x", name="fetch"),
        Message.tool("b", "value of y", name="fetch"),
    )
    assert result.tool_calls == tuple(calls)


def test_an_unknown_tool_becomes_an_error_result_the_model_sees() -> None:
    agent, provider = agent_with(
        [LocalReply.tool_call("get_stock", {}, call_id="c1"), "Sorry."], tools=[get_weather]
    )

    result = agent.run("Stock price?")

    error = provider.requests[1].messages[-1]
    assert error == Message.tool(
        "c1",
        "there is no tool named 'get_stock'; available tools: get_weather",
        name="get_stock",
        is_error=True,
    )
    assert result.content == "Sorry."


def test_a_failing_tool_is_an_error_result_not_a_crash() -> None:
    def explode(reason: str) -> str:
        """Always fails."""
        raise RuntimeError(f"kaboom: {reason}")

    agent, provider = agent_with(
        [LocalReply.tool_call("explode", {"reason": "test"}), "It failed."], tools=[explode]
    )

    result = agent.run("go")

    error = provider.requests[1].messages[-1]
    assert error.role is Role.TOOL
    assert error.is_error
    assert error.text == "tool 'explode' raised RuntimeError: kaboom: test"
    assert result.content == "It failed."


def test_invalid_tool_arguments_are_an_error_result_the_model_sees() -> None:
    agent, provider = agent_with(
        [LocalReply.tool_call("get_weather", {"town": "Paris"}), "Oops."], tools=[get_weather]
    )

    agent.run("Weather?")

    error = provider.requests[1].messages[-1]
    assert error.is_error
    assert "city" in error.text
    assert "town" in error.text


def test_max_tool_iterations_forces_a_text_answer_with_tool_choice_none() -> None:
    agent, provider = agent_with(
        [
            LocalReply.tool_call("get_weather", {"city": "Paris"}),
            LocalReply.tool_call("get_weather", {"city": "Rome"}),
            "Paris 21 C, Rome 21 C.",
        ],
        tools=[get_weather],
        max_tool_iterations=2,
    )

    result = agent.run("Weather in Paris and Rome?")

    assert [r.tool_choice for r in provider.requests] == [None, None, "none"]
    assert result.content == "Paris 21 C, Rome 21 C."
    assert result.iterations == 3
    assert len(result.tool_calls) == 2


def test_tool_calls_past_the_limit_are_answered_as_errors_but_not_run() -> None:
    runs: list[str] = []

    def record(item: str) -> str:
        """Record an item."""
        runs.append(item)
        return "recorded"

    agent, provider = agent_with(
        [
            LocalReply.tool_call("record", {"item": "first"}),
            LocalReply.tool_call("record", {"item": "second"}, call_id="late", text="Also:"),
        ],
        tools=[record],
        max_tool_iterations=1,
    )

    result = agent.run("record things")

    assert runs == ["first"]
    assert provider.requests[1].tool_choice == "none"
    assert len(provider.requests) == 2
    assert result.new_messages[-1] == Message.tool(
        "late",
        "not run: the tool-call limit was reached; answer with what you have",
        name="record",
        is_error=True,
    )
    assert result.content == "Also:"


def test_max_tool_iterations_bounds_the_loop_even_for_an_agent_without_tools() -> None:
    agent, provider = agent_with(
        [LocalReply.tool_call("ghost", {})] * 4 + ["final"], max_tool_iterations=1
    )

    agent.run("hi")

    assert len(provider.requests) == 2


def test_zero_tool_iterations_forbids_tools_from_the_first_call() -> None:
    agent, provider = agent_with(["No tools."], tools=[get_weather], max_tool_iterations=0)

    agent.run("Weather?")

    assert provider.last_request.tool_choice == "none"


def test_configured_tool_choice_applies_to_the_first_call_only() -> None:
    agent, provider = agent_with(
        [LocalReply.tool_call("get_weather", {"city": "Paris"}), "Sunny."],
        tools=[get_weather],
        tool_choice="required",
    )

    agent.run("Weather?")

    assert [r.tool_choice for r in provider.requests] == ["required", None]


def test_no_tools_and_no_tool_choice_are_sent_for_an_agent_without_tools() -> None:
    agent, provider = agent_with(["ok"], tool_choice="required")

    agent.run("hi")

    assert provider.last_request.tools == ()
    assert provider.last_request.tool_choice is None


def test_two_tools_with_one_name_are_rejected() -> None:
    def lookup(q: str) -> str:
        """Look up."""
        return q

    with pytest.raises(ValueError, match="two tools are named 'lookup'"):
        Agent(provider=ScriptedProvider(), tools=[lookup, tool(lookup)])


# --- structured output ----------------------------------------------------------------


def test_output_schema_sends_a_response_format_and_parses_the_answer() -> None:
    agent, provider = agent_with(
        [LocalReply.json({"city": "Paris", "temp_c": 21})], output_schema=Weather
    )

    result = agent.run("Weather in Paris as JSON")

    assert provider.last_request.response_format == ResponseFormat(
        name="Weather", json_schema=Weather.model_json_schema()
    )
    assert result.output == Weather(city="Paris", temp_c=21)
    assert result.content == '{"city": "Paris", "temp_c": 21}'


def test_output_schema_is_spelled_out_in_the_system_prompt() -> None:
    agent, provider = agent_with(
        [LocalReply.json({"city": "Paris", "temp_c": 21})],
        instructions="Report the weather.",
        output_schema=Weather,
    )

    agent.run("Paris")

    system = system_of(provider.last_request)
    assert system.startswith("# Your task\nReport the weather.\n\nAnswer with a single JSON object")
    assert '"temp_c"' in system


def test_fenced_json_is_accepted() -> None:
    agent, _ = agent_with(['```json\n{"city": "Paris", "temp_c": 21}\n```'], output_schema=Weather)

    result = agent.run("Paris")

    assert result.output == Weather(city="Paris", temp_c=21)


def test_a_mismatch_is_re_asked_with_the_validation_errors() -> None:
    agent, provider = agent_with(
        [LocalReply.json({"city": "Paris"}), LocalReply.json({"city": "Paris", "temp_c": 21})],
        output_schema=Weather,
    )

    result = agent.run("Paris")

    assert result.output == Weather(city="Paris", temp_c=21)
    assert result.iterations == 2
    reask = provider.requests[1].messages[-1]
    assert reask.role is Role.USER
    assert reask.text == (
        "Your answer does not match the required JSON schema (temp_c: Field required). "
        "Reply again with only the corrected JSON object."
    )
    assert provider.requests[1].messages[-2] == Message.assistant('{"city": "Paris"}', name="agent")


def test_agent_output_error_after_max_output_retries() -> None:
    agent, provider = agent_with(
        ["not json", "still not", "nope"], output_schema=Weather, max_output_retries=2
    )

    with pytest.raises(AgentOutputError, match="does not match Weather after 3 attempts") as caught:
        agent.run("Paris")

    assert caught.value.content == "nope"
    assert len(provider.requests) == 3


def test_zero_output_retries_fails_on_the_first_mismatch() -> None:
    agent, provider = agent_with(["{}"], output_schema=Weather, max_output_retries=0)

    with pytest.raises(AgentOutputError, match="city: Field required"):
        agent.run("Paris")

    assert len(provider.requests) == 1


def test_negative_limits_in_the_config_are_rejected() -> None:
    with pytest.raises(ValueError, match="max_tool_iterations"):
        AgentConfig(max_tool_iterations=-1)
    with pytest.raises(ValueError, match="max_output_retries"):
        AgentConfig(max_output_retries=-1)


# --- usage ----------------------------------------------------------------------------


def test_usage_is_summed_over_every_model_call() -> None:
    agent, _ = agent_with(
        [
            LocalReply(
                tool_calls=[ToolCall(id="c1", name="get_weather", arguments={"city": "Paris"})],
                usage=usage(100, 10, 0.001),
            ),
            LocalReply(text="Sunny.", usage=usage(150, 5, 0.002)),
        ],
        tools=[get_weather],
    )

    result = agent.run("Weather?")

    assert result.usage.input_tokens == 250
    assert result.usage.output_tokens == 15
    assert result.usage.calls == 2
    assert result.usage.cost_usd == pytest.approx(0.003)
    assert result.iterations == 2
    assert result.attempts == 1
    assert result.finish_reason == "stop"


def test_usage_without_a_reported_figure_is_counted_from_the_request() -> None:
    agent, _ = agent_with(["one two three"])

    result = agent.run("hello")

    assert result.usage.calls == 1
    assert result.usage.input_tokens > 0
    assert result.usage.output_tokens > 0
    assert result.usage.cost_usd == 0.0


# --- streaming ------------------------------------------------------------------------


async def test_astream_yields_text_deltas_then_a_final_chunk_with_the_result() -> None:
    agent, _ = agent_with(["Hello there world"])

    chunks = [chunk async for chunk in agent.astream("hi")]

    assert [c.delta for c in chunks[:-1]] == ["Hello", " there", " world"]
    assert all(c.result is None for c in chunks[:-1])
    final = chunks[-1]
    assert final.delta == ""
    assert isinstance(final.result, AgentResult)
    assert final.result.content == "Hello there world"


async def test_astream_reports_tool_calls_and_tool_results_as_they_happen() -> None:
    agent, _ = agent_with(
        [LocalReply.tool_call("get_weather", {"city": "Paris"}, call_id="c1"), "Sunny now."],
        tools=[get_weather],
    )

    chunks = [chunk async for chunk in agent.astream("Weather?")]

    kinds = [_kind(c) for c in chunks]
    assert kinds == ["tool_call", "tool_result", "delta", "delta", "result"]
    assert chunks[0].tool_call == ToolCall(id="c1", name="get_weather", arguments={"city": "Paris"})
    assert chunks[1].tool_result == Message.tool(
        "c1", {"city": "Paris", "temp_c": 21}, name="get_weather"
    )
    assert "".join(c.delta for c in chunks) == "Sunny now."
    assert chunks[-1].result is not None
    assert chunks[-1].result.tool_calls == (chunks[0].tool_call,)


async def test_astream_raises_a_provider_failure() -> None:
    agent, _ = agent_with([ProviderRequestError("bad request", provider="scripted")])

    with pytest.raises(ProviderRequestError, match="bad request"):
        async for _ in agent.astream("hi"):
            pass


def _kind(chunk: AgentChunk) -> str:
    if chunk.result is not None:
        return "result"
    if chunk.tool_call is not None:
        return "tool_call"
    if chunk.tool_result is not None:
        return "tool_result"
    return "delta"


# --- judges ---------------------------------------------------------------------------


def test_a_judge_returning_accept_lets_the_answer_stand() -> None:
    agent, provider = agent_with(["Paris."], judge=lambda result: Verdict.accept("fine"))

    result = agent.run("Capital?")

    assert result.content == "Paris."
    assert result.verdicts == (Verdict.accept("fine"),)
    assert result.attempts == 1
    assert len(provider.requests) == 1


def test_a_bool_judge_true_accepts_and_false_retries_with_generic_feedback() -> None:
    seen: list[str] = []

    def judge(result: AgentResult) -> bool:
        seen.append(result.content)
        return result.content == "good"

    agent, provider = agent_with(["bad", "good"], judge=judge)

    result = agent.run("try")

    assert seen == ["bad", "good"]
    assert result.content == "good"
    assert [v.decision for v in result.verdicts] == [JudgeDecision.RETRY, JudgeDecision.ACCEPT]
    assert provider.requests[1].messages[-1].text == (
        "A reviewer asked for changes: The answer was not accepted; improve it and answer "
        "again.\nRevise your answer."
    )


async def test_an_async_judge_is_awaited() -> None:
    async def judge(result: AgentResult) -> Verdict:
        await asyncio.sleep(0)
        return Verdict.escalate("never") if result.content == "bad" else Verdict.accept()

    agent, _ = agent_with(["bad"], judge=judge)

    with pytest.raises(JudgeEscalated, match="never"):
        await agent.arun("try")


def test_a_two_parameter_judge_is_given_the_request() -> None:
    requests: list[JudgeRequest] = []

    def judge(result: AgentResult, request: JudgeRequest) -> Verdict:
        requests.append(request)
        return Verdict.retry("shorter") if request.attempt == 1 else Verdict.accept()

    agent, _ = agent_with(["long answer", "short"], judge=judge)

    agent.run("Summarise")

    assert [(r.task, r.attempt, r.answer.content, r.goal) for r in requests] == [
        ("Summarise", 1, "long answer", ""),
        ("Summarise", 2, "short", ""),
    ]


def test_retry_sends_the_feedback_and_the_next_answer_is_judged() -> None:
    def judge(result: AgentResult) -> Verdict:
        if "Paris" in result.content:
            return Verdict.accept()
        return Verdict.retry("Name the city.")

    agent, provider = agent_with(["It is in France.", "Paris."], judge=judge)

    result = agent.run("Capital of France?")

    assert sent(provider.requests[1]) == [
        ("user", "Capital of France?"),
        ("assistant", "It is in France."),
        ("user", "A reviewer asked for changes: Name the city.\nRevise your answer."),
    ]
    assert provider.requests[1].messages[-1].metadata == {"judge_feedback": True}
    assert result.content == "Paris."
    assert result.attempts == 2
    assert result.iterations == 2
    assert result.verdicts == (Verdict.retry("Name the city."), Verdict.accept())


def test_escalate_raises_judge_escalated_with_the_result_and_verdicts() -> None:
    agent, provider = agent_with(
        ["Mars."], judge=lambda result: Verdict.escalate("off topic"), name="geo"
    )

    with pytest.raises(JudgeEscalated) as caught:
        agent.run("Capital of France?")

    assert str(caught.value) == "agent 'geo': the judge escalated: off topic"
    assert caught.value.result.content == "Mars."
    assert caught.value.verdicts == (Verdict.escalate("off topic"),)
    assert len(provider.requests) == 1


def test_retries_beyond_judge_attempts_escalate() -> None:
    agent, provider = agent_with(
        ["one", "two", "three"],
        judge=lambda result: Verdict.retry("again"),
        judge_attempts=2,
    )

    with pytest.raises(
        JudgeEscalated, match="still asked for a retry after 2 attempts: again"
    ) as e:
        agent.run("go")

    assert len(provider.requests) == 2
    assert provider.remaining == 1
    assert e.value.result.content == "two"
    assert e.value.verdicts == (Verdict.retry("again"), Verdict.retry("again"))


def test_an_escalated_result_counts_the_judges_usage() -> None:
    judge_provider = ScriptedProvider(
        [LocalReply(text='{"decision": "escalate", "feedback": "no"}', usage=usage(5, 1, 0.5))]
    )
    agent, _ = agent_with(
        [LocalReply(text="x", usage=usage(3, 1, 0.25))],
        judge=LLMJudge("c", provider=judge_provider),
    )

    with pytest.raises(JudgeEscalated) as caught:
        agent.run("hi")

    assert caught.value.result.usage.calls == 2
    assert caught.value.result.usage.cost_usd == pytest.approx(0.75)


def test_an_escalated_result_carries_every_verdict() -> None:
    agent, _ = agent_with(["x"], judge=lambda result: Verdict.escalate("no"))

    with pytest.raises(JudgeEscalated) as caught:
        agent.run("hi")

    assert caught.value.result.verdicts == caught.value.verdicts


def test_judge_attempts_below_one_are_rejected() -> None:
    with pytest.raises(ValueError, match="judge_attempts"):
        Agent(provider=ScriptedProvider(), judge=lambda r: True, judge_attempts=0)


def test_a_judge_returning_something_else_is_a_type_error() -> None:
    agent, _ = agent_with(["x"], judge=lambda result: "yes")

    with pytest.raises(TypeError, match="return a Verdict or a bool"):
        agent.run("go")


def test_an_object_with_evaluate_is_used_as_a_judge() -> None:
    class Strict:
        def __init__(self) -> None:
            self.seen: list[int] = []

        async def evaluate(self, request: JudgeRequest) -> Verdict:
            self.seen.append(request.attempt)
            return Verdict.accept()

    judge = Strict()
    agent, _ = agent_with(["ok"], judge=judge)

    agent.run("go")

    assert agent.judge is judge
    assert judge.seen == [1]


def test_a_judge_that_is_neither_callable_nor_a_judge_is_rejected() -> None:
    with pytest.raises(TypeError, match="evaluate"):
        Agent(provider=ScriptedProvider(), judge=42)  # type: ignore[arg-type]


def test_llm_judge_accepts_with_a_json_verdict_and_its_usage_is_counted() -> None:
    judge_provider = ScriptedProvider(
        [LocalReply(text='{"decision": "accept", "feedback": "correct"}', usage=usage(40, 8, 0.5))]
    )
    judge = LLMJudge("The answer names the capital.", provider=judge_provider, model="judge-m")
    agent, _ = agent_with([LocalReply(text="Paris.", usage=usage(10, 2, 0.25))], judge=judge)

    result = agent.run("Capital of France?")

    assert result.verdicts == (
        Verdict(decision=JudgeDecision.ACCEPT, feedback="correct", usage=usage(40, 8, 0.5)),
    )
    assert result.usage.calls == 2
    assert result.usage.input_tokens == 50
    assert result.usage.cost_usd == pytest.approx(0.75)
    request = judge_provider.last_request
    assert request.model == "judge-m"
    assert request.temperature == 0.0
    assert request.response_format is not None
    assert request.response_format.name == "verdict"
    prompt = request.messages[-1].text
    assert "Task given to the agent:\nCapital of France?" in prompt
    assert "The agent's answer (attempt 1):\nParis." in prompt
    assert "Criteria:\nThe answer names the capital." in prompt


def test_llm_judge_retry_feedback_reaches_the_agent() -> None:
    judge = LLMJudge(
        "Name the city.",
        provider=ScriptedProvider(
            [
                LocalReply.json({"decision": "retry", "feedback": "Say the city's name."}),
                '```json\n{"decision": "ACCEPT", "feedback": ""}\n```',
            ]
        ),
    )
    agent, provider = agent_with(["In France.", "Paris."], judge=judge)

    result = agent.run("Capital of France?")

    assert provider.requests[1].messages[-1].text == (
        "A reviewer asked for changes: Say the city's name.\nRevise your answer."
    )
    assert result.content == "Paris."
    assert [v.decision for v in result.verdicts] == [JudgeDecision.RETRY, JudgeDecision.ACCEPT]


@pytest.mark.parametrize(
    "reply",
    ["looks fine to me", '{"decision": "maybe", "feedback": ""}', '{"feedback": "x"}', "[1, 2]"],
    ids=["prose", "unknown decision", "no decision", "not an object"],
)
def test_an_unparseable_llm_verdict_escalates(reply: str) -> None:
    judge = LLMJudge("anything", provider=ScriptedProvider([reply]))
    agent, _ = agent_with(["answer"], judge=judge)

    with pytest.raises(JudgeEscalated, match="not a valid verdict") as caught:
        agent.run("go")

    [verdict] = caught.value.verdicts
    assert verdict.decision is JudgeDecision.ESCALATE
    assert reply[:20] in verdict.feedback


async def test_llm_judge_is_told_the_goal_when_there_is_one() -> None:
    judge_provider = ScriptedProvider([LocalReply.json({"decision": "accept", "feedback": ""})])
    agent, _ = agent_with(["ok"], judge=LLMJudge("c", provider=judge_provider))

    await agent.execute([Message.user("go")], goal="Ship the release notes")

    assert system_of(judge_provider.last_request) == (
        "You review answers strictly and fairly. The overall goal: Ship the release notes"
    )


# --- provider failures ----------------------------------------------------------------


def test_a_retryable_provider_error_is_retried_per_the_providers_policy() -> None:
    agent, provider = agent_with(
        [ProviderRetryableError("rate limited", provider="scripted", retry_after=1.5), "ok"]
    )

    result = agent.run("hi")

    assert result.content == "ok"
    assert len(provider.requests) == 2
    assert provider.retry_delays == [1.5]
    assert result.iterations == 1


def test_retryable_errors_past_the_policy_are_raised() -> None:
    provider = ScriptedProvider(
        [ProviderRetryableError("overloaded", provider="scripted")] * 2 + ["never reached"],
        retry=ProviderRetry(max_attempts=2),
    )
    agent = Agent(provider=provider)

    with pytest.raises(ProviderRetryableError, match="overloaded"):
        agent.run("hi")

    assert len(provider.requests) == 2
    assert len(provider.retry_delays) == 1


def test_a_request_error_is_raised_at_once() -> None:
    agent, provider = agent_with(
        [ProviderRequestError("invalid model", provider="scripted", status_code=404), "unused"]
    )

    with pytest.raises(ProviderRequestError, match="invalid model"):
        agent.run("hi")

    assert len(provider.requests) == 1
    assert provider.retry_delays == []


# --- default provider -----------------------------------------------------------------


@pytest.fixture
def no_provider_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on a user's machine: the suite's choice of the echo test double undone."""
    monkeypatch.delenv("SELECTGRAPH_PROVIDER", raising=False)


def test_the_echo_test_double_is_chosen_by_name_and_answers_offline() -> None:
    agent = Agent()  # the suite sets SELECTGRAPH_PROVIDER=local

    result = agent.run("hello")

    assert type(agent.provider) is LocalProvider
    assert result.content == '[local] reply to: "hello"'


@pytest.mark.usefixtures("no_provider_chosen")
def test_without_keys_or_the_embedded_model_the_echo_provider_is_used_with_a_warning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_defaults, "embedded_model_available", lambda: False)
    monkeypatch.setattr(_defaults, "_warned", False)

    with pytest.warns(UserWarning, match="replies are placeholders"):
        provider = default_provider()

    assert type(provider) is LocalProvider


@pytest.mark.usefixtures("no_provider_chosen")
def test_without_keys_the_embedded_model_is_the_default_shared_by_every_agent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[str] = []

    class FakeLlama:
        def __init__(self, model: str) -> None:
            made.append(model)

    monkeypatch.setattr(_defaults, "embedded_model_available", lambda: True)
    monkeypatch.setattr(_defaults, "_embedded", {})
    monkeypatch.setenv("SELECTGRAPH_LLAMA_MODEL", "/models/tiny.gguf")
    monkeypatch.setattr(_llama, "LlamaCppProvider", FakeLlama)

    first, second = default_provider(), default_provider()

    assert first is second
    assert isinstance(first, FakeLlama)
    assert made == ["/models/tiny.gguf"]  # loaded once


@pytest.mark.usefixtures("no_provider_chosen")
async def test_openai_key_selects_openai(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key")

    provider = default_provider()

    assert isinstance(provider, OpenAIProvider)
    await provider.aclose()


@pytest.mark.usefixtures("no_provider_chosen")
async def test_anthropic_key_selects_anthropic(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key")

    provider = Agent().provider

    assert isinstance(provider, AnthropicProvider)
    await provider.aclose()


@pytest.mark.usefixtures("no_provider_chosen")
async def test_openai_key_wins_when_both_keys_are_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key")

    provider = default_provider()

    assert isinstance(provider, OpenAIProvider)
    await provider.aclose()


@pytest.mark.parametrize(
    ("choice", "expected"),
    [("local", LocalProvider), (" Anthropic ", AnthropicProvider), ("OPENAI", OpenAIProvider)],
)
async def test_selectgraph_provider_chooses_explicitly(
    monkeypatch: pytest.MonkeyPatch, choice: str, expected: type[Any]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key")
    monkeypatch.setenv("SELECTGRAPH_PROVIDER", choice)

    provider = default_provider()

    assert type(provider) is expected
    if isinstance(provider, OpenAIProvider | AnthropicProvider):
        await provider.aclose()


def test_an_unknown_selectgraph_provider_is_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SELECTGRAPH_PROVIDER", "gemini")

    with pytest.raises(ValueError, match="'gemini' is not a provider"):
        Agent()


def test_judges_and_deciders_default_to_the_local_provider_offline() -> None:
    assert type(LLMJudge("c").provider) is LocalProvider
    assert type(LLMDecider().provider) is LocalProvider
    assert LLMDecider().model == "local"
