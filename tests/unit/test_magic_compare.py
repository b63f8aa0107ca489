"""`%lab compare A B`: two runs or branches side by side from a magic (issue 28 part 3).

Scenarios: a run and its fork by run id give the same comparison as `lab.compare(run, fork)`;
`RUN_ID@SEQ` and a bare `SEQ` (a checkpoint of the current run, or of `--run ID`) name the branch
ending there, so two branches of a rewound run compare; wrong words, an unknown run and a missing
checkpoint are one-line `UsageError`s naming what to type.
"""

from __future__ import annotations

from typing import Any

import pytest
from IPython.core.error import UsageError

from lab.share import Comparison
from tests.unit.test_kernel_ext import COUNTER_CELLS, ip, lab_magic, run_cells  # noqa: F401  (ip: the fixture)


def test_compare_a_run_and_its_fork_by_id(ip: Any) -> None:  # noqa: F811
    run_cells(ip, COUNTER_CELLS)
    run = lab_magic(ip, "start Inc(by=2), state=State(count=1)")
    lab_magic(ip, "run")
    fork = lab_magic(ip, "fork 2")
    fork.run()
    cmp = lab_magic(ip, f"compare {run.id} {fork.id}  # the two runs")
    assert isinstance(cmp, Comparison)
    assert (cmp.a.run.id, cmp.a.upto, cmp.b.run.id, cmp.b.upto) == (run.id, None, fork.id, None)
    direct = ip.user_ns["lab"].compare(run, fork)
    assert cmp.to_json() == direct.to_json()
    assert cmp.shared >= 2 and not cmp.diverged  # the fork replays the same steps from the same state
    at = lab_magic(ip, f"compare {run.id}@1 {fork.id}")
    assert at.a.upto == 1 and len(at.a.entries) == 2 and at.diverged
    assert at.a.label == f"A: {run.id}@1"


def test_compare_two_branches_of_the_current_run(ip: Any) -> None:  # noqa: F811
    run_cells(ip, COUNTER_CELLS)
    run = lab_magic(ip, "start Inc(by=1), state=State(count=0)")
    lab_magic(ip, "run")
    old_tip = run.head
    lab_magic(ip, "rewind 2")
    run.step()  # a new branch from checkpoint 2: the same station, a new checkpoint
    new_tip = run.head
    assert new_tip > old_tip
    cmp = lab_magic(ip, f"compare {old_tip} {new_tip}")
    assert (cmp.a.run.id, cmp.a.upto, cmp.b.upto) == (run.id, old_tip, new_tip)
    assert [e["seq"] for e in cmp.b.entries] == [0, 1, 2, new_tip]
    assert cmp.shared == 4 and len(cmp.a.entries) > 4  # the new branch is the old one's prefix

    other = lab_magic(ip, "start Inc(by=3), state=State(count=0)")  # now the current run
    lab_magic(ip, "step 2")
    by_option = lab_magic(ip, f"compare 1 {old_tip} --run {run.id}")
    assert by_option.a.run.id == run.id and by_option.a.upto == 1
    mixed = lab_magic(ip, f"compare 1 {run.id}@{old_tip}")
    assert mixed.a.run.id == other.id and mixed.b.run.id == run.id
    assert mixed.first_a is not None and mixed.first_a["station"] == "Inc"


def test_compare_refuses_bad_words(ip: Any) -> None:  # noqa: F811
    run_cells(ip, COUNTER_CELLS)
    run = lab_magic(ip, "start Inc(by=2), state=State(count=1)")
    lab_magic(ip, "run")
    with pytest.raises(UsageError, match=r"%lab compare needs A B"):
        lab_magic(ip, f"compare {run.id}")
    with pytest.raises(UsageError, match=r"%lab compare takes A B"):
        lab_magic(ip, "compare 1 2 3")
    with pytest.raises(UsageError, match=r"no run 'run-nope' in lab .*`%lab runs`"):
        lab_magic(ip, f"compare run-nope {run.id}")
    with pytest.raises(UsageError, match=r"%lab compare: .*no checkpoint 99"):
        lab_magic(ip, f"compare {run.id}@99 {run.id}")
    with pytest.raises(UsageError, match=r"not RUN_ID@SEQ \(SEQ a whole number\)"):
        lab_magic(ip, f"compare {run.id}@x1 {run.id}")
