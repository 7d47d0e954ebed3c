"""Parallel: the declared shape of fan-out — parallel groups, Scatter, merge and failure rules."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal, get_args

if TYPE_CHECKING:
    from selectgraph.core._state import GraphState

__all__ = [
    "Branches",
    "GroupAdapter",
    "FailureMode",
    "FanOutOptions",
    "MergeFn",
    "MergePolicy",
    "ParallelGroup",
    "Scatter",
]


class MergePolicy(StrEnum):
    """How a join settles a ``data`` key without a reducer that several branches wrote.

    Keys with a declared reducer always merge through it, every branch's write
    included, whatever the policy. The order is deterministic: declaration order
    for a parallel group or a list of targets, index order for Scatter — never
    the order in which branches happened to finish.
    """

    LAST_WINS = "last_wins"
    """The value of the last branch (in that order) that wrote the key. The default."""
    FIRST_WINS = "first_wins"
    """The value of the first branch that wrote the key."""
    APPEND = "append"
    """Lists are concatenated across branches (items the parent already held count once);
    other values fall back to LAST_WINS."""
    ERROR = "error"
    """Raise MergeConflictError naming the key and the branches that wrote it."""


FailureMode = Literal["fail_all", "continue_others", "wait_all"]
"""What a fan-out does when a branch fails.

- ``"fail_all"`` (default): the first failure cancels the running siblings and the
  fan-out fails like a node (its on_failure edge, else the error policy).
- ``"continue_others"``: siblings finish; successful branches' writes are merged,
  failures are recorded in ``state.errors``, the run is "degraded" and continues
  along the success edges (it fails only when every branch failed).
- ``"wait_all"``: everything finishes; successful writes are merged and every
  failure is recorded; with any failure (all of them included) the fan-out takes
  its on_failure edge when it has one, else it continues along its edges, "degraded".
"""

FAILURE_MODES: frozenset[str] = frozenset(get_args(FailureMode))

MergeFn = Callable[[list["GraphState"]], "GraphState"]
"""``merge_fn(branch_states) -> GraphState``: replaces the merge of a group entirely."""


@dataclass(frozen=True, slots=True)
class Scatter:
    """One dynamic branch: run ``node_name`` on the state with ``state_patch`` laid over it.

    A router returns a list of these to run the same node (or several) many times
    at once. The patch is the branch's input: its nodes see it, but it is not
    written back to the parent unless a node writes those keys itself.

    Example:
        >>> Scatter("researcher", {"topic": "AI"})
        Scatter(node_name='researcher', state_patch={'topic': 'AI'})
    """

    node_name: str
    """The node the branch starts at."""
    state_patch: Mapping[str, Any] = field(default_factory=dict)
    """``data`` values this branch sees in place of (or besides) the parent's."""

    def __post_init__(self) -> None:
        if not isinstance(self.node_name, str) or not self.node_name:
            raise TypeError(f"Scatter needs a node name, got {self.node_name!r}")
        if not isinstance(self.state_patch, Mapping):
            raise TypeError(
                f"Scatter({self.node_name!r}): state_patch must be a mapping of data values, "
                f"got {type(self.state_patch).__name__}"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class ParallelGroup:
    """A parallel group as declared with ``add_parallel_nodes``."""

    name: str
    """The group's node name; edges into and out of it work like any node's."""
    members: tuple[str, ...]
    """The nodes run at once, in declaration (and merge) order."""
    merge_policy: MergePolicy = MergePolicy.LAST_WINS
    """How keys without a reducer that several members wrote are settled."""
    merge_fn: MergeFn | None = None
    """Replaces the merge entirely when set."""
    failure_mode: FailureMode = "fail_all"
    """What a member's failure does to the others."""
    max_concurrency: int | None = None
    """Members running at once; ``None`` uses the graph's limit."""
    description: str = ""
    """What the group does, for diagrams and llm_decide prompts."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FanOutOptions:
    """How a fan-out merges and fails, as declared on its group or edge."""

    merge_policy: MergePolicy = MergePolicy.LAST_WINS
    """How keys without a reducer that several branches wrote are settled."""
    merge_fn: MergeFn | None = None
    """Replaces the merge entirely when set."""
    failure_mode: FailureMode = "fail_all"
    """What a branch's failure does to the others."""
    max_concurrency: int | None = None
    """Branches running at once; ``None`` uses the graph's limit."""


DEFAULT_FANOUT = FanOutOptions()


@dataclass(frozen=True, slots=True)
class Branches:
    """A routing decision to run several branches at once (a list edge, or a router's list)."""

    targets: tuple[Any, ...]
    """Node names and/or Scatter objects, in merge order."""
    options: FanOutOptions = DEFAULT_FANOUT
    """How the branches merge and fail."""
    how: str = "edge"
    """What asked for them, for error messages (``edge``, ``router 'pick'``)."""

    def describe(self) -> str:
        """``[a, b]``, or ``[work x3]`` for Scatter, as traces and diagrams show it."""
        names: list[str] = []
        counts: dict[str, int] = {}
        for target in self.targets:
            name = target.node_name if isinstance(target, Scatter) else str(target)
            if name not in counts:
                names.append(name)
            counts[name] = counts.get(name, 0) + 1
        shown = [name if counts[name] == 1 else f"{name} x{counts[name]}" for name in names]
        return f"[{', '.join(shown)}]"

    def nodes(self) -> list[str]:
        """The distinct node names the branches start at."""
        names = (t.node_name if isinstance(t, Scatter) else t for t in self.targets)
        return list(dict.fromkeys(n for n in names if isinstance(n, str)))


class GroupAdapter:
    """The node of a parallel group: the runner runs its members instead of calling it."""

    kind = "parallel"
    is_async = False
    executor_retries = False  # members retry as their own nodes
    wants_context = False

    def __init__(self, group: ParallelGroup) -> None:
        self.group = group

    async def __call__(self, state: Any, context: Any) -> Any:
        raise RuntimeError(  # pragma: no cover - the runner never calls a group's adapter
            f"parallel group {self.group.name!r} is run by the engine, not called"
        )

    def __repr__(self) -> str:
        return f"GroupAdapter({self.group.name}: {', '.join(self.group.members)})"


def check_fanout_options(
    where: str,
    merge_policy: Any,
    failure_mode: Any,
    max_concurrency: Any,
    merge_fn: Any = None,
) -> list[str]:
    """Problems with a fan-out's options, each a sentence naming ``where``."""
    problems = []
    if not isinstance(merge_policy, MergePolicy):
        choices = ", ".join(f"MergePolicy.{p.name}" for p in MergePolicy)
        problems.append(f"{where}: merge_policy must be one of {choices}; got {merge_policy!r}")
    if failure_mode not in FAILURE_MODES:
        choices = ", ".join(repr(m) for m in sorted(FAILURE_MODES))
        problems.append(f"{where}: failure_mode must be one of {choices}; got {failure_mode!r}")
    if max_concurrency is not None and (
        isinstance(max_concurrency, bool)
        or not isinstance(max_concurrency, int)
        or max_concurrency < 1
    ):
        problems.append(
            f"{where}: max_concurrency must be an integer >= 1 or None; got {max_concurrency!r}"
        )
    if merge_fn is not None and not callable(merge_fn):
        problems.append(f"{where}: merge_fn must be callable; got {type(merge_fn).__name__}")
    return problems


def is_fanout(value: Any) -> bool:
    """Whether a router's return value asks for several branches (a list or tuple)."""
    return type(value) is list or type(value) is tuple


def describe_members(members: Sequence[str]) -> str:
    """``['a', 'b']`` as ``a, b`` for messages."""
    return ", ".join(members)
