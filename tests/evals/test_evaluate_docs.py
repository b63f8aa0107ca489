"""docs/evaluate.md's Python blocks run as written, in order, in a fresh process of this interpreter
(`.venv-evals`, where pydantic-evals is installed), as tests/docs runs the other pages."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.blocks import runnable

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "evaluate.md"
RUNNER = REPO / "tests" / "docs" / "blocks.py"

pytestmark = pytest.mark.slow


def test_evaluate_page_blocks_run_as_written(tmp_path: Path) -> None:
    assert len(runnable(DOC)) >= 3
    env = dict(os.environ, PYTHONPATH=str(REPO), IPYTHONDIR=str(tmp_path / "ipython"), MPLBACKEND="agg")
    done = subprocess.run(
        [sys.executable, str(RUNNER), str(DOC)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, f"{DOC.name}:\n{done.stdout[-6000:]}\n{done.stderr[-3000:]}"
    assert "{'scored': 3} 0.6666666666666666" in done.stdout
    assert "['mixed'] (0.6666666666666666, 1.0)" not in done.stdout  # the fix makes no case worse
    assert "[] (0.6666666666666666, 1.0)" in done.stdout
