"""Fork stacks stored folded (lab/fork_stacks.py): every stack reads back as the same frames.

Scenarios: random stacks (regular loops, irregular ones, several forks a round) folded one frame
at a time and from nothing give the same stored form and read back equal; the lazy view a
drawing uses agrees with the frames; a plain list (what stores before the fold hold) reads as
before; a loop's stored form has a constant number of entries; a damaged block is refused
by the codec naming the checkpoint.
"""

from __future__ import annotations

import json
import random

import pytest

from lab.codec import SnapshotCodec
from lab.engine.tasks import Fork, Task, TaskInput
from lab.errors import CheckpointError
from lab.fork_stacks import MAX_FRAMES, StackEncoder, StoredStack, decode_stack
from lab.records import PendingStation


def _random_stack(rnd: random.Random) -> tuple[Fork, ...]:
    kind = rnd.randrange(4)
    forks = ("a", "b", "c")
    period = rnd.randrange(1, 5)
    out, run = [], 0
    for i in range(rnd.randrange(0, 50)):
        if kind == 0:  # no pattern at all
            out.append(Fork(rnd.choice(forks), rnd.randrange(5), rnd.randrange(3)))
            continue
        run += rnd.choice((1, 1, 1, 2)) if kind == 2 else 1  # kind 2: rounds that skip a run now and then
        out.append(Fork(forks[i % period % 3], run, rnd.randrange(2) if kind == 3 else 0))
    return tuple(out)


def test_random_stacks_fold_the_same_incrementally_and_read_back_equal() -> None:
    rnd = random.Random(28)
    shared = StackEncoder()
    for _ in range(1500):
        stack = _random_stack(rnd)
        for m in range(len(stack) + 1):  # the way a run grows it: a frame more each time
            stored = shared.encode(stack[:m])
        assert stored == StackEncoder().encode(stack)  # a function of the frames alone
        stored = json.loads(json.dumps(stored))
        assert decode_stack(stored) == stack
        if stack:
            assert stored[-1] == stack[-1].to_json()  # the innermost frame is always a plain frame
        view = StoredStack(stored)
        frames = [f.to_json() for f in stack]
        assert len(view) == len(stack) and list(view) == frames and list(reversed(view)) == frames[::-1]
        assert [view[i] for i in range(-len(stack), len(stack))] == frames + frames
        assert view[2:7] == frames[2:7]


def test_a_loop_stores_a_constant_number_of_entries_and_old_plain_lists_read_as_before() -> None:
    enc = StackEncoder()
    one_fork = (Fork("__start__", 0, 0), *(Fork("map", r, 0) for r in range(1, 5001)), Fork("map", 5001, 3))
    stored = enc.encode(one_fork)
    assert stored == [
        {"fork": "__start__", "run": 0, "thread": 0},
        {"repeat": [{"fork": "map", "run": 1, "thread": 0}], "times": 5000, "run_step": 1},
        {"fork": "map", "run": 5001, "thread": 3},
    ]
    two_forks = tuple(Fork("outer" if r % 2 else "inner", r, 1) for r in range(1, 4001))
    assert len(enc.encode(two_forks)) == 3  # a block of two frames a round, and the round's last two
    assert decode_stack(enc.encode(two_forks)) == two_forks
    plain = [f.to_json() for f in one_fork]  # what the codec wrote before the fold
    assert decode_stack(plain) == one_fork
    assert list(StoredStack(plain)) == plain


@pytest.mark.parametrize(
    "entry",
    [
        {"repeat": [], "times": 2, "run_step": 1},
        {"repeat": [{"fork": "map", "run": 1, "thread": 0}], "times": 0, "run_step": 1},
        {"repeat": [{"fork": "map", "run": 1, "thread": 0}], "times": 2.5, "run_step": 1},
        {"repeat": [{"fork": "map", "run": 1, "thread": 0}], "times": 2},
        {"repeat": [{"fork": "map", "run": 1, "thread": 0}], "times": MAX_FRAMES + 1, "run_step": 1},
        {"fork": "map", "run": "x", "thread": 0},
        7,
    ],
)
def test_a_damaged_stored_stack_is_refused_naming_the_checkpoint(entry) -> None:
    from lab.codec import InputCodec

    codec = SnapshotCodec(state_type=int, output_type=int, nodes={}, inputs={"square": InputCodec("square", int)})
    station = PendingStation("square", {"inputs": 3}, {"task": 4, "fork_stack": [entry]})
    with pytest.raises(CheckpointError, match="frontier entry of square is damaged.*fork the run"):
        codec.decode_node(station, run_id="run-x", seq=9)


def test_the_codec_writes_and_reads_a_task_and_a_join_with_folded_stacks() -> None:
    from lab.codec import InputCodec
    from lab.engine.tasks import JoinAcc

    inputs = {"square": InputCodec("square", int), "collect": InputCodec("collect", list[int])}
    codec = SnapshotCodec(state_type=int, output_type=int, nodes={}, inputs=inputs)
    stack = (Fork("__start__", 0, 0), *(Fork("map", r, 0) for r in range(1, 300)))
    task = Task(12, "square", 3, stack)
    stored = codec.encode_node(task)
    assert len(json.dumps(stored.to_json())) < 300
    again = codec.decode_node(PendingStation.from_json(json.loads(json.dumps(stored.to_json()))))
    assert again == task and again.fork_stack == stack and isinstance(again.fork_stack, tuple)
    acc = JoinAcc("collect", 299, [1, 4], stack, arrived=2, waiting_for=(13,))
    stored = codec.encode_node(acc)
    back = codec.decode_node(PendingStation.from_json(json.loads(json.dumps(stored.to_json()))))
    assert back == acc and back.downstream == stack
    assert isinstance(codec.decode_node(PendingStation("square", {"inputs": 2})), TaskInput)
