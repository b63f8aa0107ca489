"""A looping parallel run's fork stacks through both stores (DuckDB file, PostgreSQL database).

Scenarios, each on both backends: every checkpoint's decoded stacks after a reopen equal the
ones the engine held while running; a store whose stacks were written as plain lists (the form
before they were folded) reopens, resumes and forks; a run stopped mid-loop resumes after a
reopen and a fork from a mid checkpoint starts from the same frames and finishes; and the bytes a
checkpoint stores do not grow with the round count (bytes counted, not time).
"""

from __future__ import annotations

import json

from lab import Lab
from lab.bench.share import WIDTH, Rounds, map_loop
from lab.engine.tasks import JoinAcc, Task
from lab.fork_stacks import StackEncoder

OUTPUT = sum(i * i for i in range(WIDTH))


def _graph(lab: Lab):
    return map_loop(lab.graph("stack_loop", state_type=Rounds, input_type=list[int], output_type=int))


def _stacks(frontier) -> list[tuple]:
    out = []
    for t in frontier:
        if isinstance(t, Task):
            out.append((t.task_id, t.node_id, t.fork_stack))
        elif isinstance(t, JoinAcc):
            out.append((t.node_id, t.fork_run, t.downstream))
    return out


def _stored_bytes(lab: Lab, run_id: str) -> dict[int, int]:
    """Each checkpoint's `next` as stored (the JSON the store returns), in bytes."""
    records = lab.read(run_id).history(all_branches=True)
    return {r.seq: len(json.dumps([p.to_json() for p in r.next], separators=(",", ":"))) for r in records}


def test_every_checkpoint_reads_back_the_stacks_the_engine_held(location: str) -> None:
    lab = Lab(location)
    g = _graph(lab)
    run = g.start(inputs=list(range(WIDTH)), state=Rounds(limit=9), step_limit=None)
    held = {run.head: _stacks(run.frontier)}
    while run.status != "done":
        run.step()
        held[run.head] = _stacks(run.frontier)
    assert run.output == OUTPUT and max(len(s[-1]) for s in held[run.head - 1]) >= 10
    run_id = run.id
    lab.close()
    lab = Lab(location)
    _graph(lab)
    again = lab.resume(run_id)
    for seq, stacks in held.items():
        assert _stacks(again.checkpoint(seq).next) == stacks, seq


def test_a_store_written_with_plain_stacks_still_resumes_and_forks(location: str, monkeypatch) -> None:
    # the codec as it was before the fold: every frame written out
    monkeypatch.setattr(StackEncoder, "encode", lambda self, stack: [f.to_json() for f in stack])
    lab = Lab(location)
    run = _graph(lab).start(inputs=list(range(WIDTH)), state=Rounds(limit=8), step_limit=None)
    run.run(max_steps=10)  # super-steps: two a round
    assert run.status != "done"
    run_id, head = run.id, run.head
    mid = head // 2
    held = _stacks(run.checkpoint(mid).next)
    stored = lab.read(run_id).history(all_branches=True)
    assert any("repeat" not in json.dumps(p.meta) and len(p.meta["fork_stack"]) >= 4 for r in stored for p in r.next if p.meta)
    lab.close()
    monkeypatch.undo()
    lab = Lab(location)
    _graph(lab)
    fork = lab.fork(run_id, mid)
    assert _stacks(fork.frontier) == held
    assert fork.run(step_limit=None).status == "done" and fork.output == OUTPUT
    again = lab.resume(run_id)
    assert again.head == head
    again.run(step_limit=None)
    assert again.status == "done" and again.output == OUTPUT


def test_a_looping_run_resumes_and_forks_from_the_middle_after_a_reopen(location: str) -> None:
    lab = Lab(location)
    run = _graph(lab).start(inputs=list(range(WIDTH)), state=Rounds(limit=12), step_limit=None)
    run.run(max_steps=14)
    run_id, head = run.id, run.head
    mid = head // 2 + 1
    held_mid, held_head = _stacks(run.checkpoint(mid).next), _stacks(run.frontier)
    assert max(len(s[-1]) for s in held_head) >= 7
    lab.close()
    lab = Lab(location)
    _graph(lab)
    again = lab.resume(run_id)
    assert _stacks(again.frontier) == held_head
    again.run(step_limit=None)
    assert again.status == "done" and again.output == OUTPUT
    fork = lab.fork(run_id, mid)
    assert _stacks(fork.frontier) == held_mid
    fork.run(step_limit=None)
    assert fork.status == "done" and fork.output == OUTPUT
    assert fork.state.done == again.state.done == 13


def test_the_bytes_a_checkpoint_stores_do_not_grow_with_the_rounds(location: str) -> None:
    lab = Lab(location)
    sizes = {}
    for rounds in (20, 80):
        run = _graph(lab).start(inputs=list(range(WIDTH)), state=Rounds(limit=rounds), step_limit=None)
        run.run(step_limit=None)
        assert run.status == "done"
        sizes[rounds] = _stored_bytes(lab, run.id)
    short, long = sizes[20], sizes[80]
    assert (len(short), len(long)) == (2 * 20 + 3, 2 * 80 + 3)  # two super-steps a round
    # the largest checkpoint: a map's eight tasks, each with its stack; 80 rounds store what 20 do
    # but for the digits of larger task ids (3 digits from round 12 on, both runs)
    assert max(long.values()) <= max(short.values()) + 16, (max(short.values()), max(long.values()))
    first_half = max(v for seq, v in long.items() if seq <= 80)
    assert max(v for seq, v in long.items() if seq > 80) <= first_half + 16  # rounds 40-80 store what 1-40 did
    # what every frame written out would have cost at round 80: 8 tasks x 80 frames x ~36 bytes
    assert max(long.values()) < 8 * 80 * 36 / 10

