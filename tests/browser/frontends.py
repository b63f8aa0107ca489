"""Driving a notebook in either frontend the lab supports: JupyterLab and Jupyter Notebook 7.

Both are the same Lumino application underneath (cells are `.jp-Cell`, outputs
`.jp-OutputArea-output`, menus are Lumino menus), so a test written against these helpers runs
in both: only the URL of a notebook and the wait for its kernel differ.
"""

from __future__ import annotations

import re
import time

import nbformat

from .conftest import REPO, SCREENSHOTS, Server
from .lab_page import open_in_lab
from .waits import KERNEL_UP, RUN_ALL

FRONTENDS = ("jupyterlab", "notebook7")

FIRST_CLICK = 60_000
"""Run All's first click until a cell is queued (ms); past it the page is reloaded and Run All clicked again."""

SESSION_SETTLES = 30_000
"""A notebook page until the server holds one idle kernel for it that the page is connected to (ms).

Past it the test goes on as before: the frontend may have started no kernel yet (it then asks
which kernel at Run All, `accept_kernel_choice`)."""


def open_notebook(page, server: Server, path: str, frontend: str) -> None:  # type: ignore[no-untyped-def]
    """Open `path` (relative to the server's root) in `frontend` and wait for its cells."""
    from playwright.sync_api import expect

    if frontend == "jupyterlab":
        open_in_lab(page, server, path)
    else:
        page.goto(f"{server.url}/notebooks/{path}?token={server.token}")
    expect(page.locator(".jp-Notebook .jp-Cell").first).to_be_visible(timeout=KERNEL_UP)
    if frontend == "jupyterlab":
        # The toolbar says idle before the kernel exists; the status bar's "| Idle" means it is up.
        expect(page.get_by_text(re.compile(r"\| Idle"))).to_be_visible(timeout=KERNEL_UP)
    else:
        expect(page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").first).to_be_attached(
            timeout=KERNEL_UP
        )
    page.lab_server, page.lab_path = server, path  # for `run_all`: which session to watch on the server
    session_kernel(server, path, settle=True)


def session_kernel(server: Server, path: str, *, settle: bool = False) -> str | None:
    """The id of the kernel the server's session for `path` holds (None: no session).

    With `settle`, first wait (up to SESSION_SETTLES) until the session's kernel is idle with the
    page connected to it and every kernel on the server belongs to a session, the same on two polls
    in a row. A Notebook 7 page opened at
    load has started three kernels in its first second, replacing two (the server's log: "Kernel
    started" x3, "Kernel shutdown" x2); a Run All clicked in between ran two cells on a kernel that
    was then replaced, and the frontend un-queued the rest without an error.
    """
    deadline = time.monotonic() + (SESSION_SETTLES / 1000 if settle else 0)
    seen: tuple[str, ...] | None = None
    while True:
        every = server.api("GET", "/api/sessions") or []
        sessions = [s for s in every if s.get("path") == path]  # type: ignore[union-attr]
        kernel = (sessions[0].get("kernel") or {}) if len(sessions) == 1 else {}
        if not settle:
            return kernel.get("id")
        kernels = {k["id"]: k for k in server.api("GET", "/api/kernels") or []}  # type: ignore[union-attr]
        held = {(s.get("kernel") or {}).get("id") for s in every}  # type: ignore[union-attr]
        mine = kernels.get(kernel.get("id", ""), {})
        ready = (
            set(kernels) <= held  # no kernel being started or replaced outside a session
            and mine.get("execution_state") == "idle"
            and mine.get("connections", 0) >= 1  # the page is connected to it
        )
        state = tuple(sorted(f"{k}:{v.get('execution_state')}:{v.get('connections', 0)}" for k, v in kernels.items()))
        if ready and state == seen:
            return kernel["id"]
        seen = state if ready else None
        if time.monotonic() > deadline:
            return kernel.get("id")
        time.sleep(0.2)  # a poll of the server's REST API: no event tells when a kernel settles


def run_all(page) -> None:  # type: ignore[no-untyped-def]
    """Run > Run All Cells, from the menu bar, as a person would; wait until every code cell ran."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import expect

    server: Server | None = getattr(page, "lab_server", None)
    before = session_kernel(server, page.lab_path) if server is not None else None
    click_run_all_cells(page)
    prompts = page.locator(".jp-CodeCell .jp-InputPrompt")
    try:
        accept_kernel_choice(page, timeout=FIRST_CLICK)
    except PlaywrightTimeout:
        # Nothing queued and nothing asked: Notebook 7 at load has sat like this with its kernel
        # started and connected on the server's side but no kernel in the page's session (no cell
        # ever sent; the server's log shows no request). A person reloads the page and runs again.
        page.reload(timeout=KERNEL_UP)  # its "leave the page?" question is accepted (conftest's `page`)
        expect(page.locator(".jp-Notebook .jp-Cell").first).to_be_visible(timeout=KERNEL_UP)
        click_run_all_cells(page)
    try:
        accept_kernel_choice(page)
        expect(prompts.first).to_have_text(re.compile(r"\[[\d*]+\]"), timeout=KERNEL_UP)
    except (AssertionError, PlaywrightTimeout) as exc:  # say what the page showed instead: a dialog, the kernel's status
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shot = SCREENSHOTS / f"run-all-never-started-{int(time.time())}.png"
        page.screenshot(path=str(shot), full_page=True)
        dialogs = page.locator(".jp-Dialog").all_inner_texts()
        status = page.locator(".jp-Notebook-ExecutionIndicator, .jp-KernelStatus").all_inner_texts()
        raise AssertionError(f"Run All never started a cell; dialogs {dialogs}, kernel status {status}, screenshot {shot}") from exc
    # Run All queues every cell at once ("[*]"); a failing cell un-queues the rest, so the run is
    # over when no cell is queued any more, whether or not every cell ran.
    page.wait_for_function(
        "() => [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')]"
        ".every(p => !p.textContent.includes('*'))",
        timeout=RUN_ALL,
    )
    texts = prompts.all_inner_texts()
    unrun = [i for i, t in enumerate(texts) if not re.search(r"\[\d+\]", t)]
    if unrun and server is not None:
        after = session_kernel(server, page.lab_path)
        errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").count()
        if after != before and before is not None and not errors:
            # The frontend replaced the session's kernel under Run All (see `session_kernel`): the
            # cells it had sent ran on a kernel that is gone and the rest were un-queued, with no
            # error. The new kernel is fresh, so run the notebook again on it, as a person would.
            session_kernel(server, page.lab_path, settle=True)
            click_run_all_cells(page)
            accept_kernel_choice(page)
            page.wait_for_function(  # every cell ran, or one failed (its error output is stderr)
                "() => [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')].every(p => /\\[\\d+\\]/.test(p.textContent))"
                " || document.querySelector(\".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']\") !== null",
                timeout=RUN_ALL,
            )
            texts = prompts.all_inner_texts()
            unrun = [i for i, t in enumerate(texts) if not re.search(r"\[\d+\]", t)]
    if unrun:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        log = SCREENSHOTS / f"run-all-stopped-{int(time.time())}-server.log"
        if server is not None:
            log.write_bytes(server.log.read_bytes())
            sessions, kernels = server.api("GET", "/api/sessions"), server.api("GET", "/api/kernels")
        else:
            sessions = kernels = "?"
        raise AssertionError(
            f"Run All stopped before code cells {unrun}; sessions {sessions}, kernels {kernels}, kernel before Run "
            f"All {before}, server log {log}; what the notebook shows:\n{outputs_text(page)}"
        )


def accept_kernel_choice(page, timeout: int = KERNEL_UP) -> None:  # type: ignore[no-untyped-def]
    """Once Run All has started the first cell, or asked which kernel to start: then take the
    kernel it offers (the notebook's own), as a person would.

    On a busy machine the frontend can open a notebook before it has the server's kernel specs,
    start no kernel, and ask "Select Kernel" when Run All needs one (a Notebook 7 run did, at
    load ~8 with the suite split over two workers); the kernel it offers is the notebook's.
    """
    page.wait_for_function(
        "() => /\\[[\\d*]+\\]/.test(document.querySelector('.jp-CodeCell .jp-InputPrompt')?.textContent ?? '')"
        " || [...document.querySelectorAll('.jp-Dialog')].some(d => d.textContent.includes('Select Kernel'))",
        timeout=timeout,
    )
    dialog = page.locator(".jp-Dialog", has_text="Select Kernel")
    if dialog.count():
        dialog.locator("button", has_text=re.compile(r"^Select$")).click()


def click_run_all_cells(page) -> None:  # type: ignore[no-untyped-def]
    """Click Run > Run All Cells once the item is enabled.

    Lumino ignores a click on a disabled menu item, and the frontend keeps Run All disabled until
    the notebook's session is wired to its kernel, which on a busy machine can come after the
    status says idle (a Notebook 7 run once sat at "[ ]" for the whole deadline). So the menu is
    opened again until the item is enabled, then clicked.
    """
    deadline = time.monotonic() + KERNEL_UP / 1000
    item = page.locator(".lm-Menu-item", has=page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")))
    while True:
        page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
        item.wait_for(state="visible", timeout=KERNEL_UP)
        if "lm-mod-disabled" not in (item.get_attribute("class") or ""):
            item.click()
            return
        page.keyboard.press("Escape")
        assert time.monotonic() < deadline, "Run > Run All Cells stayed disabled: the notebook never got its kernel"
        page.wait_for_timeout(250)  # a poll of the menu's state: no event tells when the item is enabled


def cell_index(notebook: str, startswith: str, *, exact: bool = False) -> int:
    """The index of the code cell of notebooks/<notebook> whose source starts with (or is) the text."""
    cells = nbformat.read(REPO / "notebooks" / notebook, as_version=4).cells
    found = [
        i
        for i, c in enumerate(cells)
        if c.cell_type == "code" and (c.source.strip() == startswith if exact else c.source.startswith(startswith))
    ]
    assert len(found) == 1, (notebook, startswith, found)
    return found[0]


def output_of(page, index: int):  # type: ignore[no-untyped-def]
    return page.locator(".jp-Notebook .jp-Cell").nth(index).locator(".jp-OutputArea-output")


def outputs_text(page) -> str:  # type: ignore[no-untyped-def]
    return "\n".join(page.locator(".jp-OutputArea-output").all_inner_texts())
