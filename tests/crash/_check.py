"""The crash checker: what the side-effect log and the store's heads must agree on.

Pure functions over plain data, so they can be tested on hand-made logs (and
shown to flag a re-run) without any process being killed.

The rule: a node whose completion the committed head records (a visit in the
history its state holds, or in a finished fan-out branch's pending writes)
must never run again, nor a ``context.once`` step whose result the head
memoized; a node killed before that record committed may run again (at
least once).
The harness reads the head at the start of every attempt, before the attempt
runs anything, so an effect logged by attempt ``a`` for a visit that the head
seen at the start of any attempt ``<= a`` already held is a re-run.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Effect:
    """One line of the side-effect log."""

    attempt: int
    kind: str
    """``"node"``: the node's own effect; ``"once"``: the memoized step inside ``review``."""
    node: str
    visit: int
    step: int

    @property
    def key(self) -> tuple[str, str, int]:
        """What identifies the effect within a run (the attempt and step may differ)."""
        return (self.kind, self.node, self.visit)


@dataclass(frozen=True, slots=True)
class Seen:
    """The committed head as an attempt found it before running anything."""

    attempt: int
    visits: dict[str, int]
    """Completed visits per node (the last visit of each node the head records)."""
    memo: frozenset[str]
    """Task ids (``"<step>:<node>"``) whose ``context.once`` results are committed."""


def parse_effects(text: str) -> list[Effect]:
    """The log's lines (``<attempt> <kind> <node> <visit> <step>``) as effects."""
    effects = []
    for number, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        if len(parts) != 5:
            raise ValueError(f"side-effect log line {number} is malformed: {line!r}")
        attempt, kind, node, visit, step = parts
        effects.append(Effect(int(attempt), kind, node, int(visit), int(step)))
    return effects


def reruns(effects: Iterable[Effect], seen: Sequence[Seen]) -> list[str]:
    """Effects of completed work that ran again after its completion was committed."""
    found = []
    for effect in effects:
        for head in seen:
            if head.attempt > effect.attempt:
                continue
            done = effect.visit <= head.visits.get(effect.node, 0)
            memoized = effect.kind == "once" and f"{effect.step}:{effect.node}" in head.memo
            if done or memoized:
                what = "completed" if done else "memoized"
                found.append(
                    f"{effect.kind} effect of {effect.node} visit {effect.visit} ran in attempt "
                    f"{effect.attempt}, but attempt {head.attempt} had found it {what} in the "
                    f"committed head (visits {head.visits}, memo {sorted(head.memo)})"
                )
                break
    return found


def coverage(effects: Iterable[Effect], expected: Iterable[tuple[str, str, int]]) -> list[str]:
    """Work the fault-free run did that never happened here, and work it never did."""
    got = {effect.key for effect in effects}
    want = set(expected)
    problems = [f"lost: {key} never ran" for key in sorted(want - got)]
    problems += [
        f"unexpected: {key} ran, the fault-free run never did" for key in sorted(got - want)
    ]
    return problems


def exactly_once(effects: Iterable[Effect]) -> list[str]:
    """For a fault-free run: every effect exactly once."""
    counts: dict[tuple[str, str, int], int] = {}
    for effect in effects:
        counts[effect.key] = counts.get(effect.key, 0) + 1
    return [f"{key} ran {count} times" for key, count in sorted(counts.items()) if count != 1]


def same_outcome(
    final: dict[str, Any], reference: dict[str, Any], fields: Sequence[str] = ("data", "order")
) -> list[str]:
    """The final state and the order of completed nodes, against the fault-free run's."""
    return [
        f"{name} differs: got {final.get(name)!r}, the fault-free run had {reference.get(name)!r}"
        for name in fields
        if final.get(name) != reference.get(name)
    ]
