"""Every notebook in notebooks/ runs top to bottom on a fresh kernel (batch.ipynb in
test_own_runs.py, see RUN_ELSEWHERE), and is stored clean.

The kernel is this interpreter (`sys.executable`, the venv's python, where `lab` is installed
editable) started from a throwaway kernelspec, so a stray user-level `python3` kernelspec cannot
send the notebooks to another Python. Each notebook runs with a fresh temporary directory as its
working directory, so `Lab()`'s default store `.graphlab/lab.duckdb` lands there, not in the repo.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from nbformat.v4 import new_code_cell, new_notebook

from lab import RevisionMismatchError

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
KERNEL_NAME = "python3"
EVALS_KERNEL = "graphlab-evals"
"""The kernel notebooks/evaluate.ipynb names: `.venv-evals`'s python (scripts/setup.sh registers it)."""
CELL_TIMEOUT = 300
"""Seconds one cell may take: a Ray or agent cell takes over a minute on a busy machine (load 5)."""

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def kernel_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A kernelspec directory holding one `python3` kernel that runs this very interpreter."""
    root = tmp_path_factory.mktemp("kernels")
    spec = root / KERNEL_NAME
    spec.mkdir()
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": f"Python 3 ({sys.executable})",
                "language": "python",
            }
        )
    )
    return root


def execute(nb: nbformat.NotebookNode, cwd: Path, kernel_dir: Path) -> nbformat.NotebookNode:
    km = AsyncKernelManager(
        kernel_name=KERNEL_NAME, kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernel_dir)])
    )
    client = NotebookClient(
        nb,
        km=km,
        kernel_name=KERNEL_NAME,
        timeout=CELL_TIMEOUT,
        allow_errors=False,
        resources={"metadata": {"path": str(cwd)}},
    )
    # cleanup_kc: nbclient owns only the kernels it creates; this one must be shut down and its
    # channels closed too, or the kernel outlives the test and its zmq sockets leak.
    client.execute(cwd=str(cwd), cleanup_kc=True)
    assert not km.has_kernel
    return nb


def stdout(cell: nbformat.NotebookNode) -> str:
    """All a cell printed: a kernel may flush one print() in several stream messages."""
    return "".join(o["text"] for o in cell.outputs if o.get("output_type") == "stream" and o.get("name") == "stdout")


def printed(cell: nbformat.NotebookNode) -> str:
    """The last line a cell printed."""
    lines = stdout(cell).strip().splitlines()
    return lines[-1] if lines else ""


def test_kernel_is_this_python_and_imports_lab(tmp_path: Path, kernel_dir: Path) -> None:
    probe = new_notebook(
        cells=[
            new_code_cell(
                "import json, os, sys, lab\n"
                "print(json.dumps({'exe': sys.executable, 'lab': lab.__file__, 'cwd': os.getcwd()}))"
            )
        ]
    )
    execute(probe, tmp_path, kernel_dir)
    out = json.loads(probe.cells[0].outputs[0]["text"])
    assert Path(out["exe"]).resolve() == Path(sys.executable).resolve()
    assert Path(out["lab"]).resolve().is_relative_to(REPO / "lab"), out["lab"]
    assert Path(out["cwd"]).resolve() == tmp_path.resolve()


def test_there_are_notebooks() -> None:
    assert NOTEBOOKS, f"no notebooks found in {REPO / 'notebooks'}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_is_stored_without_outputs(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    dirty = [
        i
        for i, cell in enumerate(nb.cells)
        if cell.cell_type == "code" and (cell.get("outputs") or cell.get("execution_count") is not None)
    ]
    assert not dirty, f"{path.name}: code cells {dirty} have stored outputs or execution counts; clear them"
    # evaluate.ipynb asks for the kernel of .venv-evals, which scripts/setup.sh registers (docs/evaluate.md)
    assert nb.metadata.get("kernelspec", {}).get("name") == (EVALS_KERNEL if path.name == "evaluate.ipynb" else KERNEL_NAME)


RUN_ELSEWHERE = {
    "batch.ipynb": "tests/notebooks/test_own_runs.py",
    "evaluate.ipynb": "tests/evals/test_evaluate_notebook.py",
}
"""Notebooks run top to bottom by another test: batch.ipynb starts a Ray of its own and two
worker processes (the slowest notebook by far), so it runs once, in test_own_runs.py, where it
shares its folder's store with a consent run parked at its gate, as the shipped notebooks do.
evaluate.ipynb needs the `evals` extra (pydantic-evals), so it runs in `.venv-evals` with tests/evals."""
TOP_TO_BOTTOM = [p for p in NOTEBOOKS if p.name not in RUN_ELSEWHERE]


def test_every_notebook_runs_top_to_bottom_somewhere() -> None:
    """A notebook left out of the parametrization below is run top to bottom by the test named."""
    for name, where in RUN_ELSEWHERE.items():
        assert (REPO / "notebooks" / name).exists() and "execute(" in (REPO / where).read_text(), (name, where)
        assert f'"notebooks" / "{name}"' in (REPO / where).read_text(), (name, where)


@pytest.mark.parametrize("path", TOP_TO_BOTTOM, ids=[p.name for p in TOP_TO_BOTTOM])
def test_notebook_runs_top_to_bottom(path: Path, tmp_path: Path, kernel_dir: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    execute(nb, tmp_path, kernel_dir)  # raises CellExecutionError on the first failing cell
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]


QUICKSTART = REPO / "notebooks" / "quickstart.ipynb"


def defining_cells(path: Path) -> tuple[list[str], str]:
    """A notebook's code cells before its first `g.start(`, and that cell: what a restart re-runs."""
    code = [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    start = next(i for i, src in enumerate(code) if "g.start(" in src)
    return code[:start], code[start]


def test_quickstart_run_resumes_after_kernel_restart(tmp_path: Path, kernel_dir: Path) -> None:
    """The quickstart's promise: restart, re-run the defining cells, `lab.resume(run_id)` goes on."""
    defining, start_cell = defining_cells(QUICKSTART)

    first = new_notebook(cells=[new_code_cell(s) for s in defining])
    first.cells.append(new_code_cell(start_cell + "\nrun.step(); run.step()\nprint(run.id)"))
    execute(first, tmp_path, kernel_dir)
    run_id = printed(first.cells[-1]).strip()

    second = new_notebook(cells=[new_code_cell(s) for s in defining])
    second.cells.append(
        new_code_cell(f"run = lab.resume({run_id!r})\nrun.run()\nprint(run.status, run.output, run.head)")
    )
    try:
        execute(second, tmp_path, kernel_dir)
    except CellExecutionError as exc:
        if exc.ename == "RevisionMismatchError":
            raise RevisionMismatchError(str(exc)) from exc
        raise
    assert printed(second.cells[-1]).split() == ["done", "6", "6"]


GATE_DEFINITIONS = [
    """
%load_ext kernel_ext
from dataclasses import dataclass, field

from pydantic_graph import BaseNode, End, GraphRunContext

from lab import Gate, Lab, Verdict

lab = Lab()
""",
    """
@dataclass
class Mail:
    to: str = ""
    draft: str = ""
    log: list[str] = field(default_factory=list)


g = lab.graph("mail", state_type=Mail, output_type=str)
""",
    """
@g.node
@dataclass
class Draft(BaseNode[Mail, None, str]):
    async def run(self, ctx: GraphRunContext[Mail, None]) -> "ConfirmSend":
        ctx.state.draft = f"Hello {ctx.state.to}"
        return ConfirmSend()
""",
    """
@g.node
@dataclass
class ConfirmSend(Gate[Mail]):
    prompt = "Send the draft?"

    async def decide(self, ctx: GraphRunContext[Mail, None], verdict: Verdict) -> "Send | Draft":
        ctx.state.log.append(f"{verdict.approved}:{verdict.note}")
        return Send() if verdict.approved else Draft()
""",
    """
@g.node
@dataclass
class Send(BaseNode[Mail, None, str]):
    async def run(self, ctx: GraphRunContext[Mail, None]) -> End[str]:
        return End(ctx.state.draft)
""",
]


def test_parked_gate_is_approved_after_kernel_restart(tmp_path: Path, kernel_dir: Path) -> None:
    """Park at a gate, shut the kernel down; a new kernel re-runs the definitions, resumes, approves, finishes."""
    first = new_notebook(cells=[new_code_cell(s.strip()) for s in GATE_DEFINITIONS])
    first.cells.append(
        new_code_cell(
            "import os\nrun = %lab start Draft(), state=Mail(to='ops')\n%lab run\n"
            "print(os.getpid(), run.id, run.status, run.wait.kind, run.wait.node_id)"
        )
    )
    execute(first, tmp_path, kernel_dir)  # returns once that kernel is shut down
    pid, run_id, *parked = printed(first.cells[-1]).split()
    assert parked == ["waiting", "consent", "ConfirmSend"]

    second = new_notebook(cells=[new_code_cell(s.strip()) for s in GATE_DEFINITIONS])
    second.cells += [
        new_code_cell(
            f"import os\nrun = lab.resume({run_id!r})\nprint(os.getpid(), run.status, run.wait.prompt)"
        ),
        new_code_cell('%lab approve "looks right"'),
        new_code_cell("%lab run\nprint(run.status, run.output, run.state.log)"),
    ]
    try:
        execute(second, tmp_path, kernel_dir)
    except CellExecutionError as exc:
        if exc.ename == "RevisionMismatchError":
            raise RevisionMismatchError(str(exc)) from exc
        raise
    other_pid, status, *prompt = printed(second.cells[-3]).split()
    assert other_pid != pid and status == "waiting" and " ".join(prompt) == "Send the draft?"
    assert (
        "approved the consent gate at ConfirmSend with note 'looks right'"
        in stdout(second.cells[-2])
    )
    assert printed(second.cells[-1]).strip() == "done Hello ops ['True:looks right']"


CONSENT = REPO / "notebooks" / "consent.ipynb"


def test_consent_notebook_gate_is_approved_after_kernel_restart(tmp_path: Path, kernel_dir: Path) -> None:
    """consent.ipynb's cells up to `g.start(...)`, which runs to the gate; a new kernel approves with `%lab approve`."""
    defining, start_cell = defining_cells(CONSENT)

    first = new_notebook(cells=[new_code_cell(s) for s in defining])
    assert "run.run()" in start_cell  # the notebook's own start cell parks the run at the gate
    first.cells.append(new_code_cell(start_cell + "\nprint(run.id, run.status, run.wait.node_id)"))
    execute(first, tmp_path, kernel_dir)
    run_id, status, node = printed(first.cells[-1]).split()
    assert (status, node) == ("waiting", "ConfirmSend")

    second = new_notebook(cells=[new_code_cell(s) for s in defining])
    second.cells += [
        new_code_cell(f"%load_ext kernel_ext\nrun = lab.resume({run_id!r})\n%lab approve after a restart"),
        new_code_cell("%lab run\nprint(run.status, run.state.sent, run.waits()[-1].resolution['note'])"),
    ]
    execute(second, tmp_path, kernel_dir)
    assert printed(second.cells[-1]).split() == ["done", "True", "after", "a", "restart"]


def test_magic_errors_in_a_real_kernel_are_one_line(tmp_path: Path, kernel_dir: Path) -> None:
    """In a kernel, a wrong %lab line or bad SQL shows `UsageError: ...` and no traceback."""
    bad = [
        "%lab runs",  # before any lab exists
        "%lab frobnicate",
        "%%lab_sql\nselect nope from runs",
    ]
    nb = new_notebook(cells=[new_code_cell("%load_ext kernel_ext")] + [new_code_cell(s) for s in bad])
    nb.cells.insert(2, new_code_cell("from lab import Lab\nlab = Lab()"))
    km = AsyncKernelManager(
        kernel_name=KERNEL_NAME, kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernel_dir)])
    )
    client = NotebookClient(
        nb, km=km, kernel_name=KERNEL_NAME, timeout=CELL_TIMEOUT, allow_errors=True,
        resources={"metadata": {"path": str(tmp_path)}},
    )  # fmt: skip
    client.execute(cwd=str(tmp_path), cleanup_kc=True)
    shown = []
    for cell in nb.cells[1:]:
        if cell.source.startswith("from lab"):
            continue
        text = "".join(o.get("text", "") for o in cell.outputs) + "".join(
            "".join(o.get("traceback", [])) for o in cell.outputs if o.output_type == "error"
        )
        assert "Traceback" not in text and "File " not in text, text
        shown.append(text.strip())
    assert shown[0].startswith("UsageError: no lab is open in this kernel; run `%lab open`"), shown[0]
    assert shown[1].startswith("UsageError: unknown %lab subcommand 'frobnicate'"), shown[1]
    assert shown[2].startswith('UsageError: SQL error: Binder Error: Referenced column "nope" not found'), (
        shown[2]
    )
