"""notebooks/evaluate.ipynb runs top to bottom on a fresh kernel of this interpreter (`.venv-evals`, where
pydantic-evals is installed), as tests/notebooks runs the others: twenty cases over an agent workflow,
a change to one node, the comparison naming the cases that got worse."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from tests.notebooks.test_notebooks import execute, kernel_dir, stdout  # noqa: F401 - kernel_dir is a fixture

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_evaluate_notebook_runs_top_to_bottom(tmp_path: Path, kernel_dir: Path) -> None:  # noqa: F811
    nb = nbformat.read(REPO / "notebooks" / "evaluate.ipynb", as_version=4)
    execute(nb, tmp_path, kernel_dir)  # raises CellExecutionError on the first failing cell
    code = [c for c in nb.cells if c.cell_type == "code"]
    outputs = [o for c in code for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    printed = "".join(stdout(c) for c in code)
    assert "assertions passed 75%, mean TeamScore 0.825, 20 cases" in printed
    assert "tickets/triage@1 -> tickets/triage@2" in printed and "worse: ['t09', 't19']" in printed
    shown = [o.data for o in outputs if o.output_type == "execute_result" and "text/html" in o.data]
    evaluation = next(d for d in shown if d["text/plain"].startswith("<Evaluation tickets/triage@1"))
    assert "<table>" in evaluation["text/html"] and "<svg" in evaluation["text/html"]
    comparison = next(d for d in shown if d["text/plain"].startswith("<Comparison"))
    assert "2 of 20 cases worse" in comparison["text/html"] and "<svg" in comparison["text/html"]
