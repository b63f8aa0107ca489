"""The PostgreSQL store's tables and migrations: the same tables and columns as DuckDB's
(`schema.py`, documented in docs/store.md), JSON as `jsonb`, times as UTC `timestamp`.

`MIGRATIONS[v]` takes a store from schema v to v + 1, in step with DuckDB's: the schema
version means the same tables and the same formats of what they hold on both backends (a test
checks the lists are as long).

A boundary is applied by one server-side function, `graphlab_write(rows jsonb)`, so a write
is one round trip and one transaction whatever it holds. It applies the rows as DuckDB's fold
does, in the same order, running a statement only for the kinds of rows given, with what a shared
server needs besides. A station's boundary (only checkpoints, events and updates, of one run) is
applied row by row, each row one plain `INSERT ... VALUES` on values plpgsql reads from the array
(the run's lock, the checkpoint, the last event number, each event, the run's head): about a third
fewer instructions on the server than a statement per kind building its row set from the array,
which any other write (a new run, waits, verdicts, breakpoints, calls, several runs) still takes.
The usual station's boundary does not reach this function: `graphlab_station` (postgres_station.py)
takes the same rows as typed parameters.

- it first takes a transaction lock on every run the rows touch, so two writers of one run
  queue instead of interleaving;
- event `seq`s are numbered from the run's stored events (gap-free however many processes
  write observations of one run); the row's own `seq` is the writer's guess;
- a verdict (`vd`) must find its wait unanswered and its run waiting at the wait's checkpoint;
  otherwise the whole write is refused with SQLSTATE `GLANS` (the first verdict won);
- a different checkpoint under a taken `(run_id, seq)` is refused with SQLSTATE `GLCPX`;
  the same checkpoint again changes nothing (checked only when an id was taken: a check of every
  boundary against the stored checkpoints cost more as the table grew).
"""

from __future__ import annotations

from . import sql_text as q
from .dialect import POSTGRES
from .schema import EVAL_TABLES

RUN_LOCK = 1196379212
"""Advisory lock class of a run's writers (transaction-scoped, in `graphlab_write`)."""
LIVE_LOCK = 1196379213
"""Advisory lock class of a run's live holders (session-scoped, shared): see `PostgresStore.abandoned`."""
MIGRATE_LOCK = 1196379214
"""Advisory lock held while a store's schema is checked and migrated (one process at a time)."""
GRAPH_LOCK = 1196379215
"""Advisory lock class of a graph key while its revision is registered."""
WRITER_LOCK = 1196379216
"""Advisory lock class of the process that steps a run (session-scoped, exclusive): see postgres_session.py."""
JOB_LOCK = 1196379217
"""Advisory lock class of an agent job while one transaction records it (transaction-scoped): postgres_jobs.py."""
EFFECT_LOCK = 1196379218
"""Advisory lock class of an `IdempotentOp` record while one transaction records it: postgres_effects.py."""

WRITERS_TABLE = """
CREATE TABLE IF NOT EXISTS writers (
    run_id text PRIMARY KEY,
    pid bigint NOT NULL,
    host text NOT NULL,
    started double precision NOT NULL,
    claimed_at timestamp NOT NULL
)
"""
"""The process that steps each run, as DuckDB's `writers` table (docs/store.md): with its session's
`WRITER_LOCK` it tells a live writer whose connection dropped (a server restart) from a dead one."""

_ROWS = """jsonb_array_elements(rows) WITH ORDINALITY AS e(j, ord), jsonb_to_record(e.j) AS x(
    t text, run_id text, seq bigint, parent_seq bigint, status text, state jsonb, next jsonb, output jsonb,
    created_at double precision, kind text, node_id text, attempt bigint, checkpoint_seq bigint, payload jsonb,
    graph_key text, revision integer, digest text, head_seq bigint, durability text, error jsonb,
    updated_at double precision, parent_run_id text, breakpoints jsonb, counters jsonb, owner text, prompt text,
    details jsonb, prior jsonb, resolved_at double precision, resolution jsonb, call_id text, call_index bigint,
    name text, mode text, replayed_from text, request jsonb, response jsonb, input_tokens bigint, output_tokens bigint,
    ms double precision)"""


def _of(kinds: str, columns: str) -> str:
    """The rows of these kinds (`'cp'`, or `'upd', 'cp'`) in order, each read as these columns only: a row
    of another kind is never converted, nor a column the statement does not read (`_ROWS` reads all)."""
    return (
        f"jsonb_array_elements(rows) WITH ORDINALITY AS e(j, ord), jsonb_to_record(e.j) AS x({columns}) "
        f"WHERE e.j->>'t' IN ({kinds})"
    )


def ts(col: str) -> str:
    """Seconds since the epoch (a double) as the UTC `timestamp` the tables hold."""
    return f"(to_timestamp({col}) AT TIME ZONE 'UTC')"


_RUN_COLUMNS = (
    "run_id text, graph_key text, revision integer, digest text, status text, head_seq bigint, durability text, "
    "output jsonb, error jsonb, created_at double precision, updated_at double precision, parent_run_id text, "
    "parent_seq bigint, breakpoints jsonb"
)
_CP_COLUMNS = (
    "run_id text, seq bigint, parent_seq bigint, status text, state jsonb, next jsonb, output jsonb, "
    "created_at double precision, counters jsonb"
)


REFUSE_TAKEN_CHECKPOINT = (
    "IF FOUND THEN RAISE EXCEPTION USING ERRCODE = 'GLCPX', MESSAGE = c.run_id, DETAIL = c.seq::text, "
    "HINT = left(c.stored::text, 300) || ' | ' || left(c.given::text, 300); END IF;"
)
"""Both write paths' refusal of a different checkpoint under a taken `(run_id, seq)`: `c` holds the
stored row and the given one (SQLSTATE `GLCPX`, which postgres_store.py turns into the lab's error)."""

WRITE_FUNCTION = f"""
CREATE OR REPLACE FUNCTION graphlab_write(rows jsonb) RETURNS void LANGUAGE plpgsql AS $fn$
-- Graph Lab's write function (postgres_schema.py): a statement runs only for the kinds of rows given
DECLARE
    c record;
    w record;
    kinds text[];
    n_cp bigint;
    n bigint;
    f_n integer := coalesce(jsonb_array_length(rows), 0);
    f_run text := rows->0->>'run_id';
    f_fast boolean := f_run IS NOT NULL;
    f_row jsonb;
    f_kind text;
    f_seq bigint;
    f_head jsonb;
BEGIN
    -- A station's boundary (checkpoints, events, run updates of one run): row by row, each a plain
    -- statement on plpgsql's values (no row set to build per statement); the same rows, order and checks
    FOR i IN 0 .. f_n - 1 LOOP
        f_row := rows->i;
        IF (f_row->>'t' IN ('cp', 'ev', 'upd') AND f_row->>'run_id' = f_run) IS NOT TRUE THEN
            f_fast := false;
            EXIT;
        END IF;
    END LOOP;
    IF f_fast THEN
        PERFORM pg_advisory_xact_lock({RUN_LOCK}, hashtext(f_run));
        FOR i IN 0 .. f_n - 1 LOOP
            f_row := rows->i;
            f_kind := f_row->>'t';
            IF f_kind = 'ev' THEN
                IF f_seq IS NULL THEN  -- numbered from the run's stored events, read after the lock:
                    -- first from the writer's guess on (one index entry read, not the run's whole leaf page),
                    -- then, if nothing is stored from there, the run's last of all
                    f_seq := (f_row->>'seq')::bigint - 1;
                    SELECT v.seq INTO f_seq FROM events v WHERE v.run_id = f_run AND v.seq >= f_seq
                    ORDER BY v.seq DESC LIMIT 1;
                    IF NOT FOUND THEN
                        SELECT v.seq INTO f_seq FROM events v WHERE v.run_id = f_run ORDER BY v.seq DESC LIMIT 1;
                        f_seq := coalesce(f_seq, -1);
                    END IF;
                END IF;
                f_seq := f_seq + 1;
                INSERT INTO events (run_id, seq, kind, node_id, attempt, checkpoint_seq, payload, created_at)
                VALUES (f_run, f_seq, f_row->>'kind', f_row->>'node_id', (f_row->>'attempt')::bigint,
                        (f_row->>'checkpoint_seq')::bigint, nullif(f_row->'payload', 'null'),
                        {ts("(f_row->>'created_at')::double precision")});
                CONTINUE;
            END IF;
            f_head := f_row;
            IF f_kind = 'cp' THEN
                INSERT INTO checkpoints (run_id, seq, parent_seq, status, state, next, output, created_at, counters)
                VALUES (f_run, (f_row->>'seq')::bigint, (f_row->>'parent_seq')::bigint, f_row->>'status',
                        nullif(f_row->'state', 'null'), nullif(f_row->'next', 'null'), nullif(f_row->'output', 'null'),
                        {ts("(f_row->>'created_at')::double precision")}, nullif(f_row->'counters', 'null'))
                ON CONFLICT (run_id, seq) DO NOTHING;
                IF NOT FOUND THEN  -- the id was taken: the same checkpoint again changes nothing, a different one is refused
                    SELECT k.run_id, k.seq, to_jsonb(k) - 'created_at' AS stored,
                           jsonb_build_object('parent_seq', (f_row->>'parent_seq')::bigint, 'status', f_row->>'status',
                                              'state', nullif(f_row->'state', 'null'), 'next', nullif(f_row->'next', 'null'),
                                              'output', nullif(f_row->'output', 'null'),
                                              'counters', nullif(f_row->'counters', 'null')) AS given
                    INTO c FROM checkpoints k
                    WHERE k.run_id = f_run AND k.seq = (f_row->>'seq')::bigint
                      AND (k.parent_seq IS DISTINCT FROM (f_row->>'parent_seq')::bigint
                        OR k.status IS DISTINCT FROM f_row->>'status'
                        OR k.state IS DISTINCT FROM nullif(f_row->'state', 'null')
                        OR k.next IS DISTINCT FROM nullif(f_row->'next', 'null')
                        OR k.output IS DISTINCT FROM nullif(f_row->'output', 'null')
                        OR k.counters IS DISTINCT FROM nullif(f_row->'counters', 'null'));
                    {REFUSE_TAKEN_CHECKPOINT}
                END IF;
            END IF;
        END LOOP;
        IF f_head->>'t' = 'cp' THEN  -- the run's head: its last checkpoint or update
            UPDATE runs SET status = f_head->>'status', head_seq = (f_head->>'seq')::bigint,
                            output = nullif(f_head->'output', 'null'), error = NULL,
                            updated_at = {ts("coalesce((f_head->>'updated_at')::double precision, (f_head->>'created_at')::double precision)")}
            WHERE run_id = f_run;
        ELSIF f_head IS NOT NULL THEN
            UPDATE runs SET status = f_head->>'status', head_seq = (f_head->>'head_seq')::bigint,
                            output = nullif(f_head->'output', 'null'), error = nullif(f_head->'error', 'null'),
                            updated_at = {ts("coalesce((f_head->>'updated_at')::double precision, (f_head->>'created_at')::double precision)")}
            WHERE run_id = f_run;
        END IF;
        RETURN;
    END IF;

    SELECT array_agg(DISTINCT e->>'t'), count(*) FILTER (WHERE e->>'t' = 'cp')
    INTO kinds, n_cp FROM jsonb_array_elements(rows) e;

    IF 'vd' = ANY(kinds) THEN  -- an answer also locks the run its wait parks
        PERFORM pg_advisory_xact_lock({RUN_LOCK}, hashtext(ids.r)) FROM (
            SELECT DISTINCT r FROM (
                SELECT e->>'run_id' AS r FROM jsonb_array_elements(rows) e WHERE e->>'run_id' IS NOT NULL
                UNION SELECT wt.run_id FROM waits wt JOIN jsonb_array_elements(rows) e
                    ON e->>'t' = 'vd' AND wt.owner = e->>'owner'
            ) u ORDER BY r
        ) ids;
    ELSE
        PERFORM pg_advisory_xact_lock({RUN_LOCK}, hashtext(ids.r)) FROM (
            SELECT DISTINCT e->>'run_id' AS r FROM jsonb_array_elements(rows) e
            WHERE e->>'run_id' IS NOT NULL ORDER BY r
        ) ids;
    END IF;

    IF 'run' = ANY(kinds) THEN
        INSERT INTO runs (run_id, graph_key, revision, digest, status, head_seq, durability, output, error,
                          created_at, updated_at, parent_run_id, parent_seq, breakpoints)
        SELECT run_id, graph_key, revision, digest, status, head_seq, durability, output, error,
               {ts("created_at")}, {ts("updated_at")}, parent_run_id, parent_seq, breakpoints
        FROM {_of("'run'", _RUN_COLUMNS)} ORDER BY ord
        ON CONFLICT (run_id) DO NOTHING;
    END IF;

    IF n_cp > 0 THEN
        INSERT INTO checkpoints (run_id, seq, parent_seq, status, state, next, output, created_at, counters)
        SELECT run_id, seq, parent_seq, status, state, next, output, {ts("created_at")}, counters
        FROM {_of("'cp'", _CP_COLUMNS)} ORDER BY ord
        ON CONFLICT (run_id, seq) DO NOTHING;
        GET DIAGNOSTICS n = ROW_COUNT;
        IF n < n_cp THEN  -- an id was taken: the same checkpoint again changes nothing, a different one is refused
            SELECT x.run_id, x.seq, to_jsonb(k) - 'created_at' AS stored,
                   jsonb_build_object('parent_seq', x.parent_seq, 'status', x.status, 'state', x.state,
                                      'next', x.next, 'output', x.output, 'counters', x.counters) AS given
            INTO c
            FROM {_ROWS} JOIN checkpoints k ON k.run_id = x.run_id AND k.seq = x.seq
            WHERE x.t = 'cp' AND (k.parent_seq IS DISTINCT FROM x.parent_seq OR k.status IS DISTINCT FROM x.status
                OR k.state IS DISTINCT FROM x.state OR k.next IS DISTINCT FROM x.next
                OR k.output IS DISTINCT FROM x.output OR k.counters IS DISTINCT FROM x.counters)
            LIMIT 1;
            {REFUSE_TAKEN_CHECKPOINT}
        END IF;
    END IF;

    IF 'wait' = ANY(kinds) THEN
        INSERT INTO waits (owner, run_id, kind, node_id, checkpoint_seq, prompt, details, prior, created_at)
        SELECT owner, run_id, kind, node_id, checkpoint_seq, prompt, details, prior, {ts("created_at")}
        FROM {_ROWS} WHERE t = 'wait' ORDER BY ord
        ON CONFLICT (owner) DO NOTHING;
    END IF;

    IF 'vd' = ANY(kinds) THEN
        FOR c IN SELECT DISTINCT ON (owner) owner, resolution, resolved_at FROM {_ROWS}
                 WHERE t = 'vd' ORDER BY owner, ord LOOP
            UPDATE waits SET resolution = c.resolution, resolved_at = {ts("c.resolved_at")}
            WHERE owner = c.owner AND resolved_at IS NULL
              AND EXISTS (SELECT 1 FROM runs r WHERE r.run_id = waits.run_id AND r.status = 'waiting'
                          AND r.head_seq = waits.checkpoint_seq);
            IF NOT FOUND THEN
                SELECT wt.resolution, wt.run_id, r.status, r.head_seq, wt.checkpoint_seq INTO w
                FROM waits wt LEFT JOIN runs r ON r.run_id = wt.run_id WHERE wt.owner = c.owner;
                RAISE EXCEPTION USING ERRCODE = 'GLANS', MESSAGE = c.owner,
                    DETAIL = coalesce(w.resolution::text, ''),
                    HINT = coalesce(w.run_id || ' ' || w.status || ' ' || w.head_seq || ' ' || w.checkpoint_seq, '');
            END IF;
        END LOOP;
    END IF;

    IF 'bp' = ANY(kinds) THEN
        UPDATE runs SET breakpoints = b.breakpoints
        FROM (SELECT DISTINCT ON (run_id) run_id, breakpoints FROM {_ROWS}
              WHERE t = 'bp' ORDER BY run_id, ord DESC) b
        WHERE runs.run_id = b.run_id;
    END IF;

    IF 'ev' = ANY(kinds) THEN
        INSERT INTO events (run_id, seq, kind, node_id, attempt, checkpoint_seq, payload, created_at)
        SELECT x.run_id, coalesce((SELECT max(v.seq) FROM events v WHERE v.run_id = x.run_id), -1)
                         + row_number() OVER (PARTITION BY x.run_id ORDER BY e.ord),
               x.kind, x.node_id, x.attempt, x.checkpoint_seq, x.payload, {ts("x.created_at")}
        FROM {_of("'ev'", "run_id text, kind text, node_id text, attempt bigint, checkpoint_seq bigint, "
                  "payload jsonb, created_at double precision")};
    END IF;

    IF n_cp > 0 OR 'upd' = ANY(kinds) THEN
        UPDATE runs SET status = u.status, head_seq = u.head_seq, output = u.output, error = u.error,
                        updated_at = {ts("u.ts")}
        FROM (SELECT DISTINCT ON (run_id) run_id, status,
                     CASE WHEN t = 'cp' THEN seq ELSE head_seq END AS head_seq, output,
                     CASE WHEN t = 'cp' THEN NULL ELSE error END AS error,
                     coalesce(updated_at, created_at) AS ts
              FROM {_of("'upd', 'cp'", "t text, run_id text, seq bigint, status text, head_seq bigint, output jsonb, "
                        "error jsonb, updated_at double precision, created_at double precision")}
              ORDER BY run_id, ord DESC) u
        WHERE runs.run_id = u.run_id;
    END IF;

    IF 'call' = ANY(kinds) THEN
        INSERT INTO calls ({q.CALL_COLS})
        SELECT y.call_id, y.run_id, y.node_id, y.checkpoint_seq, {q.call_attempt("y")}, y.call_index, y.kind,
               y.name, y.digest, y.mode, y.replayed_from, y.request, y.response, y.input_tokens, y.output_tokens,
               y.ms, y.created_at
        FROM (SELECT x.call_id, x.run_id, x.node_id, x.checkpoint_seq, x.call_index, x.kind, x.name, x.digest,
                     x.mode, x.replayed_from, x.request, x.response, x.input_tokens, x.output_tokens, x.ms,
                     {ts("x.created_at")} AS created_at
              FROM {_ROWS} WHERE x.t = 'call') y
        ON CONFLICT (call_id) DO NOTHING;
    END IF;
END
$fn$
"""
"""`graphlab_write(rows jsonb)`: one boundary, applied in the order DuckDB's fold applies it. A typical
step (a checkpoint, its `settled` event, the next `entered`) takes the row-by-row path: the run's lock,
the checkpoint, the last event number, the two events, the run's head. Its cost on the server, by
callgrind of `postgres --single` (docs/benchmarks.md): ~420k instructions a step against ~775k for the
statement-per-kind path (one statement for all three kinds' rows, as data-modifying CTEs, cost the same
as four). The last event number is read from the writer's guess on, as a backward index scan that stops
at its bound (a `max(seq)` over the run read the run's whole index leaf page: ~50k instructions more), and
the head's update has one form per kind of head (no CASE to build per call: ~11k less)."""

WRITE_FUNCTION_SOURCE = WRITE_FUNCTION.split("$fn$")[1]
"""The function's body as the server keeps it (`pg_proc.prosrc`): a store whose installed body differs
(an older Graph Lab's, with the same rows and checks) gets this one on open (`PostgresStore`), under
the migration lock, without a schema version of its own: the tables are the same."""

INSTALLED_WRITE_FUNCTION = "SELECT prosrc FROM pg_proc WHERE oid = to_regprocedure('graphlab_write(jsonb)')"

MIGRATIONS: list[list[str]] = [
    # version 0 -> 1: the foundation tables
    [
        "CREATE TABLE IF NOT EXISTS meta (key text PRIMARY KEY, value text NOT NULL)",
        """
        CREATE TABLE IF NOT EXISTS graphs (
            graph_key text NOT NULL,
            revision integer NOT NULL,
            digest text NOT NULL,
            manifest jsonb NOT NULL,
            created_at timestamp NOT NULL,
            PRIMARY KEY (graph_key, revision)
        )
        """,
        """
        CREATE TABLE IF NOT EXISTS runs (
            run_id text PRIMARY KEY,
            graph_key text NOT NULL,
            revision integer NOT NULL,
            digest text NOT NULL,
            status text NOT NULL,
            head_seq bigint,
            durability text NOT NULL,
            output jsonb,
            error jsonb,
            created_at timestamp NOT NULL,
            updated_at timestamp NOT NULL,
            parent_run_id text,
            parent_seq bigint
        )
        """,
        """
        CREATE TABLE IF NOT EXISTS checkpoints (
            run_id text NOT NULL,
            seq bigint NOT NULL,
            parent_seq bigint,
            status text NOT NULL,
            state jsonb,
            next jsonb NOT NULL,
            output jsonb,
            created_at timestamp NOT NULL,
            PRIMARY KEY (run_id, seq)
        )
        """,
        """
        CREATE TABLE IF NOT EXISTS events (
            run_id text NOT NULL,
            seq bigint NOT NULL,
            kind text NOT NULL,
            node_id text,
            attempt bigint,
            checkpoint_seq bigint,
            payload jsonb,
            created_at timestamp NOT NULL,
            PRIMARY KEY (run_id, seq)
        )
        """,
        "CREATE INDEX IF NOT EXISTS runs_status ON runs (status)",
        "CREATE INDEX IF NOT EXISTS runs_parent ON runs (parent_run_id) WHERE parent_run_id IS NOT NULL",
    ],
    # version 1 -> 2: waits and verdicts, per-run breakpoints, checkpointed budget counters
    [
        """
        CREATE TABLE IF NOT EXISTS waits (
            owner text PRIMARY KEY,
            run_id text NOT NULL,
            kind text NOT NULL,
            node_id text NOT NULL,
            checkpoint_seq bigint NOT NULL,
            prompt text,
            details jsonb,
            prior jsonb,
            created_at timestamp NOT NULL,
            resolved_at timestamp,
            resolution jsonb
        )
        """,
        "CREATE INDEX IF NOT EXISTS waits_run ON waits (run_id, checkpoint_seq)",
        "ALTER TABLE runs ADD COLUMN IF NOT EXISTS breakpoints jsonb",
        "ALTER TABLE checkpoints ADD COLUMN IF NOT EXISTS counters jsonb",
        WRITE_FUNCTION,
    ],
    # version 2 -> 3: delegated agent jobs (lab/agents) and their lifecycle events
    [
        """
        CREATE TABLE IF NOT EXISTS jobs (
            request_id text PRIMARY KEY,
            run_id text,
            node_id text,
            wait_owner text,
            checkpoint_seq bigint,
            runtime text NOT NULL,
            runner text NOT NULL,
            request jsonb NOT NULL,
            digest text NOT NULL,
            status text NOT NULL,
            retry_of text,
            output jsonb,
            error jsonb,
            usage jsonb,
            worker jsonb,
            created_at timestamp NOT NULL,
            updated_at timestamp NOT NULL,
            ended_at timestamp
        )
        """,
        """
        CREATE TABLE IF NOT EXISTS job_events (
            request_id text NOT NULL,
            seq bigint NOT NULL,
            kind text NOT NULL,
            from_status text,
            to_status text,
            payload jsonb,
            created_at timestamp NOT NULL,
            PRIMARY KEY (request_id, seq)
        )
        """,
    ],
    # version 3 -> 4: DuckDB's schema 4 adds `writers` and `journal_marks`, its machinery for several
    # processes on one file (docs/store.md "Who holds what, when"). A server serialises its writes
    # itself (advisory locks); `writers` names who steps a run (postgres_session.py). A store an
    # older Graph Lab migrated to 4 without it gains it on open.
    [WRITERS_TABLE],
    # version 4 -> 5: `IdempotentOp` records (lab/idempotent.py), as DuckDB's
    [
        """
        CREATE TABLE IF NOT EXISTS effects (
            key text PRIMARY KEY,
            run_id text NOT NULL,
            node_id text NOT NULL,
            checkpoint_seq bigint,
            name text NOT NULL,
            status text NOT NULL,
            result jsonb,
            error jsonb,
            tries bigint NOT NULL,
            settled_by text,
            created_at timestamp NOT NULL,
            updated_at timestamp NOT NULL
        )
        """,
        "CREATE INDEX IF NOT EXISTS effects_run ON effects (run_id)",
    ],
    # version 5 -> 6: recorded calls (lab/recording.py), as DuckDB's (the text is sql_text.CALLS_TABLE)
    # (journalled: `graphlab_write` stores `call` rows from now on)
    [POSTGRES.sql(q.CALLS_TABLE), "CREATE INDEX IF NOT EXISTS calls_run ON calls (run_id)", WRITE_FUNCTION],
    # version 6 -> 7: evaluations (lab/evaluate/), DuckDB's DDL rendered for PostgreSQL
    [POSTGRES.ddl(stmt) for stmt in EVAL_TABLES],
    # version 7 -> 8: report evaluators' analyses (lab/evaluate/), as DuckDB's
    [POSTGRES.ddl(q.EVAL_ANALYSES_TABLE)],
    # version 8 -> 9: no table changes, as DuckDB's: folded fork stacks and `b` rows (schema.py)
    [],
]
