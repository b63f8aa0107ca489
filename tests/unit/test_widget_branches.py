"""The run widget's branch picker and its paused label (issue 15 item 7).

Scenarios:
- the tree's branches from parent links: the first branch, a branch from a rewind, the head's
- after a rewind and a step in the widget, the picker offers both branches; picking the old
  one shows it on the timeline (its tip, its state) without moving the head; Rewind here on
  it makes it the head's branch again; a Step goes back to following the head
- a run stepped and then idle reads "❚❚ paused", not "▶ running"; a done run reads done
"""

from __future__ import annotations

import pytest

from lab import Lab
from lab.share.branches import Branch, branches
from lab.widgets import RunWidget
from tests.conftest import Counter, Inc, declare_counter


@pytest.fixture
def mem_lab():
    lab = Lab(":memory:")
    yield lab
    lab.close()


def test_branches_of_a_checkpoint_tree() -> None:
    tree = {0: None, 1: 0, 2: 1, 3: 2, 4: 3, 5: 2, 6: 5, 7: 1}
    assert branches(tree, 6) == [
        Branch(tip=4, fork=None, first=0, has_head=False),
        Branch(tip=6, fork=2, first=5, has_head=True),
        Branch(tip=7, fork=1, first=7, has_head=False),
    ]
    assert [b.label for b in branches(tree, 2)] == ["0…4 · head", "from 2: 5…6 · head", "from 1: 7"]
    assert branches({0: None, 1: 0}, 1) == [Branch(tip=1, fork=None, first=0, has_head=True)]


def _step(w: RunWidget) -> None:
    w.step_btn.click()
    assert w.wait(10)


def test_picker_reaches_the_old_branch_after_a_rewind_and_a_step(mem_lab) -> None:
    run = declare_counter(mem_lab).start(Inc(), state=Counter())
    w = RunWidget(run)
    assert w.branch_picker.layout.display == "none"  # one branch: no picker
    w.run_btn.click()
    assert w.wait(10) and run.status == "done" and w._seqs == list(range(9))
    w.slider.value = 2
    w.rewind_btn.click()
    assert run.head == 2
    _step(w)  # a new branch from 2: checkpoint 9
    assert run.head == 9 and w._seqs == [0, 1, 2, 9]
    assert w.branch_picker.layout.display is None
    assert [label for label, _ in w.branch_picker.options] == ["0…8", "from 2: 9 · head"]
    assert w.branch_picker.value == 9

    w.branch_picker.value = 8  # the old branch: its checkpoints, at its tip; the head stays
    assert w._seqs == list(range(9)) and w.selected_seq == 8 and run.head == 9
    assert "State at checkpoint 8 · done" in w.state_panel.value
    assert 'data-seq="8"' in w.timeline_label.value
    assert not w.rewind_btn.disabled and not w.fork_btn.disabled
    w.slider.value = 6
    assert w.selected_seq == 6 and w._seqs == list(range(9))
    w.refresh()  # a redraw keeps the picked branch
    assert w.selected_seq == 6 and w.branch_picker.value == 8

    w.rewind_btn.click()  # Rewind here, on the old branch: the head moves there
    assert run.head == 6 and w.branch_picker.value == 8
    assert dict((v, k) for k, v in w.branch_picker.options)[8] == "0…8 · head"
    w.branch_picker.value = 9
    assert w._seqs == [0, 1, 2, 9]
    _step(w)  # a step follows the head again
    assert w._seqs == [0, 1, 2, 3, 4, 5, 6, 10] and w.selected_seq == 10
    assert w.branch_picker.value == 10 and len(w.branch_picker.options) == 3


def test_an_idle_running_run_reads_paused(mem_lab) -> None:
    run = declare_counter(mem_lab).start(Inc(), state=Counter())
    w = RunWidget(run)
    assert 'data-label="created"' in w.header.value
    _step(w)
    assert run.status == "running" and w.status_label == "paused"
    assert 'data-status="running" data-label="paused">❚❚ paused<' in w.header.value
    assert "▶ running" not in w.header.value
    w.run_btn.click()
    assert w.wait(10) and 'data-label="done">✔ done<' in w.header.value
