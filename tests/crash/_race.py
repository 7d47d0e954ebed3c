"""Races: two processes pick up one run at once; exactly one may carry it on.

Either both answer the run's interrupt (two fresh processes, or the one that
paused, answering from memory, against a fresh one), or both continue a run
a crash stopped. Afterwards a stale worker tries again, and everything is
checked as for any trial.
"""

from __future__ import annotations

import functools
import os
import random
import select
import time
from typing import Any

from tests.crash._child import (
    NODE_KILLS,
    SAVE_KILLS,
    fork,
    racer_child,
    read_report,
    read_text,
    reap,
)
from tests.crash._trials import Harness, Trial


def race_trial(h: Harness, seed: int) -> Trial:
    """Two processes pick up one run at once; exactly one may win.

    Seeded variations: a race to answer the interrupt (the same answer or two
    different ones; two fresh processes, or the process that paused, answering
    from memory, against a fresh one) or, about a third of the time, a race to
    continue a run a kill stopped; and sometimes a kill of one racer after the
    start. Afterwards the run is carried to its end, a stale worker tries to
    answer again, and the outcome is compared with a fault-free run given the
    stored answer.
    """
    rng = random.Random(seed)
    trial = Trial(seed, f"race-{h.tag}-{seed}", rng.randint(8, 15), f"A{seed}", "sync")
    answers = [f"A{seed}", f"A{seed}" if rng.random() < 0.3 else f"B{seed}"]
    live = rng.random() < 0.5
    victim = rng.choice([None, None, 0, 1])
    trial.driver = rng.choice(["sync", "sync", "async"])
    crashed = rng.random() < 0.35
    if crashed:  # the run was killed; two workers pick it up, with the same answer
        answers[1] = answers[0]
        live = False
        trial.durability = rng.choice(["sync", "sync", "async", "exit"])
    trial.notes["kind"] = "crashed" if crashed else "interrupt"
    h.seen = []
    reference = h.reference(trial)
    started = time.perf_counter()
    step = next(e.step for e in h.effects(trial, f"reference-{trial.answer}") if e.kind == "once")
    interrupt_id = f"{trial.run_id}|{step}:review|0"
    if crashed:
        kill = rng.choice((*NODE_KILLS, *SAVE_KILLS, "branch_enter", "paused"))
        first_job = h._job(
            trial, "trial", kill=kill, fraction=rng.random(), reference=reference["events"]
        )
        first = h.run_child(first_job)
        h.note_seen(first, first_job.number)
        if first["killed"]:
            trial.kills.append({"attempt": first_job.number, "planned": kill, "at": first["died"]})
    elif not live:
        first = h.run_child(h._job(trial, "trial", stop_at_pause=True))
        h.note_seen(first, h.attempts)
    if not live and first["error"] is not None:
        trial.problems.append(f"the first attempt failed: {first['error']}")
        return trial
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    racers = []
    for index, answer in enumerate(answers):
        job = h._job(
            trial,
            "trial",
            role="continue" if crashed else "live" if live and index == 0 else "fresh",
            answer=answer,
            interrupt_id=interrupt_id,
            ready_fd=ready_w,
            go_fd=go_r,
            stop_at_pause=not crashed,
            kill=rng.choice((*NODE_KILLS, *SAVE_KILLS)) if victim == index else None,
            fraction=rng.random(),
        )
        racers.append(job)
    for job in racers:  # attempt numbers above both racers' start: see _check.reruns
        job.race_number = h.attempts + 1 + racers.index(job)
    h.attempts += 2
    pids = [fork(functools.partial(racer_child, h.spec, job), f"{job.out}.error") for job in racers]
    ready = b""
    while len(ready) < 2:
        readable, _, _ = select.select([ready_r], [], [], 60)
        if not readable:
            break
        ready += os.read(ready_r, 2 - len(ready))
    os.write(go_w, b"gg")
    reports = []
    for pid, job in zip(pids, racers, strict=True):
        killed, code = reap(pid)
        reports.append(
            {
                "killed": killed,
                "code": code,
                "role": job.role,
                "answer": job.answer,
                "number": job.race_number,
                "done": read_report(f"{job.out}.done"),
                "error": read_text(f"{job.out}.error"),
                "seen": read_report(f"{job.out}.seen"),
            }
        )
        h.note_seen(reports[-1], job.number)
        if killed:
            trial.kills.append(
                {
                    "attempt": job.race_number,
                    "planned": job.kill,
                    "at": read_text(f"{job.out}.died"),
                }
            )
    for fd in (ready_r, ready_w, go_r, go_w):
        os.close(fd)
    if len(ready) < 2:
        trial.problems.append(f"the racers never both got ready: {reports}")
        return trial
    final = h.continue_until_done(trial, rng, 0, reference)
    stale = _stale(h, trial, interrupt_id)
    _judge_race(h, trial, reports, stale, final, answers, crashed)
    if final is not None:
        stored = str(final["data"]["answer"]).split(":")[0]
        if stored != trial.answer:
            reference = h.reference(trial, stored)
    h.check(trial, reference, final)
    trial.notes["race"] = [
        f"{r['role']}:{r['answer']}:"
        + ("killed" if r["killed"] else str((r["done"] or {}).get("outcome")))
        for r in reports
    ]
    trial.seconds = time.perf_counter() - started
    return trial


def _stale(h: Harness, trial: Trial, interrupt_id: str) -> dict[str, Any]:
    """A worker that answers the interrupt after the race and the run are over."""
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    os.write(go_w, b"g")
    job = h._job(
        trial,
        "trial",
        role="stale",
        answer=f"stale{trial.seed}",
        interrupt_id=interrupt_id,
        ready_fd=ready_w,
        go_fd=go_r,
    )
    job.race_number = job.number
    pid = fork(lambda: racer_child(h.spec, job), f"{job.out}.error")
    killed, code = reap(pid)
    for fd in (ready_r, ready_w, go_r, go_w):
        os.close(fd)
    h.note_seen({"seen": read_report(f"{job.out}.seen")}, job.number)
    return {
        "killed": killed,
        "code": code,
        "done": read_report(f"{job.out}.done"),
        "error": read_text(f"{job.out}.error"),
        "number": job.number,
    }


def _judge_race(
    h: Harness,
    trial: Trial,
    reports: list[dict[str, Any]],
    stale: dict[str, Any],
    final: dict[str, Any] | None,
    answers: list[str],
    crashed: bool,
) -> None:
    """Exactly one winner, losers that ran nothing, and a stored answer nobody overwrote.

    After a crash (``crashed``) a loser may have run the node it was on before
    its save was refused (the winner ran it too, and only one completion is
    stored: the history check sees to that), so "ran nothing" is not asked.
    """
    problems = trial.problems
    for report in reports:
        if report["error"] is not None:
            problems.append(
                f"racer {report['number']} ({report['role']}) failed: {report['error']}"
            )
    finished = [r for r in reports if not r["killed"] and r["done"] is not None]
    outcomes = [r["done"]["outcome"] for r in finished]
    winners = [r for r in finished if r["done"]["outcome"] == "won"]
    if len(winners) > 1:
        problems.append(f"both racers won: {outcomes}")
    # A crash after the run's end (its last save committed): nothing left to race for.
    ended = all(r["seen"] and r["seen"]["trigger"] and not r["seen"]["next"] for r in reports)
    both_saw_end = ended and outcomes == ["found it finished"] * 2
    if (
        len(finished) == 2
        and not both_saw_end
        and sorted(outcomes)
        not in (
            ["conflict", "won"],
            ["resume_error", "won"],
            ["found it finished", "won"],
        )
    ):
        problems.append(f"two racers, outcomes {outcomes}: expected one win and one refusal")
    log = h.effects(trial, "trial")
    for report in finished if not crashed else []:
        if report["done"]["outcome"] != "won":
            ran = [e for e in log if e.attempt == report["number"]]
            if ran:
                problems.append(f"racer {report['number']} lost but ran {ran}")
    if final is not None:
        stored = str(final["data"]["answer"]).split(":")[0]
        if winners and stored != winners[0]["answer"]:
            problems.append(
                f"the winner answered {winners[0]['answer']!r}, the run kept {stored!r}"
            )
        if stored not in answers:
            problems.append(f"the run kept {stored!r}, which no racer answered")
        for report in finished:
            refused = report["done"]["outcome"] != "won"
            if refused and stored == report["answer"] and answers[0] != answers[1]:
                problems.append(f"the run kept the answer of refused racer {report['number']}")
    _judge_stale(trial, stale)


def _judge_stale(trial: Trial, stale: dict[str, Any]) -> None:
    """The worker that answers after everything is over is refused and writes nothing."""
    problems = trial.problems
    done = stale["done"]
    if done is None:
        problems.append(f"the stale worker failed: {stale['error']}")
    else:
        if done["outcome"] != "resume_error" or done["continue"] != "resume_error":
            problems.append(f"the stale worker was not refused: {done}")
        if not done["version_before"] == done["version_after"] == done["version_last"]:
            problems.append(f"the stale worker moved the head: {done}")
