"""`run.replay` is stored with the run (issue 28, docs/replay.md): a `replay` event records each
change; `lab.resume` in another `Lab` on the same DuckDB file, `lab.fork` of a run with no handle,
and `run.fork` keep the mode the run chose, and a resumed strict run still refuses a changed request.
Across a kernel restart: tests/agents/test_replay_restart.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab import Lab
from lab.errors import NodeExecutionError, ReplayMissError
from tests.agents.replay_graphs import Article, declare


def test_the_mode_a_run_chose_outlives_its_handle(tmp_path: Path) -> None:
    path = tmp_path / "lab.duckdb"
    with Lab(path) as lab:
        g, _, _ = declare(lab)
        run = g.start(g.nodes["Research"](), state=Article())
        run.run()
        run.replay = "off"
        run.replay = "strict"
        run.replay = "strict"  # no change: no event
        assert [e.payload["mode"] for e in run.events("replay")] == ["off", "strict"]
        kept = run.fork(2)
        assert kept.replay == "strict" and [e.payload["mode"] for e in kept.events("replay")] == ["strict"]
        plain = g.start(g.nodes["Research"](), state=Article())
        run_id, fork_id, plain_id = run.id, kept.id, plain.id
    with Lab(path) as lab:
        g, model, _ = declare(lab)
        again = lab.resume(run_id)
        assert again.replay == "strict"
        assert lab.resume(fork_id).replay == "strict" and lab.resume(plain_id).replay == "auto"
        cold = lab.fork(run_id, 2, state=Article(tone="stern", notes=list(again.history()[2].state["notes"])))
        assert cold.replay == "strict"
        with pytest.raises(NodeExecutionError) as failed:
            cold.run(raise_on_failure=True)
        assert isinstance(failed.value.__cause__, ReplayMissError) and model.calls == 0
        again.replay = "auto"
        assert lab.resume(run_id).replay == "auto"
