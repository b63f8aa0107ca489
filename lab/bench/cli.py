"""`python -m lab.bench`: the loop table, then the parallel and reader tables (or a profile).

The command line only: it imports the measuring modules (`serial`, `parallel`, `readers`,
`batch`, `profile`, `replay`) and prints their reports; none of them imports it back.
"""

from __future__ import annotations

import argparse
import traceback
from collections.abc import Sequence

from .batch import batch_markdown, run_batch_benchmark
from .common import DEFAULT_VISITS
from .parallel import parallel_markdown, run_parallel_benchmark
from .profile import profile_lab_step
from .readers import readers_markdown, run_reader_benchmark
from .replay import replay_markdown, run_replay_benchmark
from .serial import DEFAULT_REPEAT, VARIANTS, run_benchmark, to_markdown

__all__ = ("main",)

DESCRIPTION = "`python -m lab.bench`: what the lab costs per station, against raw pydantic-graph."


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m lab.bench", description=DESCRIPTION)
    p.add_argument(
        "--visits", type=int, default=DEFAULT_VISITS, help="stations per run (default %(default)s)"
    )
    p.add_argument(
        "--repeat", type=int, default=DEFAULT_REPEAT, help="timed runs per variant (default %(default)s)"
    )
    p.add_argument(
        "--warmup", type=int, default=1, help="untimed runs per variant first (default %(default)s)"
    )
    p.add_argument(
        "--only",
        action="append",
        choices=[*(v.key for v in VARIANTS), "parallel", "readers"],
        help=(
            "measure only these variants (repeatable; the floor is always measured; `parallel`: the map + join "
            "table; `readers`: a reader in a second process while the first steps)"
        ),
    )
    p.add_argument("--profile", action="store_true", help="profile the lab step variant instead (cProfile)")
    p.add_argument(
        "--postgres", metavar="URL", help="also time the lab on this PostgreSQL database (the lab_postgres row)"
    )
    p.add_argument(
        "--replay", action="store_true", help="also time recorded model calls and their replay (lab/bench/replay.py)"
    )
    p.add_argument(
        "--ray", action="store_true", help="also time a batch of runs on Ray against a plain loop (lab/bench/batch.py)"
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Print the report (or the profile). Always 0: missed targets and failures are reported."""
    args = _parser().parse_args(argv)
    try:
        if args.profile:
            print(profile_lab_step(args.visits))
        else:
            loop_only = [k for k in args.only or () if k not in ("parallel", "readers")]
            if args.only is None or loop_only:
                report = run_benchmark(
                    args.visits, args.repeat, args.warmup, only=loop_only or None, postgres=args.postgres
                )
                print(to_markdown(report))
            if args.replay:
                print()
                print(replay_markdown(run_replay_benchmark()))
            if args.ray:
                print()
                print(batch_markdown(run_batch_benchmark(postgres=args.postgres)))
            if args.only is None or "parallel" in args.only:
                print()
                print(parallel_markdown(run_parallel_benchmark(repeat=args.repeat, warmup=args.warmup)))
            if args.only is None or "readers" in args.only:
                print()
                print(readers_markdown(run_reader_benchmark()))
    except Exception:
        traceback.print_exc()
    return 0
