"""A worker: DBOS launched in this process, the graphs installed, runs taken from the queue.

One worker per process (DBOS keeps one instance per process). The worker
launches DBOS inside the running event loop, so the runs it dequeues run on
that loop; it registers the queue with its concurrency, beats its lease and
watches the others' (PostgreSQL), and stops when ``stop`` is set, or, run
from a blocking call (``executor.serve()``, ``selectgraph worker``), on
SIGINT or SIGTERM.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable

from selectgraph.executors.dbos._database import create_engine, create_tables, probe
from selectgraph.executors.dbos._leases import Leases
from selectgraph.executors.dbos._protocols import WorkerExecutor
from selectgraph.executors.dbos._serializer import JsonSerializer, refuse_pickle
from selectgraph.executors.dbos._threads import ThreadBook
from selectgraph.executors.dbos._turns import install_threads
from selectgraph.executors.dbos._workflow import install_graphs

__all__ = ["serve", "serve_until_signalled"]

logger = logging.getLogger("selectgraph.executors")


async def serve(
    executor: WorkerExecutor, stop: asyncio.Event, on_ready: Callable[[], None] | None = None
) -> None:
    """Work for ``executor``'s queue until ``stop`` is set; ``on_ready()`` once it takes runs.

    Raises:
        DatabaseUnavailableError: the database does not answer.
        RuntimeError: this process already runs a DBOS instance.
    """
    from dbos import DBOS, DBOSConfig, _dbos

    if not executor.graphs:
        raise ValueError(
            "a worker needs at least one graph: DBOSExecutor(..., graphs={name: graph})"
        )
    if _dbos._dbos_global_instance is not None:
        raise RuntimeError("this process already runs DBOS; run one selectgraph worker per process")
    url = executor.database_url
    probe(url)
    refuse_pickle()
    install_graphs(executor.graphs)
    book = ThreadBook(create_engine(url))
    install_threads(book)
    leases = None
    if not executor.single_node:
        engine = create_engine(url, pool_size=1)
        try:
            create_tables(engine)
        finally:
            engine.dispose()
        leases = Leases(url, executor.executor_id, ttl=executor.lease_ttl)
    config: DBOSConfig = {
        "name": executor.app_name,
        "system_database_url": url,
        "executor_id": executor.executor_id,
        "application_version": executor.app_version,
        "serializer": JsonSerializer(),
        "log_level": "WARNING",
        "sys_db_pool_size": executor.pool_size,
        "notification_listener_polling_interval_sec": min(executor.poll_interval, 0.1),
    }
    DBOS(config=config)
    try:
        if leases is not None:
            leases.start()  # known to the others before it takes any run
        DBOS.launch()  # inside this loop: dequeued runs execute on it
        await DBOS.register_queue_async(
            executor.queue,
            worker_concurrency=executor.worker_concurrency,
            polling_interval_sec=executor.poll_interval,
        )
        logger.info(
            "worker %s serving queue %r with graphs %s",
            executor.executor_id,
            executor.queue,
            ", ".join(sorted(executor.graphs)),
        )
        if on_ready is not None:
            on_ready()
        await stop.wait()
    finally:
        if leases is not None:
            leases.stop()
        DBOS.destroy(workflow_completion_timeout_sec=0)
        install_threads(None)
        book.close()


def serve_until_signalled(
    executor: WorkerExecutor, on_ready: Callable[[], None] | None = None
) -> None:
    """Serve ``executor`` in a new event loop until SIGINT or SIGTERM, then stop cleanly."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await serve(executor, stop, on_ready)

    asyncio.run(main())
