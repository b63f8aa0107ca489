"""The run view never deadlocks with a thread that writes the run while holding the store.

Issue 26 (done-when 4, the run widget cell; found by tests/matrix/test_matrix_views.py under
load): a redraw held the view's lock and waited for the store, while another thread held the
store (answering a wait, or the view's poll taking in an answer) and, writing the verdict,
handed the event to the view, which waited for the view's lock: the view, the run and
`lab.close()` hung for good. An event now reaches the view under a lock of its own that is
never held while waiting for another.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from lab import Lab
from lab.widgets import RunWidget
from tests.matrix.cases import case_named


def test_an_answer_written_with_the_store_held_during_a_redraw_does_not_deadlock(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    lab = Lab(str(tmp_path / "locks.duckdb"))
    case = case_named("nodes")
    run = case.start(case.build(lab, "gate"))
    run.run()
    assert run.status == "waiting" and run.wait.kind == "consent"
    view = RunWidget(run)

    store = lab.store
    history = run.history
    redrawing = threading.Event()

    def history_signalling(*args: Any, **kwargs: Any) -> Any:  # a redraw's first read, the view's lock held
        redrawing.set()
        return history(*args, **kwargs)

    holding = threading.Event()
    answered = threading.Event()

    def answer_with_the_store_held() -> None:
        with store.held():
            holding.set()
            assert redrawing.wait(30)
            run.approve("while the view redraws")  # writes the verdict; the view gets the event
        answered.set()

    answerer = threading.Thread(target=answer_with_the_store_held, daemon=True)
    answerer.start()
    assert holding.wait(30)
    monkeypatch.setattr(run, "history", history_signalling)
    redraw = threading.Thread(target=view.refresh, daemon=True)
    redraw.start()
    redraw.join(30)
    answerer.join(30)
    deadlocked = not answered.is_set() or redraw.is_alive()
    if deadlocked:  # leave the lab open: closing it would wait for the stuck threads too
        pytest.fail("the view's redraw and an answer written with the store held deadlocked")
    monkeypatch.undo()
    assert run.status == "queued" and run.wait.resolution["note"] == "while the view redraws"
    view.refresh()
    assert "while the view redraws" in view.events_panel.value
    lab.close()
