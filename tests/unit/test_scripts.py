"""scripts/start.sh and scripts/test.sh, run for real in a copy of the repository's layout whose
`scripts/setup.sh` does nothing (issue 25 item 8).

- `start.sh --notebook` starts Jupyter Notebook 7 (with --allow-root when root) and opens the
  quickstart notebook
- `test.sh -q` passes one -q to pytest (its summary line stays), `test.sh` alone passes -q
- the whole suite: tests/evals run beside the rest at a lower CPU priority, their output shown
  after the rest's; an interrupted run stops them
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
        # no path: the suite in .venv and tests/evals in .venv-evals (its output after the suite's),
        # each with one verbosity, each on two xdist workers
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


BESIDE = """#!/usr/bin/env bash
# the suite's pytest waits until tests/evals' has started: both run at once
[ "$1" = "-c" ] && exit 0  # lint-imports
if [[ " $* " == *" tests/evals "* ]]; then
    echo "evals nice=$(nice)"
    touch evals-started
    [[ " $* " == *" --hang "* ]] && { echo $$ > evals.pid; exec sleep 120; }
    exit 3
fi
for _ in $(seq 600); do [ -e evals-started ] && break; sleep 0.05; done
[ -e evals-started ] || { echo "tests/evals never started beside the suite"; exit 9; }
echo "suite nice=$(nice)"
[[ " $* " == *" --hang "* ]] && exec sleep 120
exit 0
"""
"""A fake python for both venvs: the suite's run returns only once tests/evals' has started."""


def test_the_evals_run_beside_the_suite_at_a_lower_priority_and_print_after_it(tmp_path: Path) -> None:
    root = _layout(tmp_path, python=BESIDE)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp))
    out = subprocess.run(["bash", "scripts/test.sh"], cwd=root, env=env, capture_output=True, text=True, timeout=60)
    base = os.nice(0)
    assert out.stdout.splitlines() == [f"suite nice={base}", f"evals nice={min(base + 10, 19)}"], out
    assert out.returncode == 3, out  # the suite passed: the exit code is tests/evals'
    assert list(tmp.iterdir()) == []  # the evals' held-back output is removed once shown


def test_an_interrupted_run_stops_the_evals_beside_it(tmp_path: Path) -> None:
    """^C reaches the script's foreground pytest; tests/evals, a background job, ignore it: the
    script stops them itself (their whole process group)."""
    root = _layout(tmp_path, python=BESIDE)
    proc = subprocess.Popen(["bash", "scripts/test.sh", "--hang"], cwd=root, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    pid_file = root / "evals.pid"
    try:
        deadline = time.monotonic() + 30
        while not (pid_file.exists() and pid_file.read_text().strip()):
            assert proc.poll() is None and time.monotonic() < deadline, "tests/evals never started"
            time.sleep(0.05)
        evals = int(pid_file.read_text())
        os.killpg(proc.pid, signal.SIGINT)  # what ^C in a terminal does
        assert proc.wait(timeout=30) == 130
        deadline = time.monotonic() + 10
        while _alive(evals):
            assert time.monotonic() < deadline, "tests/evals outlived the interrupted run"
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


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
