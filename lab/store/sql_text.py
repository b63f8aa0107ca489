"""The store's SQL, one text per operation, shared by the DuckDB and PostgreSQL stores.

Written in DuckDB's spelling with `?` parameters and the markers of `dialect.py` (`{json}`,
`{in_ints}`); each store renders a text with its dialect (`DUCKDB.sql(GET_RUN)`) before it
runs it. What only one backend does (DuckDB's journal fold and list aggregates, PostgreSQL's
server-side write function and advisory locks) stays with that backend.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = (
    "RUN_COLS", "CP_COLS", "WAIT_COLS", "EV_COLS", "TABLES_BY_RUN",
    "GET_RUN", "LIST_RUNS", "FAMILY", "NEXT_SEQS",
    "CHECKPOINTS", "CHECKPOINT", "CHECKPOINTS_IN", "SEQS", "PARENTS", "COUNT_PRUNED", "PRUNE", "DELETE_BY_RUN",
    "EVENTS", "EVENTS_OF_KIND", "EVENTS_AT", "EVENT_COUNT", "EVENT_TAIL", "EVENT_ROWS_JSON", "SETTLED_STATIONS",
    "WAITS", "WAIT_AT", "OPEN_WAITS",
    "GRAPH_REVISION", "GRAPH_NEXT_REVISION", "GRAPH_INSERT", "MANIFEST",
    "SCHEMA_VERSION_READ", "META_COLUMNS", "list_runs",
    "JOB_COLS", "JOB_EVENT_COLS", "JOB", "JOB_STATUS", "JOB_INSERT", "JOB_INSERT_NEW", "JOBS", "JOB_EVENTS", "JOB_EVENT_INSERT",
    "JOB_LINE_SEEN", "job_events_insert", "job_transition", "list_jobs",
    "EFFECT_COLS", "EFFECT", "EFFECT_INSERT", "EFFECT_RESTART", "EFFECT_FINISH", "EFFECTS", "EFFECTS_OF_RUN",
    "CALL_COLS", "CALLS_TABLE", "CALLS_OF_RUN", "call_attempt", "CALLS_IN_LINEAGE", "recorded_calls",
    "EVAL_COLS", "EVAL_CASE_COLS", "EVAL_SCORE_COLS", "EVALUATION", "EVALUATIONS", "EVAL_INSERT", "EVAL_CASES",
    "EVAL_SCORES", "EVAL_CASE_DELETE", "EVAL_SCORES_DELETE", "EVAL_CASE_INSERT", "EVAL_SCORE_INSERT",
)  # fmt: skip

RUN_COLS = (
    "run_id, graph_key, revision, digest, status, head_seq, durability, output, error, "
    "created_at, updated_at, parent_run_id, parent_seq, breakpoints"
)
CP_COLS = "run_id, seq, parent_seq, status, state, next, output, created_at, counters"
WAIT_COLS = (
    "run_id, owner, kind, node_id, checkpoint_seq, prompt, details, prior, created_at, resolved_at, resolution"
)
EV_COLS = "run_id, seq, kind, node_id, attempt, checkpoint_seq, payload, created_at"
TABLES_BY_RUN = ("calls", "effects", "checkpoints", "events", "waits", "runs")
"""The tables a run's rows live in, children first (the order a run is deleted in)."""

# -- runs ------------------------------------------------------------------------------------

GET_RUN = f"SELECT {RUN_COLS} FROM runs WHERE run_id = ?"
LIST_RUNS = f"SELECT {RUN_COLS} FROM runs WHERE true"
FAMILY = (
    f"SELECT {RUN_COLS} FROM runs WHERE run_id = ? OR parent_run_id IS NOT NULL "
    "OR run_id IN (SELECT parent_run_id FROM runs WHERE parent_run_id IS NOT NULL)"
)
"""The run, every child run, and every run that is a parent: all a lineage can name."""
NEXT_SEQS = (
    "SELECT (SELECT coalesce(max(seq), -1) + 1 FROM checkpoints WHERE run_id = ?), "
    "(SELECT coalesce(max(seq), -1) + 1 FROM events WHERE run_id = ?)"
)


def list_runs(*, graph_key: bool, status: bool) -> str:
    """`LIST_RUNS` filtered by the graph key and/or the status (a parameter each, in that order)."""
    return LIST_RUNS + (" AND graph_key = ?" if graph_key else "") + (" AND status = ?" if status else "") + (
        " ORDER BY created_at, run_id"
    )


# -- checkpoints -----------------------------------------------------------------------------

CHECKPOINTS = f"SELECT {CP_COLS} FROM checkpoints WHERE run_id = ? ORDER BY seq"
CHECKPOINT = f"SELECT {CP_COLS} FROM checkpoints WHERE run_id = ? AND seq = ?"
CHECKPOINTS_IN = f"SELECT {CP_COLS} FROM checkpoints WHERE run_id = ? AND seq {{in_ints}}"
SEQS = "SELECT seq FROM checkpoints WHERE run_id = ? ORDER BY seq"
PARENTS = "SELECT seq, parent_seq FROM checkpoints WHERE run_id = ? ORDER BY seq"
COUNT_PRUNED = "SELECT count(*) FROM checkpoints WHERE run_id = ? AND NOT (seq {in_ints})"
PRUNE = "DELETE FROM checkpoints WHERE run_id = ? AND NOT (seq {in_ints})"
DELETE_BY_RUN = {table: f"DELETE FROM {table} WHERE run_id = ?" for table in TABLES_BY_RUN}

# -- events ----------------------------------------------------------------------------------

EVENTS = f"SELECT {EV_COLS} FROM events WHERE run_id = ? ORDER BY seq"
EVENTS_OF_KIND = f"SELECT {EV_COLS} FROM events WHERE run_id = ? AND kind = ? ORDER BY seq"
EVENTS_AT = f"SELECT {EV_COLS} FROM events WHERE run_id = ? AND checkpoint_seq = ? ORDER BY seq"
EVENT_COUNT = "SELECT count(*) FROM events WHERE run_id = ?"
EVENT_TAIL = f"SELECT {EV_COLS} FROM events WHERE run_id = ? ORDER BY seq DESC LIMIT ?"
EVENT_ROWS_JSON = {
    "duckdb": (
        "SELECT '[' || coalesce(string_agg(CAST(json_array(seq, kind, node_id, attempt, checkpoint_seq, "
        "CASE WHEN json_type(payload) = 'OBJECT' THEN payload ELSE CAST('{}' AS JSON) END, "
        "strftime(created_at, '%Y-%m-%dT%H:%M:%S.%g')) AS VARCHAR), ',' ORDER BY seq), '') || ']' "
        "FROM events WHERE run_id = ?"
    ),
    "postgresql": (
        "SELECT '[' || coalesce(string_agg(json_build_array(seq, kind, node_id, attempt, checkpoint_seq, "
        "CASE WHEN jsonb_typeof(payload) = 'object' THEN payload ELSE CAST('{}' AS jsonb) END, "
        "to_char(created_at, 'YYYY-MM-DD\"T\"HH24:MI:SS.MS'))::text, ',' ORDER BY seq), '') || ']' "
        "FROM events WHERE run_id = ?"
    ),
}
"""A run's events as one JSON text made by the database (`Store.event_rows_json`): the two backends
spell JSON building differently, so this one read has a text per backend (rendered with its dialect)."""
SETTLED_STATIONS = (
    "SELECT checkpoint_seq, node_id FROM events WHERE run_id = ? AND kind = 'settled' "
    "AND checkpoint_seq IS NOT NULL AND node_id IS NOT NULL"
)

# -- waits -----------------------------------------------------------------------------------

WAITS = f"SELECT {WAIT_COLS} FROM waits WHERE run_id = ? ORDER BY checkpoint_seq, created_at"
WAIT_AT = f"SELECT {WAIT_COLS} FROM waits WHERE run_id = ? AND checkpoint_seq = ? ORDER BY created_at DESC LIMIT 1"
OPEN_WAITS = (
    f"SELECT {', '.join('w.' + c.strip() for c in WAIT_COLS.split(','))} FROM waits w "
    "JOIN runs r ON r.run_id = w.run_id AND r.head_seq = w.checkpoint_seq "
    "WHERE w.resolved_at IS NULL AND r.status = 'waiting' ORDER BY w.created_at"
)
"""Every unanswered wait of a waiting run, at the run's head."""

# -- graphs and the schema -------------------------------------------------------------------

GRAPH_REVISION = "SELECT revision FROM graphs WHERE graph_key = ? AND digest = ?"
GRAPH_NEXT_REVISION = "SELECT coalesce(max(revision), 0) + 1 FROM graphs WHERE graph_key = ?"
GRAPH_INSERT = "INSERT INTO graphs VALUES (?, ?, ?, {json}, ?)"
MANIFEST = "SELECT manifest FROM graphs WHERE graph_key = ? AND revision = ?"
SCHEMA_VERSION_READ = "SELECT value FROM meta WHERE key = 'schema_version'"
META_COLUMNS = ("key", "value")

# -- agent jobs (jobs.py; not journalled: each change is one transaction of its own) --------------

JOB_COLS = (
    "request_id, run_id, node_id, wait_owner, checkpoint_seq, runtime, runner, request, digest, status, "
    "retry_of, output, error, usage, worker, created_at, updated_at, ended_at"
)
JOB_EVENT_COLS = "request_id, seq, kind, from_status, to_status, payload, created_at"
JOB = f"SELECT {JOB_COLS} FROM jobs WHERE request_id = ?"
JOB_STATUS = (
    "SELECT status, (SELECT coalesce(max(seq), -1) + 1 FROM job_events WHERE request_id = ?) FROM jobs WHERE request_id = ?"
)
"""A job's status and the seq its next event gets, in one statement (the caller holds the job: see `jobs.py`)."""
JOB_INSERT_NEW = (
    f"INSERT INTO jobs ({JOB_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, {{json}}, ?, ?, ?, {{json}}, {{json}}, {{json}}, {{json}}, ?, ?, ?)"
)
"""A new job whose request id is known to be free (the caller holds it and read it)."""
JOB_INSERT = JOB_INSERT_NEW + " ON CONFLICT (request_id) DO NOTHING RETURNING request_id"
"""A new job; no row comes back when its request id is taken (the caller then reads the stored job)."""
JOBS = f"SELECT {JOB_COLS} FROM jobs WHERE true"
JOB_EVENTS = f"SELECT {JOB_EVENT_COLS} FROM job_events WHERE request_id = ? AND seq > ? ORDER BY seq"
JOB_EVENT_INSERT = (
    f"INSERT INTO job_events ({JOB_EVENT_COLS}) "
    "SELECT CAST(? AS VARCHAR), coalesce(max(seq), -1) + 1, CAST(? AS VARCHAR), CAST(? AS VARCHAR), "
    "CAST(? AS VARCHAR), {json}, CAST(? AS TIMESTAMP) FROM job_events WHERE request_id = ?"
)
"""A job's next event, numbered from its stored ones (the caller holds the job: see `jobs.py`)."""


def job_events_insert(n: int) -> str:
    """`n` events of one job in one statement, their seqs given (from `JOB_STATUS`)."""
    row = "(?, ?, ?, ?, ?, {json}, ?)"
    return f"INSERT INTO job_events ({JOB_EVENT_COLS}) VALUES " + ", ".join([row] * n)


JOB_LINE_SEEN = "SELECT 1 FROM job_events WHERE request_id = ? AND CAST(payload->>'line' AS BIGINT) = ?"
"""Whether a worker's progress line is already recorded for this job."""


def job_transition(columns: Sequence[str], *, ended: bool) -> str:
    """Move a job to a status (a parameter) with `columns` set (a {json} parameter each), only if its
    status is still the one read in the same transaction (the last parameter, after the request id)."""
    sets = ["status = ?", "updated_at = ?", *(f"{c} = {{json}}" for c in columns)]
    if ended:
        sets.append("ended_at = ?")
    return (
        f"UPDATE jobs SET {', '.join(sets)} WHERE request_id = ? AND status = ?"
    )


def list_jobs(columns: Sequence[str]) -> str:
    """`JOBS` where each of `columns` equals a parameter, oldest first."""
    return JOBS + "".join(f" AND {c} = ?" for c in columns) + " ORDER BY created_at, request_id"


# -- idempotent effects (effects.py; not journalled: each is committed before its effect runs) -----

EFFECT_COLS = (
    "key, run_id, node_id, checkpoint_seq, name, status, result, error, tries, settled_by, "
    "created_at, updated_at"
)
EFFECT = f"SELECT {EFFECT_COLS} FROM effects WHERE key = ?"
EFFECT_INSERT = (
    f"INSERT INTO effects ({EFFECT_COLS}) VALUES (?, ?, ?, ?, ?, 'started', NULL, NULL, 1, NULL, ?, ?)"
)
EFFECT_RESTART = (
    "UPDATE effects SET status = 'started', result = NULL, error = NULL, tries = tries + 1, "
    "settled_by = NULL, updated_at = ? WHERE key = ?"
)
"""Start a failed (or repeatable, or released) effect again: one more try of it."""
EFFECT_FINISH = (
    "UPDATE effects SET status = ?, result = {json}, error = {json}, settled_by = ?, updated_at = ? "
    "WHERE key = ? AND status = 'started' RETURNING key"
)
"""Record how a started effect ended (only a started one: a finished record is never rewritten)."""
EFFECTS = f"SELECT {EFFECT_COLS} FROM effects ORDER BY created_at, key"
EFFECTS_OF_RUN = f"SELECT {EFFECT_COLS} FROM effects WHERE run_id = ? ORDER BY created_at, key"


# -- recorded calls (lab/recording.py; not journalled: a call is committed before its result is used) --

CALL_COLS = (
    "call_id, run_id, node_id, checkpoint_seq, attempt, call_index, kind, name, digest, mode, replayed_from, "
    "request, response, input_tokens, output_tokens, ms, created_at"
)
CALLS_TABLE = """
CREATE TABLE IF NOT EXISTS calls (
    call_id VARCHAR PRIMARY KEY,
    run_id VARCHAR NOT NULL,
    node_id VARCHAR NOT NULL,
    checkpoint_seq BIGINT,
    attempt BIGINT,
    call_index BIGINT NOT NULL,
    kind VARCHAR NOT NULL,
    name VARCHAR NOT NULL,
    digest VARCHAR NOT NULL,
    mode VARCHAR NOT NULL,
    replayed_from VARCHAR,
    request {json_type},
    response {json_type},
    input_tokens BIGINT,
    output_tokens BIGINT,
    ms DOUBLE PRECISION,
    created_at TIMESTAMP NOT NULL
)
"""
"""One row per recorded call of a station (a model request or a `@lab.recorded` function): `live`
rows hold the request and response (JSON, secrets left out); `replayed` rows name the live row they
replayed (docs/replay.md). `{json_type}` is JSON on DuckDB, jsonb on PostgreSQL (`Dialect.sql`).
Calls are journalled (a `call` journal row, stored with the boundary write that follows it): DuckDB's
fold and PostgreSQL's `graphlab_write` store them."""
CALLS_OF_RUN = f"SELECT {CALL_COLS} FROM calls WHERE run_id = ? ORDER BY created_at, call_id"
def call_attempt(c: str) -> str:
    """A journalled call's station try, found when the call is stored: the station's last `entered` event
    written before the call was (`c` names the row being stored)."""
    return (
        f"(SELECT max(e.seq) FROM events e WHERE e.run_id = {c}.run_id AND e.node_id = {c}.node_id "
        f"AND e.kind = 'entered' AND e.created_at <= {c}.created_at)"
    )


CALLS_IN_LINEAGE = (
    "WITH RECURSIVE lineage(run_id, parent_run_id, depth) AS ("
    "SELECT run_id, parent_run_id, 0 FROM runs WHERE run_id = ? "
    "UNION ALL SELECT r.run_id, r.parent_run_id, l.depth + 1 FROM runs r JOIN lineage l ON r.run_id = l.parent_run_id "
    "WHERE l.depth < 1000) "
    f"SELECT {CALL_COLS} FROM calls WHERE mode = 'live' AND run_id IN (SELECT run_id FROM lineage) "
    "ORDER BY created_at DESC, call_id DESC"
)
"""The live calls of a run and of every run it was forked from, newest first: what its replays may use (one read)."""


def recorded_calls(n_runs: int, *, node: bool) -> str:
    """The live calls of `n_runs` runs (a parameter each), of one station when `node` (one more), newest first."""
    runs = ", ".join(["?"] * n_runs)
    return (
        f"SELECT {CALL_COLS} FROM calls WHERE mode = 'live' AND run_id IN ({runs})"
        + (" AND node_id = ?" if node else "")
        + " ORDER BY created_at DESC, call_id DESC"
    )
# -- evaluations (lab/evaluate/, store/evals.py) ---------------------------------------------

EVAL_COLS = "evaluation_id, dataset, graph_key, revision, cases, spec, created_at"
EVAL_CASE_COLS = (
    "evaluation_id, case_index, case_name, run_id, status, output, expected, duration, usage, error, updated_at"
)
EVAL_SCORE_COLS = "evaluation_id, case_index, name, kind, value, reason, evaluator"
EVALUATION = f"SELECT {EVAL_COLS} FROM evaluations WHERE evaluation_id = ?"
EVALUATIONS = f"SELECT {EVAL_COLS} FROM evaluations ORDER BY created_at, evaluation_id"
EVAL_INSERT = f"INSERT INTO evaluations ({EVAL_COLS}) VALUES (?, ?, ?, ?, ?, {{json}}, ?)"
EVAL_CASES = f"SELECT {EVAL_CASE_COLS} FROM eval_cases WHERE evaluation_id = ? ORDER BY case_index"
EVAL_SCORES = f"SELECT {EVAL_SCORE_COLS} FROM eval_scores WHERE evaluation_id = ? ORDER BY case_index, name"
EVAL_CASE_DELETE = "DELETE FROM eval_cases WHERE evaluation_id = ? AND case_index = ?"
EVAL_SCORES_DELETE = "DELETE FROM eval_scores WHERE evaluation_id = ? AND case_index = ?"
EVAL_CASE_INSERT = (
    f"INSERT INTO eval_cases ({EVAL_CASE_COLS}) VALUES (?, ?, ?, ?, ?, {{json}}, {{json}}, ?, {{json}}, ?, ?)"
)
EVAL_SCORE_INSERT = f"INSERT INTO eval_scores ({EVAL_SCORE_COLS}) VALUES (?, ?, ?, ?, {{json}}, ?, ?)"
# report evaluators' analyses (pydantic-evals `ReportAnalysis` JSON, or the evaluator's error), in order
EVAL_ANALYSIS_COLS = "evaluation_id, position, evaluator, analysis, error, created_at"
EVAL_ANALYSES_TABLE = """
CREATE TABLE IF NOT EXISTS eval_analyses (
    evaluation_id VARCHAR NOT NULL,
    position BIGINT NOT NULL,
    evaluator VARCHAR NOT NULL,
    analysis JSON,
    error VARCHAR,
    created_at TIMESTAMP NOT NULL,
    PRIMARY KEY (evaluation_id, position)
)
"""
EVAL_ANALYSES = f"SELECT {EVAL_ANALYSIS_COLS} FROM eval_analyses WHERE evaluation_id = ? ORDER BY position"
EVAL_ANALYSES_DELETE = "DELETE FROM eval_analyses WHERE evaluation_id = ?"
EVAL_ANALYSIS_INSERT = f"INSERT INTO eval_analyses ({EVAL_ANALYSIS_COLS}) VALUES (?, ?, ?, {{json}}, ?, ?)"
