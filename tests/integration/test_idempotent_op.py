"""`IdempotentOp` across real crashes (seed 002 "All-or-nothing steps").

Each test drives `effect_worker.py` processes on one DuckDB file and SIGKILLs one at a chosen
point of the op's protocol: after its result is recorded, or inside the effect (its key stored,
its result not). The effect appends a line to a log file, so the number of lines is the number
of times the outside world was charged.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lab import Lab

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 120.0
"""Seconds a worker gets to reach a line (a loaded machine opens the store and imports slowly)."""


class Worker:
    def __init__(self, db: Path, log: Path, *args: str, block: str = "", safe: bool = False):
        env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        env["GRAPHLAB_TEST_BLOCK"] = block
        env["GRAPHLAB_TEST_SAFE"] = "1" if safe else "0"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.effect_worker", os.fspath(db), os.fspath(log), *args],
            cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        self.lines: list[str] = []

    def until(self, prefix: str) -> str:
        """Read lines until one starts with `prefix` (returns its rest); fails if the worker exits first."""
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            if line.startswith(prefix):
                return line[len(prefix) :].strip()
        self.proc.wait(timeout=DEADLINE)
        raise AssertionError(f"the worker exited before {prefix!r}: {self.lines} {self.proc.stderr.read()}")

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        assert self.proc.wait(timeout=DEADLINE) == -signal.SIGKILL
        self._close()

    def result(self) -> dict[str, Any]:
        out = json.loads(self.until("RESULT"))
        assert self.proc.wait(timeout=DEADLINE) == 0, self.proc.stderr.read()
        self._close()
        return out

    def _close(self) -> None:
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()


def _charges(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "lab.duckdb", tmp_path / "charges.log"


def _effects(db: Path, run_id: str) -> list[Any]:
    with Lab(os.fspath(db)) as lab:
        return lab.effects(run_id)


@pytest.mark.timeout(600)
def test_a_crash_after_the_result_is_recorded_does_not_run_the_effect_again(files):
    """Seed 002: "A side effect a node already performed ... is not rolled back when the step is
    discarded, so on a resume it can happen again. Checkpoints give at-least-once execution;
    making an effect exactly-once is the effect's own job. See side effects and delivery semantics
    for the IdempotentOp primitive." A worker killed after the op recorded its result, before the
    station settled: the resumed station runs again, and the op gives it the recorded receipt
    without charging a second time."""
    db, log = files
    w = Worker(db, log, "start", block="recorded")
    run_id = w.until("RUN")
    w.until("RECORDED")
    w.kill()
    assert _charges(log) == 1
    again = Worker(db, log, "resume", run_id)
    assert again.until("RUN") == run_id
    out = again.result()
    assert out["status"] == "done" and out["output"] == "shipped with r1"
    assert _charges(log) == 1  # the resumed station did not charge again
    [effect] = _effects(db, run_id)
    assert (effect.status, effect.tries, effect.result["receipt"], effect.node_id) == ("done", 1, "r1", "Pay")


@pytest.mark.timeout(600)
def test_a_crash_inside_the_effect_is_in_doubt_and_a_person_settles_it(files):
    """Seed 002: "making an effect exactly-once is the effect's own job ... the IdempotentOp
    primitive". A worker killed inside the effect (its key stored before the effect, its result
    never): the resumed station does not silently charge again; it fails with EffectInDoubtError
    naming the key, and the record reads in doubt. A person who checked the bank settles it with
    the receipt, and the retried run ships with it, still one charge."""
    db, log = files
    w = Worker(db, log, "start", block="effect")
    run_id = w.until("RUN")
    w.until("EFFECT")
    w.kill()
    assert _charges(log) == 1
    [effect] = _effects(db, run_id)
    assert effect.status == "started" and effect.in_doubt
    again = Worker(db, log, "resume", run_id)
    again.until("RUN")
    out = again.result()
    assert out["status"] == "failed" and out["type"] == "lab.errors.EffectInDoubtError", out
    assert effect.key in out["message"] and "lab.settle_effect" in out["message"]
    assert _charges(log) == 1  # not run again on its own
    settle = Worker(db, log, "settle", run_id, effect.key, json.dumps({"receipt": "r1", "amount": 5}))
    settle.until("RUN")
    out = settle.result()
    assert out["status"] == "done" and out["output"] == "shipped with r1", out
    assert _charges(log) == 1
    [effect] = _effects(db, run_id)
    assert (effect.status, effect.settled_by) == ("done", "person")


@pytest.mark.timeout(600)
def test_an_in_doubt_effect_runs_again_when_the_op_says_it_is_safe_or_a_person_says_rerun(files, tmp_path):
    """Seed 002: "on a resume it can happen again ... making an effect exactly-once is the effect's
    own job": an op declared safe_to_repeat=True (the effect is harmless twice) runs again after a
    crash inside it, and so does one a person settled with rerun=True."""
    db, log = files
    w = Worker(db, log, "start", block="effect", safe=True)
    run_id = w.until("RUN")
    w.until("EFFECT")
    w.kill()
    again = Worker(db, log, "resume", run_id, safe=True)
    again.until("RUN")
    out = again.result()
    assert out["status"] == "done" and out["output"] == "shipped with r2", out
    assert _charges(log) == 2
    [effect] = _effects(db, run_id)
    assert (effect.status, effect.tries) == ("done", 2)

    db2, log2 = tmp_path / "two.duckdb", tmp_path / "two.log"
    w = Worker(db2, log2, "start", block="effect")
    run_id = w.until("RUN")
    w.until("EFFECT")
    w.kill()
    [effect] = _effects(db2, run_id)
    settle = Worker(db2, log2, "settle", run_id, effect.key, "rerun")
    settle.until("RUN")
    out = settle.result()
    assert out["status"] == "done" and out["output"] == "shipped with r2", out
    assert _charges(log2) == 2


# -- in one process: what a key names -----------------------------------------------------------

from dataclasses import dataclass, field  # noqa: E402

from pydantic import BaseModel  # noqa: E402
from pydantic_graph import BaseNode, End, GraphRunContext  # noqa: E402

from lab import IdempotentOp, interrupt  # noqa: E402
from lab.errors import ArgumentError, RunStateError, UnstorableEffectError  # noqa: E402

sent: list[str] = []


class Receipt(BaseModel):
    id: str
    amount: int


async def _mail(to: str) -> str:
    sent.append(to)
    return f"mail-{len(sent)}"


mail = IdempotentOp("mail", _mail)
bill = IdempotentOp("bill", lambda n: Receipt(id=f"b{len(sent)}", amount=n), result_type=Receipt)
flaky_calls: list[int] = []


def _flaky() -> str:
    flaky_calls.append(1)
    if len(flaky_calls) == 1:
        raise ConnectionError("refused")
    return "ok"


flaky = IdempotentOp("flaky", _flaky)


@dataclass
class Loop:
    rounds: int = 0
    got: list[str] = field(default_factory=list)


@dataclass
class Ask(BaseNode[Loop, None, list]):
    async def run(self, ctx: GraphRunContext[Loop, None]) -> Ask | End[list]:
        first = await mail.acall("ann")  # before the park: the resumed station must not mail again
        second = await mail.acall("bob")  # a second call of the same op in one visit: its own key
        receipt = bill(7)
        answer = interrupt("go on?")
        ctx.state.got += [first, second, receipt.id, answer]
        ctx.state.rounds += 1
        return Ask() if ctx.state.rounds < 2 else End(ctx.state.got)


def test_a_park_keeps_the_visit_and_a_loop_back_is_a_new_visit():
    """Seed 002: "Checkpoints give at-least-once execution; making an effect exactly-once is the
    effect's own job": a station that mails, parks on interrupt() and runs again from the top on
    resume mails once per visit (the park keeps its visit's key; the second call of the op in a visit
    has a key of its own); when the graph loops back to the station, that is a new visit, which mails again."""
    sent.clear()
    lab = Lab(":memory:")
    g = lab.graph("mailer", state_type=Loop, output_type=list)
    g.node(Ask)
    run = g.start(Ask(), state=Loop()).run()
    assert run.status == "waiting" and sent == ["ann", "bob"]
    run.resume_with("yes")
    run.run()
    assert run.status == "waiting" and sent == ["ann", "bob", "ann", "bob"]  # the loop's second visit
    run.resume_with("again")
    run.run()
    assert run.status == "done" and sent == ["ann", "bob", "ann", "bob"]
    assert run.output == ["mail-1", "mail-2", "b2", "yes", "mail-3", "mail-4", "b4", "again"]
    keys = [e.key.split("/", 2)[2] for e in lab.effects(run.id)]
    assert keys == ["Ask/mail#1", "Ask/mail#2", "Ask/bill#3", "Ask/mail#1", "Ask/mail#2", "Ask/bill#3"]
    assert lab.effects(run.id)[2].result == {"id": "b2", "amount": 7}  # a result_type is stored as JSON
    lab.close()


@dataclass
class Once(BaseNode[Loop, None, str]):
    async def run(self, ctx: GraphRunContext[Loop, None]) -> End[str]:
        return End(flaky())


@dataclass
class Opaque(BaseNode[Loop, None, str]):
    async def run(self, ctx: GraphRunContext[Loop, None]) -> End[str]:
        IdempotentOp("opaque", lambda: object())()
        return End("unreachable")


def test_an_effect_that_raised_runs_again_and_an_unstorable_result_is_in_doubt():
    """Seed 002: "making an effect exactly-once is the effect's own job": an effect that raised said
    itself that it did not complete, so the retried station runs it again; one whose result is not
    JSON happened but cannot be replayed, so it stays in doubt (UnstorableEffectError)."""
    flaky_calls.clear()
    lab = Lab(":memory:")
    g = lab.graph("flaky-effect", state_type=Loop, output_type=str)
    g.node(Once)
    g.node(Opaque)
    run = g.start(Once(), state=Loop()).run(raise_on_failure=False)
    assert run.status == "failed" and lab.effects(run.id)[0].status == "failed"
    run.retry()
    assert run.status == "done" and run.output == "ok" and len(flaky_calls) == 2
    assert lab.effects(run.id)[0].tries == 2
    bad = g.start(Opaque(), state=Loop(), at_any_station=True).run(raise_on_failure=False)
    assert bad.status == "failed" and bad.error["type"] == "lab.errors.UnstorableEffectError"
    [effect] = lab.effects(bad.id)
    assert effect.in_doubt
    with pytest.raises(RunStateError, match="not in doubt"):
        lab.settle_effect(lab.effects(run.id)[0].key, "x")
    with pytest.raises(ArgumentError, match="no effect"):
        lab.settle_effect("nope")
    with pytest.raises(RunStateError, match="outside a running station"):
        flaky()
    with pytest.raises(ArgumentError, match="await op.acall"):
        mail("x")
    assert issubclass(UnstorableEffectError, Exception)
    lab.close()


rewind_calls: list[int] = []
counted = IdempotentOp("count", lambda n: rewind_calls.append(n) or len(rewind_calls))


@dataclass
class First(BaseNode[Loop, None, int]):
    async def run(self, ctx: GraphRunContext[Loop, None]) -> Second:
        ctx.state.rounds += 1
        return Second()


@dataclass
class Second(BaseNode[Loop, None, int]):
    async def run(self, ctx: GraphRunContext[Loop, None]) -> End[int]:
        return End(counted(ctx.state.rounds))


def test_a_rewind_is_the_same_visit_and_a_fork_is_a_new_run():
    """Seed 002: "A side effect a node already performed — a file written, an API call sent — is not rolled
    back when the step is discarded ... making an effect exactly-once is the effect's own job": rewinding
    the run to the checkpoint a station entered from does not undo its effect, so the station gets the
    recorded result; a fork is a new run, whose station runs its effect."""
    rewind_calls.clear()
    lab = Lab(":memory:")
    g = lab.graph("rewound", state_type=Loop, output_type=int)
    g.node(First)
    g.node(Second)
    run = g.start(First(), state=Loop()).run()
    assert run.output == 1 and rewind_calls == [1]
    run.rewind(1)
    run.run()
    assert run.output == 1 and rewind_calls == [1]
    forked = run.fork(1).run()
    assert forked.output == 2 and rewind_calls == [1, 1]
    lab.close()


from pydantic_graph import GraphBuilder, StepContext  # noqa: E402
from pydantic_graph.join import reduce_list_append  # noqa: E402

mapped_calls: list[int] = []
broke: list[int] = []
mapped = IdempotentOp("ship", lambda n: mapped_calls.append(n) or f"parcel-{n}")


def test_each_task_of_a_parallel_step_has_its_own_effect_record():
    """Seed 002: "If any node in it raises, the whole step's updates are discarded ... A side effect a node
    already performed ... is not rolled back when the step is discarded, so on a resume it can happen
    again ... the IdempotentOp primitive". Three tasks of one mapped step each ship once; one of them
    raises after shipping, so the step is discarded and retried: nobody ships again, and each task gets
    its own parcel back (the key names the task, not only the node)."""
    mapped_calls.clear()
    broke.clear()
    native = GraphBuilder(state_type=Loop, input_type=list[int], output_type=list[str])

    @native.step
    async def ship(ctx: StepContext[Loop, None, int]) -> str:
        parcel = mapped(ctx.inputs)
        if ctx.inputs == 2 and not broke:
            broke.append(1)
            raise ConnectionError("the label printer jammed")
        return parcel

    collect = native.join(reduce_list_append, initial_factory=list[str], node_id="collect")
    native.add(native.edge_from(native.start_node).map().to(ship), native.edge_from(ship).to(collect), native.edge_from(collect).to(native.end_node))
    lab = Lab(":memory:")
    run = lab.adopt(native.build(), name="shipping").start(inputs=[1, 2, 3], state=Loop())
    run.run(raise_on_failure=False)
    assert run.status == "failed" and sorted(mapped_calls) == [1, 2, 3]
    run.retry()  # the failed step again, to its end here
    if run.status != "done":
        run.run()
    assert run.status == "done" and sorted(run.output) == ["parcel-1", "parcel-2", "parcel-3"]
    assert sorted(mapped_calls) == [1, 2, 3]  # nobody shipped twice
    keys = [e.key.split("/", 2)[2] for e in lab.effects(run.id)]
    assert len(set(keys)) == 3 and all(k.startswith("ship~t") for k in keys)
    lab.close()
