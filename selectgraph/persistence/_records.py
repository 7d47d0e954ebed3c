"""The checkpoint names from before the split, importable where they were; none is defined here.

Each name lives in the module of its job: :mod:`._checkpoint` (the record and
its ids), :mod:`._delta` (deltas between encoded states, and rebuilding a
state from a chain), :mod:`._chain` (making a run's successive checkpoints)
and :mod:`._codec` (their stored bytes). The runtime still imports some of
them from here; new code imports from the defining module.
"""

from __future__ import annotations

from selectgraph.persistence._chain import SNAPSHOT_EVERY, CheckpointChain, make_checkpoint
from selectgraph.persistence._checkpoint import (
    Checkpoint,
    CheckpointKind,
    checkpoint_ids_from,
    id_time,
    new_checkpoint_id,
    replayable_ids,
)
from selectgraph.persistence._codec import (
    build_checkpoint,
    decode_body,
    decode_record,
    decode_writes,
    encode_body,
    encode_record,
    encode_writes,
)
from selectgraph.persistence._delta import (
    apply_delta,
    apply_delta_in_place,
    copy_encoded,
    diff_state,
    materialize,
)

__all__ = [
    "SNAPSHOT_EVERY",
    "Checkpoint",
    "CheckpointChain",
    "CheckpointKind",
    "apply_delta",
    "apply_delta_in_place",
    "build_checkpoint",
    "checkpoint_ids_from",
    "copy_encoded",
    "decode_body",
    "decode_record",
    "decode_writes",
    "diff_state",
    "encode_body",
    "encode_record",
    "encode_writes",
    "id_time",
    "make_checkpoint",
    "materialize",
    "new_checkpoint_id",
    "replayable_ids",
]
