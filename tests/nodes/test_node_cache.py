"""Node cache: a node given an input it has already run on is not run again.

Within a run (a loop), across runs of one graph, across cache objects on one
SQLite file and across processes; with TTL expiry, custom keys, reads=
narrowing, and the cases that must not be cached.
"""

from __future__ import annotations

import json
import logging
import math
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from selectgraph import (
    END,
    Agent,
    AgentConfig,
    AgentGraph,
    CachePolicy,
    InMemoryNodeCache,
    NodeCache,
    NodeContractError,
    NodeError,
    SQLiteNodeCache,
    append,
    goto,
)
from selectgraph.nodes._cache import CachingAdapter
from selectgraph.observe import NodeCacheHit
from selectgraph.testing import ScriptedProvider

ROOT = Path(__file__).resolve().parents[2]


class Clock:
    """A clock the test moves by hand, so expiry needs no sleeping."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class Counter:
    """An 'expensive' node that records every real call."""

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn
        self.calls = 0

    def __call__(self, state: Any) -> Any:
        self.calls += 1
        return self.fn(state)


def square(state: Any) -> dict[str, Any]:
    return {"square": state["x"] ** 2}


def hits(result: Any) -> list[NodeCacheHit]:
    return [event for event in result.trace if isinstance(event, NodeCacheHit)]


def looping_graph(
    node: Callable[[Any], Any], cache: CachePolicy | None, **kwargs: Any
) -> AgentGraph:
    """``expensive`` runs three times on an unchanged ``x`` while ``tick`` counts the laps."""
    graph = AgentGraph("loop", reducers={"log": append}, **kwargs)
    graph.add_node("expensive", node, reads=["x"], cache=cache)
    graph.add_node("tick", lambda state: {"laps": state.get("laps", 0) + 1})
    graph.add_edge("expensive", "tick")
    graph.add_edge("tick", END, condition="laps >= 3")
    graph.add_edge("tick", "expensive")
    return graph


def one_node_graph(node: Any, cache: CachePolicy | None = None, **kwargs: Any) -> AgentGraph:
    graph = AgentGraph("one", **kwargs)
    graph.add_node("expensive", node, cache=cache or CachePolicy(), next_node=END)
    return graph


# ---------------------------------------------------------------- hits and misses


def test_a_loop_reuses_the_output_and_the_trace_shows_each_hit() -> None:
    def work(state: Any) -> dict[str, Any]:
        # A whole-value write through the view and a reducer-merged update.
        state.data["doubled"] = [state["x"], state["x"]]
        return {"log": [f"saw {state['x']}"]}

    cached = Counter(work)
    result = looping_graph(cached, CachePolicy()).run({"x": 4})
    assert cached.calls == 1
    assert result.node_order == ["expensive", "tick"] * 3

    # Replayed through the same merge as the real output: the append reducer
    # applies to the update each visit, the view's assignment replaces.
    plain = looping_graph(work, None).run({"x": 4})
    assert result.state.data == plain.state.data
    assert result.state["log"] == ["saw 4"] * 3
    assert result.state["doubled"] == [4, 4]

    events = hits(result)
    assert [(e.node, e.step) for e in events] == [("expensive", 3), ("expensive", 5)]
    assert len({e.key for e in events}) == 1
    assert len(events[0].key) == 64
    assert all(e.run_id == result.run_id and e.graph == "loop" for e in events)
    # The hit is between the node's start and finish, like any event it emits.
    kinds = [type(e).__name__ for e in result.trace]
    third = kinds.index("NodeCacheHit")
    assert kinds[third - 1 : third + 2] == ["NodeStarted", "NodeCacheHit", "NodeFinished"]


def test_repeated_runs_of_one_graph_hit_and_a_new_input_recomputes() -> None:
    node = Counter(square)
    graph = one_node_graph(node)
    assert graph.run({"x": 3}).state["square"] == 9
    second = graph.run({"x": 3})
    assert second.state["square"] == 9
    assert node.calls == 1
    assert [e.node for e in hits(second)] == ["expensive"]

    other = graph.run({"x": 5})
    assert other.state["square"] == 25
    assert node.calls == 2
    assert hits(other) == []


def test_graph_objects_have_separate_default_caches() -> None:
    node = Counter(square)
    one_node_graph(node).run({"x": 3})
    one_node_graph(node).run({"x": 3})
    assert node.calls == 2


def test_graphs_sharing_a_store_never_see_each_others_entries() -> None:
    store = InMemoryNodeCache()
    first, second = Counter(square), Counter(lambda state: {"square": -1})
    for name, node in (("first", first), ("second", second)):
        graph = AgentGraph(name, node_cache=store)
        graph.add_node("expensive", node, cache=CachePolicy(), next_node=END)
        graph.run({"x": 3})
        assert graph.run({"x": 3}).state["square"] == (9 if name == "first" else -1)
    assert (first.calls, second.calls) == (1, 1)
    assert len(store) == 2


def test_goto_is_replayed_on_a_hit() -> None:
    chooser = Counter(lambda state: goto("right", {"chosen": "right"}))
    graph = AgentGraph("route")
    graph.add_node("choose", chooser, destinations=["left", "right"], cache=CachePolicy())
    graph.add_node("left", lambda state: {"side": "left"}, next_node=END)
    graph.add_node("right", lambda state: {"side": "right"}, next_node=END)
    graph.add_edge("choose", "left")
    for _ in range(2):
        result = graph.run({"q": 1})
        assert result.node_order == ["choose", "right"]
        assert result.state["side"] == "right"
        assert result.state["chosen"] == "right"
    assert chooser.calls == 1


def test_an_async_node_is_cached_under_arun() -> None:
    import asyncio

    calls = []

    async def fetch(state: Any) -> dict[str, Any]:
        calls.append(state["x"])
        await asyncio.sleep(0)
        return {"page": f"page {state['x']}"}

    graph = one_node_graph(fetch)

    async def main() -> list[str]:
        return [(await graph.arun({"x": n})).state["page"] for n in (1, 1, 2)]

    assert asyncio.run(main()) == ["page 1", "page 1", "page 2"]
    assert calls == [1, 2]


def test_an_agent_node_is_cached_without_calling_the_model_again() -> None:
    provider = ScriptedProvider(["answer one", "answer two"])
    agent = Agent(AgentConfig(name="writer"), provider=provider)
    graph = AgentGraph("agents")
    graph.add_node("writer", agent, cache=CachePolicy(), next_node=END)

    first = graph.run("Write about owls")
    again = graph.run("Write about owls")
    assert again.state.last_output == first.state.last_output == "answer one"
    assert again.state.messages == first.state.messages  # the answer is appended again
    assert again.total_usage.calls == 0
    assert first.total_usage.calls == 1
    assert again.state.history[-1][1].agent_result is not None
    assert provider.prompts == ["Write about owls"]
    # An agent's key covers the conversation: another prompt is another input.
    assert graph.run("Write about cats").state.last_output == "answer two"


def test_cached_nodes_in_fan_out_branches_hit_and_the_hits_name_their_branch() -> None:
    left = Counter(lambda state: {"left": state["x"] + 1})
    right = Counter(lambda state: {"right": state["x"] + 2})
    graph = AgentGraph("fan")
    graph.add_node("start", lambda state: {"started": True})
    graph.add_node("left", left, reads=["x"], cache=CachePolicy(), next_node="join")
    graph.add_node("right", right, reads=["x"], cache=CachePolicy(), next_node="join")
    graph.add_node("join", lambda state: {"sum": state["left"] + state["right"]}, next_node=END)
    graph.add_edge("start", ["left", "right"])
    graph.run({"x": 1})
    result = graph.run({"x": 1})
    assert result.state["sum"] == 5
    assert (left.calls, right.calls) == (1, 1)
    found = {(e.node, e.branch.name if e.branch else None) for e in hits(result)}
    assert found == {("left", "left"), ("right", "right")}


def test_a_graph_node_is_cached_and_a_cached_node_inside_a_subgraph_hits_there() -> None:
    inner = Counter(lambda state: {"y": state["x"] * 10})
    child = AgentGraph("child")
    child.add_node("inner", inner, next_node=END)
    parent = AgentGraph("parent")
    parent.add_node("sub", child, cache=CachePolicy(), next_node=END)
    parent.run({"x": 2})
    again = parent.run({"x": 2})
    assert again.state["y"] == 20
    assert inner.calls == 1
    assert [(e.node, e.namespace) for e in hits(again)] == [("sub", ())]

    nested = Counter(lambda state: {"y": state["x"] * 10})
    child = AgentGraph("child")
    child.add_node("inner", nested, cache=CachePolicy(), next_node=END)
    parent = AgentGraph("parent")
    parent.add_node("sub", child, next_node=END)
    parent.run({"x": 3})
    again = parent.run({"x": 3})
    assert again.state["y"] == 30
    assert nested.calls == 1
    assert [(e.node, e.namespace, e.graph) for e in hits(again)] == [("inner", ("sub",), "child")]


# ---------------------------------------------------------------- keys and expiry


def test_an_entry_expires_after_its_ttl() -> None:
    clock = Clock()
    node = Counter(square)
    graph = one_node_graph(node, CachePolicy(ttl=60), node_cache=InMemoryNodeCache(clock=clock))
    graph.run({"x": 3})
    clock.now += 59.9
    graph.run({"x": 3})
    assert node.calls == 1
    clock.now += 0.2  # 60.1 s after the entry was written
    graph.run({"x": 3})
    assert node.calls == 2
    clock.now += 30  # the recomputed entry starts a new ttl
    graph.run({"x": 3})
    assert node.calls == 2


def test_a_custom_key_decides_what_counts_as_the_same_input() -> None:
    node = Counter(lambda state: {"greeting": f"hello {state['user']}"})
    graph = one_node_graph(node, CachePolicy(key=lambda state: state["user"].lower()))
    graph.run({"user": "Ada", "noise": 1})
    result = graph.run({"user": "ADA", "noise": 2})
    assert node.calls == 1
    assert result.state["greeting"] == "hello Ada"  # the recorded output
    assert [e.key for e in hits(result)] == ["ada"]
    graph.run({"user": "Grace"})
    assert node.calls == 2


def test_a_key_function_returning_a_non_string_fails_naming_the_node() -> None:
    graph = one_node_graph(square, CachePolicy(key=lambda state: state["x"]))
    with pytest.raises(NodeError) as caught:
        graph.run({"x": 3})
    cause = caught.value.__cause__
    assert isinstance(cause, TypeError)
    assert "'expensive'" in str(cause)
    assert "returned int 3" in str(cause)


def test_a_key_function_cannot_write_state() -> None:
    def sneaky(state: Any) -> str:
        state.data["x"] = 100
        return "k"

    graph = one_node_graph(square, CachePolicy(key=sneaky))
    with pytest.raises(NodeError) as caught:
        graph.run({"x": 3})
    assert isinstance(caught.value.__cause__, TypeError)


def test_reads_narrow_the_default_key() -> None:
    narrow, wide = Counter(square), Counter(square)
    narrow_graph = AgentGraph("narrow")
    narrow_graph.add_node("expensive", narrow, reads=["x"], cache=CachePolicy(), next_node=END)
    wide_graph = one_node_graph(wide)
    for graph in (narrow_graph, wide_graph):
        graph.run({"x": 3, "unrelated": "a"})
        graph.run({"x": 3, "unrelated": "b"})
    assert narrow.calls == 1  # only x is its input
    assert wide.calls == 2  # all of data is its input


def test_the_default_key_ignores_key_order_and_set_order() -> None:
    node = Counter(lambda state: {"n": len(state["tags"])})
    graph = one_node_graph(node)
    graph.run({"a": 1, "tags": {"x", "y", "z"}})
    graph.run({"tags": {"z", "y", "x"}, "a": 1})
    assert node.calls == 1


# ---------------------------------------------------------------- SQLite store


def test_a_sqlite_cache_survives_a_new_cache_object_on_the_same_file(tmp_path: Path) -> None:
    path = tmp_path / "cache.db"
    first, second = Counter(square), Counter(square)
    with SQLiteNodeCache(path) as store:
        one_node_graph(first, node_cache=store).run({"x": 7})
    with SQLiteNodeCache(path) as store:
        result = one_node_graph(second, node_cache=store).run({"x": 7})
    assert result.state["square"] == 49
    assert (first.calls, second.calls) == (1, 0)
    assert len(hits(result)) == 1


def test_a_sqlite_cache_is_shared_with_another_process(tmp_path: Path) -> None:
    path = tmp_path / "cache.db"
    script = tmp_path / "other.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys
            from selectgraph import END, AgentGraph, CachePolicy, SQLiteNodeCache

            calls = []

            def square(state):
                calls.append(state["x"])
                return {"square": state["x"] ** 2}

            graph = AgentGraph("one", node_cache=SQLiteNodeCache(sys.argv[1]))
            graph.add_node("expensive", square, cache=CachePolicy(), next_node=END)
            result = graph.run({"x": int(sys.argv[2])})
            print(result.state["square"], len(calls))
            """
        )
    )
    node = Counter(square)
    with SQLiteNodeCache(path) as store:
        one_node_graph(node, node_cache=store).run({"x": 7})

    def other(x: int) -> str:
        done = subprocess.run(
            [sys.executable, str(script), str(path), str(x)],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
            timeout=120,
        )
        return done.stdout.strip()

    assert other(7) == "49 0"  # the other process reused this one's entry
    assert other(8) == "64 1"
    with SQLiteNodeCache(path) as store:
        result = one_node_graph(node, node_cache=store).run({"x": 8})
    assert result.state["square"] == 64
    assert node.calls == 1


def test_sqlite_entries_expire_and_broken_rows_are_misses(tmp_path: Path) -> None:
    clock = Clock()
    with SQLiteNodeCache(tmp_path / "c.db", clock=clock) as store:
        store.set("a", {"v": 1}, ttl=10)
        store.set("b", [1, 2], ttl=None)
        assert store.get("a") == {"v": 1}
        clock.now += 10
        assert store.get("a") is None
        assert store.get("b") == [1, 2]
        assert len(store) == 1  # the expired row was dropped when read
        store._conn.execute("UPDATE node_cache SET value = 'not json' WHERE key = 'b'")
        assert store.get("b") is None
        store.set("c", "x")
        store.clear()
        assert store.get("c") is None
        assert len(store) == 0


# ---------------------------------------------------------------- stores


@pytest.mark.parametrize("make", [InMemoryNodeCache, "sqlite"])
def test_stores_keep_json_copies(make: Any, tmp_path: Path) -> None:
    store: NodeCache = SQLiteNodeCache(tmp_path / "s.db") if make == "sqlite" else make()
    assert isinstance(store, NodeCache)
    value: dict[str, Any] = {"items": [1, 2], "nested": {"a": None}}
    store.set("k", value)
    value["items"].append(3)
    got = store.get("k")
    assert got == {"items": [1, 2], "nested": {"a": None}}
    got["items"].append(4)
    assert store.get("k") == {"items": [1, 2], "nested": {"a": None}}
    assert store.get("missing") is None
    with pytest.raises(ValueError, match="None"):
        store.set("k", None)
    with pytest.raises(TypeError, match="not JSON data"):
        store.set("k", {"when": object()})
    with pytest.raises(TypeError, match="must be a str"):
        store.set(1, "v")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="ttl"):
        store.set("k", 1, ttl=0)
    store.close()


def test_the_memory_store_drops_the_least_recently_used_entry_past_its_limit() -> None:
    store = InMemoryNodeCache(max_entries=2)
    store.set("a", 1)
    store.set("b", 2)
    assert store.get("a") == 1  # a is now the most recent
    store.set("c", 3)
    assert (store.get("a"), store.get("b"), store.get("c")) == (1, None, 3)
    with pytest.raises(ValueError, match="max_entries"):
        InMemoryNodeCache(max_entries=0)


# ---------------------------------------------------------------- not cached


def test_an_unencodable_output_is_not_cached_and_the_node_still_works(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Handle:  # not JSON, not a model, not a dataclass
        pass

    node = Counter(lambda state: {"handle": Handle(), "x2": state["x"] * 2})
    store = InMemoryNodeCache()
    graph = one_node_graph(node, node_cache=store)
    with caplog.at_level(logging.WARNING, logger="selectgraph"):
        first = graph.run({"x": 1})
        second = graph.run({"x": 1})
    assert isinstance(first.state["handle"], Handle)
    assert second.state["x2"] == 2
    assert node.calls == 2
    assert len(store) == 0
    assert "'expensive' output not cached" in caplog.text
    assert "Handle" in caplog.text


def test_an_unencodable_input_runs_the_node_uncached(caplog: pytest.LogCaptureFixture) -> None:
    node = Counter(lambda state: {"done": True})
    graph = one_node_graph(node)
    with caplog.at_level(logging.WARNING, logger="selectgraph"):
        graph.run({"conn": object()})
        graph.run({"conn": object()})
    assert node.calls == 2
    assert "'expensive' runs uncached" in caplog.text


def test_a_failed_run_is_not_cached() -> None:
    attempts = []

    def flaky(state: Any) -> dict[str, Any]:
        attempts.append(1)
        if len(attempts) == 1:
            raise ConnectionError("down")
        return {"square": state["x"] ** 2}

    graph = one_node_graph(flaky)
    with pytest.raises(NodeError):
        graph.run({"x": 2})
    assert graph.run({"x": 2}).state["square"] == 4
    assert graph.run({"x": 2}).state["square"] == 4
    assert len(attempts) == 2


def test_an_output_breaking_declared_writes_is_not_cached() -> None:
    store = InMemoryNodeCache()
    graph = AgentGraph("contract", node_cache=store)
    graph.add_node(
        "expensive", lambda state: {"other": 1}, writes=["square"], cache=CachePolicy(),
        next_node=END,
    )  # fmt: skip
    for _ in range(2):
        with pytest.raises(NodeContractError):
            graph.run({"x": 2})
    assert len(store) == 0


class Item(BaseModel):
    name: str
    price: float


class Shop(BaseModel):
    query: str = ""
    items: list[Item] = []


def test_schema_models_are_restored_as_models_on_a_hit() -> None:
    node = Counter(lambda state: {"items": [Item(name=state["query"], price=math.pi)]})
    graph = one_node_graph(node, state_schema=Shop)
    first = graph.run({"query": "lamp"})
    again = graph.run({"query": "lamp"})
    assert node.calls == 1
    assert again.state["items"] == first.state["items"] == [Item(name="lamp", price=math.pi)]
    assert isinstance(again.state["items"][0], Item)


def test_an_entry_written_in_another_format_is_a_miss() -> None:
    store = InMemoryNodeCache()
    node = Counter(square)
    graph = one_node_graph(node, node_cache=store)
    graph.run({"x": 3})
    (key,) = store._entries
    store.set(key, {"format": 0, "entry": {"update": {"square": -1}}})
    assert graph.run({"x": 3}).state["square"] == 9
    assert node.calls == 2
    assert json.loads(key)[:2] == ["one", "expensive"]


# ---------------------------------------------------------------- refused


@pytest.mark.parametrize("ttl", [0, -1, math.nan, math.inf, "60", True])
def test_a_bad_ttl_is_refused(ttl: Any) -> None:
    with pytest.raises(ValueError, match="ttl must be a number of seconds > 0"):
        CachePolicy(ttl=ttl)


def test_a_key_that_is_not_a_function_is_refused() -> None:
    with pytest.raises(TypeError, match="key must be a function"):
        CachePolicy(key="x")  # type: ignore[arg-type]


def test_add_node_refuses_a_cache_that_is_not_a_policy() -> None:
    with pytest.raises(TypeError, match="node 'expensive': cache must be a CachePolicy"):
        AgentGraph().add_node("expensive", square, cache={"ttl": 5})  # type: ignore[arg-type]


def test_a_graph_refuses_a_node_cache_that_is_not_a_store() -> None:
    with pytest.raises(TypeError, match="node_cache must be a NodeCache"):
        AgentGraph(node_cache={})  # type: ignore[arg-type]


def test_a_generator_node_cannot_be_cached() -> None:
    def ask(state: Any) -> Any:
        yield "question"

    async def ask_async(state: Any) -> Any:
        yield "question"

    for fn in (ask, ask_async):
        with pytest.raises(TypeError, match=r"node 'review'.*generator function"):
            AgentGraph().add_node("review", fn, cache=CachePolicy())


def test_the_wrapper_keeps_the_inner_adapters_traits() -> None:
    graph = one_node_graph(square, CachePolicy(ttl=5))
    spec = graph.compile().nodes["expensive"]
    assert isinstance(spec.adapter, CachingAdapter)
    assert (spec.adapter.kind, spec.adapter.is_async, spec.adapter.executor_retries) == (
        "function",
        False,
        True,
    )
    assert spec.offload  # a blocking function still runs off the loop inside branches
