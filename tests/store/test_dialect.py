"""The store's SQL dialect layer (issue 26 item 3: "the two stores share their SQL through one dialect layer").

Every statement of `lab/store/sql_text.py` is written once and rendered per backend; these tests
pin what the rendering does, and that the store package stays in modules under 700 lines.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from lab.store import sql_text as q
from lab.store.dialect import DUCKDB, POSTGRES

STATEMENTS = {name: value for name, value in vars(q).items() if name.isupper() and isinstance(value, str) and " " in value}


def test_every_statement_renders_for_both_backends_without_markers_left():
    """issue 26 item 3: one text per operation, `?` on DuckDB and `%s` on PostgreSQL, markers resolved."""
    assert {"GET_RUN", "CHECKPOINTS_IN", "GRAPH_INSERT", "PRUNE", "OPEN_WAITS"} <= STATEMENTS.keys()
    for name, text in STATEMENTS.items():
        duck, pg = DUCKDB.sql(text), POSTGRES.sql(text)
        for rendered in (duck, pg):
            assert "{" not in rendered and "}" not in rendered, (name, rendered)
        assert "%s" not in duck, name
        assert "?" not in pg, name
        assert duck.count("?") == pg.count("%s"), name


def test_markers_are_spelled_per_backend():
    """issue 26 item 3: JSON casts and list parameters differ per backend; the rest of the text does not."""
    assert DUCKDB.sql(q.GRAPH_INSERT) == "INSERT INTO graphs VALUES (?, ?, ?, ?, ?)"
    assert POSTGRES.sql(q.GRAPH_INSERT) == "INSERT INTO graphs VALUES (%s, %s, %s, %s::jsonb, %s)"
    assert POSTGRES.sql(q.PRUNE) == "DELETE FROM checkpoints WHERE run_id = %s AND NOT (seq = ANY(%s))"
    assert DUCKDB.sql(q.PRUNE) == "DELETE FROM checkpoints WHERE run_id = ? AND NOT (seq IN (SELECT unnest(?::BIGINT[])))"
    assert POSTGRES.sql("SELECT '5%' || ?") == "SELECT '5%%' || %s"  # a literal % survives psycopg's formatting


def test_upsert_replaces_the_row_with_the_same_key_on_duckdb():
    """issue 26 item 3: the upsert each backend writes; DuckDB's is run here against a real table."""
    assert POSTGRES.upsert("meta", q.META_COLUMNS, "key") == (
        "INSERT INTO meta VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value"
    )
    con = duckdb.connect(":memory:")
    con.execute("CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
    for value in ("1", "2"):
        con.execute(DUCKDB.upsert("meta", q.META_COLUMNS, "key"), ["schema_version", value])
    assert con.execute("SELECT * FROM meta").fetchall() == [("schema_version", "2")]


def test_duckdb_renderings_run_against_the_schema():
    """issue 26 item 3: every shared statement, rendered for DuckDB, is valid against the store's tables."""
    from lab.store.schema import MIGRATIONS

    con = duckdb.connect(":memory:")
    for migration in MIGRATIONS:
        for stmt in migration:
            con.execute(stmt)
    ran = 0
    for text in STATEMENTS.values():
        if text.startswith(("SELECT", "DELETE")):
            assert con.execute(DUCKDB.sql(text), _params(DUCKDB.sql(text))).fetchall() in ([], [(0,)], [(0, 0)], [(1,)])
            ran += 1
    assert ran >= 15


def _params(sql: str) -> list[object]:
    """A parameter per `?`: a list for a list parameter, else NULL (every table is empty)."""
    out: list[object] = []
    rest = sql
    while "?" in rest:
        before, rest = rest.split("?", 1)
        out.append([1] if before.endswith("unnest(") else None)
    return out


@pytest.mark.parametrize("dialect", [DUCKDB, POSTGRES], ids=lambda d: d.name)
def test_json_is_read_as_each_driver_returns_it(dialect):
    """issue 26 item 3: DuckDB returns JSON as text, psycopg decodes jsonb; both give the same record values."""
    raw = {"a": [1, 2]}
    stored = raw if dialect.json_decoded else json.dumps(raw)
    assert dialect.load(stored) == raw
    assert dialect.load(None) is None
    assert dialect.event_payload(stored) == raw
    assert dialect.event_payload(None) == {}


def test_a_damaged_duckdb_event_payload_is_kept_not_raised():
    """issue 26 item 3: the shared event row keeps DuckDB's rule for a payload that is not JSON."""
    assert DUCKDB.event_payload("{not json") == {"damaged_payload": "{not json"}


def test_no_store_module_is_over_700_lines():
    """issue 26 item 3: no module over 700 lines in lab/store."""
    root = Path(__file__).resolve().parents[2] / "lab" / "store"
    long = {p.name: n for p in root.glob("*.py") if (n := len(p.read_text().splitlines())) > 700}
    assert not long, long
