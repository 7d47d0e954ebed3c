"""Hot reload: the graph's module imported again when its file changes, the store and runs kept.

The graph is found where the application put it: a global of an imported module (the
module ``selectgraph studio`` loaded, or the caller's). Its file is checked every
``interval`` seconds (its modification time and size: no extra dependency); when it
changed, the module is reloaded and the same global read again. A new graph that
fails to import or compile leaves the old one serving, and the error is shown. Runs
going on keep the graph they started with; new runs, forks and the diagram use the
new one.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import logging
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from selectgraph.build._builder import AgentGraph

if TYPE_CHECKING:
    from selectgraph.studio._runs import RunManager

__all__ = ["Reloader"]

log = logging.getLogger("selectgraph.studio")


class Reloader:
    """Watches the file of the module holding the graph, and swaps in the graph it defines."""

    def __init__(self, manager: RunManager, interval: float = 0.5) -> None:
        """Find the module and global holding ``manager.graph``.

        Raises:
            ValueError: the graph is no global of an imported module with a file, or
                ``interval`` is not positive.
        """
        if interval <= 0:
            raise ValueError(f"the reload interval must be > 0 seconds, got {interval}")
        self.manager = manager
        self.interval = interval
        self.module, self.name = _origin(manager.graph)
        self.path = Path(str(self.module.__file__))
        self.seen = _signature(self.path)
        self.version = 1
        """Counts the graphs served: the page redraws its diagram when it changes."""
        self.error: str | None = None
        """Why the last reload was not taken (the old graph serves on), if it was not."""

    def check(self) -> bool:
        """Reload when the file changed (blocking); whether a new graph was taken."""
        now = _signature(self.path)
        if now == self.seen:
            return False
        self.seen = now
        try:
            module = _reload(self.module, self.path)
            graph = getattr(module, self.name, None)
            if graph is self.manager.graph:
                # A reload runs in the module's old namespace: a file caught half
                # written, or one that no longer sets the name, leaves the old graph.
                raise LookupError(f"{self.module.__name__} no longer defines {self.name}")
            if not isinstance(graph, AgentGraph):
                raise TypeError(
                    f"{self.module.__name__}.{self.name} is no longer a graph "
                    f"(it is {type(graph).__name__})"
                )
            graph.compile()
        except Exception as error:  # the module's own code: anything can go wrong in it
            self.error = f"{type(error).__name__}: {error}"
            log.warning("reloading %s failed: %s", self.path, self.error)
            return False
        self.module, self.error = module, None
        self.manager.graph = graph
        self.version += 1
        log.info("reloaded %s: %s", self.path, graph.name)
        return True

    async def watch(self) -> None:
        """Check the file every ``interval`` seconds until cancelled."""
        while True:
            await asyncio.sleep(self.interval)
            await asyncio.to_thread(self.check)


def _signature(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:  # being replaced by an editor: looked at again next time
        return None
    return stat.st_mtime_ns, stat.st_size


def _origin(graph: AgentGraph) -> tuple[ModuleType, str]:
    """The imported module and global name holding ``graph``."""
    for module in list(sys.modules.values()):
        if module is None or module.__name__ == "__main__":
            continue  # __main__ cannot be imported again
        if not getattr(module, "__file__", None):
            continue
        for name, value in list(vars(module).items()):
            if value is graph:
                return module, name
    raise ValueError(
        f"reload needs graph {graph.name!r} to be a global of an imported module "
        "(as `selectgraph studio module:graph` loads it); it was found in none"
    )


def _reload(module: ModuleType, path: Path) -> ModuleType:
    """``module`` imported again, in its own namespace (as ``importlib.reload`` does).

    A module loaded from a file path (``selectgraph studio path/to/file.py``) has no
    finder to find it again by name: its file is executed again instead.
    """
    try:
        return importlib.reload(module)
    except ModuleNotFoundError:
        spec = importlib.util.spec_from_file_location(module.__name__, path)
        if spec is None or spec.loader is None:
            raise
        spec.loader.exec_module(module)
        return module
