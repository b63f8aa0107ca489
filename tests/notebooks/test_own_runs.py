"""Notebooks touch only their own runs (issue 25 item 3).

`notebooks/.graphlab` is one store for every shipped notebook. `consent.ipynb` ends parked at its
gate (its natural end); `batch.ipynb` then did `[wait] = lab.waiting()`, which lists every parked
run in the store, and failed. Here both run, one after the other, in one folder; and no notebook,
README or docs block unpacks or indexes a store-wide list.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from tests.notebooks.test_notebooks import REPO, execute, kernel_dir  # noqa: F401 - fixture

STORE_WIDE = re.compile(r"\[\s*\w+\s*\]\s*=\s*lab\.(waiting|runs)\(\)|lab\.(waiting|runs)\(\)\s*\[")
"""`[x] = lab.waiting()` or `lab.runs()[-1]`: one item of a list of the whole store."""


def _code() -> dict[str, str]:
    out = {}
    for path in sorted((REPO / "notebooks").glob("*.ipynb")):
        for i, cell in enumerate(nbformat.read(path, as_version=4).cells):
            if cell.cell_type == "code":
                out[f"{path.name} cell {i}"] = cell.source
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for i, block in enumerate(re.findall(r"```python[^\n]*\n(.*?)```", path.read_text(), re.S)):
            out[f"{path.relative_to(REPO)} block {i}"] = block
    return out


def test_no_notebook_or_doc_picks_one_item_of_a_store_wide_list() -> None:
    found = {where: m.group(0) for where, src in _code().items() if (m := STORE_WIDE.search(src))}
    assert not found, f"filter by the notebook's own batch or run first: {found}"


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_batch_notebook_runs_beside_a_consent_run_parked_in_the_same_store(
    tmp_path: Path, kernel_dir: Path, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    """batch.ipynb runs top to bottom here (test_notebooks.py leaves it to this test), after
    consent.ipynb in the same folder. Its `ray.init()` starts a Ray of its own, as on a user's
    machine, not the session's: a cell of that path must show no Ray token-authentication notice
    (issue 25 item 7)."""
    consent = nbformat.read(REPO / "notebooks" / "consent.ipynb", as_version=4)
    execute(consent, tmp_path, kernel_dir)  # Run All: it ends parked at its gate
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    batch = nbformat.read(REPO / "notebooks" / "batch.ipynb", as_version=4)
    execute(batch, tmp_path, kernel_dir)  # raises CellExecutionError if it took the consent run's wait
    outputs = [o for c in batch.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    stderr = "".join(o.get("text", "") for o in outputs if o.get("name") == "stderr")
    assert "Token authentication" not in stderr, stderr  # issue 25 item 7: no red block in the cell
