"""`python -m lab`: inspect a store from a terminal, without a notebook.

The CLI reads only what the store holds (JSON), so it needs no graph definitions. `runs` and
`show` open the store read-only: they never fold or truncate the journal and need no write
access (the journal is folded into the reader's own view). A run whose writer is gone (the CLI
opens only when no process holds the store) shows as `interrupted`. `salvage` is the one
command that writes: it rebuilds a damaged journal from its complete transactions.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from .errors import LabError, RunNotFoundError, StoreLockedError
from .lab import DEFAULT_PATH
from .store import open_store, salvage_journal

__all__ = ("main",)


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]], width: int = 60) -> str:
    cells = [[_cell(v, width) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    sep = "  ".join("-" * w for w in widths)
    body = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join([line, sep, *body])


def _cell(value: Any, width: int) -> str:
    if value is None:
        text = ""
    elif isinstance(value, dict | list):
        text = json.dumps(value, separators=(",", ":"))
    else:
        text = str(value)
    text = text.replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"


def _runs(args: argparse.Namespace) -> int:
    store = open_store(args.store, read_only=True)
    try:
        runs = store.list_runs(graph_key=args.graph, status=args.status)
        rows = [
            (r.run_id, f"{r.graph_key}@{r.revision}", r.status, r.head_seq, r.output, r.created_at.isoformat(" ", "seconds"))
            for r in runs
        ]
        print(_table(["run", "graph", "status", "head", "output", "created (UTC)"], rows))
        print(f"\n{len(runs)} run(s) in {store.path}")
    finally:
        store.close()
    return 0


def _show(args: argparse.Namespace) -> int:
    store = open_store(args.store, read_only=True)
    try:
        r = store.get_run(args.run_id)
        print(f"run      {r.run_id}")
        print(f"graph    {r.graph_key}@{r.revision} (digest {r.digest})")
        print(f"status   {r.status}   head {r.head_seq}   durability {r.durability}")
        if r.output is not None:
            print(f"output   {json.dumps(r.output)}")
        if r.error:
            print(f"error    {r.error.get('type')}: {r.error.get('message')} (station {r.error.get('node_id')})")
        cps = store.checkpoints(r.run_id)
        print("\ncheckpoints")
        print(
            _table(
                ["seq", "parent", "status", "next", "state"],
                [(c.seq, c.parent_seq, c.status, ", ".join(p.node_id for p in c.next) or "-", c.state) for c in cps],
                width=args.width,
            )
        )
        if args.events:
            evs = store.events(r.run_id)
            print("\nevents")
            print(
                _table(
                    ["seq", "kind", "station", "attempt", "checkpoint", "payload"],
                    [(e.seq, e.kind, e.node_id, e.attempt, e.checkpoint_seq, e.payload or None) for e in evs],
                    width=args.width,
                )
            )
    finally:
        store.close()
    return 0


def _salvage(args: argparse.Namespace) -> int:
    print(salvage_journal(args.store))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab", description="Inspect a Graph Lab store.")
    parser.add_argument("--store", default=DEFAULT_PATH, help=f"the DuckDB file (default: {DEFAULT_PATH})")
    sub = parser.add_subparsers(dest="command", required=True)
    p_runs = sub.add_parser("runs", help="list the runs in the store")
    p_runs.add_argument("--graph", help="only runs of this graph")
    p_runs.add_argument("--status", help="only runs with this status")
    p_runs.set_defaults(func=_runs)
    p_show = sub.add_parser("show", help="one run: its checkpoints (and events with --events)")
    p_show.add_argument("run_id")
    p_show.add_argument("--events", action="store_true", help="also list the run's events")
    p_show.add_argument("--width", type=int, default=60, help="truncate cells to this many characters")
    p_show.set_defaults(func=_show)
    p_salvage = sub.add_parser(
        "salvage", help="rebuild a damaged journal from its complete transactions (the original is kept aside)"
    )
    p_salvage.set_defaults(func=_salvage)
    for p in (p_runs, p_show, p_salvage):
        p.add_argument("--store", default=argparse.SUPPRESS, help="the DuckDB file")
    args = parser.parse_args(argv)
    import os

    if args.store != ":memory:" and not os.path.exists(args.store):
        print(f"error: no store at {args.store}; pass --store PATH (a Graph Lab DuckDB file)", file=sys.stderr)
        return 2
    try:
        return int(args.func(args))
    except LabError as exc:
        print(f"error: {_for_terminal(exc, args)}", file=sys.stderr)
        return 2


def _for_terminal(exc: LabError, args: argparse.Namespace) -> str:
    """The error in terminal words: what to type here, not the Python call a notebook would make."""
    store = args.store
    if isinstance(exc, RunNotFoundError):
        return f"no run {getattr(args, 'run_id', '?')!r} in {store}; `python -m lab runs --store {store}` lists its runs"
    if isinstance(exc, StoreLockedError):
        who = str(exc).split(";")[0]  # "the store P is open in another process (PID n)"
        return (
            f"{who}; shut down that notebook's kernel (or run lab.close() in it) and try again, "
            "or pass --store PATH to read another file"
        )
    return str(exc)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
