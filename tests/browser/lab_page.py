"""One JupyterLab page shared by the browser tests, each opening its own notebook in it.

A fresh browser context loads JupyterLab's frontend in ~3.5 s (its scripts parsed and its plugins
activated again: the HTTP cache of a shared context saves nothing measurable), and every browser
test used to pay it. Here the frontend is loaded once; a test opens its notebook the way the
`/lab/tree/<path>` URL does (`filebrowser:open-path`, through the app the server exposes with
`LabApp.expose_app_in_browser`), and gets a fresh kernel for it.

Isolation: after each test every document is closed without saving and the server's kernels are
shut down (conftest's `page`). The page is then kept only if it is back where a fresh one starts:
JupyterLab still loaded at /lab, no dialog, menu or notification showing, the side panels as they
were, no document open, and the test passed. Anything else (a failed test, a test that navigated
elsewhere, such as Notebook 7) throws the whole context away and the next test loads a new one.
"""

from __future__ import annotations

import json
from typing import Any

from .waits import KERNEL_UP, SHOWS

VIEWPORT = {"width": 1400, "height": 1800}

READY = "() => !!(window.jupyterapp && window.jupyterapp.shell && window.jupyterapp.shell.isAttached)"
"""JupyterLab's app exists and its shell is on the page (`restored` is awaited after this)."""

STATE = """() => {
  const app = window.jupyterapp;
  if (!app || !app.shell || !location.pathname.includes('/lab')) return null;
  const shell = app.shell;
  return JSON.stringify({
    left: shell.leftCollapsed, right: shell.rightCollapsed, mode: shell.mode,
    presentation: !!shell.presentationMode,
    documents: [...shell.widgets('main')].filter(w => w.context).length,
    dialogs: document.querySelectorAll('.jp-Dialog').length,
    menus: document.querySelectorAll('.lm-Menu').length,
    toasts: document.querySelectorAll('.Toastify__toast').length,
  });
}"""
"""What must be as a fresh page has it for the page to serve the next test (null: not JupyterLab)."""

CLOSE_ALL = """() => {
  for (const w of [...window.jupyterapp.shell.widgets('main')]) {
    if (w.context && w.context.model) w.context.model.dirty = false;  // closed without saving or asking
    w.dispose();
  }
}"""
"""Close every document, unsaved (a test's edits and outputs are not kept). JupyterLab then opens
a launcher in the empty main area; `CLOSE_LAUNCHERS` closes it once the next notebook is open."""

CLOSE_LAUNCHERS = """() => {
  for (const w of [...window.jupyterapp.shell.widgets('main')]) if (!w.context) w.dispose();
}"""
"""Close what is not a document (the launcher): the notebook is then alone, as a fresh page opened
at its `/lab/tree/` URL shows it."""

OPEN = """path => { window.jupyterapp.commands.execute('filebrowser:open-path', {path, dontShowBrowser: true}); }"""
"""What JupyterLab runs for a `/lab/tree/<path>` URL: the file browser goes to the folder, the
document opens. Not awaited: on an error the command shows a dialog and waits for it (see `open_in_lab`)."""


class SharedLab:
    """The package's one JupyterLab page: `take` it for a test, `give_back` after."""

    def __init__(self, browser: Any, server: Any) -> None:
        self.browser, self.server = browser, server
        self.context: Any = None
        self.page: Any = None
        self.fresh: str | None = None  # STATE of the page just after it was loaded

    def take(self) -> Any:
        """The shared page with JupyterLab loaded and nothing open; a new one if there is none."""
        if self.page is None:
            self.context, self.page = new_page(self.browser)
            self.page.goto(f"{self.server.url}/lab?reset&token={self.server.token}")
            self.page.wait_for_function(READY, timeout=KERNEL_UP)
            self.page.evaluate("() => window.jupyterapp.restored")
            self.fresh = self.page.evaluate(STATE)
        self.page.dialogs = []
        return self.page

    def give_back(self, passed: bool) -> None:
        """Close the test's documents; keep the page only if `passed` and it is as fresh again."""
        page, kept = self.page, False
        if page is None:
            return
        try:
            if passed and not page.is_closed() and page.evaluate(STATE) is not None:
                page.evaluate(CLOSE_ALL)
                kept = page.evaluate(STATE) == self.fresh
        except Exception:  # a page that cannot even answer is not kept (the test's own error is reported)
            kept = False
        if not kept:
            self.discard()

    def discard(self) -> None:
        if self.context is not None:
            self.context.close()
        self.context = self.page = self.fresh = None


def new_page(browser: Any) -> tuple[Any, Any]:
    """A new context and page; any alert() is recorded in `page.dialogs` and dismissed."""
    context = browser.new_context(viewport=VIEWPORT, device_scale_factor=1)
    pg = context.new_page()
    pg.dialogs = []  # any alert() would be an escaping failure: record and dismiss it

    def dialog(d: Any) -> None:
        if d.type == "beforeunload":  # a reload the test asks for (frontends.run_all): leave the page
            d.accept()
            return
        pg.dialogs.append(d.message)
        d.dismiss()

    pg.on("dialog", dialog)
    return context, pg


def open_in_lab(page: Any, server: Any, path: str) -> None:
    """Open `path` (relative to the server's root) in JupyterLab as its `/lab/tree/` URL would.

    In the shared page (JupyterLab loaded, nothing open) through the app; in any other page by the URL.
    Returns once the notebook's first cell shows; the kernel may still be starting.
    """
    from playwright.sync_api import expect

    if page.evaluate(STATE) is None:
        page.goto(server.lab_url(path))
    else:
        page.evaluate(OPEN, path)
        page.wait_for_function(
            "() => document.querySelector('.jp-Notebook .jp-Cell') || document.querySelector('.jp-Dialog')",
            timeout=KERNEL_UP,
        )
        if not page.locator(".jp-Notebook .jp-Cell").count():  # a dialog and no notebook: "Cannot open"
            dialogs = page.locator(".jp-Dialog").all_inner_texts()
            raise AssertionError(f"JupyterLab did not open {path}: {json.dumps(dialogs)}")
        page.evaluate(CLOSE_LAUNCHERS)
    expect(page.locator(".jp-Notebook .jp-Cell").first).to_be_visible(timeout=SHOWS)
