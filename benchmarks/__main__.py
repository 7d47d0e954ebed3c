"""Benchmarks: time selectgraph and LangGraph on the same workloads, in the same process.

Run with ``python -m benchmarks`` (``--quick`` for a short smoke run). Both
libraries' runs are interleaved, repetition by repetition, so they share the
machine's conditions; each figure is the median over repetitions, and the
ratio is LangGraph's median over selectgraph's.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from benchmarks import workloads as w

Builder = Callable[[], w.Workload]


@dataclass(frozen=True, slots=True)
class Case:
    """One workload, measured for both libraries."""

    name: str
    unit: str
    units_per_call: int
    """How many units one call performs (steps per run, or 1 for per-run figures)."""
    calls_per_sample: int
    selectgraph: Builder
    langgraph: Builder | None
    target_us: float | None = None


@dataclass(frozen=True, slots=True)
class Row:
    """Measured figures of one case."""

    name: str
    unit: str
    selectgraph_us: float
    selectgraph_min_us: float
    langgraph_us: float | None
    ratio: float | None
    target_us: float | None


CASES = [
    Case("linear3", "µs/run", 1, 200, w.selectgraph_linear3, w.langgraph_linear3, 15.0),
    Case("loop1000", "µs/step", w.LOOP_STEPS, 3, w.selectgraph_loop, w.langgraph_loop, 5.0),
    Case("bigstate", "µs/step", w.BIG_STEPS, 5, w.selectgraph_bigstate, w.langgraph_bigstate),
]

SWEEP = [10, 1_000, 10_000]
"""State sizes (keys) for the per-step flatness sweep."""
SWEEP_SHORT, SWEEP_LONG = 50, 550
"""Steps of the two runs whose difference gives the marginal cost of a step."""


def _sample(run: w.Workload, calls: int, units: int) -> float:
    gc.collect()
    start = time.perf_counter()
    for _ in range(calls):
        run()
    return (time.perf_counter() - start) / calls / units * 1e6


def measure(case: Case, repeats: int, with_langgraph: bool) -> Row:
    """Median (and min) microseconds per unit for both libraries, interleaved."""
    ours = case.selectgraph()
    theirs = case.langgraph() if with_langgraph and case.langgraph is not None else None
    for run in (ours, theirs):
        if run is not None:
            _sample(run, max(1, case.calls_per_sample // 4), case.units_per_call)  # warm up
    ours_samples: list[float] = []
    theirs_samples: list[float] = []
    for _ in range(repeats):
        ours_samples.append(_sample(ours, case.calls_per_sample, case.units_per_call))
        if theirs is not None:
            # LangGraph is ~50x slower per call: fewer calls keep the run short.
            calls = max(1, case.calls_per_sample // 20)
            theirs_samples.append(_sample(theirs, calls, case.units_per_call))
    ours_median = statistics.median(ours_samples)
    theirs_median = statistics.median(theirs_samples) if theirs_samples else None
    return Row(
        name=case.name,
        unit=case.unit,
        selectgraph_us=ours_median,
        selectgraph_min_us=min(ours_samples),
        langgraph_us=theirs_median,
        ratio=theirs_median / ours_median if theirs_median else None,
        target_us=case.target_us,
    )


@dataclass(frozen=True, slots=True)
class SweepPoint:
    """Costs of a loop over a state of one size."""

    keys: int
    step_us: float
    """Marginal µs per step: the cost a further step adds, whatever the run's fixed cost."""
    run_us: float
    """µs per run spent outside the steps (setup, copying the input, the result)."""


def sweep(repeats: int) -> list[SweepPoint]:
    """Per-step and per-run cost of a looping graph, by number of keys in the state.

    Runs of SHORT and LONG steps are timed; their difference over the extra steps
    is the marginal cost of a step, which must not grow with the state.
    """
    points = []
    for keys in SWEEP:
        short, long = w.selectgraph_keys(keys, SWEEP_SHORT), w.selectgraph_keys(keys, SWEEP_LONG)
        for run in (short, long):
            _sample(run, 2, 1)
        shorts: list[float] = []
        longs: list[float] = []
        for _ in range(repeats):
            shorts.append(_sample(short, 20, 1))
            longs.append(_sample(long, 20, 1))
        short_us, long_us = statistics.median(shorts), statistics.median(longs)
        step_us = (long_us - short_us) / (SWEEP_LONG - SWEEP_SHORT)
        points.append(SweepPoint(keys, step_us, short_us - step_us * SWEEP_SHORT))
    return points


def _langgraph_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("langgraph")
    except Exception:
        return None


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks and print a table (and optionally JSON)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="few repetitions (a smoke run)")
    parser.add_argument("--repeats", type=int, default=15, help="repetitions per workload")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    parser.add_argument("--no-langgraph", action="store_true", help="skip LangGraph")
    args = parser.parse_args(argv)
    repeats = 3 if args.quick else args.repeats

    lg_version = None if args.no_langgraph else _langgraph_version()
    if lg_version is None and not args.no_langgraph:
        print("langgraph is not installed (pip install -e '.[bench]'); timing selectgraph only\n")
    from selectgraph import __version__

    print(
        f"selectgraph {__version__} vs langgraph {lg_version or '-'}, Python "
        f"{platform.python_version()}, {platform.machine()}; median of {repeats} repetitions\n"
    )
    rows = [measure(case, repeats, lg_version is not None) for case in CASES]
    header = (
        f"{'workload':<10} {'unit':<8} {'selectgraph':>12} {'langgraph':>11} {'ratio':>8}  target"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        theirs = f"{row.langgraph_us:11.1f}" if row.langgraph_us is not None else f"{'-':>11}"
        ratio = f"{row.ratio:7.1f}x" if row.ratio is not None else f"{'-':>8}"
        target = ""
        if row.target_us is not None:
            met = "met" if row.selectgraph_us <= row.target_us else "MISSED"
            target = f"<= {row.target_us:g} ({met})"
        print(f"{row.name:<10} {row.unit:<8} {row.selectgraph_us:12.2f} {theirs} {ratio}  {target}")

    by_name = {row.name: row for row in rows}
    step_ratio = by_name["bigstate"].selectgraph_us / by_name["loop1000"].selectgraph_us
    verdict = "met" if step_ratio <= 2 else "MISSED"
    print(
        f"\nbigstate step / loop1000 step (selectgraph): {step_ratio:.2f}  target <= 2 ({verdict})"
    )

    points = sweep(repeats)
    print("\ncost as the state grows (selectgraph, a loop writing one key per step):")
    for point in points:
        print(
            f"  {point.keys:>6} keys: {point.step_us:6.2f} µs/step"
            f"   (+ {point.run_us:6.1f} µs/run outside the steps)"
        )

    if args.json:
        payload: dict[str, Any] = {
            "langgraph": lg_version,
            "python": platform.python_version(),
            "repeats": repeats,
            "rows": [asdict(row) for row in rows],
            "bigstate_over_loop": step_ratio,
            "sweep": [asdict(point) for point in points],
        }
        with open(args.json, "w") as handle:
            json.dump(payload, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
