"""Option checks: the builder refuses a wrong option when it is given, and fills in defaults."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from selectgraph.core._callables import callable_name
from selectgraph.core._control import Budget, CancellationToken
from selectgraph.core._policies import RetryPolicy
from selectgraph.persistence._node_cache import InMemoryNodeCache, NodeCache
from selectgraph.routing._parallel import MergePolicy, check_fanout_options

__all__ = [
    "check_fast_route",
    "check_input_field",
    "check_node_cache",
    "check_options",
    "check_state_version",
    "check_sync_nodes",
    "check_timeout",
    "check_token",
    "describe_node",
    "input_pipeline",
    "make_budget",
    "node_names",
    "output_pipeline",
    "retry_policy",
    "unique_names",
]


def check_timeout(name: str, timeout: float | None) -> None:
    """Refuse a node timeout that is not a number of seconds > 0."""
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0
    ):
        raise ValueError(f"node {name!r}: timeout must be a number of seconds > 0, got {timeout!r}")


def node_names(what: str, names: Iterable[str]) -> frozenset[str]:
    """Node names given as one string or several (checked against the nodes at compile)."""
    if isinstance(names, str):
        return frozenset((names,))
    chosen = frozenset(names)
    bad = [n for n in chosen if not isinstance(n, str)]
    if bad:
        raise TypeError(f"AgentGraph: {what} takes node names, got {bad[0]!r}")
    return chosen


def check_options(where: str, **options: Any) -> None:
    """Refuse fan-out options of the wrong kind at once, naming the option."""
    problems = check_fanout_options(
        where,
        options.get("merge_policy", MergePolicy.LAST_WINS),
        options.get("failure_mode", "fail_all"),
        options.get("max_concurrency"),
        options.get("merge_fn"),
    )
    if problems:
        bad_kind = not isinstance(options.get("merge_policy", MergePolicy.LAST_WINS), MergePolicy)
        raise (TypeError if bad_kind else ValueError)("; ".join(problems))


def check_sync_nodes(value: Any) -> None:
    """Refuse a ``sync_nodes`` that is not ``"thread"`` or ``"loop"``."""
    if value not in ("thread", "loop"):
        raise ValueError(
            f'AgentGraph: sync_nodes must be "thread" (a worker thread) or "loop" (the event '
            f"loop's thread), got {value!r}"
        )


def check_input_field(field: Any) -> str | None:
    """Refuse an ``input_field`` that is not a non-empty field name."""
    if field is not None and (not isinstance(field, str) or not field.isidentifier()):
        raise ValueError(
            f"AgentGraph: input_field must be the name of a state field (an identifier), "
            f"got {field!r}"
        )
    return field


def check_state_version(
    version: int, migrations: Mapping[int, Callable[..., Any]] | None
) -> dict[int, Callable[[dict[str, Any]], dict[str, Any]]]:
    """Refuse a state version that is not an int >= 1, or migrations not ``{n: fn}`` below it.

    Returns the migrations as a dict. A version may lack its migration (no run was
    ever stored at it): a stored state that needs it then fails to load, naming it.
    """
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError(f"AgentGraph: state_version must be an int >= 1, got {version!r}")
    if migrations is None:
        return {}
    if not isinstance(migrations, Mapping):
        raise TypeError(
            "AgentGraph: state_migrations must map a version n to a function upgrading a "
            f"state stored at n to n + 1, got {type(migrations).__name__}"
        )
    checked: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}
    for key, fn in migrations.items():
        if isinstance(key, bool) or not isinstance(key, int) or not 1 <= key < version:
            raise ValueError(
                f"AgentGraph: state_migrations has key {key!r}; keys are the versions a "
                f"migration upgrades from, 1 to {version - 1} (state_version={version})"
            )
        if not callable(fn):
            raise TypeError(
                f"AgentGraph: state_migrations[{key}] must be a function (data) -> data, "
                f"got {type(fn).__name__}"
            )
        checked[key] = fn
    return checked


def check_node_cache(cache: NodeCache | None) -> NodeCache:
    """Where cached node outputs go: ``cache``, or an InMemoryNodeCache of the graph's own."""
    if cache is not None and not isinstance(cache, NodeCache):
        raise TypeError(
            "AgentGraph: node_cache must be a NodeCache (InMemoryNodeCache, "
            f"SQLiteNodeCache...), got {type(cache).__name__}"
        )
    return cache if cache is not None else InMemoryNodeCache()


def retry_policy(retry: RetryPolicy | None, error_retry_limit: int | None) -> RetryPolicy:
    """``retry``, else the default policy with ``error_retry_limit`` retries when given."""
    if retry is not None:
        return retry
    return (
        RetryPolicy() if error_retry_limit is None else RetryPolicy(max_retries=error_retry_limit)
    )


def describe_node(node: Any, adapter: Any = None) -> str:
    """What a node does, in a line, when it was not described."""
    # An agent node describes itself by its focus; anything else by its own
    # description or the first line of its docstring.
    for source in (adapter, node):
        doc = getattr(source, "description", None)
        if isinstance(doc, str) and doc:
            return doc
    text = getattr(node, "__doc__", None) if callable(node) and not isinstance(node, type) else None
    if isinstance(text, str) and text.strip() and type(node).__doc__ != text:
        return text.strip().splitlines()[0]
    return ""


def unique_names(nodes: Iterable[Any]) -> list[str]:
    """A name for each node of a chain: its own, or its function's, made unique."""
    names: list[str] = []
    for index, node in enumerate(nodes, start=1):
        base = getattr(node, "name", None)
        if not isinstance(base, str) or not base:
            base = callable_name(node)
        if base == "lambda":
            base = f"step_{index}"
        candidate, suffix = base, 2
        while candidate in names:
            candidate, suffix = f"{base}_{suffix}", suffix + 1
        names.append(candidate)
    return names


def make_budget(tokens: int | None, cost: float | None, duration: float | None) -> Budget | None:
    """The run budget these limits make, or ``None`` when none is set."""
    limits = Budget(max_total_tokens=tokens, max_cost_usd=cost, max_duration=duration)
    return None if limits.empty else limits


def check_token(token: CancellationToken | None) -> CancellationToken | None:
    """``token``, refused unless it is a CancellationToken."""
    if token is not None and not isinstance(token, CancellationToken):
        raise TypeError(
            "AgentGraph: cancellation_token must be a CancellationToken, "
            f"got {type(token).__name__}"
        )
    return token


def check_fast_route(fn: Callable[[Any], Any] | None) -> Callable[[Any], Any] | None:
    """``fn``, refused unless it is callable."""
    if fn is not None and not callable(fn):
        raise TypeError(f"AgentGraph: fast_route_fn must be callable, got {type(fn).__name__}")
    return fn


def input_pipeline(value: Any) -> Any:
    """A GuardrailsPipeline of ``value`` (a pipeline or a list of guardrails), or ``None``."""
    if value is None:
        return None
    from selectgraph.guardrails import as_pipeline

    return as_pipeline(value)


def output_pipeline(value: Any) -> Any:
    """As :func:`input_pipeline`, refusing an async pipeline (output checks run inside the loop)."""
    pipeline = input_pipeline(value)
    if pipeline is not None and pipeline.is_async:
        raise TypeError(
            "AgentGraph: output_guardrails run where the run ends, inside the step loop, "
            "and must be synchronous; an async guardrail can check the result after arun()"
        )
    return pipeline
