"""How one statement text of `sql_text.py` is written for each backend (SQLAlchemy's dialect idea).

A statement is written once, in DuckDB's spelling, with `?` for a parameter and a few markers
for what the two databases spell differently; `Dialect.sql` renders it for one backend:

| marker           | DuckDB                         | PostgreSQL (psycopg)     |
| ---------------- | ------------------------------ | ------------------------ |
| `?`              | `?`                            | `%s`                     |
| `{json}`         | `?` (JSON text)                | `%s::jsonb`              |
| `{in_ints}`      | `IN (SELECT unnest(?::BIGINT[]))` | `= ANY(%s)`           |
| `{json_type}`    | `JSON` (a column's type)       | `jsonb`                  |

and `Dialect.upsert` writes "insert, or replace the row with this key" (`INSERT OR REPLACE` /
`ON CONFLICT ... DO UPDATE`). The dialect also reads what the driver returns: DuckDB hands
JSON columns back as text, psycopg decodes `jsonb` itself (`Dialect.load`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ("Dialect", "DUCKDB", "POSTGRES")


@dataclass(frozen=True)
class Dialect:
    """One backend's spelling of the store's SQL, and how its driver returns JSON."""

    name: str
    """`duckdb` or `postgresql`."""
    param: str
    """A positional parameter: `?` (DuckDB) or `%s` (psycopg)."""
    json_param: str
    """A parameter that holds a JSON document (JSON text on DuckDB, cast to `jsonb` on PostgreSQL)."""
    in_ints: str
    """`col {in_ints}`: the column is one of a list of integers given as one parameter."""
    json_decoded: bool
    """True when the driver returns JSON columns decoded (psycopg's `jsonb`), False for text (DuckDB)."""
    restore_what: str
    """What a damaged-data message tells a user to restore from a backup."""
    _rendered: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def sql(self, text: str) -> str:
        """`text` (written with `?` and the markers above) as this backend runs it; cached per text."""
        out = self._rendered.get(text)
        if out is None:
            out = text.replace("{json}", "\x00j").replace("{in_ints}", "\x00i")
            if self.param != "?":
                out = out.replace("%", "%%").replace("?", self.param)
            out = out.replace("\x00j", self.json_param).replace("\x00i", self.in_ints)
            out = out.replace("{json_type}", "JSON" if self.name == "duckdb" else "jsonb")
            self._rendered[text] = out
        return out

    def upsert(self, table: str, columns: Sequence[str], key: str) -> str:
        """Insert one row (a parameter per column) into `table`, replacing the row with the same `key`."""
        marks = ", ".join([self.param] * len(columns))
        if self.name == "duckdb":
            return f"INSERT OR REPLACE INTO {table} VALUES ({marks})"
        sets = ", ".join(f"{c} = excluded.{c}" for c in columns if c != key)
        return f"INSERT INTO {table} VALUES ({marks}) ON CONFLICT ({key}) DO UPDATE SET {sets}"

    def ddl(self, text: str) -> str:
        """A `CREATE TABLE` written in DuckDB's types (VARCHAR, JSON, DOUBLE) in this backend's."""
        if self.name == "duckdb":
            return text
        for duck, pg in ((" VARCHAR", " text"), (" JSON", " jsonb"), (" DOUBLE", " double precision")):
            text = text.replace(duck, pg)
        return text

    def load(self, value: Any) -> Any:
        """A JSON column's value as Python data (`None` stays `None`); raises `ValueError` when damaged."""
        if self.json_decoded or value is None:
            return value
        return json.loads(value)

    def event_payload(self, value: Any) -> dict[str, Any]:
        """An event's payload: `{}` when absent; a damaged text payload is kept under `damaged_payload`."""
        if self.json_decoded:
            return value if isinstance(value, dict) else {}
        try:
            return self.load(value) or {}
        except ValueError:
            return {"damaged_payload": value}


DUCKDB = Dialect(
    name="duckdb",
    param="?",
    json_param="?",
    in_ints="IN (SELECT unnest(?::BIGINT[]))",
    json_decoded=False,
    restore_what="the store file",
)
POSTGRES = Dialect(
    name="postgresql",
    param="%s",
    json_param="%s::jsonb",
    in_ints="= ANY(%s)",
    json_decoded=True,
    restore_what="the database",
)
