"""Two notebooks in one folder (issue 14), with real Jupyter kernels.

- two shipped notebooks run top to bottom at the same time, in one folder, on one default store
  (`Lab()` in both: `.graphlab/lab.duckdb`); then a third kernel sees every run of both
- two kernels started with jupyter_client: each sees the other's run within a second; stepping the
  other's run is refused naming its pid and host; killing a kernel lets the other take the run over
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager, KernelManager
from nbclient import NotebookClient

from tests.notebooks.test_notebooks import CELL_TIMEOUT, KERNEL_NAME, REPO, kernel_dir  # noqa: F401 - fixture

pytestmark = pytest.mark.slow


def test_two_notebooks_run_at_once_in_one_folder(tmp_path: Path, kernel_dir: Path) -> None:  # noqa: F811
    names = ("quickstart.ipynb", "consent.ipynb")
    books = {n: nbformat.read(REPO / "notebooks" / n, as_version=4) for n in names}

    async def both() -> None:
        clients = []
        for name in names:
            km = AsyncKernelManager(
                kernel_name=KERNEL_NAME, kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernel_dir)])
            )
            clients.append(
                NotebookClient(
                    books[name], km=km, kernel_name=KERNEL_NAME, timeout=CELL_TIMEOUT, allow_errors=False,
                    resources={"metadata": {"path": str(tmp_path)}},
                )  # fmt: skip
            )
        # both kernels live at once, each running its notebook top to bottom
        await asyncio.gather(*(c.async_execute(cwd=str(tmp_path), cleanup_kc=True) for c in clients))

    asyncio.run(both())
    assert (tmp_path / ".graphlab" / "lab.duckdb").exists()
    # a third kernel in the same folder lists the runs of both
    km, kc = _kernel(kernel_dir, tmp_path)
    try:
        graphs = json.loads(_run(kc, "from lab import Lab\nprint(json.dumps(sorted({r.graph_key for r in Lab().runs()})))"))
    finally:
        _stop(km, kc)
    assert len(graphs) >= 2, graphs


def _kernel(kernel_dir: Path, cwd: Path):  # noqa: F811
    km = KernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernel_dir)]))
    km.start_kernel(cwd=str(cwd))
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=120)
    _run(kc, f"import sys, json, os; sys.path.insert(0, {str(REPO)!r})")
    return km, kc


def _stop(km, kc) -> None:
    kc.stop_channels()
    km.shutdown_kernel(now=True)


def _run(kc, code: str) -> str:
    """Execute `code` in the kernel; its stdout, or AssertionError with the kernel's error."""
    out: list[str] = []
    err: list[str] = []

    def hook(msg) -> None:
        kind = msg["msg_type"]
        if kind == "stream" and msg["content"]["name"] == "stdout":
            out.append(msg["content"]["text"])
        elif kind == "error":
            err.append(f"{msg['content']['ename']}: {msg['content']['evalue']}")

    reply = kc.execute_interactive(code, output_hook=hook, timeout=120)
    if reply["content"]["status"] != "ok":
        raise AssertionError("; ".join(err) or reply["content"])
    return "".join(out).strip()


def test_two_kernels_one_store_one_writer_per_run(tmp_path: Path, kernel_dir: Path) -> None:  # noqa: F811
    setup = (
        "from lab import Lab\n"
        "from tests.integration import graphs_for_tests as gt\n"
        "lab = Lab()\n"
        "g = gt.declare(lab)\n"
    )
    a = _kernel(kernel_dir, tmp_path)
    b = _kernel(kernel_dir, tmp_path)
    try:
        _run(a[1], setup)
        _run(b[1], setup)
        pid_a = int(_run(a[1], "print(os.getpid())"))
        run_id = _run(a[1], "run = g.start(gt.entry(), state=gt.State()); run.run(max_steps=4); print(run.id)")
        # kernel B sees it (and its checkpoints) within a second of their being written
        deadline = time.monotonic() + 1.0
        while True:
            head = _run(b[1], f"print(next((r.head_seq for r in lab.runs() if r.run_id == {run_id!r}), None))")
            if head == "4" or time.monotonic() > deadline:
                break
        assert head == "4"
        # stepping it from B is refused, naming A
        message = _run(
            b[1],
            f"r = lab.resume({run_id!r})\n"
            "try:\n    r.step()\nexcept Exception as exc:\n    print(type(exc).__name__, exc)",
        )
        assert message.startswith("RunOwnedError") and f"process {pid_a} on host {socket.gethostname()}" in message
        # A keeps stepping while B reads
        _run(a[1], "run.run(max_steps=6)")
        assert _run(b[1], "print(lab.sql(\"select max(seq) from checkpoints where run_id = ?\", [r.id]).fetchall()[0][0])") == "10"
        # A's kernel dies: B takes the run over and finishes it
        _stop(*a)
        done = _run(b[1], f"r = lab.resume({run_id!r}); r.run(); print(r.status, r.output, r.writer)")
        assert done == f"done {60} None"
    finally:
        for km, kc in (a, b):
            if km.is_alive():
                _stop(km, kc)
