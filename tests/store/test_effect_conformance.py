"""The `effects` table on both backends (DuckDB file and PostgreSQL): `IdempotentOp`'s protocol.

Seed 002 "All-or-nothing steps": "Checkpoints give at-least-once execution; making an effect
exactly-once is the effect's own job. See side effects and delivery semantics for the
IdempotentOp primitive." A key is recorded before the effect and its result after; a later
try finds the record.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic_graph import BaseNode, End, GraphRunContext

from lab import IdempotentOp, Lab, Retry
from lab.store.effects import EffectTables

KW = {"run_id": "run-x", "node_id": "Pay", "checkpoint_seq": 3, "name": "charge"}


def test_the_key_is_recorded_before_and_the_result_after(lab: Lab) -> None:
    """Seed 002: "making an effect exactly-once is the effect's own job ... the IdempotentOp primitive":
    a new key says run it; a started one is in doubt (not run again unless repeatable); a done one
    gives its result back; a failed one runs again; a finished record is never rewritten."""
    store = lab.store
    assert isinstance(store, EffectTables)
    rec, go = store.begin_effect("k1", **KW)
    assert go and (rec.status, rec.tries, rec.result, rec.in_doubt) == ("started", 1, None, True)
    rec, go = store.begin_effect("k1", **KW)
    assert not go and rec.status == "started"  # in doubt: not run again on its own
    rec, go = store.begin_effect("k1", **KW, repeat_started=True)
    assert go and rec.tries == 2
    assert store.finish_effect("k1", result={"receipt": "r1", "n": [1, 2]})
    assert not store.finish_effect("k1", result={"receipt": "other"})  # a finished record stays
    rec, go = store.begin_effect("k1", **KW, repeat_started=True)
    assert not go and (rec.status, rec.result, rec.settled_by) == ("done", {"receipt": "r1", "n": [1, 2]}, "effect")

    store.begin_effect("k2", **{**KW, "name": "mail"})
    assert store.finish_effect("k2", error={"type": "OSError", "message": "down"})
    rec, go = store.begin_effect("k2", **KW)
    assert go and (rec.status, rec.tries, rec.error) == ("started", 2, None)
    assert [(e.key, e.checkpoint_seq, e.node_id) for e in store.effects("run-x")] == [("k1", 3, "Pay"), ("k2", 3, "Pay")]
    assert store.effects("nope") == [] and store.effect("nope") is None
    store.delete_run("run-x")  # a deleted run takes its effect records with it
    assert store.effects() == []


@dataclass
class Box:
    tries: int = 0
    receipt: str = ""


charges: list[int] = []
tries: list[int] = []
op = IdempotentOp("charge", lambda n: charges.append(n) or f"r{len(charges)}")


@dataclass
class Pay(BaseNode[Box, None, str]):
    async def run(self, ctx: GraphRunContext[Box, None]) -> End[str]:
        receipt = op(5)
        tries.append(1)
        if len(tries) < 3:
            raise ConnectionError("the shipping API is down")  # after the charge: a retry must not charge again
        return End(receipt)


def test_a_retried_station_runs_its_effect_once(lab: Lab) -> None:
    """Seed 002: "A side effect a node already performed ... is not rolled back when the step is
    discarded, so on a resume it can happen again ... the IdempotentOp primitive": a station retried
    by its policy (each try on the head's state) charges once, on either backend."""
    charges.clear()
    tries.clear()
    g = lab.graph("retried-charge", state_type=Box, output_type=str)
    g.node(retry=Retry(max_attempts=3))(Pay)
    run = g.start(Pay(), state=Box()).run()
    assert run.status == "done" and run.output == "r1" and charges == [5] and len(tries) == 3
    [effect] = lab.effects(run.id)
    assert (effect.status, effect.tries, effect.result) == ("done", 1, "r1")
