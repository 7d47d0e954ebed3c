"""The crash harness's trials: a run killed at seeded points and carried to its end, checked.

``Harness`` runs trials against one store from a process with no threads,
forking a child (``_child``) per attempt; the races are in ``_race``.
"""

from __future__ import annotations

import os
import random
import signal
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.crash import _check
from tests.crash._child import (
    KILL_KINDS,
    Attempt,
    attempt_child,
    fork,
    read_report,
    read_text,
    reap,
)


@dataclass
class Trial:
    """One seeded trial: a run killed a few times, then carried to its end."""

    seed: int
    run_id: str
    n: int
    answer: str
    durability: str
    driver: str = "sync"
    kills: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0
    notes: dict[str, Any] = field(default_factory=dict)
    """What else happened (a race's roles and outcomes)."""


class Harness:
    """Runs trials against one store."""

    def __init__(self, spec: dict[str, str], workdir: Path) -> None:
        self.spec = spec
        self.workdir = workdir
        self.tag = uuid.uuid4().hex[:8]
        self.attempts = 0
        self.seen: list[_check.Seen] = []
        """The heads each attempt of the current trial found (for ``_check.reruns``)."""
        self.finished: list[float] = []
        """Seconds taken by attempts that ran to the end: the window for timer kills."""

    def _job(self, trial: Trial, kind: str, **overrides: Any) -> Attempt:
        self.attempts += 1
        base = f"{self.workdir}/{self.tag}-{trial.seed}-{self.attempts}"
        fields: dict[str, Any] = {
            "number": self.attempts,
            "run_id": trial.run_id,
            "n": trial.n,
            "answer": trial.answer,
            "durability": trial.durability,
            "driver": trial.driver,
            "log": f"{self.workdir}/{self.tag}-{trial.seed}.{kind}.log",
            "out": base,
        }
        fields.update(overrides)
        return Attempt(**fields)

    def run_child(self, job: Attempt, timer: float | None = None) -> dict[str, Any]:
        """Fork one attempt, maybe kill it on a timer, and collect what it reported."""
        started = time.perf_counter()
        pid = fork(lambda: attempt_child(self.spec, job), f"{job.out}.error")
        if timer is not None:
            time.sleep(timer)
            os.kill(pid, signal.SIGKILL)
        killed, code = reap(pid)
        if not killed and not job.in_memory:
            self.finished = [*self.finished[-19:], time.perf_counter() - started]
        return {
            "killed": killed,
            "code": code,
            "seen": read_report(f"{job.out}.seen"),
            "done": read_report(f"{job.out}.done"),
            "died": read_text(f"{job.out}.died"),
            "error": read_text(f"{job.out}.error"),
        }

    def reference(self, trial: Trial, answer: str | None = None) -> dict[str, Any]:
        """The fault-free run of the trial's seed, with the same durability.

        It runs on an in-memory store (in a child, like the others): an
        independent oracle, and it spends no time in fsync.
        """
        answer = answer or trial.answer
        job = self._job(trial, f"reference-{answer}", answer=answer, in_memory=True)
        started = time.perf_counter()
        report = self.run_child(job)
        if report["done"] is None:
            raise RuntimeError(f"the fault-free run of seed {trial.seed} failed: {report}")
        done: dict[str, Any] = report["done"]
        done["seconds"] = time.perf_counter() - started
        effects = _check.parse_effects(Path(job.log).read_text())
        done["keys"] = sorted({e.key for e in effects})
        trial.problems += [f"fault-free run: {p}" for p in _check.exactly_once(effects)]
        counts = done["counts"]
        done["events"] = {
            "nodes": counts.get("node_enter", 0),
            "saves": counts.get("save_before", 0),
        }
        return done

    def check(self, trial: Trial, reference: dict[str, Any], final: dict[str, Any] | None) -> None:
        """Compare the trial's log, heads and outcome with the fault-free run."""
        log = Path(f"{self.workdir}/{self.tag}-{trial.seed}.trial.log")
        effects = _check.parse_effects(log.read_text() if log.exists() else "")
        trial.problems += _check.reruns(effects, self.seen)
        trial.problems += _check.coverage(effects, [tuple(k) for k in reference["keys"]])
        if final is None:
            trial.problems.append("the run never reported its end")
        else:
            trial.problems += _check.same_outcome(final, reference)

    def continue_until_done(
        self, trial: Trial, rng: random.Random, kills: int, reference: dict[str, Any]
    ) -> dict[str, Any] | None:
        """Attempts until the run ends, the first ``kills`` of them with a planned kill.

        Under sync durability the pending-writes kill points are drawn three times
        as often: only there do they exist, and only while the fan-out is ahead.
        """
        kinds = list(KILL_KINDS)
        if trial.durability == "sync":
            kinds += ["writes_insert", "writes_after"] * 2
        else:
            kinds = [k for k in kinds if not k.startswith("writes_")]
        for _ in range(kills + 20):
            kill = rng.choice(kinds) if len(trial.kills) < kills else None
            job = self._job(
                trial,
                "trial",
                kill=kill,
                fraction=rng.random(),
                reference=reference["events"],
            )
            timer = rng.random() * self._window(reference) if kill == "timer" else None
            report = self.run_child(job, timer)
            if report["seen"] is not None:
                seen = report["seen"]
                self.seen.append(_check.Seen(job.number, seen["visits"], frozenset(seen["memo"])))
            if report["killed"]:
                where = "timer" if kill == "timer" else report["died"]
                trial.kills.append({"attempt": job.number, "planned": kill, "at": where})
                continue
            if report["error"] is not None or report["code"] != 0:
                trial.problems.append(f"attempt {job.number} failed: {report['error']}")
                return None
            if report["done"] is not None and "data" in report["done"]:
                return report["done"]  # type: ignore[no-any-return]
        trial.problems.append("the run did not end after 20 attempts without a planned kill")
        return None

    def clean(self, seed: int) -> None:
        """Delete a trial's side-effect logs and child reports."""
        for path in self.workdir.glob(f"{self.tag}-{seed}[.-]*"):
            path.unlink()

    def _window(self, reference: dict[str, Any]) -> float:
        """How long after its fork a timer kill may come: about as long as an attempt lasts."""
        if not self.finished:
            return 3 * float(reference["seconds"])
        return 1.2 * sum(self.finished) / len(self.finished)

    def kills_trial(self, seed: int) -> Trial:
        """A run killed 3 to 8 times at seeded points, continued to its end, and checked."""
        rng = random.Random(seed)
        trial = Trial(
            seed=seed,
            run_id=f"crash-{self.tag}-{seed}",
            n=rng.randint(8, 15),
            answer=f"ok{seed}",
            durability=rng.choices(["sync", "async", "exit"], [6, 2, 2])[0],
        )
        trial.driver = rng.choice(["sync", "sync", "async"])
        started = time.perf_counter()
        self.seen = []
        reference = self.reference(trial)
        final = self.continue_until_done(trial, rng, rng.randint(3, 8), reference)
        self.check(trial, reference, final)
        trial.seconds = time.perf_counter() - started
        return trial

    def effects(self, trial: Trial, kind: str) -> list[_check.Effect]:
        log = Path(f"{self.workdir}/{self.tag}-{trial.seed}.{kind}.log")
        return _check.parse_effects(log.read_text() if log.exists() else "")

    def note_seen(self, report: dict[str, Any], number: int) -> None:
        seen = report["seen"]
        if seen is not None:
            self.seen.append(_check.Seen(number, seen["visits"], frozenset(seen["memo"])))

    def stale_trial(self, seed: int) -> Trial:
        """Self-test: an attempt resumes wrongly; the checker must report what it ran again.

        By ``seed % 3``: 0 dies inside the loop, then continues from the checkpoint
        before the head (a completed ``work`` visit runs again); 1 pauses at the
        interrupt, then does the same (the memoized draft is made again); 2 dies
        entering the join, then ignores the finished branches' pending writes (the
        branches run again). ``notes["flaggable"]`` says whether the wrong resume
        had completed work to repeat.
        """
        rng = random.Random(seed)
        trial = Trial(seed, f"stale-{self.tag}-{seed}", rng.randint(8, 15), f"ok{seed}", "sync")
        started = time.perf_counter()
        self.seen = []
        reference = self.reference(trial)
        variant = seed % 3
        events = reference["events"]
        if variant == 0:
            first = self._job(trial, "trial", kill="node_enter", fraction=0.3, reference=events)
        elif variant == 1:
            first = self._job(trial, "trial", stop_at_pause=True)
        else:  # entering "merge": every branch has finished and stored its writes
            first = self._job(trial, "trial", kill="node_enter", kill_index=trial.n + 7)
        self.note_seen(self.run_child(first), first.number)
        bug = "no_pending" if variant == 2 else "older_head"
        job = self._job(trial, "trial", bug=bug)
        report = self.run_child(job)
        self.note_seen(report, job.number)
        trial.notes["bug"] = bug
        trial.notes["flaggable"] = (
            variant != 2 or "left" in self.seen[-1].visits or ("mid2" in self.seen[-1].visits)
        )
        if report["error"] is not None:
            trial.notes["stale_attempt"] = report["error"].strip().splitlines()[-1]
        final = report["done"] if report["done"] and "data" in report["done"] else None
        self.check(trial, reference, final)
        trial.seconds = time.perf_counter() - started
        return trial
