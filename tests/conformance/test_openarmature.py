"""Run OpenArmature's graph-engine conformance fixtures against selectgraph."""

from __future__ import annotations

import asyncio
import dataclasses
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from selectgraph import GraphBuildError, GraphEvent, GraphRunError
from selectgraph.observe import DrainSummary, ObserverWarning, drain, drain_events_for, subscribe

from ._adapter import (
    AdapterError,
    Harness,
    Layout,
    NodeDrain,
    build_case,
    cases_of,
    failed_invariants,
    harness_of,
    load_fixture,
    node_events,
    state_subset,
)

FIXTURES = (
    Path(__file__).resolve().parents[3] / "shared/conformance/openarmature/graph-engine/conformance"
)

if not FIXTURES.is_dir():
    pytest.skip(f"conformance fixtures not found at {FIXTURES}", allow_module_level=True)

_XFAIL: dict[str, tuple[str, type[BaseException]]] = {}
"""Fixtures expected to fail, why, and what they fail with (strict: a pass is an error).

Every other fixture must pass."""


def _params() -> list[Any]:
    params = []
    for path in sorted(FIXTURES.glob("*.yaml")):
        number = path.name[:3]
        marks = []
        if number in _XFAIL:
            reason, raises = _XFAIL[number]
            marks.append(pytest.mark.xfail(reason=reason, raises=raises, strict=True))
        params.append(pytest.param(path, id=path.stem, marks=marks))
    return params


def _check_warnings(case: dict[str, Any], warnings: list[str]) -> None:
    expected = case["expected_compile_warning"]
    if isinstance(expected, list):
        assert sorted(warnings) == sorted(expected)
    else:
        assert expected in warnings


_SLACK = 0.25
"""Seconds a timed drain may overrun its timeout on a loaded machine (scheduling only)."""


@dataclass
class Outcome:
    """One invocation of a case's graph and what the harness saw of it."""

    run_id: str
    mark: int
    """Where the invocation's deliveries start in the harness's delivery log."""
    result: Any = None
    summary: DrainSummary | None = None
    drain_elapsed: float = 0.0
    drain_timeout: float | None = None
    delivered_at_drain: dict[str, int] = field(default_factory=dict)
    node_drains: list[NodeDrain] = field(default_factory=list)


@dataclass
class Run:
    """A case being run: its graph, harness, fixture and the invocations so far."""

    case: dict[str, Any]
    graph: Any
    layout: Layout
    harness: Harness
    outcomes: list[Outcome] = field(default_factory=list)


def _run_case(case: dict[str, Any]) -> None:
    if "expected_compile_error" in case:
        with pytest.raises(GraphBuildError) as caught:
            build_case(case).compile()
        assert case["expected_compile_error"] in caught.value.categories
        return

    layout = Layout()
    harness = harness_of(case, layout)
    graph = build_case(case, layout, (), harness)
    if "expected_compile_warning" in case:
        _check_warnings(case, [d.category for d in graph.validate()])
    run = Run(case, graph, layout, harness)
    if "invocations" in case:
        for invocation in case["invocations"]:
            unknown = set(invocation) - {"name", "initial_state", "drain", "expected"}
            if unknown:
                raise AdapterError("fixture_directive_unknown", f"invocation {sorted(unknown)}")
            _invoke(run, invocation.get("initial_state") or {}, invocation)
        _check_invariants(run, case.get("invariants") or {}, None)
        return
    if "expected" not in case and "expected_error" not in case:
        return  # a compile-only case
    invoke = case.get("invoke", case.get("invoke_with")) or {}
    if set(invoke) - {"drain"}:
        raise AdapterError("fixture_directive_unknown", f"invoke keys {sorted(invoke)}")
    step = {"expected": case.get("expected") or {}, "drain": invoke.get("drain")}
    if "expected_error" in case:
        step["expected_error"] = case["expected_error"]
    outcomes = []
    for _ in range(case.get("run_count", 1)):
        outcomes.append(_invoke(run, case.get("initial_state") or {}, step))
    assert all(outcome == outcomes[0] for outcome in outcomes), "runs were not deterministic"
    _check_invariants(run, case.get("invariants") or {}, None)


_EXPECTED_KEYS = frozenset(
    {
        "final_state",
        "execution_order",
        "observer_events",
        "observer_event_invariants",
        "delivery_order",
        "no_propagated_error",
        "drain_summary",
        "node_drain_summaries",
        "node_accumulator_snapshots",
        "node_accumulator_snapshot_invariants",
        "final_accumulator_state",
        "invariants",
        "expected_error",
    }
)
_UNSUPPORTED: dict[str, str] = {}


def _invoke(run: Run, initial: dict[str, Any], step: dict[str, Any]) -> Any:
    """Run the graph once as ``step`` (``expected``, ``drain``, ``expected_error``) says."""
    expected = dict(step.get("expected") or {})
    error_spec = step.get("expected_error", expected.pop("expected_error", None))
    for key in set(expected) & _UNSUPPORTED.keys():
        raise AdapterError("fixture_directive_unknown", _UNSUPPORTED[key])
    if expected.pop("empty_phases_raises_at_registration", False):
        # Refused when registered, before anything runs (graph-engine §6).
        with pytest.raises(ValueError, match="phases is empty"):
            subscribe(run.harness.observers[0], phases=())
    unknown = set(expected) - _EXPECTED_KEYS
    if unknown:
        raise AdapterError("fixture_directive_unknown", f"expected keys {sorted(unknown)}")
    harness = run.harness
    mark, drains = len(harness.deliveries), len(harness.node_drains)
    started = len(harness.snapshots.run_ids)
    summary_key: Any = None
    # selectgraph reports a raising async observer with warnings.warn from its
    # delivery thread: record those (the suite turns warnings into errors).
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ObserverWarning)
        if error_spec is not None:
            summary_key = _run_expecting_error(run, initial, error_spec)
            result = None
        else:
            result = run.graph.run(dict(initial), observers=harness.per_invocation())
        if len(harness.snapshots.run_ids) != started + 1:
            raise AssertionError("the run emitted no RunStarted for the outermost graph")
        outcome = Outcome(harness.snapshots.run_ids[-1], mark, result)
        run.outcomes.append(outcome)
        outcome.node_drains = harness.node_drains[drains:]
        _drain(run, outcome, step.get("drain"))
    reported = [w for w in caught if issubclass(w.category, ObserverWarning)]
    if expected.get("no_propagated_error"):
        assert result is not None
    _check_reported(run, outcome, reported)

    final = order = None
    if result is not None:
        final = state_subset(result.state, expected.get("final_state", {}))
        if "final_state" in expected:
            assert final == expected["final_state"]
        order = run.layout.execution_order(run.graph.name, result.node_order)
        if "execution_order" in expected:
            assert order == expected["execution_order"]
    _check_observers(run, outcome, expected)
    _check_drains(run, outcome, expected)
    _check_invariants(run, expected.get("invariants") or {}, outcome)
    return final, order, summary_key


def _check_reported(run: Run, outcome: Outcome, reported: list[Any]) -> None:
    """Each event a ``raise`` observer got was reported as an ObserverWarning naming it."""
    raising = [o for o in run.harness.observers if o.behavior == "raise"]
    got = sum(len(o.bucket(outcome.run_id)) for o in raising)
    assert len(reported) == got
    assert all(any(o.name in str(w.message) for o in raising) for w in reported)


def _drain(run: Run, outcome: Outcome, spec: Any) -> None:
    """The ``drain`` directive: the engine's real drain(); else wait for this run's events."""
    if spec is None:
        asyncio.run(drain_events_for(outcome.run_id))
        return
    if set(spec) - {"timeout_seconds"}:
        raise AdapterError("fixture_directive_unknown", f"drain keys {sorted(spec)}")
    outcome.drain_timeout = spec.get("timeout_seconds")
    began = time.monotonic()
    outcome.summary = asyncio.run(drain(outcome.drain_timeout))
    outcome.drain_elapsed = time.monotonic() - began
    outcome.delivered_at_drain = {
        o.name: _count(run, o.bucket(outcome.run_id)) for o in run.harness.observers
    }


def _count(run: Run, events: list[GraphEvent]) -> int:
    return len(node_events(events, run.layout))


def _mapped(run: Run, events: list[GraphEvent], phases: frozenset[str]) -> list[dict[str, Any]]:
    mapped = node_events(events, run.layout, run.harness.snapshots)
    return [e for e in mapped if e["phase"] in phases]


def _project(event: dict[str, Any], want: dict[str, Any]) -> dict[str, Any]:
    got = {k: event.get(k, "<absent>") for k in want}
    if isinstance(want.get("error"), dict):  # {category: ...}: the error as a record
        got["error"] = {"category": event.get("error", "<absent>")}
    return got


def _same_events(got: list[dict[str, Any]], wanted: list[dict[str, Any]]) -> None:
    assert [_project(e, w) for e, w in zip(got, wanted, strict=False)] == wanted
    assert len(got) == len(wanted)


_ALL_PHASES = frozenset({"started", "completed"})


def _check_observers(run: Run, outcome: Outcome, expected: dict[str, Any]) -> None:
    deliveries = run.harness.deliveries[outcome.mark :]
    for name, wanted in (expected.get("observer_events") or {}).items():
        observer = run.harness.observer(name)
        events = [e for n, e in deliveries if n == name]
        _same_events(_mapped(run, events, observer.phases), wanted)
    if "delivery_order" in expected:
        order = [
            {"observer": name, "step": e.get("step"), "phase": e["phase"]}
            for name, event in deliveries
            for e in _mapped(run, [event], run.harness.observer(name).phases)
        ]
        assert order == expected["delivery_order"]
    if "observer_event_invariants" in expected:
        if len(run.harness.observers) != 1:
            raise AdapterError("fixture_schema_invalid", "invariants need exactly one observer")
        (observer,) = run.harness.observers
        seen = _mapped(run, [e for _, e in deliveries], observer.phases)
        assert failed_invariants(seen, expected["observer_event_invariants"]) == []
    for name, wanted in (expected.get("final_accumulator_state") or {}).items():
        bucket = run.harness.observer(name).bucket(outcome.run_id)
        _same_events(_mapped(run, bucket, _ALL_PHASES), wanted)


def _check_summary(summary: DrainSummary | None, wanted: dict[str, Any]) -> None:
    assert summary is not None, "no drain was made"
    unknown = set(wanted) - {"timeout_reached", "undelivered_count", "undelivered_count_min"}
    if unknown:
        raise AdapterError("fixture_directive_unknown", f"drain summary keys {sorted(unknown)}")
    assert summary.timeout_reached == wanted["timeout_reached"]
    if "undelivered_count" in wanted:
        assert summary.undelivered_count == wanted["undelivered_count"]
    if "undelivered_count_min" in wanted:
        assert summary.undelivered_count >= wanted["undelivered_count_min"]


def _node_drain(outcome: Outcome, node: str) -> NodeDrain:
    found = [d for d in outcome.node_drains if d.node == node]
    assert len(found) == 1, f"node {node!r} drained {len(found)} times"
    return found[0]


def _check_drains(run: Run, outcome: Outcome, expected: dict[str, Any]) -> None:
    if "drain_summary" in expected:
        _check_summary(outcome.summary, expected["drain_summary"])
    for node, wanted in (expected.get("node_drain_summaries") or {}).items():
        _check_summary(_node_drain(outcome, node).summary, wanted)
    for node, by_observer in (expected.get("node_accumulator_snapshots") or {}).items():
        taken = _node_drain(outcome, node)
        for name, wanted in by_observer.items():
            _same_events(_mapped(run, _snapshot_of(run, taken, name), _ALL_PHASES), wanted)
    for node, by_observer in (expected.get("node_accumulator_snapshot_invariants") or {}).items():
        taken = _node_drain(outcome, node)
        for name, predicates in by_observer.items():
            events = _mapped(run, _snapshot_of(run, taken, name), _ALL_PHASES)
            assert failed_invariants(events, predicates) == []


def _snapshot_of(run: Run, taken: NodeDrain, name: str) -> list[GraphEvent]:
    if run.harness.observer(name) is not taken.observer:
        raise AdapterError("fixture_schema_invalid", f"node {taken.node!r} snapshots another")
    return taken.bucket


def _run_expecting_error(run: Run, initial: dict[str, Any], expected: dict[str, Any]) -> Any:
    unknown = set(expected) - {
        "category",
        "raised_from",
        "message",
        "recoverable_state",
        "execution_order",
    }
    if unknown:
        raise AdapterError("fixture_directive_unknown", f"expected_error keys {sorted(unknown)}")
    with pytest.raises(GraphRunError) as caught:
        run.graph.run(dict(initial), observers=run.harness.per_invocation())
    error = caught.value
    assert error.category == expected["category"]
    if "raised_from" in expected:
        assert error.node == expected["raised_from"]
    if "message" in expected:
        assert str(error.__cause__) == expected["message"]
    recovered = None
    if "recoverable_state" in expected:
        assert error.state is not None
        recovered = state_subset(error.state, expected["recoverable_state"])
        assert recovered == expected["recoverable_state"]
    if "execution_order" in expected:
        assert error.result is not None
        assert error.result.node_order == expected["execution_order"]
    return error.category, error.node, recovered


# ---------------------------------------------------------------- invariants
def _timed_drains(run: Run) -> list[tuple[float, float]]:
    """``(elapsed, timeout)`` of every drain made with a timeout, node drains included."""
    found = [(o.drain_elapsed, o.drain_timeout) for o in run.outcomes if o.summary is not None]
    found += [(d.elapsed, d.timeout) for o in run.outcomes for d in o.node_drains]
    return [(elapsed, timeout) for elapsed, timeout in found if timeout is not None]


def _within_timeout(run: Run, _: Outcome | None) -> bool:
    drains = _timed_drains(run)
    return bool(drains) and all(elapsed <= timeout + _SLACK for elapsed, timeout in drains)


def _complete(run: Run, run_id: str) -> bool:
    """Every node event run ``run_id`` emitted reached every observer."""
    emitted = run.harness.snapshots.emitted(run_id)
    return emitted > 0 and all(
        _count(run, o.bucket(run_id)) == emitted for o in run.harness.observers
    )


def _usable_after_timeout(run: Run, outcome: Outcome | None) -> bool:
    """After a timed-out drain, the same graph runs again and every event is delivered."""
    assert outcome is not None
    assert outcome.summary is not None
    assert outcome.summary.timed_out
    result = run.graph.run({}, observers=run.harness.per_invocation())
    summary = asyncio.run(drain())
    wanted = run.case["expected"].get("final_state", {})
    return (
        not summary.timed_out
        and state_subset(result.state, wanted) == wanted
        and _complete(run, run.harness.snapshots.run_ids[-1])
    )


def _second_independent(run: Run, _: Outcome | None) -> bool:
    first, second = run.outcomes[:2]
    assert first.summary is not None
    assert first.summary.timed_out
    delivered = run.harness.deliveries[second.mark :]
    return (
        second.summary is not None
        and not second.summary.timed_out
        and second.summary.undelivered_count == 0
        and all(event.run_id == second.run_id for _, event in delivered)
        and _complete(run, second.run_id)
    )


def _waited_for_all(run: Run, outcome: Outcome | None) -> bool:
    assert outcome is not None
    assert outcome.summary is not None
    emitted = run.harness.snapshots.emitted(outcome.run_id)
    counts = outcome.delivered_at_drain
    return emitted > 0 and bool(counts) and all(count == emitted for count in counts.values())


def _node_drains(run: Run, outcome: Outcome | None) -> list[NodeDrain]:
    drains = outcome.node_drains if outcome is not None else []
    if outcome is None:
        drains = [d for o in run.outcomes for d in o.node_drains]
    assert drains, "no node drained"
    return drains


def _synchronized(run: Run, outcome: Outcome | None) -> bool:
    return all(_count(run, d.bucket) == d.emitted for d in _node_drains(run, outcome))


def _not_blocked(run: Run, outcome: Outcome | None) -> bool:
    return all(
        not d.summary.timed_out
        and not any(
            e["node_name"] == d.node and e["phase"] == "completed"
            for e in node_events(d.bucket, run.layout)
        )
        for d in _node_drains(run, outcome)
    )


def _workers_kept(run: Run, _: Outcome | None) -> bool:
    timed_out = [d for d in _node_drains(run, None) if d.summary.timed_out]
    asyncio.run(drain())
    return bool(timed_out) and all(_complete(run, d.run_id) for d in timed_out)


def _run_intact(run: Run, outcome: Outcome | None) -> bool:
    assert outcome is not None
    return outcome.result is not None and _complete(run, outcome.run_id)


def _unique_ids(run: Run, _: Outcome | None) -> bool:
    ids = [o.run_id for o in run.outcomes]
    return len(ids) > 1 and len(set(ids)) == len(ids)


def _scoped(run: Run, _: Outcome | None) -> bool:
    drains = _node_drains(run, None)
    return all(
        d.run_id == o.run_id and all(e.run_id == d.run_id for e in d.bucket)
        for o in run.outcomes
        for d in o.node_drains
    ) and len({d.run_id for d in drains}) == len(drains)


def _covered_inner(run: Run, outcome: Outcome | None) -> bool:
    return all(
        any("fan_out_index" in e or "branch_name" in e for e in node_events(d.bucket, run.layout))
        and all(e.run_id == d.run_id for e in d.bucket)
        for d in _node_drains(run, outcome)
    )


_INVARIANTS: dict[str, Callable[[Run, Outcome | None], bool]] = {
    "drain_returned_within_timeout": _within_timeout,
    "graph_state_intact_after_timeout": _usable_after_timeout,
    "second_invocation_drain_independent_of_first": _second_independent,
    "drain_waited_for_all_events": _waited_for_all,
    "drain_events_for_synchronized_accumulator_read": _synchronized,
    "drain_returned_without_blocking_on_post_call_events": _not_blocked,
    "workers_not_cancelled_on_per_invocation_drain_timeout": _workers_kept,
    "graph_state_intact_after_per_invocation_drain_timeout": _run_intact,
    "each_invocation_has_unique_invocation_id": _unique_ids,
    "drain_scopes_strictly_to_supplied_invocation_id": _scoped,
    "drain_covered_all_fan_out_instances_via_shared_invocation_id": _covered_inner,
    "drain_covered_all_parallel_branches_via_shared_invocation_id": _covered_inner,
}
"""Fixture-level invariants (conformance-adapter §5.9): name -> check on the runs made."""


_EVENT_INVARIANTS = frozenset({"no_events_for_node", "edge_resolution_failure_in_completed_event"})
"""Fixture-level invariants over the node events every observer saw (020)."""


def _check_invariants(run: Run, invariants: dict[str, Any], outcome: Outcome | None) -> None:
    for name, want in invariants.items():
        if name in _EVENT_INVARIANTS:
            mark = outcome.mark if outcome is not None else 0
            seen = _mapped(run, [e for _, e in run.harness.deliveries[mark:]], _ALL_PHASES)
            assert failed_invariants(seen, {name: want}) == [], f"invariant {name} is not {want}"
            continue
        check = _INVARIANTS.get(name)
        if check is None:
            raise AdapterError("fixture_directive_unknown", f"invariant {name!r}")
        assert check(run, outcome) == want, f"invariant {name} is not {want}"


@pytest.mark.parametrize("path", _params())
def test_fixture(path: Path) -> None:
    for case in cases_of(load_fixture(path)):
        _run_case(case)


def _fixture_case(number: str) -> dict[str, Any]:
    (path,) = FIXTURES.glob(f"{number}-*.yaml")
    return cases_of(load_fixture(path))[0]


def _recorded(case: dict[str, Any]) -> tuple[list[GraphEvent], Layout]:
    layout = Layout()
    harness = harness_of(case, layout)
    build_case(case, layout, (), harness).run(dict(case.get("initial_state") or {}))
    asyncio.run(drain())
    (observer,) = harness.observers
    return observer.events, layout


def test_fan_out_invariants_fail_without_instance_indices() -> None:
    case = _fixture_case("017")
    events, layout = _recorded(case)
    predicates = case["expected"]["observer_event_invariants"]
    mapped = node_events(events, layout)
    assert failed_invariants(mapped, predicates) == []
    unindexed = [{k: v for k, v in e.items() if k != "fan_out_index"} for e in mapped]
    failed = failed_invariants(unindexed, predicates)
    assert {"inner_event_count", "inner_fan_out_indices_seen"} <= set(failed)


def test_events_missing_their_branch_are_an_engine_error() -> None:
    events, layout = _recorded(_fixture_case("017"))
    anonymous = [dataclasses.replace(event, branch=None) for event in events]
    with pytest.raises(AssertionError, match="entered 'process''s fan_out"):
        node_events(anonymous, layout)


def test_branch_name_invariants_fail_on_a_swapped_branch() -> None:
    case = _fixture_case("021")
    events, layout = _recorded(case)
    predicates = case["expected"]["observer_event_invariants"]
    mapped = node_events(events, layout)
    assert failed_invariants(mapped, predicates) == []
    swapped = [
        {**e, "branch_name": "beta"} if e.get("branch_name") == "alpha" else e for e in mapped
    ]
    assert failed_invariants(swapped, predicates) == ["inner_events_carry_correct_branch_name"]


def test_fan_out_node_is_one_pair_and_its_instances_are_hidden() -> None:
    events, layout = _recorded(_fixture_case("017"))
    mapped = node_events(events, layout)
    process = [e for e in mapped if e["node_name"] == "process"]
    assert [(e["phase"], e["namespace"]) for e in process] == [
        ("started", ["process"]),
        ("completed", ["process"]),
    ]
    inner = sorted(
        (e["fan_out_index"], e["phase"], tuple(e["namespace"]), tuple(e["fan_out_index_chain"]))
        for e in mapped
        if e["node_name"] == "compute"
    )
    assert inner == [
        (i, phase, ("process", "compute"), (i,))
        for i in range(3)
        for phase in ("completed", "started")
    ]


def test_unknown_invariant_is_refused() -> None:
    with pytest.raises(AdapterError, match="fixture_directive_unknown"):
        failed_invariants([], {"leaf_node_colour": "blue"})


def test_raising_observer_under_warnings_as_errors_keeps_delivering() -> None:
    case = _fixture_case("015")
    layout = Layout()
    harness = harness_of(case, layout)
    graph = build_case(case, layout, (), harness)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ObserverWarning)
        graph.run({})
        summary = asyncio.run(drain(5.0))
    assert not summary.timed_out
    recorder = harness.observer("obs_recorder")
    assert len(node_events(recorder.events, layout)) == 6
