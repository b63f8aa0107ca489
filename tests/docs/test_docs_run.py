"""Every Python block of README.md and docs/*.md runs as written, in order, in a fresh process
(issue 15 item 2), so the docs cannot rot: each file's blocks run as the cells of one real
IPython shell (magic lines included) in a fresh interpreter, in an empty working directory (the
default store `.graphlab/lab.duckdb` lands there). tests/docs/blocks.py says what runs and how
a block that cannot run is marked.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.blocks import SKIP, blocks, runnable

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
ELSEWHERE = {"evaluate.md": "tests/evals/test_evaluate_docs.py"}
"""Docs whose blocks another test runs: evaluate.md needs the `evals` extra, so it runs in `.venv-evals`."""
RUNNER = Path(__file__).with_name("blocks.py")

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("doc", [d for d in DOCS if runnable(d) and d.name not in ELSEWHERE], ids=lambda d: d.name)
def test_python_blocks_run_as_written(doc: Path, tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO), IPYTHONDIR=str(tmp_path / "ipython"), MPLBACKEND="agg")
    done = subprocess.run(
        [sys.executable, str(RUNNER), str(doc)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, f"{doc.name}:\n{done.stdout[-6000:]}\n{done.stderr[-3000:]}"


def test_every_python_block_runs_or_says_why_not() -> None:
    """A block is run, or not Python, or marked {test="skip"}; a skipped block is rare."""
    skipped = [b.where() for d in DOCS for b in blocks(d) if b.skipped]
    assert all(b.python for d in DOCS for b in blocks(d) if b.skipped), (
        "only Python blocks need a skip marker"
    )
    assert len(skipped) <= 3, f"most blocks must run; skipped: {skipped}"
    assert sum(len(runnable(d)) for d in DOCS) >= 15
    assert SKIP == '{test="skip"}'
