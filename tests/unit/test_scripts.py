"""scripts/start.sh and scripts/test.sh, run for real in a copy of the repository's layout whose
`scripts/setup.sh` does nothing (issue 25 item 8).

- `start.sh --notebook` starts Jupyter Notebook 7 (with --allow-root when root) and opens the
  quickstart notebook
- `test.sh -q` passes one -q to pytest (its summary line stays), `test.sh` alone passes -q
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _layout(tmp_path: Path, python: str | None = None) -> Path:
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    for name in ("start.sh", "test.sh"):
        shutil.copy(REPO / "scripts" / name, root / "scripts" / name)
    (root / "scripts" / "setup.sh").write_text("#!/usr/bin/env bash\nexit 0\n")  # set up already
    (root / "notebooks").mkdir()
    shutil.copy(REPO / "notebooks" / "quickstart.ipynb", root / "notebooks" / "quickstart.ipynb")
    if python is None:
        (root / ".venv").symlink_to(Path(sys.executable).parents[1])  # the venv running these tests
    else:
        for venv in (".venv", ".venv-evals"):  # the suite's venv, and tests/evals' (docs/evaluate.md "Versions")
            (root / venv / "bin").mkdir(parents=True)
            fake = root / venv / "bin" / "python"
            fake.write_text(python)
            fake.chmod(0o755)
    return root


ECHO_ARGS = '#!/usr/bin/env bash\nprintf "%s\\n" "$@"\n'


MAIN = ["-m", "pytest"]
"""How test.sh starts pytest in .venv (the suite but tests/evals)."""
EVALS = ["-m", "pytest"]
"""How it starts pytest in .venv-evals (tests/evals alone)."""


SPLIT = ["-n", "2", "--dist", "loadgroup"]
"""The whole suite's two pytest-xdist workers (not for chosen paths, nor when -n is given)."""


@pytest.mark.parametrize(
    ("given", "passed"),
    [
        # no path: the suite in .venv, then tests/evals in .venv-evals, each with one verbosity,
        # each on two xdist workers
        ([], [*MAIN, "-q", *SPLIT, "--ignore=tests/evals", *EVALS, "-q", *SPLIT, "-p", "no:cacheprovider", "tests/evals"]),
        (["-q"], [*MAIN, *SPLIT, "--ignore=tests/evals", "-q", *EVALS, *SPLIT, "-p", "no:cacheprovider", "-q", "tests/evals"]),
        (["-v", "-k", "x"], [*MAIN, *SPLIT, "--ignore=tests/evals", "-v", "-k", "x", *EVALS, *SPLIT, "-p", "no:cacheprovider", "-v", "-k", "x", "tests/evals"]),
        # a worker count (or no xdist) chosen: not split
        (["-n", "0"], [*MAIN, "-q", "--ignore=tests/evals", "-n", "0", *EVALS, "-q", "-p", "no:cacheprovider", "-n", "0", "tests/evals"]),
        (["-p", "no:xdist"], [*MAIN, "-q", "--ignore=tests/evals", "-p", "no:xdist", *EVALS, "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "tests/evals"]),
        # paths outside tests/evals: .venv alone, not split
        (["-q", "tests/unit"], [*MAIN, "--ignore=tests/evals", "-q", "tests/unit"]),
        (["tests/unit", "-x"], [*MAIN, "-q", "--ignore=tests/evals", "tests/unit", "-x"]),
        # paths under tests/evals: .venv-evals alone
        (["tests/evals/test_evaluate.py"], [*EVALS, "-q", "tests/evals/test_evaluate.py"]),
    ],
)
def test_test_sh_passes_one_verbosity(tmp_path: Path, given: list[str], passed: list[str]) -> None:
    """`test.sh` adds -q unless the arguments choose a verbosity, never twice, in each venv it runs."""
    root = _layout(tmp_path, python=ECHO_ARGS)
    out = subprocess.run(["bash", "scripts/test.sh", *given], cwd=root, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == passed


def test_test_sh_caches_bytecode_where_the_environment_says_not_to(tmp_path: Path) -> None:
    """Both pytest runs (and every process they start) write bytecode even under
    PYTHONDONTWRITEBYTECODE=1: the suite's kernels and killed children then import the lab compiled."""
    root = _layout(tmp_path, python='#!/usr/bin/env bash\necho "${PYTHONDONTWRITEBYTECODE-unset}"\n')
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    out = subprocess.run(["bash", "scripts/test.sh"], cwd=root, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["unset", "unset"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_start_sh_notebook_opens_notebook_7_on_the_quickstart(tmp_path: Path) -> None:
    root = _layout(tmp_path)
    port = _free_port()
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
        JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
        JUPYTER_DATA_DIR=str(tmp_path / "data"),
    )
    log = tmp_path / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            ["bash", "scripts/start.sh", "--notebook", "--no-browser", "--ServerApp.ip=127.0.0.1",
             f"--ServerApp.port={port}", "--ServerApp.port_retries=0", "--IdentityProvider.token=t0k"],
            cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/?token=t0k", timeout=5) as r:
                    landed, page = r.geturl(), r.read().decode()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"start.sh --notebook did not serve (exit {proc.poll()}):\n{log.read_text()[-3000:]}")
                time.sleep(0.5)
        assert landed.split("?")[0].endswith("/notebooks/notebooks/quickstart.ipynb"), landed
        assert "/lab/" not in landed and "notebook" in page.lower()  # Notebook 7's page, not JupyterLab's
        # as root, Jupyter refuses to start without --allow-root: serving at all shows start.sh passed it
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
