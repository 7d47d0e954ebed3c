"""The crash harness: one process per store that forks a child per attempt and kills it.

Run as ``python -m tests.crash._harness <config.json>`` (the tests do). The
process imports selectgraph once and starts no thread, so ``os.fork()`` is
safe; each child opens its own store (SQLite file, PostgreSQL connections)
after the fork, runs or continues its trial's run, and either finishes or is
killed with SIGKILL: by itself at a planned point (inside a node, after a
node's side effect and before its checkpoint, mid-fan-out, inside the
checkpoint's transaction, just after the commit, while paused at the
interrupt, just after the answer was stored) or by this process on a timer.
Then a new child continues the run, and so on until it ends; the checker
compares the outcome with a fault-free run of the same seed. A seed also
picks the durability (sync, async, exit) and the driver (``run``/``resume``
or ``arun``/``aresume``). Results go to the JSON file the config names.

Races: two children answer one interrupt at once (both fresh processes, or
the process that paused against a fresh one), or both carry on one crashed
run; sometimes one of them is killed too.

Config keys: ``store`` (``{"kind": "sqlite", "target": path}`` or
``{"kind": "postgres", "target": url, "schema": name}``), ``workdir``,
``mode`` (``"kills"``, ``"race"`` or ``"stale"``: a deliberate re-run the
checker must flag), ``seeds`` (a list) or ``base`` and ``min_kills`` (trials
from ``base`` on until that many kills happened), ``result``.
"""

from __future__ import annotations

import functools
import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path

from tests.crash._child import Hung, write_json
from tests.crash._race import race_trial
from tests.crash._trials import Harness, Trial


def main() -> None:
    """Entry point: ``python -m tests.crash._harness <config.json>``."""
    config = json.loads(Path(sys.argv[1]).read_text())
    workdir = Path(config["workdir"])
    workdir.mkdir(parents=True, exist_ok=True)
    if threading.active_count() != 1:
        raise RuntimeError("the harness must not start threads before it forks")
    if config["store"]["kind"] == "postgres":
        import psycopg_pool  # noqa: F401  (imported once here, not in every child)
    if threading.active_count() != 1:
        raise RuntimeError("importing the PostgreSQL client started a thread: forking is unsafe")
    harness = Harness(config["store"], workdir)
    mode = config["mode"]
    started = time.perf_counter()
    trials: list[Trial] = []

    def seeds() -> Iterator[int]:
        if "seeds" in config:
            yield from config["seeds"]
            return
        seed = config["base"]
        while sum(len(t.kills) for t in trials) < config["min_kills"]:
            yield seed
            seed += 1

    run: dict[str, Callable[[int], Trial]] = {
        "kills": harness.kills_trial,
        "race": functools.partial(race_trial, harness),
        "stale": harness.stale_trial,
    }
    for seed in seeds():
        try:
            trial = run[mode](seed)
        except Hung as exc:
            trial = Trial(seed, "", 0, "", "")
            trial.problems.append(f"an attempt hung: {exc}")
        trials.append(trial)
        print(f"seed {seed}: {len(trial.kills)} kills, {len(trial.problems)} problems", flush=True)
        if not trial.problems and mode != "stale":
            harness.clean(seed)  # a failing trial's logs and reports stay for a look
    by_kind: dict[str, int] = {}
    for trial in trials:
        for kill in trial.kills:
            by_kind[str(kill["at"])] = by_kind.get(str(kill["at"]), 0) + 1
    write_json(
        config["result"],
        {
            "store": config["store"]["kind"],
            "mode": mode,
            "seconds": time.perf_counter() - started,
            "kills": sum(len(t.kills) for t in trials),
            "by_kind": by_kind,
            "trials": [asdict(t) for t in trials],
        },
    )


if __name__ == "__main__":
    main()
