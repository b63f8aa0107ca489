"""A parallel super-step stopped in flight settles every branch it entered (issue 26, stopped step's siblings).

A run timeout or `cancel()` stops a super-step whose branches each have an `entered` event. The
stop's own event (`failed` for the timeout, `cancelled`) names the branch still running; before,
the sibling branches' `entered` events were left open in the event log forever (crash recovery
learnt to ignore them, commit 3cb77ad, but the log still said they were in flight). Now the stop
writes a `dropped` event for every sibling in the same write: each `entered` attempt has exactly
one settlement, and the run goes on to pydantic-graph's own result afterwards.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections import Counter
from typing import Any

from lab import Lab
from tests.matrix.cases import Slow, case_named
from tests.matrix.k_parallel import START, Tally, native_graph

SETTLEMENTS = ("settled", "failed", "interrupted", "cancelled", "waiting", "dropped")


def native_output() -> Any:
    """The plain map graph's output as pydantic-graph itself computes it."""
    return asyncio.run(native_graph("plain").run(state=Tally(variant="plain", graph="native"), inputs=START))


def assert_every_entered_settled_once(run: Any) -> None:
    events = run.events()
    entered = [e.attempt for e in events if e.kind == "entered"]
    settled = Counter(e.attempt for e in events if e.kind in SETTLEMENTS and e.attempt is not None)
    assert entered and all(settled[a] == 1 for a in entered), (
        [(e.seq, e.kind, e.node_id, e.attempt) for e in events],
        {a: settled[a] for a in entered},
    )


def to_the_map_step(run: Any) -> None:
    """Step until the frontier is the map's three `work` branches (the next step is the one stopped)."""
    while list(run.next_stations) != ["work", "work", "work"]:
        assert run.status in ("created", "queued", "running"), (run.status, run.error)
        run.step()


def test_a_timed_out_map_step_settles_every_branch(tmp_path):
    """Issue 26 (stopped super-step siblings): run(timeout=...) stops the step with item 2's branch
    still running; the two siblings get `dropped` events in the timeout's write."""
    case = case_named("parallel")
    release = tmp_path / "release"
    with Lab(os.fspath(tmp_path / "lab.duckdb")) as lab:
        run = case.start(case.build(lab, "slow", slow=Slow(release=os.fspath(release))))
        to_the_map_step(run)
        run.run(timeout=1.0)
        assert run.status == "failed" and run.error["type"].endswith("RunTimeout"), run.error
        (failed,) = run.events("failed")
        dropped = run.events("dropped")
        assert len(dropped) == 2 and all(d.seq < failed.seq for d in dropped), (dropped, failed)
        assert all("timed out" in d.payload["reason"] for d in dropped)
        assert_every_entered_settled_once(run)
        release.write_text("go")
        run.run()
        assert (run.status, run.output) == ("done", native_output()), run.error
        assert_every_entered_settled_once(run)


def test_a_cancelled_map_step_settles_every_branch(tmp_path):
    """Issue 26 (stopped super-step siblings): cancel() from another thread while item 2's branch runs;
    every entered branch has one settlement; a fork of the cancelled run finishes with the native result."""
    case = case_named("parallel")
    entered, release = tmp_path / "entered", tmp_path / "release"
    with Lab(os.fspath(tmp_path / "lab.duckdb")) as lab:
        run = case.start(case.build(lab, "slow", slow=Slow(entered=os.fspath(entered), release=os.fspath(release))))
        to_the_map_step(run)
        driver = threading.Thread(target=run.run)
        driver.start()
        deadline = time.monotonic() + 60
        while not entered.exists():
            assert time.monotonic() < deadline and driver.is_alive(), "the slow branch never started"
            time.sleep(0.02)
        run.cancel()
        driver.join(60)
        assert not driver.is_alive() and run.status == "cancelled", run.status
        (cancelled,) = run.events("cancelled")
        assert len(run.events("dropped")) == 2 and all(d.seq < cancelled.seq for d in run.events("dropped"))
        assert_every_entered_settled_once(run)
        release.write_text("go")
        fork = lab.fork(run.id, run.head)
        fork.run()
        assert (fork.status, fork.output) == ("done", native_output()), fork.error
        assert_every_entered_settled_once(fork)
