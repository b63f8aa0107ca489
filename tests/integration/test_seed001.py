"""Seed 001, sentence by sentence: the places the lab once departed from it (issue 20)."""

from __future__ import annotations

import pytest

from lab import Lab
from lab.errors import CheckpointError
from tests.conftest import Counter, Inc, declare_counter


def test_a_different_checkpoint_under_a_taken_id_fails_explicitly(db_path):
    """Seed 001: "Unknown nodes or node fields, duplicate snapshot ids, and multiple created cursors
    fail explicitly." The same journal line replayed twice stays one checkpoint; a different one
    under an id already stored is a CheckpointError naming both, and nothing is folded."""
    lab = Lab(db_path)
    run = declare_counter(lab).start(Inc(by=2), state=Counter()).run()
    store = lab.store
    stored = store.checkpoint(run.id, 2)
    assert stored is not None
    same = store.checkpoint_row(stored)
    store.write([same])
    store.write([same])
    store.fold()  # replaying the same checkpoint twice changes nothing
    assert store.checkpoint(run.id, 2) == stored
    assert len(store.checkpoints(run.id)) == 7

    other = dict(same, state={"count": 999, "seen": []})
    store.write([other])
    with pytest.raises(CheckpointError) as caught:
        store.fold()
    message = str(caught.value)
    assert f"run {run.id} checkpoint 2" in message
    assert '"count":999' in message and '"count":2' in message  # both checkpoints named
    assert "stored" in message and "journal line" in message
    with pytest.raises(CheckpointError, match="checkpoint 2"):
        store.checkpoint(run.id, 2)  # a read folds first: it refuses too, never shows either silently
    with pytest.raises(CheckpointError):
        lab.close()  # the journal is kept, the file released
    with pytest.raises(CheckpointError, match="checkpoint 2"):
        Lab(db_path)


def test_two_different_journal_lines_under_one_id_fail_on_open(db_path):
    """Seed 001: "duplicate snapshot ids ... fail explicitly": two journal lines that disagree
    about one new checkpoint are refused when the store is opened, naming both lines."""
    lab = Lab(db_path)
    run = declare_counter(lab).start(Inc(by=2), state=Counter())
    store = lab.store
    cp = store.checkpoint(run.id, 0)
    assert cp is not None
    row = dict(store.checkpoint_row(cp), seq=50)
    store.write([row])
    store.write([dict(row, state={"count": 7, "seen": []})])
    with pytest.raises(CheckpointError, match=r"checkpoint 50: .*journal line \d+ .*journal line \d+"):
        store.fold()
    with pytest.raises(CheckpointError):
        lab.close()  # the journal is kept, the file released
    with pytest.raises(CheckpointError, match="checkpoint 50"):
        Lab(db_path)
