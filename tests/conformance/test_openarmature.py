"""Run OpenArmature's graph-engine conformance fixtures against selectgraph."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from selectgraph import GraphBuildError, GraphEvent, GraphRunError

from ._adapter import (
    AdapterError,
    Layout,
    RecordingObserver,
    build_case,
    cases_of,
    failed_invariants,
    load_fixture,
    node_events,
    observers_of,
    state_subset,
)

FIXTURES = (
    Path(__file__).resolve().parents[3] / "shared/conformance/openarmature/graph-engine/conformance"
)

if not FIXTURES.is_dir():
    pytest.skip(f"conformance fixtures not found at {FIXTURES}", allow_module_level=True)

_REQUIRED = {f"{n:03d}" for n in [*range(1, 12), 17, 21, 26, 27, *range(34, 40), 40, 41, 42]}
"""Fixtures that must pass."""

_SNAPSHOTS = (
    "node events carry no pre_state / post_state / parent_states snapshots and count step "
    "per graph, not across subgraph boundaries (graph-engine §6 node event shape)"
)
_QUEUE = "cross-observer delivery_order needs the observer delivery queue (issue 10)"
_DRAIN = "drain() and its timeout summary (graph-engine §6 drain) come in issue 10"
_DRAIN_FOR = (
    "drain_events_for() and accumulate observers keyed by invocation_id "
    "(graph-engine §6 per-invocation drain) come in issue 10"
)
_XFAIL: dict[str, tuple[str, type[BaseException]]] = {
    "012": (f"{_QUEUE}; {_SNAPSHOTS}", AdapterError),
    "013": (
        f"observers attached to a subgraph (target: inner); {_QUEUE}; {_SNAPSHOTS}",
        AdapterError,
    ),
    "014": (f"{_QUEUE}; {_SNAPSHOTS}, nor the error category", AdapterError),
    "015": (
        f"raising observers reported through warnings.warn (graph-engine §6: selectgraph logs "
        f"them); {_QUEUE}; {_SNAPSHOTS}",
        AdapterError,
    ),
    "016": (_SNAPSHOTS, AdapterError),
    "018": (
        f"observers take no phases= subscription at registration (an empty set must raise); "
        f"{_SNAPSHOTS}",
        AdapterError,
    ),
    "019": (_SNAPSHOTS, AdapterError),
    "020": (
        f"edge conditions given as a callable or field lookup, and edge_exception on the "
        f"completed event (graph-engine §4/§6); {_SNAPSHOTS}",
        AdapterError,
    ),
    "022": (_DRAIN, AdapterError),
    "023": (f"{_DRAIN}; multi-invocation fixtures (invoke:)", AdapterError),
    "024": (_DRAIN, AdapterError),
    "025": (_DRAIN, AdapterError),
    "028": (_DRAIN_FOR, AdapterError),
    "029": (_DRAIN_FOR, AdapterError),
    "030": (_DRAIN_FOR, AdapterError),
    "031": (_DRAIN_FOR, AdapterError),
    "032": (_DRAIN_FOR, AdapterError),
    "033": (_DRAIN_FOR, AdapterError),
}
"""Fixtures expected to fail, why, and what they fail with (strict: a pass is an error)."""


def _params() -> list[Any]:
    params = []
    for path in sorted(FIXTURES.glob("*.yaml")):
        number = path.name[:3]
        marks = []
        if number not in _REQUIRED:
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


def _run_case(case: dict[str, Any]) -> None:
    if "expected_compile_error" in case:
        with pytest.raises(GraphBuildError) as caught:
            build_case(case).compile()
        assert case["expected_compile_error"] in caught.value.categories
        return

    attached, per_run = observers_of(case)
    layout = Layout()
    graph = build_case(case, layout, attached)
    if "expected_compile_warning" in case:
        _check_warnings(case, [d.category for d in graph.validate()])
    if "expected" not in case and "expected_error" not in case:
        return  # a compile-only case

    initial = case.get("initial_state") or {}
    outcomes = []
    for _ in range(case.get("run_count", 1)):
        if "expected_error" in case:
            outcomes.append(_run_expecting_error(graph, initial, case["expected_error"]))
        else:
            for observer in (*attached, *per_run):
                observer.events.clear()
            outcomes.append(
                _run_expecting_success(graph, initial, case["expected"], layout, attached, per_run)
            )
    assert all(outcome == outcomes[0] for outcome in outcomes), "runs were not deterministic"


def _run_expecting_success(
    graph: Any,
    initial: dict[str, Any],
    expected: dict[str, Any],
    layout: Layout,
    attached: list[RecordingObserver],
    per_run: list[RecordingObserver],
) -> Any:
    unknown = set(expected) - {
        "final_state",
        "execution_order",
        "observer_events",
        "observer_event_invariants",
    }
    for key in unknown & _LATER_EXPECTATIONS.keys():
        raise AdapterError("fixture_directive_unknown", _LATER_EXPECTATIONS[key])
    if unknown:
        raise AdapterError("fixture_directive_unknown", f"expected keys {sorted(unknown)}")
    _check_event_fields(expected.get("observer_events") or {})
    observers = attached + per_run
    result = graph.run(dict(initial), observers=per_run)
    final = state_subset(result.state, expected.get("final_state", {}))
    if "final_state" in expected:
        assert final == expected["final_state"]
    order = layout.execution_order(graph.name, result.node_order)
    if "execution_order" in expected:
        assert order == expected["execution_order"]
    seen = {o.name: _phases(node_events(o.events, layout), o) for o in observers}
    for name, wanted in (expected.get("observer_events") or {}).items():
        got = [
            {k: event.get(k, "<absent>") for k in want}
            for event, want in zip(seen[name], wanted, strict=False)
        ]
        assert len(seen[name]) == len(wanted)
        assert got == wanted
    if "observer_event_invariants" in expected:
        events = seen[observers[0].name] if len(observers) == 1 else None
        if events is None:
            raise AdapterError("fixture_schema_invalid", "invariants need exactly one observer")
        assert failed_invariants(events, expected["observer_event_invariants"]) == []
    return final, order


_LATER_EXPECTATIONS = {
    "node_drain_summaries": "drain_events_for() (graph-engine §6) comes in issue 10",
    "node_accumulator_snapshot_invariants": (
        "accumulate observers and drain_events_for() come in issue 10"
    ),
    "delivery_order": "observer delivery queues (graph-engine §6) come in issue 10",
}
_NO_STATE_REASON = (
    "selectgraph's node events carry no pre_state / post_state / parent_states snapshots, and "
    "their step counts per graph rather than across subgraph boundaries (graph-engine §6 "
    "node event shape)"
)
_STATE_FIELDS = frozenset({"pre_state", "post_state", "parent_states", "step"})


def _check_event_fields(expected: dict[str, list[dict[str, Any]]]) -> None:
    """Refuse expected events asserting fields selectgraph's events do not carry."""
    for events in expected.values():
        for event in events:
            missing = _STATE_FIELDS & set(event)
            if missing:
                raise AdapterError("fixture_directive_unknown", _NO_STATE_REASON)


def _phases(events: list[dict[str, Any]], observer: RecordingObserver) -> list[dict[str, Any]]:
    return [e for e in events if e["phase"] in observer.phases]


def _run_expecting_error(graph: Any, initial: dict[str, Any], expected: dict[str, Any]) -> Any:
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
        graph.run(dict(initial))
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


@pytest.mark.parametrize("path", _params())
def test_fixture(path: Path) -> None:
    for case in cases_of(load_fixture(path)):
        _run_case(case)


def _fixture_case(number: str) -> dict[str, Any]:
    (path,) = FIXTURES.glob(f"{number}-*.yaml")
    return cases_of(load_fixture(path))[0]


def _recorded(case: dict[str, Any]) -> tuple[list[GraphEvent], Layout]:
    (observer,), _ = observers_of(case)
    layout = Layout()
    build_case(case, layout, [observer]).run(dict(case.get("initial_state") or {}))
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
