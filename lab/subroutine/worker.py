"""`python -m lab.subroutine.worker --store PATH --target module:attribute`: one Workflow call's child.

Reads `{"input": ..., "params": ...}` (JSON) on stdin. The store holds at most this one child
invocation: the first time the child starts there; when the parent evaluates the call again (a
retry, or a resume after it died), the child run found there continues from its own head. The
last line on stdout is `{"run_id", "status", "output", "error", "pid"}`.

A child whose parent died alone keeps running as an orphan and writes its run; the worker of the
parent's next evaluation waits for it (`--wait` seconds, default 600) and then takes its result.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

__all__ = ("main",)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.subroutine.worker")
    parser.add_argument("--store", required=True)
    parser.add_argument("--target", required=True)
    parser.add_argument(
        "--wait", type=float, default=600.0, help="seconds to wait for a store held by an orphaned child"
    )
    args = parser.parse_args(argv)
    request = json.loads(sys.stdin.read() or "{}")

    from pydantic import TypeAdapter

    from ..lab import Lab
    from .calls import resolve_target

    definition = resolve_target(args.target)
    lab = _open(Lab, args.store, args.wait)
    try:
        sub = lab.subroutine(definition)
        runs = lab.runs(graph=sub.name)
        if runs:
            run = _resume(lab, runs[0].run_id, args.wait)
            if run.status == "failed":
                run.retry()
        else:
            params = request.get("params")
            if params is not None:
                params = TypeAdapter(definition.params_type).validate_python(params)
            run = sub.start(
                TypeAdapter(definition.input_type).validate_python(request.get("input")), params=params
            )
        if run.status in ("created", "running", "queued"):
            run.run()
        record = lab.run(run.id)
        result: dict[str, Any] = {
            "run_id": run.id,
            "status": run.status,
            "output": record.output if run.status == "done" else None,
            "error": run.error,
            "pid": os.getpid(),
        }
    finally:
        lab.close()
    print(json.dumps(result, default=str))
    return 0


def _resume(lab: Any, run_id: str, wait: float) -> Any:
    """The child run; while an orphaned child process of an earlier evaluation still writes it, wait.

    Several processes share a store (docs/store.md "Who holds what, when"), one writer per run:
    the orphan finishes its run, or dies, and then this process takes the run over.
    """
    deadline = time.monotonic() + wait
    while True:
        run = lab.resume(run_id)
        if run.writer is None or time.monotonic() >= deadline:
            return run  # past the deadline, stepping it says which process writes it
        time.sleep(0.2)


def _open(lab_type: Any, path: str, wait: float) -> Any:
    """The child's lab; while an orphaned child process of an earlier evaluation holds it, wait."""
    from ..errors import StoreLockedError

    deadline = time.monotonic() + wait
    while True:
        try:
            return lab_type(path)
        except StoreLockedError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.2)


if __name__ == "__main__":
    sys.exit(main())
