"""Recordings outlive the kernel (issue 28 part 1): a real Jupyter kernel runs a five-station agent
workflow and shuts down; a new kernel opens the same store, and a fork of that run from checkpoint
2 and a rewind of it replay every call (0 model calls), while a changed prompt calls once; a run
that chose `replay="strict"` in the old kernel is strict in the new one.

Kernels are real (this interpreter's ipykernel, started by nbclient, as tests/notebooks does).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from nbformat.v4 import new_code_cell, new_notebook

from tests.agents.test_kernel_restart import kernel_dir  # noqa: F401 - the module's kernelspec fixture
from tests.notebooks.test_notebooks import execute, printed

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

DEFINE = """import sys, json
sys.path.insert(0, {repo!r})
from lab import Lab
from tests.agents.replay_graphs import Article, declare

lab = Lab()
g, model, agent = declare(lab)"""

FIRST = """run = g.start(g.nodes["Research"](), state=Article())
run.run()
chose = g.start(g.nodes["Research"](), state=Article())
chose.replay = "strict"
print(json.dumps({"run": run.id, "status": run.status, "calls": model.calls, "strict": chose.id}))"""

SECOND = """old = lab.resume({run_id!r})
fork = old.fork(2)
fork.run()
forked = model.calls
old.rewind(3)
old.run()
rewound = model.calls
edited = old.fork(2, state=Article(tone="warm", notes=old.state_at(2).notes))
edited.run()
print(json.dumps({{"fork": [forked, fork.status, [c.mode for c in fork.calls()]], "rewind": rewound,
                  "edited": [model.calls, [c.mode for c in edited.calls()]], "same": fork.state == old.state,
                  "modes": [old.replay, lab.resume({strict_id!r}).replay]}}))"""


def test_a_fork_in_a_new_kernel_replays_what_the_old_kernel_recorded(tmp_path: Path, kernel_dir: Path) -> None:  # noqa: F811
    define = DEFINE.format(repo=str(REPO))
    first = new_notebook(cells=[new_code_cell(define), new_code_cell(FIRST)])
    execute(first, tmp_path, kernel_dir)  # that kernel is shut down here
    got = json.loads(printed(first.cells[-1]))
    assert (got["status"], got["calls"]) == ("done", 5)

    second = new_notebook(cells=[new_code_cell(define), new_code_cell(SECOND.format(run_id=got["run"], strict_id=got["strict"]))])
    execute(second, tmp_path, kernel_dir)
    after = json.loads(printed(second.cells[-1]))
    assert after["fork"] == [0, "done", ["replayed", "replayed", "replayed"]]
    assert after["rewind"] == 0 and after["same"] is True
    assert after["edited"] == [1, ["replayed", "live", "replayed"]]
    assert after["modes"] == ["auto", "strict"]  # run.replay is stored with the run
