"""Run OpenArmature's graph-engine conformance fixtures against selectgraph."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from selectgraph import GraphBuildError, GraphRunError

from ._adapter import AdapterError, build_case, cases_of, load_fixture, state_subset

FIXTURES = (
    Path(__file__).resolve().parents[3] / "shared/conformance/openarmature/graph-engine/conformance"
)

if not FIXTURES.is_dir():
    pytest.skip(f"conformance fixtures not found at {FIXTURES}", allow_module_level=True)

_REQUIRED = {f"{n:03d}" for n in [*range(1, 12), 26, 27, *range(34, 39), 40, 41, 42]}
"""Fixtures that must pass."""

_NOT_YET = {
    "observers": "observer hooks and their event vocabulary (graph-engine §6) come later",
    "drain": "observer delivery queues and drain() (graph-engine §6) come later",
    "fan_out": "fan-out nodes (pipeline-utilities §9) come later",
    "parallel_branches": "parallel branches (pipeline-utilities §11) come later",
}


def _expected_failure(path: Path) -> str:
    text = path.read_text()
    for directive, reason in _NOT_YET.items():
        if f"{directive}:" in text:
            return reason
    return "not yet supported"


def _params() -> list[Any]:
    params = []
    for path in sorted(FIXTURES.glob("*.yaml")):
        number = path.name[:3]
        marks = []
        if number not in _REQUIRED:
            reason = _expected_failure(path)
            marks.append(pytest.mark.xfail(reason=reason, raises=AdapterError, strict=True))
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

    graph = build_case(case)
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
            outcomes.append(_run_expecting_success(graph, initial, case["expected"]))
    assert all(outcome == outcomes[0] for outcome in outcomes), "runs were not deterministic"


def _run_expecting_success(graph: Any, initial: dict[str, Any], expected: dict[str, Any]) -> Any:
    unknown = set(expected) - {"final_state", "execution_order"}
    if unknown:
        raise AdapterError("fixture_directive_unknown", f"expected keys {sorted(unknown)}")
    result = graph.run(dict(initial))
    final = state_subset(result.state, expected.get("final_state", {}))
    if "final_state" in expected:
        assert final == expected["final_state"]
    if "execution_order" in expected:
        assert result.node_order == expected["execution_order"]
    return final, result.node_order


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
