"""Benchmarks: time selectgraph and LangGraph on the same workloads, in the same process.

Run with ``python -m benchmarks`` (``--quick`` for a short smoke run;
``python -m benchmarks checkpoints`` for the durable-execution benchmark alone,
``python -m benchmarks observability`` for the observability benchmark alone,
``python -m benchmarks threads`` for a 1,000-turn thread). Both
libraries' runs are interleaved, repetition by repetition, so they share the
machine's conditions; each figure is the median over repetitions, and the
ratio is LangGraph's median over selectgraph's. Workloads that need an API
this selectgraph lacks are reported as not available, not failed.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import platform
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

from benchmarks import checkpoints as ck
from benchmarks import observability as obs
from benchmarks import workloads as w

Builder = Callable[[], w.Workload]


@dataclass(frozen=True, slots=True)
class Target:
    """The figure a workload must reach: an absolute limit, or a ratio to another workload."""

    limit: float
    """In the case's display unit, or a ratio when ``relative_to`` is set."""
    relative_to: str | None = None

    def describe(self, unit: str) -> str:
        if self.relative_to is None:
            return f"<= {self.limit:g} {unit.split('/')[0]}"
        return f"<= {self.limit:g}x {self.relative_to}"


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
    target: Target | None = None
    scale: float = 1.0
    """Microseconds per display unit (1000 for ms)."""
    is_async: bool = False
    """The workload returns an awaitable, awaited on the harness's event loop."""
    langgraph_calls: int | None = None
    """Calls per LangGraph sample (default: a twentieth of ``calls_per_sample``)."""


@dataclass(frozen=True, slots=True)
class Row:
    """Measured figures of one case (microseconds per unit; None when not measured)."""

    name: str
    unit: str
    scale: float
    selectgraph_us: float | None
    selectgraph_min_us: float | None
    langgraph_us: float | None
    ratio: float | None
    target: str | None
    target_value: float | None
    """What the target is checked against: the figure in the display unit, or the ratio."""
    met: bool | None
    unavailable: str | None
    """Why selectgraph could not run the workload."""


MS = 1000.0
CASES = [
    Case("linear3", "µs/run", 1, 200, w.selectgraph_linear3, w.langgraph_linear3, Target(15.0)),
    Case("loop1000", "µs/step", w.LOOP_STEPS, 3, w.selectgraph_loop, w.langgraph_loop, Target(5.0)),
    Case(
        "bigstate",
        "µs/step",
        w.BIG_STEPS,
        5,
        w.selectgraph_bigstate,
        w.langgraph_bigstate,
        Target(2.0, "loop1000"),
    ),
    Case(
        "loop1000_seed",
        "µs/step",
        w.LOOP_STEPS,
        3,
        w.selectgraph_loop_seed,
        w.langgraph_loop_seed,
        Target(1.5, "loop1000"),
        is_async=True,
        langgraph_calls=1,
    ),
    Case(
        f"fanout{w.FAN}",
        "ms/run",
        1,
        20,
        w.selectgraph_fanout,
        w.langgraph_fanout,
        Target(1.0),
        scale=MS,
        is_async=True,
        langgraph_calls=2,
    ),
    Case(
        f"fanout{w.FAN}_big",
        "ms/run",
        1,
        20,
        w.selectgraph_fanout_big,
        w.langgraph_fanout_big,
        Target(1.5, f"fanout{w.FAN}"),
        scale=MS,
        is_async=True,
        langgraph_calls=2,
    ),
    Case(
        "parallel_io",
        "ms/run",
        1,
        4,
        w.selectgraph_parallel_io,
        w.langgraph_parallel_io,
        Target(60.0),
        scale=MS,
        is_async=True,
        langgraph_calls=4,
    ),
    Case(
        "parallel_io_sync",
        "ms/run",
        1,
        4,
        w.selectgraph_parallel_io_sync,
        w.langgraph_parallel_io_sync,
        Target(80.0),
        scale=MS,
        langgraph_calls=4,
    ),
]

OBSERVABILITY = [
    Case(
        "loop1000_observer",
        "µs/step",
        w.LOOP_STEPS,
        3,
        obs.selectgraph_loop_observer,
        obs.langgraph_loop_callbacks,
        Target(1.3, "loop1000"),
    ),
    Case(
        "loop1000_astream",
        "µs/step",
        w.LOOP_STEPS,
        3,
        obs.selectgraph_loop_astream,
        obs.langgraph_loop_astream,
        Target(1.5, "loop1000"),
        is_async=True,
        langgraph_calls=1,
    ),
    Case(
        "loop1000_stream",
        "µs/step",
        w.LOOP_STEPS,
        3,
        obs.selectgraph_loop_stream,
        obs.langgraph_loop_stream,
        langgraph_calls=1,
    ),
    Case(
        "loop1000_otel",
        "µs/step",
        w.LOOP_STEPS,
        3,
        obs.selectgraph_loop_otel,
        None,
        Target(3.0, "loop1000"),
    ),
]
"""Issue 10: loop1000 observed four ways, each against the bare loop1000."""

SWEEP = [10, 1_000, 10_000]
"""State sizes (keys) for the per-step flatness sweep."""
SWEEP_SHORT, SWEEP_LONG = 50, 550
"""Steps of the two runs whose difference gives the marginal cost of a step."""


async def _timed(run: w.AsyncWorkload, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        await run()
    return time.perf_counter() - start


def _sample(run: w.Workload, calls: int, units: int, loop: asyncio.Runner | None = None) -> float:
    """Microseconds per unit over ``calls`` calls; an async workload is awaited on ``loop``."""
    gc.collect()
    if loop is not None:
        elapsed = loop.run(_timed(run, calls))
    else:
        start = time.perf_counter()
        for _ in range(calls):
            run()
        elapsed = time.perf_counter() - start
    return elapsed / calls / units * 1e6


def measure(case: Case, repeats: int, with_langgraph: bool) -> Row:
    """Median (and min) microseconds per unit for both libraries, interleaved."""
    unavailable = None
    try:
        ours: w.Workload | None = case.selectgraph()
    except w.NotAvailable as exc:
        ours, unavailable = None, str(exc)
        print(f"{case.name}: selectgraph not available: {unavailable}")
    theirs = case.langgraph() if with_langgraph and case.langgraph is not None else None
    # LangGraph is ~50x slower per call: fewer calls keep the run short.
    their_calls = case.langgraph_calls or max(1, case.calls_per_sample // 20)
    ours_samples: list[float] = []
    theirs_samples: list[float] = []
    with asyncio.Runner() as runner:
        loop = runner if case.is_async else None
        for run, calls in ((ours, case.calls_per_sample), (theirs, their_calls)):
            if run is not None:
                _sample(run, max(1, calls // 4), case.units_per_call, loop)  # warm up
        for _ in range(repeats):
            if ours is not None:
                ours_samples.append(_sample(ours, case.calls_per_sample, case.units_per_call, loop))
            if theirs is not None:
                theirs_samples.append(_sample(theirs, their_calls, case.units_per_call, loop))
    ours_median = statistics.median(ours_samples) if ours_samples else None
    theirs_median = statistics.median(theirs_samples) if theirs_samples else None
    return Row(
        name=case.name,
        unit=case.unit,
        scale=case.scale,
        selectgraph_us=ours_median,
        selectgraph_min_us=min(ours_samples) if ours_samples else None,
        langgraph_us=theirs_median,
        ratio=theirs_median / ours_median if theirs_median and ours_median else None,
        target=case.target.describe(case.unit) if case.target else None,
        target_value=None,
        met=None,
        unavailable=unavailable,
    )


def judge(rows: list[Row]) -> list[Row]:
    """Check each row against its case's target (relative targets need the other row)."""
    by_name = {row.name: row for row in rows}
    targets = {case.name: case.target for case in (*CASES, *OBSERVABILITY)}
    judged = []
    for row in rows:
        target, value = targets.get(row.name), None
        if target is not None and row.selectgraph_us is not None:
            if target.relative_to is None:
                value = row.selectgraph_us / row.scale
            else:
                base = by_name[target.relative_to].selectgraph_us
                value = row.selectgraph_us / base if base else None
        met = value <= target.limit if target is not None and value is not None else None
        judged.append(replace(row, target_value=value, met=met))
    return judged


def _verdict(met: bool) -> str:
    return "met" if met else "MISSED"


def _print_table(rows: list[Row]) -> None:
    header = (
        f"{'workload':<17} {'unit':<8} {'selectgraph':>12} {'langgraph':>11} {'ratio':>8}  target"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        ours, theirs = f"{'n/a':>12}", f"{'-':>11}"
        if row.selectgraph_us is not None:
            ours = f"{row.selectgraph_us / row.scale:12.2f}"
        if row.langgraph_us is not None:
            theirs = f"{row.langgraph_us / row.scale:11.1f}"
        ratio = f"{row.ratio:7.1f}x" if row.ratio is not None else f"{'-':>8}"
        target = row.target or ""
        if row.target and row.unavailable:
            target += " (not available)"
        elif row.target and row.met is not None:
            measured = f"{row.target_value:.2f}x, " if "x " in row.target else ""
            target += f" ({measured}{_verdict(row.met)})"
        print(f"{row.name:<17} {row.unit:<8} {ours} {theirs} {ratio}  {target}")


@dataclass(frozen=True, slots=True)
class Concurrency:
    """Wall time and memory of many concurrent runs, one line per contender."""

    contender: str
    runs: int
    wall_s: float
    """Median seconds for all runs to finish."""
    over_asyncio: float
    """Wall time over plain asyncio's, in the same process."""
    kb_per_run: float
    """tracemalloc peak above the start, divided by MEMORY_RUNS in flight."""


MEMORY_RUNS = 1_000
"""Runs in flight for the memory figure (per-run memory barely moves from 1,000 to 10,000)."""
CONCURRENT_TARGETS = {"wall": 1.5, "kb": 5.0}
"""selectgraph's concurrent10k targets: wall over asyncio, KB per in-flight run."""


def _wall(go: w.Concurrent, runs: int) -> float:
    async def timed() -> float:
        start = time.perf_counter()
        await go(runs)
        return time.perf_counter() - start

    gc.collect()
    return asyncio.run(timed())


def _kb_per_run(go: w.Concurrent, runs: int) -> float:
    async def traced() -> float:
        tracemalloc.start()
        try:
            start = tracemalloc.get_traced_memory()[0]
            await go(runs)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        return (peak - start) / runs / 1024

    gc.collect()
    return asyncio.run(traced())


def concurrency(runs: int, repeats: int, with_langgraph: bool) -> list[Concurrency]:
    """Wall time of ``runs`` concurrent 3-node chains, against plain asyncio, and memory per run.

    asyncio and selectgraph alternate ``repeats`` times; LangGraph (tens of seconds at
    10,000 runs) is timed once. Memory is measured in a separate pass under tracemalloc,
    which slows everything down and so never overlaps the timing.
    """
    contenders = [("asyncio", w.asyncio_concurrent()), ("selectgraph", w.selectgraph_concurrent())]
    if with_langgraph:
        contenders.append(("langgraph", w.langgraph_concurrent()))
    walls: dict[str, list[float]] = {name: [] for name, _ in contenders}
    for _, go in contenders:
        _wall(go, min(runs, 100))  # warm up: imports, first-call caches
    for index in range(repeats):
        for name, go in contenders:
            if name != "langgraph" or index == 0:
                walls[name].append(_wall(go, runs))
    base = statistics.median(walls["asyncio"])
    return [
        Concurrency(
            contender=name,
            runs=runs,
            wall_s=statistics.median(walls[name]),
            over_asyncio=statistics.median(walls[name]) / base,
            kb_per_run=_kb_per_run(go, MEMORY_RUNS),
        )
        for name, go in contenders
    ]


def _print_concurrency(lines: list[Concurrency]) -> None:
    runs = lines[0].runs
    print(
        f"\nconcurrent10k: {runs:,} concurrent runs of a 3-node chain, each node awaiting "
        f"{w.CHAIN_SECONDS:g} s\n(LangGraph timed once; KB/run = tracemalloc peak over "
        f"{MEMORY_RUNS:,} runs in flight, divided by the runs)"
    )
    header = f"{'':<12} {'wall s':>8} {'x asyncio':>10} {'KB/run':>8}  target"
    print(header)
    print("-" * len(header))
    for line in lines:
        target = ""
        if line.contender == "selectgraph":
            wall, kb = CONCURRENT_TARGETS["wall"], CONCURRENT_TARGETS["kb"]
            target = (
                f"wall <= {wall:g}x asyncio ({_verdict(line.over_asyncio <= wall)}), "
                f"<= {kb:g} KB/run ({_verdict(line.kb_per_run <= kb)})"
            )
        text = (
            f"{line.contender:<12} {line.wall_s:8.2f} {line.over_asyncio:9.1f}x "
            f"{line.kb_per_run:8.2f}  {target}"
        )
        print(text.rstrip())


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


CHECKPOINT_REPEATS = 5
"""Repetitions of the checkpoint benchmark at most (``--repeats`` can lower it)."""


def _ck_payload(lg_version: str | None, rows: list[ck.CheckpointRow]) -> dict[str, Any]:
    return {
        "langgraph": lg_version,
        "python": platform.python_version(),
        "checkpoints": [asdict(row) for row in rows],
    }


def _obs_payload(
    lg_version: str | None, repeats: int, rows: list[Row], budget: obs.BudgetCost
) -> dict[str, Any]:
    return {
        "langgraph": lg_version,
        "python": platform.python_version(),
        "repeats": repeats,
        "rows": [asdict(row) for row in rows],
        "budget_check": asdict(budget),
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks and print a table (and optionally JSON)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="few repetitions (a smoke run)")
    parser.add_argument("--repeats", type=int, default=15, help="repetitions per workload")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    parser.add_argument("--no-langgraph", action="store_true", help="skip LangGraph")
    parser.add_argument(
        "--runs", type=int, help="concurrent runs (default 10,000; 1,000 with --quick)"
    )
    parser.add_argument(
        "suite",
        nargs="?",
        choices=["all", "checkpoints", "observability", "scaleout", "threads"],
        default="all",
        help="'checkpoints' runs only the durable-execution benchmark (issue 9), "
        "'observability' only the observer, stream, tracing and budget-check one (issue 10), "
        "'scaleout' the DBOS executor over worker processes (issue 14; not part of 'all'), "
        "'threads' a 1,000-turn conversation on one thread (issue 21; not part of 'all')",
    )
    args = parser.parse_args(argv)
    repeats = 3 if args.quick else args.repeats
    runs = args.runs or (1_000 if args.quick else 10_000)
    # Each checkpoint repetition is a 1,000-step run per store (LangGraph's take seconds).
    ck_repeats = 1 if args.quick else min(args.repeats, CHECKPOINT_REPEATS)
    ck_steps = ck.QUICK_STEPS if args.quick else ck.STEPS

    lg_version = None if args.no_langgraph else _langgraph_version()
    if lg_version is None and not args.no_langgraph:
        print("langgraph is not installed (pip install -e '.[bench]'); timing selectgraph only\n")
    from selectgraph import __version__

    shown = ck_repeats if args.suite == "checkpoints" else repeats
    print(
        f"selectgraph {__version__} vs langgraph {lg_version or '-'}, Python "
        f"{platform.python_version()}, {platform.machine()}; median of {shown} repetitions\n"
    )
    if args.suite == "threads":
        from benchmarks import threads

        found_threads = threads.main(args.quick, lg_version is not None)
        if args.json:
            with open(args.json, "w") as handle:
                json.dump([asdict(row) for row in found_threads], handle, indent=2)
        return 0
    if args.suite == "scaleout":
        from benchmarks import scaleout

        found = scaleout.measure(args.quick)
        if args.json:
            with open(args.json, "w") as handle:
                json.dump(found, handle, indent=2)
        return 0
    if args.suite == "checkpoints":
        ck_rows = ck.measure(ck_repeats, ck_steps, lg_version is not None)
        ck.print_table(ck_rows, ck_repeats)
        if args.json:
            with open(args.json, "w") as handle:
                json.dump(_ck_payload(lg_version, ck_rows), handle, indent=2)
        return 0
    if args.suite == "observability":
        # loop1000 itself is measured too: the targets are ratios to it.
        cases = [case for case in CASES if case.name == "loop1000"] + OBSERVABILITY
        rows = judge([measure(case, repeats, lg_version is not None) for case in cases])
        print()
        _print_table(rows)
        paired = obs.interleaved(repeats)
        obs.print_interleaved(paired, repeats)
        budget = obs.measure_budget(repeats, obs.QUICK_CALLS if args.quick else obs.CALLS)
        obs.print_budget(budget, repeats)
        if args.json:
            found = _obs_payload(lg_version, repeats, rows, budget) | {"interleaved": paired}
            with open(args.json, "w") as handle:
                json.dump(found, handle, indent=2)
        return 0
    rows = judge(
        [measure(case, repeats, lg_version is not None) for case in (*CASES, *OBSERVABILITY)]
    )
    print()
    _print_table(rows)
    paired = obs.interleaved(repeats)
    obs.print_interleaved(paired, repeats)
    budget = obs.measure_budget(repeats, obs.QUICK_CALLS if args.quick else obs.CALLS)
    obs.print_budget(budget, repeats)

    points = sweep(repeats)
    print("\ncost as the state grows (selectgraph, a loop writing one key per step):")
    for point in points:
        print(
            f"  {point.keys:>6} keys: {point.step_us:6.2f} µs/step"
            f"   (+ {point.run_us:6.1f} µs/run outside the steps)"
        )

    # LangGraph needs tens of seconds for 10,000 runs: three repetitions at most.
    lines = concurrency(runs, min(repeats, 3), lg_version is not None)
    _print_concurrency(lines)

    ck_rows = ck.measure(ck_repeats, ck_steps, lg_version is not None)
    ck.print_table(ck_rows, ck_repeats)

    if args.json:
        by_name = {row.name: row for row in rows}
        payload: dict[str, Any] = {
            "langgraph": lg_version,
            "python": platform.python_version(),
            "repeats": repeats,
            "rows": [asdict(row) for row in rows],
            "bigstate_over_loop": by_name["bigstate"].target_value,
            "sweep": [asdict(point) for point in points],
            "concurrent": [asdict(line) for line in lines],
            "checkpoints": [asdict(row) for row in ck_rows],
            "budget_check": asdict(budget),
            "interleaved": paired,
        }
        with open(args.json, "w") as handle:
            json.dump(payload, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
