"""PostgresCheckpointStore's SQL: the schema's migrations and every statement it runs."""

from __future__ import annotations

from typing import Final

from selectgraph.persistence._postgres_threads import THREAD_TABLES

__all__ = ["COLUMNS", "KIND_CODES", "KIND_NAMES", "MIGRATIONS", "QUERIES", "SCHEMA_VERSION"]

MIGRATIONS: Final[tuple[tuple[int, tuple[str, ...]], ...]] = (
    (
        1,
        (
            """CREATE TABLE {schema}.runs (
                run_id text PRIMARY KEY,
                version bigint NOT NULL
            )""",
            """CREATE TABLE {schema}.checkpoints (
                checkpoint_id text PRIMARY KEY,
                run_id text NOT NULL REFERENCES {schema}.runs (run_id) ON DELETE CASCADE,
                version bigint NOT NULL,
                parent_id text,
                step bigint NOT NULL,
                kind smallint NOT NULL,
                created_at timestamptz NOT NULL,
                body bytea NOT NULL,
                UNIQUE (run_id, version)
            )""",
            """CREATE TABLE {schema}.writes (
                checkpoint_id text NOT NULL
                    REFERENCES {schema}.checkpoints (checkpoint_id) ON DELETE CASCADE,
                task_id text NOT NULL,
                body bytea NOT NULL,
                PRIMARY KEY (checkpoint_id, task_id)
            )""",
        ),
    ),
    (2, THREAD_TABLES),
    # Bodies and writes carry a CRC-32 from here on (see _codec.py): the checkpoints
    # stored before are listed, and only they are read unchecked.
    (3, ("CREATE TABLE {schema}.unsealed AS SELECT checkpoint_id FROM {schema}.checkpoints",)),
    # The run's last event seq on its runs row: a save bumps its version and numbers
    # its events in one statement (one round trip), reading the seq under the row's lock.
    (
        4,
        (
            "ALTER TABLE {schema}.runs ADD COLUMN last_seq bigint NOT NULL DEFAULT 0",
            "UPDATE {schema}.runs r SET last_seq = e.last FROM (SELECT run_id, max(last_seq) "
            "AS last FROM {schema}.events GROUP BY run_id) e WHERE e.run_id = r.run_id",
        ),
    ),
)
"""Schema changes in order; the schema records the last one applied in ``schema_version``."""

SCHEMA_VERSION: Final = MIGRATIONS[-1][0]


KIND_CODES: Final = {"snapshot": 0, "delta": 1}
KIND_NAMES: Final = {0: "snapshot", 1: "delta"}
COLUMNS: Final = (
    "c.run_id, c.checkpoint_id, c.parent_id, c.version, c.step, c.kind, c.created_at, c.body"
)

QUICK_REST: Final = (
    "saved AS (INSERT INTO {schema}.checkpoints (checkpoint_id, "
    "run_id, version, parent_id, step, kind, created_at, body) SELECT %(id)s, %(run)s, "
    "%(version)s, %(parent)s, %(step)s, %(kind)s, %(at)s, %(body)s FROM bumped "
    "RETURNING 1), logged AS (INSERT INTO {schema}.events (run_id, first_seq, last_seq, "
    "body) SELECT %(run)s, last_seq - %(count)s + 1, last_seq, %(events)s FROM bumped "
    "WHERE %(count)s > 0) SELECT count(*) FROM saved"
)
"""A quick save's checkpoint and events, inserted from the ``bumped`` runs row."""

QUERIES: Final = {
    "select": f"SELECT {COLUMNS} FROM {{schema}}.checkpoints c ",
    "chain": f"""
        WITH RECURSIVE chain (checkpoint_id, parent_id, kind, depth) AS (
            SELECT checkpoint_id, parent_id, kind, 0 FROM {{schema}}.checkpoints
            WHERE checkpoint_id = %s
            UNION ALL
            SELECT c.checkpoint_id, c.parent_id, c.kind, chain.depth + 1
            FROM {{schema}}.checkpoints c JOIN chain ON c.checkpoint_id = chain.parent_id
            WHERE chain.kind = 1 AND chain.depth < 10000
        )
        SELECT {COLUMNS} FROM chain JOIN {{schema}}.checkpoints c USING (checkpoint_id)
        ORDER BY chain.depth DESC""",
    "lock_run": "SELECT version FROM {schema}.runs WHERE run_id = %s FOR UPDATE",
    "new_run": "INSERT INTO {schema}.runs (run_id, version) VALUES (%s, 0) ON CONFLICT DO NOTHING",
    "set_version": (
        "UPDATE {schema}.runs SET version = %s, last_seq = last_seq + %s WHERE run_id = %s "
        "RETURNING last_seq"
    ),
    "put_events": (
        "INSERT INTO {schema}.events (run_id, first_seq, last_seq, body) VALUES (%s, %s, %s, %s)"
    ),
    # A save in one statement, for the common case (the run's head row exists at the
    # expected version): the version bump, the checkpoint and the events'
    # batch, numbered from the row it locks. No row: the save takes the full path.
    "quick_save": (
        "WITH bumped AS (UPDATE {schema}.runs SET version = %(version)s, "
        "last_seq = last_seq + %(count)s WHERE run_id = %(run)s AND version = %(expected)s "
        "RETURNING last_seq), " + QUICK_REST
    ),
    # The same on a thread the run owns (or was the last run of): the thread's row is
    # touched (and so locked) before the run's, the order a claim takes them in.
    "quick_thread_save": (
        "WITH owned AS (UPDATE {schema}.threads SET updated_at = %(at)s, expires_at = "
        "CASE WHEN ttl IS NULL THEN NULL ELSE %(at)s + ttl * interval '1 second' END "
        "WHERE thread_id = %(thread)s AND (owner = %(run)s OR (owner IS NULL AND "
        "last_run = %(run)s)) AND EXISTS (SELECT 1 FROM {schema}.runs WHERE run_id = "
        "%(run)s AND version = %(expected)s) RETURNING 1), bumped AS (UPDATE {schema}.runs "
        "SET version = %(version)s, last_seq = last_seq + %(count)s WHERE run_id = %(run)s "
        "AND version = %(expected)s AND EXISTS (SELECT 1 FROM owned) RETURNING last_seq), "
        + QUICK_REST
    ),
    "insert": (
        "INSERT INTO {schema}.checkpoints (checkpoint_id, run_id, version, parent_id, step, kind, "
        "created_at, body) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
    ),
    "writes": (
        "SELECT checkpoint_id, task_id, body FROM {schema}.writes WHERE checkpoint_id = ANY(%s)"
    ),
    "cursor": "SELECT version FROM {schema}.checkpoints WHERE checkpoint_id = %s AND run_id = %s",
    "owner": "SELECT run_id, version FROM {schema}.checkpoints WHERE checkpoint_id = %s",
    "rewrite": (
        "UPDATE {schema}.checkpoints SET parent_id = %s, kind = %s, body = %s "
        "WHERE checkpoint_id = %s"
    ),
    "delete": "DELETE FROM {schema}.checkpoints WHERE checkpoint_id = %s",
    "count_run": "SELECT count(*) FROM {schema}.checkpoints WHERE run_id = %s",
    "delete_run": "DELETE FROM {schema}.runs WHERE run_id = %s",
    # Runs with checkpoints, by their head's created_at, newest first; ties in code point order.
    "runs": (
        "SELECT r.run_id FROM {schema}.runs r CROSS JOIN LATERAL ("
        "SELECT h.created_at FROM {schema}.checkpoints h WHERE h.run_id = r.run_id "
        "ORDER BY h.version DESC LIMIT 1) c "
        'ORDER BY c.created_at DESC, r.run_id COLLATE "C"'
    ),
    "put_writes": (
        "INSERT INTO {schema}.writes (checkpoint_id, task_id, body) VALUES (%s, %s, %s) "
        "ON CONFLICT (checkpoint_id, task_id) DO UPDATE SET body = EXCLUDED.body"
    ),
}
