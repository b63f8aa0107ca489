"""What a person meets in a terminal (issue 15 item 9).

- `bash scripts/start.sh` serves the repository root (so `/lab/tree/notebooks/...` links work and
  `docs/` can be browsed) and opens the quickstart
- `python -m lab` errors name terminal commands (`python -m lab runs`, `--store`), not Python calls
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from lab import Lab
from tests.conftest import Counter, Inc, declare_counter

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lab", *args], capture_output=True, text=True, cwd=REPO)


def test_terminal_errors_name_terminal_commands(db_path: str) -> None:
    lab = Lab(db_path)
    declare_counter(lab).start(Inc(by=2), state=Counter()).run()
    lab.close()
    missing = _cli("show", "run-nope", "--store", db_path)
    assert missing.returncode == 2
    assert f"`python -m lab runs --store {db_path}` lists its runs" in missing.stderr
    assert "lab.runs()" not in missing.stderr
    # a notebook's kernel with the store open holds nothing between operations: the terminal reads
    beside = subprocess.Popen(
        [sys.executable, "-c", f"from lab import Lab; lab = Lab({db_path!r}); print('open', flush=True); input()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO,
    )  # fmt: skip
    try:
        assert beside.stdout is not None and beside.stdout.readline().strip() == "open"
        listed = _cli("runs", "--store", db_path)
        assert listed.returncode == 0 and "1 run(s)" in listed.stdout and " done " in listed.stdout, listed.stderr
    finally:
        beside.kill()
        beside.communicate()
    # a process that keeps the file open itself (a duckdb session, an older Graph Lab) is named
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import duckdb; con = duckdb.connect({db_path!r}); print('open', flush=True); input()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        locked = _cli("runs", "--store", db_path)
        assert locked.returncode == 2, locked.stdout
        assert "is open in another process" in locked.stderr and f"PID {holder.pid}" in locked.stderr
        assert "--store PATH" in locked.stderr and "Lab(" not in locked.stderr
    finally:
        holder.kill()
        holder.communicate()  # reaps it and closes its pipes


def test_start_script_serves_the_repository_root_with_the_quickstart(tmp_path: Path) -> None:
    token, port = secrets.token_hex(8), _free_port()
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
        JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
        JUPYTER_DATA_DIR=str(tmp_path / "data"),
        JUPYTER_PLATFORM_DIRS="1",
    )
    log = tmp_path / "start.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            ["bash", "scripts/start.sh", "--no-browser", f"--port={port}", "--ServerApp.port_retries=0",
             f"--IdentityProvider.token={token}", f"--LabApp.workspaces_dir={tmp_path / 'ws'}"],
            cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                root = _get(f"{url}/api/contents/?token={token}")
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"start.sh did not serve:\n{log.read_text()[-3000:]}") from None
                time.sleep(0.5)
        names = {item["name"] for item in root["content"]}
        assert {"notebooks", "docs", "README.md"} <= names
        assert (
            _get(f"{url}/api/contents/notebooks/quickstart.ipynb?content=0&token={token}")["type"]
            == "notebook"
        )
        with urllib.request.urlopen(f"{url}/?token={token}", timeout=10) as r:  # the default page
            assert r.url.split("?")[0].endswith("/lab/tree/notebooks/quickstart.ipynb")
        assert "/lab/tree/notebooks/quickstart.ipynb" in _tree_links()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _tree_links() -> str:
    """The README's /lab/tree/ links and start.sh's default page, which must name real files."""
    text = (REPO / "README.md").read_text() + (REPO / "scripts" / "start.sh").read_text()
    for link in re.findall(r"/lab/tree/([\w/-]+\.\w+)", text):
        assert (REPO / link).exists(), f"/lab/tree/{link} names no file of the repository"
    return text


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
