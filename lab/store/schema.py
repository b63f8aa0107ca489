"""The store's tables, and the migrations whose index is the schema version.

Columns are documented in `docs/store.md`. Times are UTC, stored as naive TIMESTAMP. JSON
columns hold what the codec wrote; query them with DuckDB's JSON functions
(`state->>'count'`).
"""

from __future__ import annotations

from ..errors import StoreSchemaError
from . import sql_text as q
from .dialect import DUCKDB

SCHEMA_VERSION = 9


def stored_version(what: str, value: str | None, elsewhere: str) -> int:
    """The schema version a store's `meta` row says (0 without one), a newer one refused.

    `what` names the store ("the store PATH"); `elsewhere` says where a person goes instead of an
    edited row (a backup, another file or database)."""
    try:
        version = int(value) if value is not None else 0
    except ValueError:
        raise StoreSchemaError(
            f"{what} says its schema_version is {value!r}, not a number: its meta table was edited outside "
            f"Graph Lab; restore it from a backup, or {elsewhere}"
        ) from None
    refuse_newer(what, version)
    return version


def refuse_newer(what: str, version: int) -> None:
    """Refuse a store whose schema `version` a newer Graph Lab wrote (`what` names it: "the store PATH")."""
    if version > SCHEMA_VERSION:
        raise StoreSchemaError(
            f"{what} was written by a newer Graph Lab (schema {version}; this version "
            f"knows up to {SCHEMA_VERSION}); upgrade graph-lab to open it"
        )

TABLES: tuple[str, ...] = (
    "graphs", "runs", "checkpoints", "events", "waits", "jobs", "job_events", "effects", "calls",
    "evaluations", "eval_cases", "eval_scores", "eval_analyses",
)
"""The data tables (besides `meta`), in dependency order."""

EFFECTS_TABLE = """
CREATE TABLE IF NOT EXISTS effects (
    key VARCHAR PRIMARY KEY,
    run_id VARCHAR NOT NULL,
    node_id VARCHAR NOT NULL,
    checkpoint_seq BIGINT,
    name VARCHAR NOT NULL,
    status VARCHAR NOT NULL,
    result JSON,
    error JSON,
    tries BIGINT NOT NULL,
    settled_by VARCHAR,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
)
"""
"""One row per `IdempotentOp` call of a station visit (docs/store.md "effects")."""

EVAL_TABLES: list[str] = [
    """
    CREATE TABLE IF NOT EXISTS evaluations (
        evaluation_id VARCHAR PRIMARY KEY,
        dataset VARCHAR NOT NULL,
        graph_key VARCHAR NOT NULL,
        revision INTEGER NOT NULL,
        cases BIGINT NOT NULL,
        spec JSON,
        created_at TIMESTAMP NOT NULL
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS eval_cases (
        evaluation_id VARCHAR NOT NULL,
        case_index BIGINT NOT NULL,
        case_name VARCHAR NOT NULL,
        run_id VARCHAR,
        status VARCHAR NOT NULL,
        output JSON,
        expected JSON,
        duration DOUBLE,
        usage JSON,
        error VARCHAR,
        updated_at TIMESTAMP NOT NULL,
        PRIMARY KEY (evaluation_id, case_index)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS eval_scores (
        evaluation_id VARCHAR NOT NULL,
        case_index BIGINT NOT NULL,
        name VARCHAR NOT NULL,
        kind VARCHAR NOT NULL,
        value JSON,
        reason VARCHAR,
        evaluator VARCHAR NOT NULL,
        PRIMARY KEY (evaluation_id, case_index, name)
    )
    """,
]
"""`lab.evaluate`'s tables (docs/evaluate.md): an evaluation, one row per case (linked to its run),
one row per score, assertion, label or evaluator failure of a case. Written once in DuckDB's
spelling; PostgreSQL's migration renders them with `Dialect.ddl`."""

MIGRATIONS: list[list[str]] = [
    # version 0 -> 1: the foundation tables
    [
        """
        CREATE TABLE IF NOT EXISTS meta (
            key VARCHAR PRIMARY KEY,
            value VARCHAR NOT NULL
        )
        """,
        """
        CREATE TABLE IF NOT EXISTS graphs (
            graph_key VARCHAR NOT NULL,
            revision INTEGER NOT NULL,
            digest VARCHAR NOT NULL,
            manifest JSON NOT NULL,
            created_at TIMESTAMP NOT NULL,
            PRIMARY KEY (graph_key, revision)
        )
        """,
        """
        CREATE TABLE IF NOT EXISTS runs (
            run_id VARCHAR PRIMARY KEY,
            graph_key VARCHAR NOT NULL,
            revision INTEGER NOT NULL,
            digest VARCHAR NOT NULL,
            status VARCHAR NOT NULL,
            head_seq BIGINT,
            durability VARCHAR NOT NULL,
            output JSON,
            error JSON,
            created_at TIMESTAMP NOT NULL,
            updated_at TIMESTAMP NOT NULL,
            parent_run_id VARCHAR,
            parent_seq BIGINT
        )
        """,
        """
        CREATE TABLE IF NOT EXISTS checkpoints (
            run_id VARCHAR NOT NULL,
            seq BIGINT NOT NULL,
            parent_seq BIGINT,
            status VARCHAR NOT NULL,
            state JSON,
            next JSON NOT NULL,
            output JSON,
            created_at TIMESTAMP NOT NULL,
            PRIMARY KEY (run_id, seq)
        )
        """,
        """
        CREATE TABLE IF NOT EXISTS events (
            run_id VARCHAR NOT NULL,
            seq BIGINT NOT NULL,
            kind VARCHAR NOT NULL,
            node_id VARCHAR,
            attempt BIGINT,
            checkpoint_seq BIGINT,
            payload JSON,
            created_at TIMESTAMP NOT NULL,
            PRIMARY KEY (run_id, seq)
        )
        """,
    ],
    # version 1 -> 2: waits and verdicts, per-run breakpoints, checkpointed budget counters
    [
        """
        CREATE TABLE IF NOT EXISTS waits (
            owner VARCHAR PRIMARY KEY,
            run_id VARCHAR NOT NULL,
            kind VARCHAR NOT NULL,
            node_id VARCHAR NOT NULL,
            checkpoint_seq BIGINT NOT NULL,
            prompt VARCHAR,
            details JSON,
            prior JSON,
            created_at TIMESTAMP NOT NULL,
            resolved_at TIMESTAMP,
            resolution JSON
        )
        """,
        "ALTER TABLE runs ADD COLUMN IF NOT EXISTS breakpoints JSON",
        "ALTER TABLE checkpoints ADD COLUMN IF NOT EXISTS counters JSON",
    ],
    # version 2 -> 3: delegated agent jobs (lab/agents) and their lifecycle events. Written directly
    # (not through the journal): a handful of rows per job, each transition a conditional UPDATE so
    # the first terminal wins whichever process records it.
    [
        """
        CREATE TABLE IF NOT EXISTS jobs (
            request_id VARCHAR PRIMARY KEY,
            run_id VARCHAR,
            node_id VARCHAR,
            wait_owner VARCHAR,
            checkpoint_seq BIGINT,
            runtime VARCHAR NOT NULL,
            runner VARCHAR NOT NULL,
            request JSON NOT NULL,
            digest VARCHAR NOT NULL,
            status VARCHAR NOT NULL,
            retry_of VARCHAR,
            output JSON,
            error JSON,
            usage JSON,
            worker JSON,
            created_at TIMESTAMP NOT NULL,
            updated_at TIMESTAMP NOT NULL,
            ended_at TIMESTAMP
        )
        """,
        """
        CREATE TABLE IF NOT EXISTS job_events (
            request_id VARCHAR NOT NULL,
            seq BIGINT NOT NULL,
            kind VARCHAR NOT NULL,
            from_status VARCHAR,
            to_status VARCHAR,
            payload JSON,
            created_at TIMESTAMP NOT NULL,
            PRIMARY KEY (request_id, seq)
        )
        """,
    ],
    # version 3 -> 4: several processes on one store (docs/store.md "Who holds what, when")
    [
        """
        CREATE TABLE IF NOT EXISTS writers (
            run_id VARCHAR PRIMARY KEY,
            pid BIGINT NOT NULL,
            host VARCHAR NOT NULL,
            started DOUBLE NOT NULL,
            claimed_at TIMESTAMP NOT NULL
        )
        """,
        """
        CREATE TABLE IF NOT EXISTS journal_marks (
            file VARCHAR PRIMARY KEY,
            ino BIGINT NOT NULL,
            folded BIGINT NOT NULL
        )
        """,
    ],
    # version 4 -> 5: `IdempotentOp` records (lab/idempotent.py, seed 002 "All-or-nothing steps").
    # Written directly, like jobs: a record must be committed before its effect runs, which a
    # buffered journal line is not.
    [EFFECTS_TABLE],
    # version 5 -> 6: recorded calls (lab/recording.py, docs/replay.md), replayed on rewind, fork and
    # retry. Journalled: a `call` journal row rides with the station's next boundary write.
    [DUCKDB.sql(q.CALLS_TABLE)],
    # version 6 -> 7: evaluations over pydantic-evals data sets (lab/evaluate/, docs/evaluate.md)
    EVAL_TABLES,
    # version 7 -> 8: the analyses of an evaluation's report evaluators (lab/evaluate/, docs/evaluate.md)
    [DUCKDB.sql(q.EVAL_ANALYSES_TABLE)],
    # version 8 -> 9: no table changes; what the rows hold changed. A pending task's fork stack is
    # stored folded (a frame run repeated is written once with its count, lab/fork_stacks.py), and a
    # journal line may be a whole boundary (`"t": "b"`, boundary.py). A Graph Lab that knows up to 8
    # would read those as damage; the version makes it say "upgrade graph-lab" instead.
    [],
]

JOURNAL_COLUMNS: dict[str, str] = {
    "t": "VARCHAR",
    "j": "BIGINT",
    "run_id": "VARCHAR",
    "seq": "BIGINT",
    "parent_seq": "BIGINT",
    "status": "VARCHAR",
    "state": "JSON",
    "next": "JSON",
    "output": "JSON",
    "created_at": "DOUBLE",
    "kind": "VARCHAR",
    "node_id": "VARCHAR",
    "attempt": "BIGINT",
    "checkpoint_seq": "BIGINT",
    "payload": "JSON",
    "graph_key": "VARCHAR",
    "revision": "INTEGER",
    "digest": "VARCHAR",
    "head_seq": "BIGINT",
    "durability": "VARCHAR",
    "error": "JSON",
    "updated_at": "DOUBLE",
    "parent_run_id": "VARCHAR",
    "breakpoints": "JSON",
    "counters": "JSON",
    "owner": "VARCHAR",
    "prompt": "VARCHAR",
    "details": "JSON",
    "prior": "JSON",
    "resolved_at": "DOUBLE",
    "resolution": "JSON",
    "pid": "BIGINT",
    "host": "VARCHAR",
    "started": "DOUBLE",
    "claimed_at": "DOUBLE",
    # a recorded call (t = 'call', lab/store/calls.py); kind, node_id, digest, checkpoint_seq as above
    "call_id": "VARCHAR",
    "call_index": "BIGINT",
    "name": "VARCHAR",
    "mode": "VARCHAR",
    "replayed_from": "VARCHAR",
    "request": "JSON",
    "response": "JSON",
    "input_tokens": "BIGINT",
    "output_tokens": "BIGINT",
    "ms": "DOUBLE",
    # an agent job known only to the journal (t = 'job': its whole row, lab/store/job_journal.py) and its
    # events (t = 'jev'); run_id, node_id, checkpoint_seq, status, digest, request, output, error, kind,
    # seq, payload, created_at, updated_at as above
    "request_id": "VARCHAR",
    "wait_owner": "VARCHAR",
    "runtime": "VARCHAR",
    "runner": "VARCHAR",
    "retry_of": "VARCHAR",
    "from_status": "VARCHAR",
    "to_status": "VARCHAR",
    "usage": "JSON",
    "worker": "JSON",
    "ended_at": "DOUBLE",
    # a boundary row (t = 'b', lab/store/boundary.py): a checkpoint's keys, its settled event's node_id,
    # attempt and payload as above, and these
    "ev": "BIGINT",
    "entered": "VARCHAR",
    "entered_at": "DOUBLE",
}
"""Every column a journal line may carry; `t` says which table the line belongs to.

Times travel as Unix seconds (cheap to take per boundary) and become UTC TIMESTAMPs on fold."""

JOURNAL_SELECT = (
    "SELECT * REPLACE ("
    "make_timestamp(CAST(round(created_at * 1000000) AS BIGINT)) AS created_at, "
    "make_timestamp(CAST(round(updated_at * 1000000) AS BIGINT)) AS updated_at, "
    "make_timestamp(CAST(round(resolved_at * 1000000) AS BIGINT)) AS resolved_at, "
    "make_timestamp(CAST(round(claimed_at * 1000000) AS BIGINT)) AS claimed_at, "
    "make_timestamp(CAST(round(ended_at * 1000000) AS BIGINT)) AS ended_at, "
    "make_timestamp(CAST(round(entered_at * 1000000) AS BIGINT)) AS entered_at) "
    "FROM read_json(?, format='newline_delimited', maximum_object_size=?, columns={"
    + ", ".join(f"'{k}': '{v}'" for k, v in JOURNAL_COLUMNS.items())
    + "})"
)
"""Reads the journal file into rows shaped like the tables.

Parameters: the file, and the largest line it may hold (`line_limit(size)`): DuckDB refuses a
line longer than that, 16 MB by default, which a large state exceeds (issue 24 item 1)."""

MAX_LINE = 4294967295
"""The longest journal line DuckDB reads back (`maximum_object_size` is a 32-bit count): a write
with a longer line is refused before anything is written."""


def line_limit(size: int) -> int:
    """`maximum_object_size` for a journal chunk of `size` bytes: no line of it is longer."""
    return max(16 * 1024 * 1024, min(size + 1, MAX_LINE))

EXPAND_BOUNDARIES = """
INSERT INTO journal_rows BY NAME
SELECT 'cp' AS t, j, run_id, seq, parent_seq, status, state, next, output, created_at, counters
FROM journal_rows WHERE t = 'b'
UNION ALL BY NAME
SELECT 'ev' AS t, j, run_id, ev AS seq, 'settled' AS kind, node_id, attempt, seq AS checkpoint_seq, payload, created_at
FROM journal_rows WHERE t = 'b'
UNION ALL BY NAME
SELECT 'ev' AS t, j, run_id, ev + 1 AS seq, 'entered' AS kind, entered AS node_id, ev + 1 AS attempt,
       seq AS checkpoint_seq, '{}'::JSON AS payload, entered_at AS created_at
FROM journal_rows WHERE t = 'b' AND entered IS NOT NULL
"""
"""A boundary row (`t = 'b'`, lab/store/boundary.py) as the checkpoint, `settled` and `entered` rows it stands
for, added to `journal_rows` before the fold's statements (and its checkpoint check) read it; each keeps the
boundary's line number `j`. `boundary.expand` is the same in Python (PostgreSQL's write)."""

BOUNDARY_KINDS = frozenset({"cp", "ev"})
"""The row kinds `EXPAND_BOUNDARIES` adds: a fold of boundary rows runs the statements that read them."""


CHECKPOINT_CONFLICTS = """
WITH cps AS (
    SELECT j, run_id, seq, parent_seq, status, json(state) AS state, json(next) AS next,
           json(output) AS output, json(counters) AS counters
    FROM journal_rows WHERE t = 'cp'
), stored AS (
    SELECT NULL::BIGINT AS j, run_id, seq, parent_seq, status, json(state) AS state, json(next) AS next,
           json(output) AS output, json(counters) AS counters
    FROM checkpoints WHERE (run_id, seq) IN (SELECT (run_id, seq) FROM cps)
), both_ AS (SELECT * FROM stored UNION ALL SELECT * FROM cps)
SELECT a.run_id, a.seq, a.j, b.j,
       to_json({parent_seq: a.parent_seq, status: a.status, next: a.next, state: a.state, output: a.output})::VARCHAR,
       to_json({parent_seq: b.parent_seq, status: b.status, next: b.next, state: b.state, output: b.output})::VARCHAR
FROM both_ a JOIN cps b ON a.run_id = b.run_id AND a.seq = b.seq AND coalesce(a.j, -1) < b.j
WHERE a.parent_seq IS DISTINCT FROM b.parent_seq OR a.status IS DISTINCT FROM b.status
   OR a.state::VARCHAR IS DISTINCT FROM b.state::VARCHAR OR a.next::VARCHAR IS DISTINCT FROM b.next::VARCHAR
   OR a.output::VARCHAR IS DISTINCT FROM b.output::VARCHAR OR a.counters::VARCHAR IS DISTINCT FROM b.counters::VARCHAR
ORDER BY b.j LIMIT 1
"""
"""A checkpoint line whose (run_id, seq) is already taken by a different checkpoint (stored, or an
earlier journal line): (run_id, seq, first line or NULL if stored, second line, first, second).

Checkpoint ids are unique (seed 001: duplicate snapshot ids fail explicitly); the same line
replayed twice is the same checkpoint and is not a conflict."""

FOLD_STATEMENTS: list[str] = [
    """
    INSERT OR IGNORE INTO runs BY NAME
    SELECT run_id, graph_key, revision, digest, status, head_seq, durability, output, error,
           created_at, updated_at, parent_run_id, parent_seq, breakpoints
    FROM journal_rows WHERE t = 'run'
    """,
    """
    INSERT OR IGNORE INTO checkpoints BY NAME
    SELECT run_id, seq, parent_seq, status, state, next, output, created_at, counters
    FROM journal_rows WHERE t = 'cp'
    """,
    """
    INSERT OR IGNORE INTO waits BY NAME
    SELECT owner, run_id, kind, node_id, checkpoint_seq, prompt, details, prior, created_at
    FROM journal_rows WHERE t = 'wait'
    """,
    """
    UPDATE waits SET resolved_at = v.resolved_at, resolution = v.resolution
    FROM (
        SELECT owner, resolved_at, resolution FROM journal_rows WHERE t = 'vd'
        QUALIFY row_number() OVER (PARTITION BY owner ORDER BY j) = 1
    ) AS v
    WHERE waits.owner = v.owner AND waits.resolved_at IS NULL
    """,
    """
    UPDATE runs SET breakpoints = b.breakpoints
    FROM (
        SELECT run_id, breakpoints FROM journal_rows WHERE t = 'bp'
        QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY j DESC) = 1
    ) AS b
    WHERE runs.run_id = b.run_id
    """,
    """
    INSERT OR IGNORE INTO events
    SELECT run_id, seq, kind, node_id, attempt, checkpoint_seq, payload, created_at
    FROM journal_rows WHERE t = 'ev'
    """,
    """
    UPDATE runs SET status = u.status, head_seq = u.head_seq, output = u.output, error = u.error,
                    updated_at = u.updated_at
    FROM (
        SELECT run_id, status,
               CASE WHEN t = 'cp' THEN seq ELSE head_seq END AS head_seq,
               output,
               CASE WHEN t = 'cp' THEN NULL ELSE error END AS error,
               coalesce(updated_at, created_at) AS updated_at
        FROM journal_rows WHERE t IN ('upd', 'cp')
        QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY j DESC) = 1
    ) AS u
    WHERE runs.run_id = u.run_id
    """,
    # an answer from a process that does not advance the run (docs/store.md): the run is queued
    # once every wait at its head is answered; its writer records the verdict event when it goes on
    """
    UPDATE runs SET status = 'queued'
    WHERE status = 'waiting'
      AND run_id IN (SELECT w.run_id FROM waits w JOIN journal_rows v ON v.t = 'vd' AND v.owner = w.owner)
      AND EXISTS (SELECT 1 FROM waits w WHERE w.run_id = runs.run_id AND w.checkpoint_seq = runs.head_seq)
      AND NOT EXISTS (
          SELECT 1 FROM waits w
          WHERE w.run_id = runs.run_id AND w.checkpoint_seq = runs.head_seq AND w.resolved_at IS NULL
      )
    """,
    # the live writer of a run (a claim replaces an older one, never a newer one)
    """
    DELETE FROM writers USING (
        SELECT run_id, claimed_at FROM journal_rows WHERE t = 'own'
        QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY claimed_at DESC, j DESC) = 1
    ) AS o
    WHERE writers.run_id = o.run_id AND writers.claimed_at <= o.claimed_at
    """,
    """
    INSERT OR IGNORE INTO writers
    SELECT run_id, pid, host, started, claimed_at FROM journal_rows WHERE t = 'own'
    QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY claimed_at DESC, j DESC) = 1
    """,
    # recorded calls (lab/store/calls.py), after the events: a call's try is found among them
    f"""
    INSERT OR IGNORE INTO calls
    SELECT c.call_id, c.run_id, c.node_id, c.checkpoint_seq, {q.call_attempt("c")}, c.call_index, c.kind,
           c.name, c.digest, c.mode, c.replayed_from, c.request, c.response, c.input_tokens, c.output_tokens, c.ms,
           c.created_at
    FROM journal_rows c WHERE c.t = 'call'
    """,
    # an agent job known only to the journal (lab/store/job_journal.py): its last line is its row; ignored
    # once a transaction stored the job (it then holds everything the lines say, and what came after)
    """
    INSERT OR IGNORE INTO jobs BY NAME
    SELECT request_id, run_id, node_id, wait_owner, checkpoint_seq, runtime, runner, request, digest, status,
           retry_of, output, error, usage, worker, created_at, updated_at, ended_at
    FROM journal_rows WHERE t = 'job'
    QUALIFY row_number() OVER (PARTITION BY request_id ORDER BY j DESC) = 1
    """,
    """
    INSERT OR IGNORE INTO job_events BY NAME
    SELECT request_id, seq, kind, from_status, to_status, payload, created_at
    FROM journal_rows WHERE t = 'jev'
    """,
]
"""Fold journal lines into the tables. Idempotent: replaying lines already folded changes nothing.

A checkpoint line also moves its run's head and status (it is the new head by construction), so
a settled boundary costs three journal lines: entered, checkpoint, settled."""

FOLD_NEEDS: list[frozenset[str]] = [
    frozenset({"run"}),
    frozenset({"cp"}),
    frozenset({"wait"}),
    frozenset({"vd"}),
    frozenset({"bp"}),
    frozenset({"ev"}),
    frozenset({"upd", "cp"}),
    frozenset({"vd"}),
    frozenset({"own"}),
    frozenset({"own"}),
    frozenset({"call"}),
    frozenset({"job"}),
    frozenset({"jev"}),
]
"""The journal row kinds (`t`) each of FOLD_STATEMENTS reads: a fold runs only those its lines need."""
assert len(FOLD_NEEDS) == len(FOLD_STATEMENTS)
