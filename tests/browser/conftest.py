"""A real JupyterLab on 127.0.0.1 with a token, driven by Debian's Chromium through Playwright.

One server and one browser per session, and one JupyterLab page the tests take turns in (`page`,
tests/browser/lab_page.py: each test opens its own notebook there, with a fresh kernel). Everything
JupyterLab would read or write lives in a temporary directory (config, runtime, IPython, workspaces, user settings, the notebooks' copy
and their `.graphlab` store), so no old tabs, news popups or stores leak in. Playwright uses
its own driver and the system Chromium (`/usr/bin/chromium`); no browser is ever downloaded.

Without Chromium the tests skip locally, with the reason; under `CI=true` they fail.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from .lab_page import SharedLab, new_page
from .waits import SHOWS

REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = Path(os.environ.get("GRAPHLAB_SCREENSHOT_DIR") or Path(tempfile.gettempdir()) / "graphlab-screenshots")
"""Where browser tests save screenshots. A test run leaves the checkout clean; to refresh the
README's images: GRAPHLAB_SCREENSHOT_DIR=docs/img bash scripts/test.sh tests/browser"""
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
]
SERVER_START_TIMEOUT = 180  # seconds: a JupyterLab server starting at load 5


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Browser tests are slow, and a Run All in a browser takes minutes at load 5: give each 15 min."""
    here = Path(__file__).parent
    for item in items:
        if item.path.is_relative_to(here):
            item.add_marker(pytest.mark.slow)
            item.add_marker(pytest.mark.timeout(900))


def _require_chromium() -> None:
    if os.path.exists(CHROMIUM) and shutil.which("dot"):
        return
    missing = [
        what
        for what, ok in (
            (f"Chromium ({CHROMIUM})", os.path.exists(CHROMIUM)),
            ("Graphviz `dot`", bool(shutil.which("dot"))),
        )
        if not ok
    ]
    reason = f"{' and '.join(missing)} not installed; `apt-get install -y chromium graphviz` (scripts/setup.sh does it as root)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"browser tests must run in CI: {reason}")
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    url: str
    token: str
    root: Path
    log: Path

    def lab_url(self, path: str) -> str:
        return f"{self.url}/lab/tree/{path}?reset&token={self.token}"

    def notebook(self, name: str) -> str:
        """A fresh copy of notebooks/<name> in its own directory (its own `.graphlab` store)."""
        folder = self.root / f"{Path(name).stem}-{secrets.token_hex(3)}"
        folder.mkdir()
        shutil.copy(REPO / "notebooks" / name, folder / name)
        return f"{folder.name}/{name}"

    def api(self, method: str, path: str) -> object:
        req = urllib.request.Request(
            f"{self.url}{path}", method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(req, timeout=10) as r:
            body = r.read()
        return json.loads(body) if body else None

    def stop_kernels(self) -> None:
        """Shut down every session's kernel (frees memory and the stores' file locks)."""
        for session in self.api("GET", "/api/sessions") or []:  # type: ignore[union-attr]
            self.api("DELETE", f"/api/sessions/{session['id']}")


# package scope: the server and Playwright stop when the browser tests are done, so the
# Playwright event loop it runs in the main thread does not outlive them (later tests call
# asyncio.run(), which refuses to run inside a running loop).
@pytest.fixture(scope="package")
def jupyter_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    _require_chromium()
    base = tmp_path_factory.mktemp("jupyter")
    dirs = {
        name: base / name
        for name in ("config", "runtime", "ipython", "data", "workspaces", "settings", "root")
    }
    for d in dirs.values():
        d.mkdir()
    notification = (
        dirs["settings"] / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    )
    notification.parent.mkdir(parents=True)
    notification.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    tracker = dirs["settings"] / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
    tracker.parent.mkdir(parents=True)
    tracker.write_text(json.dumps({"windowingMode": "none"}))  # every cell stays in the DOM
    shutil.copytree(REPO / "notebooks", dirs["root"] / "notebooks")
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(dirs["config"]),
        JUPYTER_RUNTIME_DIR=str(dirs["runtime"]),
        JUPYTER_DATA_DIR=str(dirs["data"]),
        IPYTHONDIR=str(dirs["ipython"]),
        JUPYTER_PLATFORM_DIRS="1",
    )
    env.pop("JUPYTER_PATH", None)
    token = secrets.token_hex(16)
    port = _free_port()
    cmd = [
        sys.executable, "-m", "jupyterlab",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={dirs['root']}",
        f"--LabApp.workspaces_dir={dirs['workspaces']}",
        f"--LabApp.user_settings_dir={dirs['settings']}",
        "--LabApp.news_url=",
        "--ServerApp.terminals_enabled=False",
        "--LabApp.expose_app_in_browser=True",
    ]  # fmt: skip
    if os.geteuid() == 0:
        cmd.append("--allow-root")  # JupyterLab 4.6 refuses to run as root without it
    log = base / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, env=env, cwd=dirs["root"], stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"JupyterLab did not start (exit {proc.poll()}):\n{log.read_text()[-3000:]}"
                )
            time.sleep(0.25)
        yield Server(url, token, dirs["root"], log)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="package")
def chromium() -> Iterator[object]:
    """Debian's Chromium, launched once for every browser test: Playwright's sync API allows one
    running instance per thread, so the JupyterLab tests and the offline-file tests share it."""
    _require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="package")
def browser(chromium, jupyter_server: Server) -> object:  # type: ignore[no-untyped-def]
    """The shared Chromium, once the package's JupyterLab is up."""
    return chromium


@pytest.fixture(scope="package")
def shared_lab(browser, jupyter_server: Server) -> Iterator[SharedLab]:  # type: ignore[no-untyped-def]
    """The one JupyterLab page the package's tests take turns in (tests/browser/lab_page.py)."""
    shared = SharedLab(browser, jupyter_server)
    try:
        yield shared
    finally:
        shared.discard()


PHASES = pytest.StashKey[dict[str, pytest.TestReport]]()
"""Each phase's report of a browser test (setup, call, teardown), kept by `pytest_runtest_makereport`."""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Keep each phase's report on the test, so `page` knows at teardown whether the test passed."""
    report = yield
    item.stash.setdefault(PHASES, {})[report.when] = report
    return report


@pytest.fixture
def page(shared_lab: SharedLab, jupyter_server: Server, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """JupyterLab's page with nothing open: a test opens its notebook with `lab_page.open_in_lab`.

    After the test its documents are closed unsaved and every kernel is shut down; the page serves
    the next test only if the test passed and the page is as fresh again (`SharedLab.give_back`).
    A test run in Notebook 7 (its `frontend` parameter) gets a page of its own, as `fresh_page`.
    """
    from playwright.sync_api import expect

    expect.set_options(timeout=SHOWS)
    params = getattr(getattr(request.node, "callspec", None), "params", {})
    if params.get("frontend", "jupyterlab") != "jupyterlab":  # Notebook 7, another app: a page of its own
        yield from _own_page(shared_lab.browser, jupyter_server)
        return
    pg = shared_lab.take()
    try:
        yield pg
    finally:
        phases = request.node.stash.get(PHASES, {})
        shared_lab.give_back(passed=bool(phases) and all(r.passed for r in phases.values()))
        jupyter_server.stop_kernels()  # the next test starts from no kernels


@pytest.fixture
def fresh_page(browser, jupyter_server: Server):  # type: ignore[no-untyped-def]
    """A page in a browser context of its own, for a test that must watch everything a page loads."""
    from playwright.sync_api import expect

    expect.set_options(timeout=SHOWS)
    yield from _own_page(browser, jupyter_server)


def _own_page(browser, jupyter_server: Server):  # type: ignore[no-untyped-def]
    context, pg = new_page(browser)
    try:
        yield pg
    finally:
        context.close()
        jupyter_server.stop_kernels()  # the next test starts from no kernels

