"""`python -m lab.bench.disk`: what one durable boundary costs this disk, and the best `fsync=True` ratio.

A boundary with `fsync=True` is one write and one `fdatasync`; nothing the lab does in Python can
make the device's flush cheaper. This measures, in the directory the benchmark writes to, the
ways to make 1 KB records durable one at a time, alternating their rounds so load hits each
alike, and the native floor (`Graph.iter` per station, as `python -m lab.bench` measures it):

- append: `O_APPEND` write + `fdatasync` (the journal before the in-place mode: each sync also
  commits the file's new size and, now and then, a new block);
- in place: `pwrite` into a zero-filled file already synced + `fdatasync` (no metadata: what
  `Lab(fsync=True)` does now, journal.py);
- O_DSYNC: `pwrite` in place on a file opened `O_DSYNC` (the flush inside the write);
- in place, `fstat` first: the file checked the way the journal's boundary did before sync27b.
  On Linux 6.13+ a `stat` that reports the times makes the next write stamp a fine-grained mtime,
  and `fdatasync` on ext4 without a journal then writes the inode's block too: a second disk write
  (docs/benchmarks.md, "sync27b");
- in place, `statx` first: the check the journal makes now (lab/store/file_check.py: link count
  and size only, the times unread), which should cost what plain in place costs.

The best ratio any `fsync=True` station can reach here is `(floor + in-place sync) / floor`: the
native station plus one flush, with the lab's own work counted as zero.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Callable

from lab.store.file_check import FileCheck

__all__ = ("main", "measure_syncs", "native_floor_us")

RECORD = b"x" * 1023 + b"\n"


def _append(path: str, n: int) -> list[float]:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    out = []
    try:
        os.fdatasync(fd)
        for _ in range(n):
            t = time.perf_counter()
            os.write(fd, RECORD)
            os.fdatasync(fd)
            out.append(time.perf_counter() - t)
        return out
    finally:
        os.close(fd)


def _zeroed(path: str, n: int, flags: int = 0) -> int:
    """A file of `n` records' zeros, written and synced, opened for writing in place."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, bytes(len(RECORD) * n))
    os.fsync(fd)
    os.close(fd)
    return os.open(path, os.O_RDWR | flags)


def _in_place(path: str, n: int, *, dsync: bool = False, check: Callable[[int], object] | None = None) -> list[float]:
    fd = _zeroed(path, n, os.O_DSYNC if dsync else 0)
    out = []
    try:
        for i in range(n):
            t = time.perf_counter()
            if check is not None:
                check(fd)
            os.pwrite(fd, RECORD, i * len(RECORD))
            if not dsync:
                os.fdatasync(fd)
            out.append(time.perf_counter() - t)
        return out
    finally:
        os.close(fd)


def measure_syncs(directory: str, records: int = 400, rounds: int = 5) -> dict[str, list[float]]:
    """Seconds of each durable 1 KB record, the ways alternating by rounds of `records`."""
    ways: dict[str, Callable[[str, int], list[float]]] = {
        "append + fdatasync": _append,
        "in place + fdatasync": _in_place,
        "in place, O_DSYNC": lambda p, n: _in_place(p, n, dsync=True),
        "in place, fstat first": lambda p, n: _in_place(p, n, check=os.fstat),
        "in place, statx first": lambda p, n: _in_place(p, n, check=FileCheck()),
    }
    out: dict[str, list[float]] = {k: [] for k in ways}
    path = os.path.join(directory, "disk-probe")
    try:
        for _ in range(rounds):
            for key, way in ways.items():
                out[key] += way(path, records)
    finally:
        if os.path.exists(path):
            os.remove(path)
    return out


def native_floor_us(visits: int = 1000, rounds: int = 5) -> list[float]:
    """µs per station of the native iterator on the bench's loop graph (the floor of `python -m lab.bench`)."""
    from lab import Lab

    from .common import declare
    from .serial import run_native_floor

    lab = Lab(":memory:")
    try:
        native = declare(lab).build().native
        with asyncio.Runner() as runner:
            runner.run(run_native_floor(native, visits))  # warm-up
            return [runner.run(run_native_floor(native, visits))[0] / visits * 1e6 for _ in range(rounds)]
    finally:
        lab.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.bench.disk", description=__doc__.splitlines()[0])
    parser.add_argument("--dir", help="where to write the probe file (default: a temporary directory)")
    parser.add_argument("--records", type=int, default=400, help="records per round and way (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds (default %(default)s)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="graphlab-disk-", dir=args.dir) as tmp:
        floors: list[float] = []
        syncs: dict[str, list[float]] = {}
        for _ in range(args.rounds):  # the floor and the disk alternate too
            floors += native_floor_us(rounds=1)
            for key, values in measure_syncs(tmp, args.records, 1).items():
                syncs.setdefault(key, []).extend(values)
    floor = statistics.median(floors)
    load = os.getloadavg()[0]
    print(f"{args.rounds} alternating rounds of {args.records} records of 1 KB per way; load {load:.1f}\n")
    print("| what | µs median | µs p10 | best `fsync=True` ratio: (floor + median) / floor | the same with p10 |")
    print("|---|---:|---:|---:|---:|")
    print(f"| native floor, per station (rounds: {' '.join(f'{v:.0f}' for v in floors)}) | {floor:.1f} | | 1.00x | |")
    best = {}
    for key, values in syncs.items():
        us = sorted(v * 1e6 for v in values)
        med, p10 = statistics.median(us), us[len(us) // 10]
        best[key] = (med, p10)
        print(f"| {key} | {med:.1f} | {p10:.1f} | {(floor + med) / floor:.2f}x | {(floor + p10) / floor:.2f}x |")
    med, p10 = min(b[0] for b in best.values()), min(b[1] for b in best.values())
    print(f"\nthe fastest durable record is {med:.0f} µs (median; {p10:.0f} µs p10) = {med / floor:.2f}x the floor by itself:")
    print(f"no `fsync=True` station can be under {(floor + med) / floor:.2f}x the floor on this disk now")
    print(f"(under {(floor + p10) / floor:.2f}x even if every sync took the p10 time)")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
