"""Persistence: checkpoint records and the stores that keep them.

Stores work on JSON data only: the runner encodes its state with a
:class:`~selectgraph.core._serialization.StateSerializer` (allow-listed, never
pickle) before saving, and decodes it after loading. The node cache stores
(:class:`NodeCache`) keep cached node outputs the same way, as JSON text.
"""

from selectgraph.core._errors import CheckpointConflict, CheckpointDecodeError, CheckpointNotFound
from selectgraph.persistence._chain import SNAPSHOT_EVERY, CheckpointChain, make_checkpoint
from selectgraph.persistence._checkpoint import Checkpoint, CheckpointKind, new_checkpoint_id
from selectgraph.persistence._delta import apply_delta, diff_state, materialize
from selectgraph.persistence._file import FileCheckpointStore
from selectgraph.persistence._memory import InMemoryCheckpointStore
from selectgraph.persistence._node_cache import (
    CachePolicy,
    InMemoryNodeCache,
    NodeCache,
    SQLiteNodeCache,
)
from selectgraph.persistence._postgres import PostgresCheckpointStore
from selectgraph.persistence._protocol import CheckpointStore
from selectgraph.persistence._sqlite import SQLiteCheckpointStore
from selectgraph.persistence._threads import (
    Claim,
    MultitaskStrategy,
    StoredEvent,
    Thread,
    ThreadRun,
    ThreadStore,
)

__all__ = [
    "SNAPSHOT_EVERY",
    "CachePolicy",
    "Checkpoint",
    "CheckpointChain",
    "CheckpointConflict",
    "CheckpointDecodeError",
    "CheckpointKind",
    "CheckpointNotFound",
    "CheckpointStore",
    "Claim",
    "FileCheckpointStore",
    "InMemoryCheckpointStore",
    "InMemoryNodeCache",
    "MultitaskStrategy",
    "NodeCache",
    "PostgresCheckpointStore",
    "SQLiteCheckpointStore",
    "SQLiteNodeCache",
    "StoredEvent",
    "Thread",
    "ThreadRun",
    "ThreadStore",
    "apply_delta",
    "diff_state",
    "make_checkpoint",
    "materialize",
    "new_checkpoint_id",
]
